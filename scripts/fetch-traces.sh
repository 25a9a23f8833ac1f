#!/usr/bin/env bash
# Fetches the public cluster traces and co-location measurements that `recmix sim` names
# (--trace philly|gavel|muri1|muri2|alibaba; the Lucid and Gavel pair files) into a folder, from
# their authors' repositories at pinned commits, and checks each file's SHA-256. recmix does not
# ship them: they belong to their authors, under their own licences (listed below and written to
# DEST/SOURCES.md). docs/scheduler.md says how each is read.
#
# Usage: scripts/fetch-traces.sh [--from DIR] [DEST]
#   DEST        where the files go (default: traces)
#   --from DIR  copy from a local copy of the files (an offline mirror) instead of downloading;
#               the same checksums are checked
# A file already in DEST with the right checksum is kept. A download or copy whose checksum
# differs is refused and removed, and nothing in DEST is overwritten by it.
set -euo pipefail

from= dest=traces
while (($#)); do
  case $1 in
    --from) from=${2:?--from needs a folder}; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fetch-traces.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) dest=$1; shift ;;
  esac
done

# name | SHA-256 | repository | commit | path | licence
sources=(
  "philly_jobs.csv|ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da|petuum/adaptdl|de25dcc90c350b8ade3a710e437a651a8d2efae6|simulator/traces/philly.csv|Apache-2.0"
  "gavel_msr_seed0.trace|ce629ae806113d60daa51dd9423030333a1abf45ee2a51c1013cdfdc49782a5c|stanford-futuredata/gavel|c4fa40097339e9608ab71fd64c8bdea96a5e4a4c|scheduler/traces/msr/seed=0/ee9e8c.trace|MIT"
  "gavel_throughputs.json|17111f7295f03265fd9e5118d7eba31e3dd9d6e50a2e215c13ad3d3f91f74381|stanford-futuredata/gavel|c4fa40097339e9608ab71fd64c8bdea96a5e4a4c|scheduler/simulation_throughputs.json|MIT"
  "lucid_colocate_pairs.csv|eb17384138b035112e7118b9fd33ae2ab9040fb4688942c74af59a700425ed0d|S-Lab-System-Group/Lucid|63685a3ab7d15d8e940bb47ef98b6d5cca472b13|simulation/data/colocate_info.csv|S-Lab License 1.0 (non-commercial)"
  "lucid_single_jobs.csv|6bce9f9410b9d1529c7bcfca50aa7c7bc9684dff49da8e13414013325f99ed23|S-Lab-System-Group/Lucid|63685a3ab7d15d8e940bb47ef98b6d5cca472b13|simulation/analyzer/single_data.csv|S-Lab License 1.0 (non-commercial)"
  "muri_trace1.csv|534d02a4ebe53aee1f60d3fb33e3b2207550bb28813e677c962051058ebafbc5|Rivendile/Muri|4e69a78ce75f629a5a00abd48150a1860b341ce6|simulator/trace-data/trace1.csv|Apache-2.0"
  "muri_trace2.csv|5c29e1c49ed7929bff67c8008e6f2abcafc64e70bb55cdc91801490ce2df7003|Rivendile/Muri|4e69a78ce75f629a5a00abd48150a1860b341ce6|simulator/trace-data/trace2.csv|Apache-2.0"
  "alibaba_dlrm_2025.csv|fb17bc4b3f412d5280f70f04a1bdf2adfc4429d1e61237a5b106e86206414295|alibaba/clusterdata|7a6c496e4f4b6ce6150be8f881cb051bf2abff42|cluster-trace-gpu-v2025/disaggregated_DLRM_trace.csv|no licence stated; its README asks users to cite the paper"
)

sha() { sha256sum "$1" | cut -d' ' -f1; }
get() {  # get <url> <out>
  if command -v curl > /dev/null; then
    curl -fsSL --retry 3 -o "$2" "$1"
  elif command -v wget > /dev/null; then
    wget -q -O "$2" "$1"
  else
    echo "fetch-traces.sh: neither curl nor wget is installed" >&2
    return 1
  fi
}

mkdir -p "$dest"
[[ -z $from || -d $from ]] || { echo "fetch-traces.sh: --from '$from' is not a folder" >&2; exit 1; }
failed=0
{
  echo "# Public traces for recmix sim"
  echo
  echo "Fetched by recmix's scripts/fetch-traces.sh; each file is its authors' work, unchanged, under their licence."
  echo
  echo "| file | repository @ commit : path | licence |"
  echo "|---|---|---|"
} > "$dest/SOURCES.md.part"
for entry in "${sources[@]}"; do
  IFS='|' read -r name sum repo commit path licence <<< "$entry"
  echo "| $name | $repo @ ${commit:0:12} : $path | $licence |" >> "$dest/SOURCES.md.part"
  if [[ -f $dest/$name && $(sha "$dest/$name") == "$sum" ]]; then
    echo "$name: present"
    continue
  fi
  part=$dest/$name.part
  rm -f "$part"
  if [[ -n $from ]]; then
    src=$from/$name
    if ! cp "$src" "$part" 2> /dev/null; then
      echo "fetch-traces.sh: $name: not in '$from'" >&2
      failed=1
      continue
    fi
  else
    url=https://raw.githubusercontent.com/$repo/$commit/$path
    if ! get "$url" "$part"; then
      echo "fetch-traces.sh: $name: download of $url failed" >&2
      rm -f "$part"
      failed=1
      continue
    fi
    src=$url
  fi
  got=$(sha "$part")
  if [[ $got != "$sum" ]]; then
    echo "fetch-traces.sh: $name: SHA-256 $got from $src, expected $sum; not kept" >&2
    rm -f "$part"
    failed=1
    continue
  fi
  mv "$part" "$dest/$name"
  echo "$name: fetched ($licence)"
done
mv "$dest/SOURCES.md.part" "$dest/SOURCES.md"
if ((failed)); then
  echo "fetch-traces.sh: some files are missing from '$dest' (above)" >&2
  exit 1
fi
echo "traces in $dest: recmix sim --trace philly --traces-dir $dest"
