#!/bin/bash
# End to end: `recmix data multihot` (help, progress with ETA, inspect of its output, each bad
# input named, SIGTERM leaving no file) and `recmix data synth --preset mlperf-dcnv2` (its tables
# and bags, the options it refuses). Usage: multihot_cli.sh <recmix binary>
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
recmix=$1
scratch multihot
cd "$work"

"$recmix" data multihot --help > help.txt
grep -q -- "--sizes" help.txt && grep -q "mlperf" help.txt && grep -q -- "--seed" help.txt || fail "multihot --help"

"$recmix" data synth -o one.h5 --rows 2k --tables 26 --table-rows 100 --seed 2 > /dev/null
"$recmix" data multihot one.h5 -o multi.h5 --sizes mlperf > out.txt 2> err.txt
grep -q "expanded 2000 rows into 428000 indices" out.txt || fail "multihot output: $(cat out.txt)"
grep -q "multihot: 2000 of 2000 rows (100%), .* ETA 0s" err.txt || fail "no progress line: $(cat err.txt)"
"$recmix" data inspect multi.h5 > inspect.txt
grep -q "valid: yes (2000 rows checked)" inspect.txt || fail "inspect of the output: $(cat inspect.txt)"
grep -q "max_bag = \[3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1\]" inspect.txt ||
  fail "max_bag: $(grep max_bag inspect.txt)"
"$recmix" data multihot one.h5 -o again.h5 --sizes mlperf -q > /dev/null
cmp -s <(h5dump -d /sparse/20/indices multi.h5 | tail -n +3) <(h5dump -d /sparse/20/indices again.h5 | tail -n +3) ||
  fail "two runs of one seed differ"

# each bad input: a non-zero exit and one error line naming the culprit, no output
expect_error() {  # <pattern> <args...>
  local pattern=$1
  shift
  if "$recmix" data multihot "$@" -q > /dev/null 2> bad.err; then fail "multihot $* should fail"; fi
  grep -q -- "$pattern" bad.err || fail "multihot $*: expected '$pattern', got: $(cat bad.err)"
  [[ $(wc -l < bad.err) -eq 1 ]] || fail "multihot $*: more than one error line: $(cat bad.err)"
  [[ ! -e bad.h5 ]] || fail "multihot $* left bad.h5"
}
expect_error "I/O error: nothere.h5: no such file" nothere.h5 -o bad.h5 --sizes mlperf
expect_error "data error: multi.h5: already multi-hot" multi.h5 -o bad.h5 --sizes mlperf
expect_error "config error: --sizes: 3 values for the 26 tables of one.h5" one.h5 -o bad.h5 --sizes 3,2,1
expect_error "config error: --sizes: table 1 has bag size 0" one.h5 -o bad.h5 --sizes 1,0$(printf ',1%.0s' {1..24})
expect_error "config error: --sizes: 'x' in '1,x' is not a bag size" one.h5 -o bad.h5 --sizes 1,x
expect_error "I/O error: multi.h5: already exists; --force replaces it" one.h5 -o multi.h5 --sizes mlperf
expect_error "is the input of the expansion" one.h5 -o one.h5 --sizes mlperf --force
"$recmix" data multihot one.h5 -o multi.h5 --sizes mlperf -q --force > /dev/null || fail "--force should replace"

# SIGTERM while expanding: the temporary file is removed, nothing is left at the output
"$recmix" data synth -o big.h5 --rows 400k --tables 26 --table-rows 1000 > /dev/null
"$recmix" data multihot big.h5 -o sig.h5 --sizes mlperf -q > /dev/null 2>&1 &
pid=$!
tries=0
until ls | grep -q '^sig\.h5\.tmp\.'; do
  tries=$((tries + 1))
  [[ $tries -le 300 ]] || fail "no temporary file while expanding"
  sleep 0.05
done
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[[ $status -eq 143 ]] || fail "SIGTERM: exit status $status, expected 143"
if ls | grep -q '\.tmp\.'; then fail "a temporary file was left after SIGTERM: $(ls)"; fi
[[ ! -e sig.h5 ]] || fail "sig.h5 left after SIGTERM"

# the synth preset: the benchmark's 26 tables divided by --scale, 13 dense, its bags
"$recmix" data synth --preset mlperf-dcnv2 --rows 1k --scale 2000 -o preset.h5 > /dev/null
"$recmix" data inspect preset.h5 > preset.txt
grep -q "valid: yes (1000 rows checked)" preset.txt || fail "inspect of the preset: $(cat preset.txt)"
grep -q "table_rows = \[20000, 20, 9, 4, 11, 1, 4, 1, 1, 20000, 1534, 203, 1, 2, 6, 1, 1, 1, 1, 20000, 20000, 20000, 296, 7, 1, 1\]" preset.txt ||
  fail "preset table_rows: $(grep table_rows preset.txt)"
grep -q "max_bag = \[3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1\]" preset.txt ||
  fail "preset max_bag"
grep -q "num_dense = 13" preset.txt || fail "preset dense: $(grep -i dense preset.txt)"
for conflict in "--tables 8" "--table-rows 10" "--dense 4" "--multi-hot" "--pooling 1,2"; do
  flag=${conflict%% *}
  # shellcheck disable=SC2086
  if "$recmix" data synth --preset mlperf-dcnv2 --rows 10 -o conflict.h5 $conflict 2> conflict.err > /dev/null; then
    fail "--preset with $conflict should fail"
  fi
  grep -q -- "config error: --preset mlperf-dcnv2 sets the tables, dense features and bags; drop $flag" conflict.err ||
    fail "--preset with $conflict: $(cat conflict.err)"
done
if "$recmix" data synth --rows 10 --scale 10 -o conflict.h5 2> conflict.err; then fail "--scale alone should fail"; fi
grep -q -- "--scale: only with --preset" conflict.err || fail "--scale alone: $(cat conflict.err)"
if "$recmix" data synth --preset dlrm --rows 10 -o conflict.h5 2> conflict.err; then fail "--preset dlrm should fail"; fi
grep -q -- "--preset: 'dlrm' is not a preset" conflict.err || fail "--preset dlrm: $(cat conflict.err)"
[[ ! -e conflict.h5 ]] || fail "a refused synth wrote conflict.h5"
echo "multihot CLI test passed"
