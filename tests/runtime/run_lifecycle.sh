#!/usr/bin/env bash
# What a run directory and its status.json say, and what recmix run / train / submit / status do
# with them (docs/run.md, Run states):
#   - status says finished, stopped (a clean stop), failed (every job rejected) or stale (the run
#     was killed: its scheduler is gone, or its heartbeat is old), reading status.json alone;
#   - submit refuses a run that is not running, naming its state; --queue keeps the job for the
#     next --resume, which runs it;
#   - --resume on a finished run says so, changes no file (checksums) and exits 0;
#   - a run directory holding a run needs --resume or --force (recmix run and recmix train);
#     --force moves it aside to <dir>.<time>, never onto a name that is taken;
#   - a clean stop's summary says "interrupted" and its hint names the launcher; a run whose
#     every job was rejected exits 1 and says so.
# Usage: run_lifecycle.sh <recmix binary> <source dir>
set -euo pipefail
recmix=$1 src=$(cd "$2" && pwd)
source "$(dirname "$0")/../lib.sh"
scratch lifecycle
mpirun=("$src/launch/recmix-mpirun")
py=/usr/bin/python3
cd "$work"

# checksums <dir>: every file under <dir>, by path and SHA-256.
checksums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
# state_of <run dir>: the run's state as recmix status gives it (its first line).
state_of() { "$recmix" status "$1" | sed -n '1s/^run [^:]*: \([a-z]*\).*/\1/p'; }
expect_error() {  # expect_error <pattern> <command...>: fails, with <pattern> in its stderr
  local pattern=$1
  shift
  if "$@" > bad.out 2> bad.err; then fail "'$*' succeeded"; fi
  grep -q "$pattern" bad.err || { cat bad.out bad.err; fail "no '$pattern' in the error of '$*'"; }
}
# wait_for <python condition on s, the status.json> <run dir> <pid>: until it holds, or the run ends.
wait_for() {
  local cond=$1 dir=$2 pid=$3
  for _ in $(seq 600); do
    $py -c "
import json, sys
try: s = json.load(open('$dir/status.json'))
except Exception: sys.exit(1)
jobs = {j['name']: j for j in s['jobs']}
sys.exit(0 if $cond else 1)" && return 0
    kill -0 "$pid" 2>/dev/null || fail "the run in $dir ended while waiting for: $cond"
    sleep 0.1
  done
  fail "never in $dir: $cond"
}

"$recmix" data synth -o train.h5 --rows 4k --tables 3 --table-rows 50,300,7 --dense 5 --seed 2 > /dev/null
job_toml name=small ranks=1 steps=20 > small.toml
job_toml name=extra ranks=1 steps=20 > extra.toml
printf 'include = ["small.toml"]\n[scheduler]\nround_interval_s = 0.1\n' > one.toml

# A run that finished. A resume of it has nothing to do: it says so, exits 0 and leaves every
# file as it was, with --resume auto and with --resume RUN_DIR alike.
"$recmix" run one.toml --run-dir one -q > one.out 2>&1 || { cat one.out; fail "the short run failed"; }
[[ $(state_of one) == finished ]] || { "$recmix" status one; fail "a finished run is not 'finished'"; }
before=$(checksums one)
for resume in "--run-dir one --resume auto" "--resume one"; do
  # shellcheck disable=SC2086
  "$recmix" run one.toml $resume > again.out 2>&1 || { cat again.out; fail "run $resume on a finished run exited non-zero"; }
  grep -q "the run in one has ended (finished; 1 finished): nothing to resume, every file left as it was" again.out ||
    { cat again.out; fail "run $resume on a finished run does not say there is nothing to do"; }
  [[ $(checksums one) == "$before" ]] || fail "run $resume on a finished run changed its files"
done
expect_error "the run in 'one' has finished" "$recmix" submit extra.toml --run one
expect_error "the run in 'one' has finished" "$recmix" submit extra.toml --run one --queue

# A run directory that holds a run is refused without --resume or --force, and left alone.
expect_error "the run directory 'one' holds a run already: continue it with --resume one, or start over with --force" \
  "$recmix" run one.toml --run-dir one
[[ $(checksums one) == "$before" ]] || fail "a refused run changed the run directory"
# --force moves it aside to one.<time>. The names it could take in the next minute are taken
# already (decoys): it takes one.<time>-2 and leaves them as they were.
t0=$(date +%s)
for s in $(seq 0 60); do
  d=one.$(date -u -d "@$((t0 + s))" +%Y%m%d-%H%M%S)
  mkdir "$d" && echo decoy > "$d/decoy"
