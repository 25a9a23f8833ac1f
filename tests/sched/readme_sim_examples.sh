#!/usr/bin/env bash
# The README's `recmix sim` examples run as written from a fresh clone: the shipped trace, then
# scripts/fetch-traces.sh (here from the CI's local copy of the public traces, --from, with the
# same checksums) and the public trace it fetched. A public trace named without its folder gets an
# error that says how to fetch it; a file whose checksum differs is refused and not kept.
# Usage: readme_sim_examples.sh <recmix binary> <source dir>
set -euo pipefail
recmix=$1 src=$(cd "$2" && pwd)
source "$(dirname "$0")/../lib.sh"
scratch readme-sim
mirror=${RECMIX_SHARED_DIR:-$src/../shared}/traces
[[ -d $mirror ]] || fail "no local copy of the public traces at $mirror (set RECMIX_SHARED_DIR)"
cd "$work"
ln -s "$src/examples" examples
ln -s "$src/scripts" scripts

# The README's lines, in order, without their comments.
mapfile -t lines < <(sed -n 's/^    \(recmix sim .*\|scripts\/fetch-traces\.sh .*\)$/\1/p' "$src/README.md" | sed 's/ *#.*$//')
((${#lines[@]} >= 3)) || fail "the README has fewer than 3 sim examples (found ${#lines[@]})"
for line in "${lines[@]}"; do
  read -ra words <<< "$line"
  if [[ ${words[0]} == scripts/fetch-traces.sh ]]; then
    scripts/fetch-traces.sh --from "$mirror" "${words[@]:1}" > fetch.out 2>&1 || { cat fetch.out; fail "'$line' failed"; }
  else
    # The whole public trace under every policy takes minutes: its first 1000 jobs show the line works.
    env -u RECMIX_SHARED_DIR "$recmix" "${words[@]:1}" --max-jobs 1000 --quiet > sim.out 2>&1 || { cat sim.out; fail "'$line' failed"; }
    grep -q "^recmix sim: .* jobs from" sim.out || { cat sim.out; fail "'$line' printed no run"; }
  fi
done
[[ -f traces/SOURCES.md ]] || fail "fetch-traces.sh wrote no SOURCES.md"

# A public trace by name, without its folder: the error says how to get it.
if env -u RECMIX_SHARED_DIR "$recmix" sim --trace gavel --quiet > bad.out 2>&1; then fail "sim --trace gavel without a folder ran"; fi
grep -q "scripts/fetch-traces.sh" bad.out || { cat bad.out; fail "the error does not name scripts/fetch-traces.sh"; }

# A changed file is refused, and what was fetched before stays.
mkdir changed
cp "$mirror"/* changed/
chmod u+w changed/*
echo "1,1,1,1" >> changed/muri_trace1.csv
rm traces/muri_trace1.csv
before=$(sha256sum traces/philly_jobs.csv)
if scripts/fetch-traces.sh --from changed traces > fetch.out 2>&1; then fail "a file with another checksum was taken"; fi
grep -q "muri_trace1.csv: SHA-256 .* expected" fetch.out || { cat fetch.out; fail "the checksum error does not name the file"; }
[[ ! -e traces/muri_trace1.csv && ! -e traces/muri_trace1.csv.part ]] || fail "the changed file was kept"
[[ $(sha256sum traces/philly_jobs.csv) == "$before" ]] || fail "a good file was changed"
echo "README sim examples: ok"
