#!/usr/bin/env bash
# No lost work in recmix train: a SIGTERM to a 2-rank run (through launch/recmix-mpirun, which
# hands it to the ranks as SIGUSR1) stops both ranks at the same step with a checkpoint and exit
# status 3, though the job writes no periodic checkpoints. `--resume auto` then removes a
# checkpoint left unfinished (ckpt-*.h5.tmp), skips a damaged newest checkpoint for the one before
# it (saying which and why), and ends with the weights of an uninterrupted run, bit for bit. On a
# job with no checkpoint, `--resume auto` starts at step 0 and says so. A single process stopped
# by SIGINT does the same; a second SIGINT ends it at once. A checkpoint holding a NaN or an
# impossible data position is refused by name; a diverging run stops without writing one; a
# resume with another seed or batch size is refused unless --allow-changes.
# Usage: train_signals.sh <recmix binary> <source dir>
set -euo pipefail
recmix=$1 src=$2
source "$(dirname "$0")/../lib.sh"
scratch signals
mpirun=("$src/launch/recmix-mpirun")
py=/usr/bin/python3
cd "$work"

"$recmix" data synth -o train.h5 --rows 20k --tables 4 --table-rows 100,2000,30,500 --dense 5 --seed 3 >/dev/null
job_toml name=sig seed=7 bottom_mlp="[64, 32, 8]" top_mlp="[64, 1]" lr=0.05 batch_size=64 steps=20000 \
  log_interval_s=0.2 checkpoint=0 > job.toml
final=checkpoints/ckpt-000020000.h5

"${mpirun[@]}" -np 2 "$recmix" train job.toml --run-dir full > full.out 2>&1 || { cat full.out; fail "the uninterrupted run"; }

# wait_for_steps <run dir>: until the run's log shows a training step (the handlers are in place).
wait_for_steps() {
  for _ in $(seq 1 600); do
    grep -q "step [0-9]*/20000" "$1/train.log" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no training step in $1/train.log"
}

"${mpirun[@]}" -np 2 "$recmix" train job.toml --run-dir cut > cut.out 2>&1 &
pid=$!
wait_for_steps cut

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 3 ]] || { cat cut.out; fail "a run stopped by SIGTERM exited with $rc, not 3"; }
grep -q "stopped at step [0-9]* by SIGUSR1 on rank 0" cut.out || { cat cut.out; fail "the stop is not reported"; }
ckpt=$(ls cut/checkpoints/ckpt-*.h5 | tail -1)
step=$(basename "$ckpt" .h5 | sed 's/ckpt-0*//')
(( step > 0 && step < 20000 )) || fail "the stop's checkpoint is at step $step"
echo "stopped by SIGTERM at step $step of 20000, checkpoint $(basename "$ckpt")"

# What a killed run leaves: a temporary file of a write that never completed, and a damaged
# newest checkpoint (cut short).
head -c 4096 "$ckpt" > cut/checkpoints/ckpt-000019999.h5.tmp
damaged=$(printf 'cut/checkpoints/ckpt-%09d.h5' $((step + 1)))
head -c 2000 "$ckpt" > "$damaged"
"${mpirun[@]}" -np 2 "$recmix" train job.toml --run-dir cut --resume auto > resume.out 2>&1 || {
  cat resume.out; fail "--resume auto after a stop"; }
grep -q "removed the unfinished checkpoint .*ckpt-000019999.h5.tmp" cut/train.log || { cat cut/train.log; fail "the unfinished checkpoint was not removed by name"; }
[[ ! -e cut/checkpoints/ckpt-000019999.h5.tmp ]] || fail "the unfinished checkpoint is still there"
grep -q "not resuming from $damaged" cut/train.log || { cat cut/train.log; fail "the damaged checkpoint was not skipped by name"; }
grep -q "resumed from $ckpt at step $step" cut/train.log || { cat cut/train.log; fail "not resumed from the checkpoint before the damaged one"; }
$py - full/$final cut/$final <<'PY' || fail "the stopped and resumed run's weights differ from the uninterrupted run's"
import h5py, sys
def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out
a, b = datasets(sys.argv[1]), datasets(sys.argv[2])
bad = sorted(set(a) ^ set(b)) + [k for k in a if k in b and a[k].tobytes() != b[k].tobytes()]
print("stopped + resumed = uninterrupted, bit for bit" if a and not bad else f"differ: {bad[:5]}")
sys.exit(0 if a and not bad else 1)
PY

