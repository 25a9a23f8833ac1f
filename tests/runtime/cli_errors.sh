#!/usr/bin/env bash
# Every error of the recmix command line is printed once, on a line of its own, on stderr, as
# "recmix: <kind>: <message>" (command-line mistakes included, as "usage error"), and the exit
# status is not 0; stdout carries no error. --help still prints its usage on stdout.
#   cli_errors.sh <recmix binary>
set -uo pipefail
recmix=$1
source "$(dirname "$0")/../lib.sh"
scratch cli-errors
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_error() {  # expect_error <kind> <command args...>
  local kind=$1 before=$failures
  shift
  "$recmix" "$@" >"$work/out" 2>"$work/err"
  local rc=$? what="recmix $*"
  ((rc != 0)) || fail "$what: exit status 0"
  local lines
  lines=$(wc -l <"$work/err")
  [[ $lines -eq 1 ]] || fail "$what: $lines lines on stderr, not 1: $(cat "$work/err")"
  [[ -z "$(tail -c 1 "$work/err")" ]] || fail "$what: stderr does not end its line"
  grep -qE "^recmix: ${kind}: .+" "$work/err" || fail "$what: stderr is not 'recmix: ${kind}: ...': $(cat "$work/err")"
  ! grep -q "^recmix: " "$work/out" || fail "$what: an error on stdout: $(cat "$work/out")"
  ((failures > before)) || echo "ok: $what -> $(cat "$work/err")"
}

printf 'name = "x"\n[data]\ntrain = "t.h5"\n[train]\nbatch_size = 0\n' >"$work/bad.toml"
printf 'not a dataset\n' >"$work/bad.h5"

expect_error "usage error" train "$work/missing.toml"
expect_error "usage error" no-such-command
expect_error "usage error" data synth --no-such-option
expect_error "config error" train
expect_error "config error" train "$work/bad.toml"
expect_error "config error" data synth -o "$work/x.h5" --rows abc
expect_error "data error" data inspect "$work/bad.h5"
expect_error "I/O error" report "$work/missing" -o "$work/r.html"

expect_error "usage error" trian
said() { grep -q -- "$1" "$work/err" || fail "stderr does not say '$1': $(cat "$work/err")"; }
said "unknown command 'trian' (did you mean 'train'?)"

# The checks before a job allocates or trains a step, on a small dataset.
synth() { "$recmix" data synth -o "$work/$1" --rows "$2" --tables "$3" --table-rows "$4" --dense 3 --seed 1 >/dev/null; }
synth train.h5 2k 2 10,20
synth eval3.h5 1k 3 10,20,5
synth eval-rows.h5 1k 2 10,25
mkdir "$work/dir.h5"
checks() { job_toml name=checks run_dir=run steps=10 "$@"; }
checks eval=eval3.h5 >"$work/eval3.toml"
expect_error "data error" train "$work/eval3.toml"
said "eval file '$work/eval3.h5': the table count is 3 (rows \[10, 20, 5\]); the model was built for 2"
checks eval=eval-rows.h5 >"$work/eval-rows.toml"
expect_error "data error" train "$work/eval-rows.toml"
said "table 1's row count is 25; the model was built for 20"
checks eval=no-eval.h5 >"$work/no-eval.toml"
expect_error "I/O error" train "$work/no-eval.toml"
said "data.eval: $work/no-eval.h5: no such file"
checks train=dir.h5 >"$work/dir.toml"
expect_error "I/O error" train "$work/dir.toml"
said "dir.h5: is a directory, not an HDF5 file"
checks | sed 's/^\[model\]$/[model]\ntables = [10, 30]/' >"$work/tables.toml"
expect_error "config error" train "$work/tables.toml"
said "'model.tables' \[10, 30\] (2 tables) disagrees with the dataset '$work/train.h5' \[10, 20\]"
checks batch_size=16777216 >"$work/batch.toml"
expect_error "config error" train "$work/batch.toml"
said "'train.batch_size' = 16777216 is more than the 2000 rows of the training data"
checks "bottom_mlp=[2000000000, 8]" >"$work/wide.toml"
expect_error "out of memory" train "$work/wide.toml"
said "job 'checks' cannot fit: its peak memory estimate per rank is .*, above .*; the largest term: "

# A resume whose checkpoint is at or past the target says so, writes nothing and exits 0.
checks checkpoint=5 >"$work/done.toml"
"$recmix" train "$work/done.toml" >/dev/null 2>"$work/err" || fail "training to step 10: $(cat "$work/err")"
written() { ls -l --time-style=+%s.%N "$work/run/checkpoints" "$work/run/metrics.jsonl" | md5sum; }
before=$(written)
"$recmix" train "$work/done.toml" --steps 5 --resume auto >"$work/out" 2>"$work/err" ||
  fail "--steps 5 on a step-10 checkpoint: exit status $?: $(cat "$work/err")"
grep -q "has no step left: .*ckpt-000000010.h5 is at step 10, past the job's last (5); nothing to resume" "$work/out" ||
  fail "--steps 5 on a step-10 checkpoint: stdout does not say so: $(cat "$work/out")"
[[ $(written) == "$before" ]] || fail "--steps 5 on a step-10 checkpoint wrote a checkpoint or metrics"

"$recmix" --help >"$work/out" 2>"$work/err" || fail "recmix --help: exit status $?"
grep -q "Usage" "$work/out" || fail "recmix --help: no usage on stdout"
[[ ! -s "$work/err" ]] || fail "recmix --help: wrote to stderr: $(cat "$work/err")"

echo "$failures failure(s)"
((failures == 0))
