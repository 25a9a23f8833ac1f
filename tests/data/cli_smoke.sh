#!/bin/sh
# End-to-end check of `recmix data ...`: convert from stdin, synth, inspect (valid and broken
# files), the outputs refused, the limits on malformed and empty inputs, overflowing counts, and
# the temporary file removed on SIGTERM. Usage: cli_smoke.sh <recmix binary> <shared dir>
set -eu
recmix=$1
criteo=$2/data/criteo
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# stdin, with the progress line off; 100 rows (the last line has no newline)
"$recmix" data convert criteo - -o "$dir/a.h5" --hash-rows 1000 -q < "$criteo/kaggle_sample_a.tsv" > "$dir/convert.txt"
grep -q "into 100 rows (0 malformed)" "$dir/convert.txt"
"$recmix" data inspect "$dir/a.h5" > "$dir/inspect.txt"
grep -q "^rows: 100$" "$dir/inspect.txt"
grep -q "source_files = <stdin>" "$dir/inspect.txt"
grep -q "valid: yes (100 rows checked)" "$dir/inspect.txt"

# malformed lines go to stderr with their line numbers; --strict fails and leaves nothing
"$recmix" data convert criteo "$criteo/kaggle_sample_b.tsv" -o "$dir/b.h5" -q --max-malformed 36 2> "$dir/b.err" > /dev/null
grep -q "kaggle_sample_b.tsv:2: wrong number of fields" "$dir/b.err"
if "$recmix" data convert criteo "$criteo/kaggle_sample_b.tsv" -o "$dir/strict.h5" --strict -q 2> "$dir/strict.err"; then
  echo "strict conversion should fail"; exit 1
fi
grep -q "data error: .*kaggle_sample_b.tsv:2" "$dir/strict.err"
test ! -e "$dir/strict.h5"

# more skipped lines than --max-malformed allows (by default 1%; 36 of these 100 lines are bad)
if "$recmix" data convert criteo "$criteo/kaggle_sample_b.tsv" -o "$dir/limit.h5" -q 2> "$dir/limit.err"; then
  echo "36% malformed lines should fail by default"; exit 1
fi
grep -q "data error: 36 of 100 lines malformed .*kaggle_sample_b.tsv:2:" "$dir/limit.err"
if "$recmix" data convert criteo "$criteo/kaggle_sample_b.tsv" -o "$dir/limit.h5" -q --max-malformed 35 2> "$dir/limit.err"; then
  echo "--max-malformed 35 should fail"; exit 1
fi
grep -q "more than --max-malformed 35" "$dir/limit.err"
"$recmix" data convert criteo "$criteo/kaggle_sample_b.tsv" -o "$dir/limit.h5" -q --max-malformed 40% > /dev/null 2>&1
test -e "$dir/limit.h5"

# an empty input, a header alone: an error naming the input, nothing written
: > "$dir/empty.tsv"
printf 'label\tI1\n' > "$dir/header.tsv"
for input in empty.tsv header.tsv; do
  if "$recmix" data convert criteo "$dir/$input" -o "$dir/none.h5" -q 2> "$dir/none.err"; then
    echo "converting $input should fail"; exit 1
  fi
  grep -q "data error: .*$input: no rows to convert" "$dir/none.err"
  test ! -e "$dir/none.h5"
done

# bytes after the end of a gzip stream
gzip -c "$criteo/kaggle_sample_a.tsv" > "$dir/tail.gz"
echo junk >> "$dir/tail.gz"
if "$recmix" data convert criteo "$dir/tail.gz" -o "$dir/tail.h5" -q 2> "$dir/tail.err"; then
  echo "data after the gzip stream should fail"; exit 1
fi
grep -q "tail.gz: data after the end of the gzip stream" "$dir/tail.err"

# outputs: an existing file needs --force; an input, a device or a directory is never replaced
cp "$criteo/kaggle_sample_a.tsv" "$dir/in.tsv"
for out in in.tsv a.h5; do
  cp "$dir/$out" "$dir/before"
  if "$recmix" data convert criteo "$dir/in.tsv" -o "$dir/$out" -q 2> "$dir/out.err"; then
    echo "converting onto $out should fail"; exit 1
  fi
  cmp -s "$dir/$out" "$dir/before"
