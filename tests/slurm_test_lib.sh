# Sourced by the tests that run on the project's one-node Slurm cluster: checks the programs they
# need (exit 77, skipped, when one is missing), makes the cluster's state folder and a work
# folder, and at exit stops the cluster by its PIDs and removes both (the state is kept when a
# daemon could not be stopped; its logs are shown when a check failed).
#   source slurm_test_lib.sh <source-dir> <program>...
# Sets: src, state, work, cluster; defines fail (counts into $failures).
src=$(cd "$1" && pwd)
shift
for bin in munged slurmctld slurmd srun sbatch scontrol "$@"; do
  command -v "$bin" >/dev/null 2>&1 || { echo "SKIP: $bin not found (scripts/install-deps.sh --with-slurm)"; exit 77; }
done
state=$(mktemp -d /tmp/recmix-slurm.XXXXXX)
work=$(mktemp -d /tmp/recmix-slurm-job.XXXXXX)
cluster="$src/launch/slurm/local-cluster.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
slurm_test_cleanup() {
  "$cluster" stop "$state" || echo "warning: stopping the cluster failed; state kept in $state"
  if ((failures)); then
    for f in "$state"/log/*.log "$state"/munge/munged.log; do [[ -r "$f" ]] && { echo "--- $f"; tail -20 "$f"; }; done
  fi
  [[ -z "$(ls "$state"/pids/*.pid 2>/dev/null)" ]] && rm -rf "$state"
  rm -rf "$work"
}
trap slurm_test_cleanup EXIT
