#!/usr/bin/env bash
# What a user reads when a run on 2 ranks (through launch/recmix-mpirun) ends early:
# - a NaN in the data of rank 1: stderr's first line is rank 1's, naming the file, row and column;
#   rank 0's "peer failed" line is in train.log, not on stderr; no Open MPI banner; status 1;
# - a bad job spec (recmix train), jobs file (recmix run) or a run directory holding a run:
#   exactly one "config error" line on stderr, no ORTE_ERROR_LOG line or banner, status 1;
# - a SIGTERM: a clean stop with status 3, its stop line and resume command, no "aborted" banner;
# - a program's lines come out as they are written, a line of dashes (not Open MPI's 74) too,
#   with none held back after it.
# Usage: rank_failure_output.sh <recmix binary> <source dir>
set -euo pipefail
recmix=$1 src=$2
source "$(dirname "$0")/../lib.sh"
scratch rank-failure
mpirun=("$src/launch/recmix-mpirun" -np 2)
py=/usr/bin/python3
cd "$work"
$py -c "import h5py" 2>/dev/null || { echo "python3-h5py is not installed: skipped"; exit 77; }

# no_banner <file>: none of Open MPI's banners or noise about the end.
no_banner() {
  ! grep -nE "ORTE_ERROR_LOG|MPI_ABORT|aborted|terminated normally|non-zero|help message|^-{20,}|Forwarding signal" "$1" ||
    fail "$2: Open MPI's banner above"
}

"$recmix" data synth -o train.h5 --rows 4k --tables 2 --table-rows 100,50 --dense 3 --seed 3 >/dev/null
job_toml name=K1 steps=40 > job.toml
# Global batch 128 over 2 ranks: rows 3008-3071 are rank 1's part of step 24.
cp train.h5 nan.h5
$py -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f['dense'][3040, 2] = float('nan')" nan.h5
sed 's/train = "train.h5"/train = "nan.h5"/' job.toml > nan.toml
rc=0
"${mpirun[@]}" "$recmix" train nan.toml --run-dir run-nan > nan.out 2> nan.err || rc=$?
[[ $rc == 1 ]] || { cat nan.err; fail "the NaN run exited with $rc, not 1"; }
errors=$(grep "^recmix" nan.err || true)
[[ $(grep -c . <<<"$errors") == 1 ]] || { cat nan.err; fail "not one error line on stderr"; }
grep -qE "^recmix \(rank 1\): data error: nan.h5:/dense row 3040: column 2 is not finite$" <<<"$errors" || {
  cat nan.err; fail "the error line on stderr is not rank 1's, naming the file, row and column"; }
! grep -q "peer failed" nan.err || { cat nan.err; fail "a 'peer failed' line on stderr"; }
no_banner nan.err "the NaN run"
grep -q "error recmix (rank 0): peer failed: job 'K1' stops at step 24: 1 other rank(s) failed to read the batch" \
  run-nan/train.log || { cat run-nan/train.log; fail "rank 0's 'peer failed' line is not in train.log"; }
grep -q "error recmix (rank 1): data error: nan.h5:/dense row 3040" run-nan/train.log || {
  cat run-nan/train.log; fail "the cause is not in train.log"; }
echo "ok: NaN on rank 1 -> $errors (rank 0's line in train.log)"

# config_error <what> <command...>: one "config error" line, from rank 0, status 1, no banner.
config_error() {
  local what=$1 rc=0
  shift
  "${mpirun[@]}" "$recmix" "$@" > config.out 2> config.err || rc=$?
  [[ $rc == 1 ]] || { cat config.err; fail "$what: exit status $rc, not 1"; }
  [[ $(wc -l < config.err) == 1 ]] || { cat config.err; fail "$what: not one line on stderr"; }
  grep -qE "^recmix \(rank 0\): config error: .+" config.err || { cat config.err; fail "$what: not a config error line"; }
  no_banner config.err "$what"
  echo "ok: $what -> $(cat config.err)"
}
printf 'name = "a"\n[model]\nbogus = 1\n' > bad.toml
config_error "a bad job spec" train bad.toml --run-dir run-bad
printf '[[job]]\nname = 3\n' > bad-jobs.toml
config_error "a bad jobs file" run bad-jobs.toml --run-dir run-bad-jobs
printf '[[job]]\nname = "a"\nspec = "missing.toml"\n' > missing-jobs.toml
config_error "a jobs file naming a missing spec" run missing-jobs.toml --run-dir run-missing
config_error "a run directory holding a run" train job.toml --run-dir run-nan

# A clean stop by SIGTERM: status 3, the stop line and the command that continues, no banner.
job_toml name=S steps=1000000 log_interval_s=0.2 checkpoint=0 > long.toml
"${mpirun[@]}" "$recmix" train long.toml --run-dir run-stop > stop.out 2> stop.err &
pid=$!
for _ in $(seq 1 600); do
  grep -q "step [0-9]*/1000000" run-stop/train.log 2>/dev/null && break
  sleep 0.1
done
grep -q "step [0-9]*/1000000" run-stop/train.log || fail "no training step in run-stop/train.log"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 3 ]] || { cat stop.err; fail "the stopped run exited with $rc, not 3"; }
grep -q "^recmix train: stopped at step [0-9]* by SIGUSR1 on rank 0; checkpoint " stop.err || { cat stop.err; fail "no stop line"; }
grep -q "^continue with: .*recmix-mpirun -np 2 .* train long.toml --resume auto$" stop.err || {
  cat stop.err; fail "no resume command"; }
no_banner stop.err "the clean stop"
echo "ok: SIGTERM -> status 3, $(grep '^recmix train' stop.err)"

# A rule of 60 dashes and a line after it, then the program waits: the line is out while it waits.
"${mpirun[0]}" -np 1 bash -c 'printf -- "%s\nafter the rule\n" "$(printf -- "-%.0s" {1..60})" >&2; sleep 60' \
  2> rule.err &
pid=$!
for _ in $(seq 1 300); do grep -q "after the rule" rule.err && break; sleep 0.1; done
grep -q "after the rule" rule.err || { kill -TERM "$pid"; fail "a line after a program's rule was held back"; }
kill -TERM "$pid"
wait "$pid" || true
echo "ok: a program's rule holds nothing back"