done
"$recmix" run one.toml --run-dir one --force -q > force.out 2>&1 || { cat force.out; fail "run --force failed"; }
aside=$(sed -n 's/^--force: the run that was in one is now in \(.*\)$/\1/p' force.out)
[[ $aside == one.*-2 && -d $aside ]] || { cat force.out; fail "--force did not say where the old run went"; }
[[ $(checksums "$aside") == "$before" ]] || fail "the run moved aside by --force is not the old run, byte for byte"
for d in one.2*; do
  [[ $d == "$aside" || $(ls "$d") == decoy ]] || fail "--force wrote into $d, a name that was taken"
done
[[ $(grep -c '"event":"run_start"' one/events.jsonl) == 1 ]] || fail "the forced run's events mix two runs"

# recmix train: the same for a job's run directory.
job_toml name=solo run_dir=solo steps=10 > solo.toml
"$recmix" train solo.toml > solo.out 2>&1 || { cat solo.out; fail "recmix train failed"; }
solo_before=$(checksums solo)
expect_error "the run directory '.*solo' holds a run already: continue it with --resume auto, or start over with --force" \
  "$recmix" train solo.toml
[[ $(checksums solo) == "$solo_before" ]] || fail "a refused recmix train changed the run directory"
"$recmix" train solo.toml --force > solo-force.out 2>&1 || { cat solo-force.out; fail "recmix train --force failed"; }
solo_aside=$(sed -n 's/^--force: the run that was in .* is now in \(.*\)$/\1/p' solo-force.out)
[[ -n $solo_aside && $(checksums "$solo_aside") == "$solo_before" ]] || { cat solo-force.out; fail "train --force: the old run is not aside"; }
[[ $(wc -l < solo/metrics.jsonl) == $(wc -l < "$solo_aside/metrics.jsonl") ]] || fail "train --force: the metrics mix two runs"
# recmix train --resume auto of a job at its last step: says so, exits 0, changes no file.
solo_before=$(checksums solo)
"$recmix" train solo.toml --resume auto > solo-again.out 2>&1 || { cat solo-again.out; fail "train --resume auto of a finished job exited non-zero"; }
grep -q "the job 'solo' has no step left: .*ckpt-000000010.h5 is at step 10, the job's last; nothing to resume" solo-again.out ||
  { cat solo-again.out; fail "train --resume auto of a finished job does not say there is nothing to do"; }
[[ $(checksums solo) == "$solo_before" ]] || fail "train --resume auto of a finished job changed its files"

# Every job rejected: nothing ran, exit status 1, and the summary and status say so.
job_toml name=wide ranks=4 steps=10 > wide.toml
printf 'include = ["wide.toml"]\n' > wide-jobs.toml
rc=0
"$recmix" run wide-jobs.toml --run-dir wide > wide.out 2>&1 || rc=$?
[[ $rc == 1 ]] || { cat wide.out; fail "a run whose every job was rejected exited with $rc, not 1"; }
grep -q "nothing ran: every job (1) was rejected" wide.out || { cat wide.out; fail "the summary does not say nothing ran"; }
[[ $(state_of wide) == failed ]] || fail "a run whose every job was rejected is not 'failed'"

# A clean stop (SIGTERM through the launcher) on 2 ranks: exit 3, "interrupted", the resume hint
# with the launcher; status says stopped; submit refuses the run, --queue keeps the job.
# 'long' takes at least 1 ms a step (an injected delay), so that it is still running at every
# check below however fast or loaded the machine (unslowed, it once finished first in CI).
job_toml name=long ranks=2 steps=1000000 log_interval_s=0.2 > long.toml
printf 'include = ["long.toml"]\n[scheduler]\npolicy = "complementary"\nround_interval_s = 0.1\ncolocation_limit = 2\ncores_per_rank = 2\nslowdown_limit = 100\n' > stop.toml
export RECMIX_STEP_DELAY_INJECTION='long:*:0.001'
"${mpirun[@]}" -np 2 "$recmix" run stop.toml --run-dir stop -q > stop.out 2> stop.err &
pid=$!
wait_for "jobs['long']['state'] == 'running' and jobs['long']['step'] > 0" stop "$pid"
[[ $(state_of stop) == running ]] || { "$recmix" status stop; fail "a running run is not 'running'"; }
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc == 3 ]] || { cat stop.out stop.err; fail "a run stopped by SIGTERM exited with $rc, not 3"; }
grep -q "^run interrupted after" stop.out && ! grep -q "run finished" stop.out || { cat stop.out; fail "the stopped run's summary does not say interrupted"; }
grep -qx "  $src/launch/recmix-mpirun -np 2 .*recmix run stop.toml --resume stop" stop.out ||
  { cat stop.out; fail "the resume hint does not name the launcher"; }
