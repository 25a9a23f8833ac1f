#!/usr/bin/env bash
# No lost work under Slurm, on a real one-node cluster (launch/slurm/local-cluster.sh): a job of
# the batch template on 2 ranks is requeued mid-run, once by `scontrol requeue` (SIGTERM, as at
# preemption) and once by SIGUSR1 (what --signal=USR1@120 sends before the time limit; the
# template then requeues the job itself); each restart resumes with --resume auto and ends with
# weights and optimizer state bit for bit those of one uninterrupted run.
# Exits 77 (skipped) when Slurm or munge is missing.
#   slurm_requeue_test.sh <source-dir> <recmix binary>
set -uo pipefail
recmix=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
source "$(dirname "$0")/../slurm_test_lib.sh" "$1" scancel sinfo h5diff
export OMPI_MCA_btl_vader_single_copy_mechanism=none

"$recmix" data synth -o "$work/train.h5" --rows 40k --tables 3 --table-rows 50,400,20 --dense 4 --seed 2 > /dev/null
cat > "$work/job.toml" <<TOML
name = "requeue"
seed = 7
[model]
embedding_dim = 4
bottom_mlp = [8, 4]
top_mlp = [8, 1]
[optimizer]
sparse = "adagrad"
[data]
train = "train.h5"
shuffle = true
[train]
batch_size = 64
steps = 30000
log_interval_s = 1
[checkpoint]
interval = 2000
keep = 2
TOML
# The uninterrupted run.
(cd "$work" && timeout 120 mpirun --allow-run-as-root --oversubscribe -n 2 "$recmix" train job.toml \
  --run-dir straight > straight.log 2>&1) || { cat "$work/straight.log"; fail "the uninterrupted run failed"; exit 1; }

"$cluster" start "$state" || { fail "cluster did not start"; exit 1; }
export SLURM_CONF="$state/slurm.conf"

job_field() { scontrol show job "$1" -o 2>/dev/null | sed -n "s/.* $2=\([^ ]*\).*/\1/p"; }

# interrupted <label> <how>: submits the job, interrupts it once after its first checkpoint, lets
# the requeued start run, waits for it to complete and compares its last checkpoint with the uninterrupted run's.
interrupted() {
  local label=$1 how=$2 job out final
  # Rank 0 holds after step 2001 (just after the first checkpoint) until the signal comes, so the
  # signal never finds the run already finished, however fast the machine (a test hook of the
  # trainer; the requeued start resumes past that step and does not hold).
  job=$(cd "$work" && RECMIX_FAULT_INJECTION=requeue:2001:0:stall sbatch --parsable -n 2 --overcommit \
    -o "$work/$label.out" "$src/launch/slurm/recmix.sbatch" \
    "$recmix" train job.toml --run-dir "$label" --resume auto 2>&1)
  [[ "$job" =~ ^[0-9]+$ ]] || { fail "$label: sbatch refused the job: $job"; return; }
  local deadline=$((SECONDS + 60))
  until ls "$work/$label"/checkpoints/ckpt-*.h5 >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { fail "$label: no checkpoint within 60 s"; scancel "$job"; return; }
    sleep 0.1
  done
  case $how in
    requeue) scontrol requeue "$job" ;;
    usr1) scancel --signal=USR1 "$job" ;;
  esac
  deadline=$((SECONDS + 60))
  until [[ "$(job_field "$job" Restarts)" == 1 && "$(job_field "$job" JobState)" == PENDING ]]; do
    ((SECONDS < deadline)) || { fail "$label: the job was not requeued (state $(job_field "$job" JobState))"; scancel "$job"; return; }
    sleep 0.2
  done
  # Slurm holds a requeued job back about two minutes, long enough for the node to clean up
  # the first start; waiting for the node to be idle again stands in for that here.
  until [[ "$(sinfo -h -o %T 2>/dev/null)" == idle ]]; do
    ((SECONDS < deadline)) || { fail "$label: the node did not become idle after the requeue"; scancel "$job"; return; }
    sleep 0.2
  done
  # slurmd refuses any credential of the job made up to the second it revoked the first start's
  # (its times are whole seconds), so the restart is let in two seconds later, not at once.
  scontrol update jobid="$job" StartTime=now+2
  final=$("$src/launch/slurm/wait-job.sh" "$job" 120)
  out=$(cat "$work/$label.out")
  grep -v '^step ' <<<"$out" | sed "s/^/  $label | /" | grep -E "stopped|resumed|requeue|done|continue" | head -8
  [[ "$final" == COMPLETED ]] || { echo "$out" | grep -v "^step " | tail -15; scontrol show job "$job"; fail "$label: the requeued job ended as '$final'"; return; }
  grep -q "stopped at step [0-9]* by SIG" <<<"$out" || fail "$label: the first start did not stop at the signal"
  grep -q "resumed from .* at step" <<<"$out" || fail "$label: the second start did not resume"
  [[ $how != usr1 ]] || grep -q "requeueing job $job" <<<"$out" || fail "$label: the template did not requeue the job"
  local a="$work/straight/checkpoints/ckpt-000030000.h5" b="$work/$label/checkpoints/ckpt-000030000.h5"
  [[ -f "$b" ]] || { fail "$label: no final checkpoint"; return; }
  for group in /dense /dense_optimizer /embedding; do
    h5diff -q "$a" "$b" "$group" "$group" || fail "$label: $group differs from the uninterrupted run's"
  done
}

interrupted by-requeue requeue
interrupted by-usr1 usr1
((failures == 0)) && echo "slurm requeue: all checks passed"
exit $((failures > 0))
