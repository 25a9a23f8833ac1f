#!/usr/bin/env bash
# Waits for a Slurm job to end and prints its final state (COMPLETED, FAILED, ...). Polls
# `scontrol show job` every 0.2 s, because `sbatch --wait` polls slowly (about 10 s).
# Exit status 0 when the job COMPLETED, 1 otherwise, 2 when it did not end within the timeout.
#   launch/slurm/wait-job.sh <job id> [timeout seconds, default 120]
set -uo pipefail
job=${1:?usage: wait-job.sh <job id> [timeout seconds]}
timeout_s=${2:-120}
state=""
deadline=$((SECONDS + timeout_s))
while ((SECONDS < deadline)); do
  state=$(scontrol show job "$job" -o 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  if [[ "$state" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)$ ]]; then
    echo "$state"
    [[ "$state" == COMPLETED ]]
    exit
  fi
  sleep 0.2
done
echo "${state:-UNKNOWN}"
exit 2
