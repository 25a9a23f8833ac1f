#!/usr/bin/env bash
# Starts a one-node Slurm cluster (launch/slurm/local-cluster.sh), runs a 2-rank MPI program
# under srun and through sbatch with launch/slurm/recmix.sbatch, checks that the ranks formed
# one job, checks that the daemons listen on 127.0.0.1 only, and always stops the cluster. Exits 77 (skipped) when Slurm or munge is missing.
# With a fail_one_rank binary, also checks that a rank failing under srun ends the whole step.
#   slurm_cluster_test.sh <source-dir> <rank_report binary> [<MPI test binary> [<fail_one_rank binary>]]
set -uo pipefail
payload=$2 extra=${3:-} failing=${4:-}
source "$(dirname "$0")/../slurm_test_lib.sh" "$1" munge sinfo

start=$SECONDS
"$cluster" start "$state" || { fail "cluster did not start"; exit 1; }
echo "cluster up in $((SECONDS - start)) s"
export SLURM_CONF="$state/slurm.conf"
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# The daemons listen on loopback only: every TCP or UDP socket that munged, slurmctld or slurmd
# listens on is bound to 127.0.0.1 (munged has none; it answers on a Unix socket).
check_loopback() {
  if ! command -v ss >/dev/null 2>&1; then
    echo "note: ss not found (iproute2); listening addresses not checked"
    return
  fi
  local sockets name pid line addr count
  sockets=$(ss -H -l -t -u -n -p 2>&1) || { fail "ss -ltunp failed: $sockets"; return; }
  for name in munged slurmctld slurmd; do
    pid=$(cat "$state/pids/$name.pid" 2>/dev/null)
    [[ "$pid" =~ ^[0-9]+$ ]] || { fail "no PID recorded for $name"; continue; }
    count=0
    while read -r line; do
      [[ -n "$line" ]] || continue
      # Netid State Recv-Q Send-Q Local-Address:Port Peer-Address:Port Process
      addr=$(awk '{print $5}' <<<"$line")
      count=$((count + 1))
      [[ "${addr%:*}" == 127.0.0.1 ]] || fail "$name (pid $pid) listens on $addr, not on loopback only"
    done < <(grep -E "pid=$pid," <<<"$sockets")
    if [[ $name == munged ]]; then
      ((count == 0)) && echo "$name (pid $pid): no TCP or UDP socket"
    else
      ((count > 0)) || fail "$name (pid $pid) listens on no port that ss shows"
    fi
    ((count == 0)) || echo "$name (pid $pid): $count listening socket(s) checked"
  done
}
check_loopback

# Both ranks of one job report size 2 and the same sum (0 + 1).
check_ranks() {  # check_ranks <label> <output>
  local label=$1 out=$2
  for r in 0 1; do
    grep -qx "rank $r of 2: sum of ranks 1" <<<"$out" || fail "$label: rank $r did not report 'rank $r of 2: sum of ranks 1'"
  done
}

out=$(timeout 60 srun --mpi=pmix --overcommit -n 2 "$payload" 2>&1); rc=$?
echo "srun exit $rc:"; echo "$out" | sed 's/^/  | /'
((rc == 0)) || fail "srun exited with $rc"
check_ranks srun "$out"

# Through the batch template, polling the job state (sbatch --wait polls slowly).
job=$(sbatch --parsable -n 2 --overcommit -o "$state/job-%j.out" "$src/launch/slurm/recmix.sbatch" "$payload" 2>&1)
if [[ ! "$job" =~ ^[0-9]+$ ]]; then
  fail "sbatch refused the job: $job"
else
  job_state=$("$src/launch/slurm/wait-job.sh" "$job" 120)
  out=$(cat "$state/job-$job.out" 2>/dev/null)
  echo "sbatch job $job: $job_state"; echo "$out" | sed 's/^/  | /'
  [[ "$job_state" == COMPLETED ]] || fail "batch job $job ended as '${job_state:-unknown}'"
  check_ranks sbatch "$out"
fi

# Optionally the collective tests themselves at 2 ranks under srun.
if [[ -n "$extra" ]]; then
  out=$(timeout 60 srun --mpi=pmix --overcommit -n 2 "$extra" --gtest_brief=1 2>&1); rc=$?
  echo "srun $(basename "$extra") exit $rc:"; echo "$out" | tail -3 | sed 's/^/  | /'
  ((rc == 0)) || fail "$(basename "$extra") under srun exited with $rc"
fi

# One failing rank ends every rank of the step, with its one-line error, within seconds.
if [[ -n "$failing" ]]; then
  t0=$SECONDS
  out=$(timeout 60 srun --mpi=pmix --overcommit -n 2 "$failing" blocking 2>&1); rc=$?
  echo "srun with a failing rank: exit $rc after $((SECONDS - t0)) s:"; echo "$out" | head -5 | sed 's/^/  | /'
  ((rc != 0 && rc != 124)) || fail "a failing rank under srun gave exit $rc (0: not failed, 124: hung)"
  (((SECONDS - t0) < 30)) || fail "a failing rank took $((SECONDS - t0)) s to end the step"
  [[ $(grep -c "recmix: data error:" <<<"$out") -eq 1 ]] || fail "expected the failing rank's error once"
fi

echo "total $((SECONDS - start)) s, $failures failure(s)"
((failures == 0))