done
grep -q "a.h5: already exists; --force replaces it" "$dir/out.err"
for out in "$dir/in.tsv" /dev/null "$dir"; do
  if "$recmix" data convert criteo "$dir/in.tsv" -o "$out" -q --force 2> "$dir/out.err"; then
    echo "converting onto $out should fail even with --force"; exit 1
  fi
  grep -q "^recmix: I/O error: $out: " "$dir/out.err"
done
cmp -s "$dir/in.tsv" "$criteo/kaggle_sample_a.tsv"
test -c /dev/null
if "$recmix" data convert criteo - -o "$dir/in.tsv" -q --force < "$dir/in.tsv" 2> "$dir/out.err"; then
  echo "converting stdin onto the file it reads should fail"; exit 1
fi
grep -q "is also an input" "$dir/out.err"
"$recmix" data convert criteo "$dir/in.tsv" -o "$dir/a.h5" -q --force > /dev/null
"$recmix" data inspect --quick "$dir/a.h5" | grep -q "source_files = $dir/in.tsv"

# a count that does not fit in 64 bits is an error, not a wrapped value
if "$recmix" data convert criteo "$dir/in.tsv" -o "$dir/big.h5" -q --hash-rows=18446744074G 2> "$dir/big.err"; then
  echo "--hash-rows=18446744074G should fail"; exit 1
fi
grep -q "config error: --hash-rows: '18446744074G' is too large" "$dir/big.err"
test ! -e "$dir/big.h5"

# SIGTERM while converting (stdin from a FIFO that stays open): the temporary file is removed
mkfifo "$dir/slow.fifo"
"$recmix" data convert criteo - -o "$dir/sig.h5" -q < "$dir/slow.fifo" > /dev/null 2>&1 &
pid=$!
exec 3> "$dir/slow.fifo"
cat "$criteo/kaggle_sample_a.tsv" >&3
tries=0
until ls "$dir" | grep -q '^sig\.h5\.tmp\.'; do
  tries=$((tries + 1))
  if [ "$tries" -gt 300 ]; then echo "no temporary file while converting"; exit 1; fi
  sleep 0.1
done
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
exec 3>&-
if [ "$status" -ne 143 ]; then echo "SIGTERM: exit status $status, expected 143"; exit 1; fi
if ls "$dir" | grep -q '\.tmp\.'; then echo "a temporary file was left after SIGTERM"; ls "$dir"; exit 1; fi
test ! -e "$dir/sig.h5"

# synth, multi-hot, then inspect
"$recmix" data synth -o "$dir/s.h5" --rows 5k --tables 3 --table-rows 100,200,300 --multi-hot --pooling 0,4 --seed 3 > "$dir/synth.txt"
grep -q "Bayes AUC" "$dir/synth.txt"
if "$recmix" data synth -o "$dir/s.h5" --rows 1k --tables 1 2> "$dir/synth.err"; then
  echo "synth onto an existing file should fail"; exit 1
fi
grep -q "s.h5: already exists; --force replaces it" "$dir/synth.err"
"$recmix" data inspect "$dir/s.h5" > "$dir/s.txt"
grep -q "multi-hot CSR" "$dir/s.txt"
grep -q "valid: yes (5000 rows checked)" "$dir/s.txt"

# a file that is not a dataset: non-zero exit, the problem named
if "$recmix" data inspect "$criteo/kaggle_sample_a.tsv" > "$dir/bad.txt" 2> "$dir/bad.err"; then
  echo "inspect of a TSV file should fail"; exit 1
fi
grep -q "valid: NO: .*kaggle_sample_a.tsv: cannot open as HDF5" "$dir/bad.txt"
# the problem is printed once (in the report); the error line names the file
test "$(cat "$dir/bad.txt" "$dir/bad.err" | grep -c "cannot open as HDF5")" -eq 1
grep -q "^recmix: data error: .*kaggle_sample_a.tsv: not a valid dataset" "$dir/bad.err"
echo "data CLI smoke test passed"