[[ $(state_of stop) == stopped ]] || { "$recmix" status stop; fail "a cleanly stopped run is not 'stopped'"; }
expect_error "the run in 'stop' is stopped (a clean stop, resumable).*submit --queue" "$recmix" submit extra.toml --run stop
"$recmix" submit extra.toml --run stop --queue > queue.out || fail "submit --queue to a stopped run failed"
grep -q "queued 'extra' in stop" queue.out || { cat queue.out; fail "submit --queue does not say it queued the job"; }

# The resumed run takes the queued job. Once it finished, rank 1 is killed (kill -9): the run is
# stale at once (its scheduler is gone), status still answers, and submit refuses it by name.
"${mpirun[@]}" -x "LIFECYCLE_RUN=$work" -np 2 "$recmix" run stop.toml --resume stop -q > resumed.out 2> resumed.err &
pid=$!
wait_for "jobs.get('extra', {}).get('state') == 'finished' and jobs['long']['state'] == 'running'" stop "$pid"
rank_pid() {  # rank_pid <rank>: that rank's process of this run (LIFECYCLE_RUN in its environment)
  # Read whole, not piped into grep -q: under pipefail a grep that stops early fails its pipe.
  local e env
  for e in /proc/[0-9]*/environ; do
    env=$'\n'$(tr '\0' '\n' 2>/dev/null < "$e")$'\n' || continue
    [[ $env == *$'\n'"OMPI_COMM_WORLD_RANK=$1"$'\n'* && $env == *$'\n'"LIFECYCLE_RUN=$work"$'\n'* ]] &&
      { e=${e#/proc/}; echo "${e%/environ}"; return; }
  done
  return 0
}
rank0=$(rank_pid 0) rank1=$(rank_pid 1)
[[ -n $rank0 && -n $rank1 ]] || fail "the ranks of the resumed run not found"
kill -9 "$rank1"
rc=0
wait "$pid" || rc=$?
((rc != 0)) || fail "a run with a killed rank exited 0"
# mpirun may return before rank 0 (the scheduler) has gone: its end is what status must see.
for _ in $(seq 300); do [[ $(ps -o stat= -p "$rank0" 2>/dev/null) == Z* || -z $(ps -o pid= -p "$rank0") ]] && break; sleep 0.1; done
"$recmix" status stop > stale.out || fail "recmix status of a killed run exited non-zero"
grep -q "^run stop: stale (its scheduler (process [0-9]* on .*) is gone; --resume continues it)" stale.out ||
  { cat stale.out; fail "a killed run is not 'stale'"; }
expect_error "the run in 'stop' is stale: its scheduler" "$recmix" submit extra.toml --run stop

# Stale by the clock: a heartbeat older than 10 rounds (5 s at least) from a scheduler that
# still lives (this shell); and running with a fresh one. Status reads status.json alone: a
# spool it cannot list changes nothing; rejected submissions come from status.json.
mkdir -p clock/spool
echo "not a folder" > clock/spool/rejected
chmod 000 clock/spool
beat() {  # beat <age in s>: clock/status.json with a heartbeat that old
  $py - "$1" "$$" <<'PY'
import json, socket, sys, time
s = json.load(open("one/status.json"))
s["state"] = "running"
s["heartbeat"] = {"unix_s": time.time() - float(sys.argv[1]), "pid": int(sys.argv[2]), "host": socket.gethostname(),
                  "interval_s": 0.1}
s["rejected_submissions"] = [{"file": "1-bad.json", "reason": "bad.toml: unknown key 'train.x'"}]
json.dump(s, open("clock/status.json", "w"))
PY
}
beat 60
"$recmix" status clock > clock.out 2>&1 || { cat clock.out; fail "recmix status read more than status.json"; }
grep -q "^run clock: stale (no heartbeat for 6[0-9] s (one every 0.1 s; stale after 5 s)" clock.out ||
  { cat clock.out; fail "an old heartbeat is not 'stale'"; }
grep -q "^rejected submission 1-bad.json: bad.toml: unknown key 'train.x'" clock.out ||
  { cat clock.out; fail "the rejected submissions of status.json are not shown"; }
beat 0
[[ $(state_of clock) == running ]] || fail "a fresh heartbeat of a live scheduler is not 'running'"
chmod 755 clock/spool
echo "run_lifecycle: all checks passed"