# A checkpoint holding a NaN, or a data position no run could have written, is refused by name.
cp "full/$final" nan.h5
cp "full/$final" epoch.h5
$py - nan.h5 epoch.h5 <<'PY'
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    f["embedding/1/weights"][5, 2] = float("nan")
with h5py.File(sys.argv[2], "r+") as f:
    f.attrs["data_epoch"] = 10**6
PY
"$recmix" eval nan.h5 train.h5 > nan.out 2>&1 && fail "a checkpoint holding a NaN was evaluated"
grep -q "nan.h5: /embedding/1/weights row 5 holds nan" nan.out || { cat nan.out; fail "the NaN is not named"; }
"$recmix" eval epoch.h5 train.h5 > epoch.out 2>&1 && fail "a checkpoint at epoch 10^6 was evaluated"
grep -q "epoch.h5: attribute data_epoch = 1000000 is not in 0..step" epoch.out || { cat epoch.out; fail "the bad epoch is not named"; }
# A run that diverges where the loss does not show it (a NaN put into rank 1's embedding shard
# after the last step, by the trainer's test hook) stops with one error on both ranks and writes
# no checkpoint.
RECMIX_FAULT_INJECTION=sig:50:1:nan "${mpirun[@]}" -np 2 "$recmix" train job.toml --run-dir diverge --steps 50 \
  > diverge.out 2>&1 && fail "a diverging run exited 0"
grep -q "numerical error: training diverged: at step 50 embedding table .* holds nan" diverge.out || {
  cat diverge.out; fail "the divergence is not reported by tensor and row"; }
[[ -z "$(ls diverge/checkpoints 2>/dev/null)" ]] || fail "a diverged run wrote a checkpoint: $(ls diverge/checkpoints)"

# --resume auto on a job that has no checkpoint starts at step 0.
"$recmix" train job.toml --run-dir fresh --steps 20 --resume auto > fresh.out 2>&1 || { cat fresh.out; fail "--resume auto without a checkpoint"; }
grep -q "no checkpoint in 'fresh/checkpoints' to resume from: starting at step 0" fresh/train.log || {
  cat fresh/train.log; fail "--resume auto does not say it starts at step 0"; }
[[ -f fresh/checkpoints/ckpt-000000020.h5 ]] || fail "the fresh run has no final checkpoint"

# Resuming with another seed or batch size is refused, naming both, unless --allow-changes.
sed -e 's/^seed = 7$/seed = 8/' -e 's/^batch_size = 64$/batch_size = 32/' job.toml > changed.toml
"$recmix" train changed.toml --run-dir fresh --steps 30 --resume auto > changed.out 2>&1 && fail "a changed job resumed"
grep -q "ckpt-000000020.h5 was saved with seed 7 (this job: 8), global batch 64 (this job: 32): resuming would not continue" \
  changed.out || { cat changed.out; fail "the changed settings are not named"; }
"$recmix" train changed.toml --run-dir fresh --steps 30 --resume auto --allow-changes > allowed.out 2>&1 || {
  cat allowed.out; fail "--allow-changes did not resume"; }
grep -q "resuming anyway (--allow-changes)" fresh/train.log || fail "the allowed change is not logged"

# One process, Ctrl-C: stops with a checkpoint and status 3. Twice: ends at once, by SIGINT.
"$recmix" train job.toml --run-dir ctrlc > ctrlc.out 2>&1 &
pid=$!
wait_for_steps ctrlc
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 3 ]] && grep -q "stopped at step [0-9]* by SIGINT on rank 0" ctrlc.out || { cat ctrlc.out; fail "Ctrl-C: status $rc"; }
"$recmix" train job.toml --run-dir twice > twice.out 2>&1 &
pid=$!
wait_for_steps twice
kill -INT "$pid"
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 130 || $rc == 3 ]] || { cat twice.out; fail "two Ctrl-C: status $rc"; }
echo "train_signals: all checks passed"
