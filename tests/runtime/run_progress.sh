#!/usr/bin/env bash
# What recmix run says while it runs (docs/run.md, What a run writes):
#   - the progress line gives each running job's loss, samples/s and ETA;
#   - a job whose step stops moving (a stall injected at a step) is warned of once on stderr, even
#     with -q, as "no progress for N s", with a `stalled` event, `stalled_s` in status.json and
#     the note in recmix status; its progress line says STALLED; the run goes on, and stops
#     cleanly on SIGTERM;
#   - a run in which no two jobs shared a rank says why in its summary (here: the cores).
# Usage: run_progress.sh <recmix binary> <source dir>
set -euo pipefail
recmix=$1
source "$(dirname "$0")/../lib.sh"
scratch progress
py=/usr/bin/python3
cd "$work"

"$recmix" data synth -o train.h5 --rows 8k --tables 3 --table-rows 50,300,7 --dense 5 --seed 2 > /dev/null
# Two one-thread jobs on one rank of one core: none shares, and the summary says it was the cores.
job_toml name=a ranks=1 steps=20 > a.toml
job_toml name=b ranks=1 steps=20 > b.toml
printf 'include = ["a.toml", "b.toml"]\n[scheduler]\nround_interval_s = 0.1\ncores_per_rank = 1\n' > two.toml
"$recmix" run two.toml --run-dir two -q > two.out 2>&1 || { cat two.out; fail "the two-job run failed"; }
grep -q "no two jobs shared a rank: each rank has 1 core(s) for jobs .* need 2" two.out ||
  { cat two.out; fail "the summary does not say why no job shared a rank"; }
grep -q '"none_colocated": "each rank has 1 core' two/summary.json || fail "summary.json has no none_colocated"

# Progress lines with a rate come before the stall whatever the machine's speed: each step takes
# at least 1 ms more (an injected delay), so the 1000 steps before it last at least 1 s, five
# progress intervals.
job_toml name=slow ranks=1 steps=100000 > slow.toml
printf 'include = ["slow.toml"]\n[scheduler]\nround_interval_s = 0.1\nprogress_interval_s = 0.2\nstall_warning_s = 0.5\n' \
  > jobs.toml

RECMIX_FAULT_INJECTION=slow:1000:0:stall RECMIX_STEP_DELAY_INJECTION=slow:0:0.001 \
  "$recmix" run jobs.toml --run-dir r > run.out 2> run.err &
pid=$!
stalled=
for _ in $(seq 1200); do
  if grep -q "warning: job 'slow' has made no progress for" run.err; then stalled=1; break; fi
  kill -0 "$pid" 2>/dev/null || { cat run.out run.err; fail "the run ended before the stall was warned of"; }
  sleep 0.1
done
[[ -n $stalled ]] || { cat run.err; fail "no stall warning"; }
# The progress line while it stalls says so, with the time.
for _ in $(seq 100); do grep -q "slow [0-9]*% loss [0-9.e-]* STALLED [0-9]*s" run.err && break; sleep 0.1; done
grep -q "slow [0-9]*% loss [0-9.e-]* STALLED [0-9]*s" run.err || { cat run.err; fail "no STALLED progress line"; }
# Before it: loss, samples/s and an ETA at that rate.
grep -Eq "running: slow [0-9]+% loss [0-9.e-]+ [0-9.]+[kM]? samples/s ETA [0-9]+s" run.err ||
  { cat run.err; fail "no progress line with loss, samples/s and ETA"; }
$py - r/status.json r/events.jsonl <<'EOF' || fail "status.json or events.jsonl do not tell of the stall"
import json, sys
s = json.load(open(sys.argv[1]))
job = {j["name"]: j for j in s["jobs"]}["slow"]
assert job["state"] == "running" and job["stalled_s"] >= 0.5, job
assert "loss" in job, job
events = [json.loads(l) for l in open(sys.argv[2])]
stalled = [e for e in events if e["event"] == "stalled"]
assert len(stalled) == 1 and stalled[0]["job"] == "slow" and stalled[0]["step"] >= 1, stalled
assert stalled[0]["no_progress_s"] >= 0.5 and stalled[0]["level"] == "warning", stalled
EOF
"$recmix" status r > status.out
grep -q "slow .*running .*no progress for [0-9]* s" status.out || { cat status.out; fail "recmix status does not say it stalls"; }
[[ $(grep -c "has made no progress" run.err) == 1 ]] || { cat run.err; fail "the stall was warned of more than once"; }

# The stalled job stops at SIGTERM like any other: exit 3, a clean stop.
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 3 ]] || { cat run.out run.err; fail "the stalled run exited $rc on SIGTERM, not 3"; }

# -q: no progress line, but the warning still comes.
rm -rf r
RECMIX_FAULT_INJECTION=slow:5:0:stall "$recmix" run jobs.toml --run-dir r -q > run.out 2> run.err &
pid=$!
for _ in $(seq 1200); do
  grep -q "has made no progress" run.err && break
  kill -0 "$pid" 2>/dev/null || fail "the quiet run ended before the stall was warned of"
  sleep 0.1
done
grep -q "has made no progress" run.err || fail "-q hid the stall warning"
if grep -q "running:" run.err; then fail "-q printed a progress line"; fi
kill -TERM "$pid"
wait "$pid" || true
echo "run progress: ok"
