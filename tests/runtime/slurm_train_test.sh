#!/usr/bin/env bash
# Trains a small job on 2 ranks on a real one-node Slurm cluster (started and stopped by
# launch/slurm/local-cluster.sh): once under srun, once through sbatch with the batch template,
# and a two-job recmix run through sbatch.
# Exits 77 (skipped) when Slurm or munge is missing.
#   slurm_train_test.sh <source-dir> <recmix binary>
set -uo pipefail
recmix=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
source "$(dirname "$0")/../slurm_test_lib.sh" "$1"

"$recmix" data synth -o "$work/train.h5" --rows 8k --tables 3 --table-rows 50,400,20 --dense 4 --seed 2 > /dev/null
cat > "$work/job.toml" <<TOML
name = "slurm"
[model]
embedding_dim = 4
bottom_mlp = [8, 4]
top_mlp = [8, 1]
[data]
train = "train.h5"
eval = "train.h5"
[train]
batch_size = 64
steps = 40
TOML

"$cluster" start "$state" || { fail "cluster did not start"; exit 1; }
export SLURM_CONF="$state/slurm.conf"
export OMPI_MCA_btl_vader_single_copy_mechanism=none

out=$(cd "$work" && timeout 120 srun --mpi=pmix --overcommit -n 2 "$recmix" train job.toml --run-dir srun-run 2>&1); rc=$?
echo "$out" | tail -4 | sed 's/^/  srun | /'
((rc == 0)) || fail "srun training exited with $rc"
grep -q "job 'slurm': 2 rank(s)" <<<"$out" || fail "srun: the job did not run on 2 ranks"
grep -q "final: step 40" <<<"$out" || fail "srun: no final summary"
[[ -f "$work/srun-run/checkpoints/ckpt-000000040.h5" ]] || fail "srun: no final checkpoint"

# batch <label> <recmix args...>: sbatch on 2 ranks with the template, wait; sets $out (the job's
# output) and returns 0 when it COMPLETED.
batch() {
  local label=$1 job state
  shift
  job=$(cd "$work" && sbatch --parsable -n 2 --overcommit -o "$work/$label-%j.out" "$src/launch/slurm/recmix.sbatch" \
    "$recmix" "$@" 2>&1)
  if [[ ! "$job" =~ ^[0-9]+$ ]]; then
    fail "$label: sbatch refused the job: $job"
    return 1
  fi
  state=$("$src/launch/slurm/wait-job.sh" "$job" 120)
  out=$(cat "$work/$label-$job.out" 2>/dev/null)
  echo "$out" | tail -4 | sed "s/^/  $label | /"
  [[ "$state" == COMPLETED ]] || { fail "$label: batch job $job ended as '${state:-unknown}'"; return 1; }
}

if batch sbatch train job.toml --run-dir sbatch-run; then
  grep -q "final: step 40" <<<"$out" || fail "sbatch: no final summary"
  [[ -f "$work/sbatch-run/checkpoints/ckpt-000000040.h5" ]] || fail "sbatch: no final checkpoint"
fi
# recmix run through sbatch: two jobs co-located by the scheduler on the allocation's 2 ranks.
cat > "$work/jobs.toml" <<TOML
[scheduler]
round_interval_s = 0.2
[[job]]
name = "pair-a"
ranks = 2
model = { embedding_dim = 4, bottom_mlp = [8, 4], top_mlp = [8, 1] }
data = { train = "train.h5" }
train = { batch_size = 64, steps = 40 }
[[job]]
name = "pair-b"
ranks = 1
model = { embedding_dim = 4, bottom_mlp = [4], top_mlp = [4, 1] }
data = { train = "train.h5" }
train = { batch_size = 32, steps = 60 }
TOML
if batch sbatch-run run jobs.toml --run-dir sbatch-colo; then
  /usr/bin/python3 - "$work/sbatch-colo/summary.json" <<'PY' || fail "sbatch run: the jobs did not both finish"
import json, sys
s = json.load(open(sys.argv[1]))
states = {j["name"]: (j["state"], j["steps"]) for j in s["jobs"]}
sys.exit(0 if s["ranks"] == 2 and states == {"pair-a": ("finished", 40), "pair-b": ("finished", 60)} else 1)
PY
  [[ -f "$work/sbatch-colo/jobs/pair-a/checkpoints/ckpt-000000040.h5" ]] || fail "sbatch run: no checkpoint of pair-a"
fi
((failures == 0)) && echo "slurm training: all checks passed"
exit $((failures > 0))
