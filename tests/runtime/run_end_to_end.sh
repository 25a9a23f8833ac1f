#!/usr/bin/env bash
# End to end through `recmix run` on 2 ranks: three jobs on overlapping rank sets, one arriving
# later; every job ends with the same weights, bit for bit, as the same job run alone by
# `recmix train` on the same ranks and threads. A job with a NaN in a row only one of its ranks
# reads and a job whose memory share is too small each end alone with one error line, the others
# unaffected. recmix submit adds a job to a running run and rejects bad ones with a reason;
# recmix status shows them. A bad jobs file is one clear error.
# Usage: run_end_to_end.sh <recmix binary> <source dir> [part]
# part: all (the default), or one group of sections, each its own ctest test so that they run
# side by side: placement (the first run and its replay, memory, moving apart, preemption),
# interrupts (SIGTERM and resume, resuming on fewer ranks) and failures (a rank failing in a step
# or in a checkpoint write, the strict emulator, bad jobs files, submit). With co-location only
# the first run is checked, not its replay: what the ThreadSanitizer stage runs, where everything
# is 5-15 times slower and the later runs' timing-based checks do not hold.
set -euo pipefail
recmix=$1 src=$2 part=${3:-all}
source "$(dirname "$0")/../lib.sh"
case $part in all | placement | interrupts | failures | co-location) ;; *) fail "unknown part '$part'" ;; esac
# in_part <part...>: whether the sections of these parts run.
in_part() { [[ $part == all || " $* " == *" $part "* ]]; }
scratch run
mpirun=("$src/launch/recmix-mpirun")
py=/usr/bin/python3
# same_weights <message> <checkpoint> <checkpoint> [...]: each pair holds the same datasets, bit
# for bit (weights, optimizer state; the attributes, such as the job spec text, may differ).
same_weights() {
  $py - "$@" <<'PY'
import h5py, sys
def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out
paths = sys.argv[2:]
for a_path, b_path in zip(paths[::2], paths[1::2]):
    a, b = datasets(a_path), datasets(b_path)
    bad = sorted(set(a) ^ set(b)) + [k for k in a if k in b and a[k].tobytes() != b[k].tobytes()]
    if not a or bad:
        print(f"{a_path} and {b_path} differ: {bad[:5]}")
        sys.exit(1)
print(sys.argv[1])
PY
}
# same_as_solo <run dir> <ranks> <job> [recmix train options]: the job trained alone from
# <job>.toml on <ranks> ranks ends with the weights <run dir> gave it, bit for bit.
same_as_solo() {
  local run=$1 ranks=$2 name=$3
  shift 3
  local ckpt
  ckpt="checkpoints/ckpt-$(printf %09d "$(sed -n 's/^steps = //p' "$name.toml")").h5"
  local launch=("$recmix")
  [[ $ranks == 1 ]] || launch=("${mpirun[@]}" -np "$ranks" "$recmix")
  "${launch[@]}" train "$name.toml" "$@" > /dev/null 2> solo.err || { cat solo.err; fail "solo $name"; }
  same_weights "$run: $name = its solo run, bit for bit" "$run/jobs/$name/$ckpt" "solo/$name/$ckpt" ||
    fail "$run: $name's weights differ from its solo run"
}
cd "$work"

"$recmix" data synth -o train.h5 --rows 12k --tables 4 --table-rows 100,2000,30,500 --dense 5 --seed 3 >/dev/null
cp train.h5 nan.h5
# Row 100 of the first global batch of 128 (rows 0-127) is rank 1's.
$py -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f['dense'][100, 2] = float('nan')" nan.h5

# One job spec per job, usable by recmix train alone and by include.
job() {  # job <name> <seed> <bottom> <top> <batch> <steps> [extra toml]
  { job_toml name="$1" seed="$2" run_dir="solo/$1" bottom_mlp="$3" top_mlp="$4" lr=0.05 batch_size="$5" steps="$6" \
      checkpoint=300; echo "${7:-}"; } > "$1.toml"
}
# run_spec <name> <keys>: run-<name>.toml, the job spec with the run's keys (ranks, arrival) first.
run_spec() { printf '%b\n' "$2" | cat - "$1.toml" > "run-$1.toml"; }
job wide 1 "[32, 16, 8]" "[32, 1]" 128 1200
job narrow 2 "[8]" "[8, 1]" 64 1600
job late 3 "[16, 8]" "[16, 1]" 128 600
job bad-row 4 "[8]" "[8, 1]" 128 50
sed -i 's/train = "train.h5"/train = "nan.h5"/' bad-row.toml
job starved 5 "[8]" "[8, 1]" 128 50 $'[device]\nmemory_capacity = "16KiB"'

cat > jobs.toml <<TOML
include = ["run-narrow.toml", "more.toml"]

[scheduler]
policy = "complementary"
round_interval_s = 0.2
colocation_limit = 2
cores_per_rank = 2   # lets two jobs share a rank of this 2-core machine
memory_capacity = "256MiB"
slowdown_limit = 100 # sharing a core slows jobs 2x here: no moving apart in this run

[[job]]
name = "wide"
ranks = 2
seed = 1
model = { embedding_dim = 8, bottom_mlp = [32, 16, 8], top_mlp = [32, 1] }
optimizer = { dense = "adagrad", sparse = "rowwise_adagrad", lr = 0.05 }
data = { train = "train.h5" }
train = { batch_size = 128, steps = 1200 }
checkpoint = { interval = 300 }
TOML
cat > more.toml <<TOML
include = ["run-late.toml", "run-bad-row.toml", "run-starved.toml"]
TOML
# Ranks, arrival and priority may sit in an included job spec too.
run_spec narrow 'ranks = 1'
run_spec late 'ranks = 2\narrival = 1.0'
run_spec bad-row 'ranks = 2'
run_spec starved 'ranks = 2'

if in_part placement co-location; then
"${mpirun[@]}" -np 2 "$recmix" run jobs.toml --run-dir run > run.out 2> run.err || {
  cat run.err run.out; fail "recmix run failed"; }
cat run.out
test -s run/events.jsonl || fail "no events.jsonl"
test -s run/summary.json || fail "no summary.json"
$py - run <<'PY' || fail "summary or events are wrong"
import json, os, sys
run = sys.argv[1]
s = json.load(open(f"{run}/summary.json"))
jobs = {j["name"]: j for j in s["jobs"]}
def check(cond, what):
    if not cond:
        print("check failed:", what, file=sys.stderr); sys.exit(1)
for name in ("wide", "narrow", "late"):
    check(jobs[name]["state"] == "finished", f"{name} finished ({jobs[name]})")
    check(not jobs[name]["estimate_below_peak"], f"{name}: estimate below the measured peak")
    check(0 < jobs[name]["measured_peak_bytes"] <= jobs[name]["estimate_bytes"], f"{name}: peak within estimate")
check(jobs["wide"]["ranks"] == [0, 1] and len(jobs["narrow"]["ranks"]) == 1, "placements")
check("narrow" in jobs["wide"]["partners"], "wide and narrow co-located")
check(jobs["bad-row"]["state"] == "failed", "bad-row failed")
check("nan.h5" in jobs["bad-row"]["error"] and "row 100" in jobs["bad-row"]["error"]
      and jobs["bad-row"]["error"].startswith("rank 1: data error"), "bad-row's error names rank 1, file and row: " + jobs["bad-row"]["error"])
check(jobs["starved"]["state"] == "failed" and "out of memory" in jobs["starved"]["error"], "starved ran out of memory: " + jobs["starved"].get("error", ""))
events = [json.loads(l) for l in open(f"{run}/events.jsonl")]
kinds = [e["event"] for e in events]
for k in ("run_start", "submitted", "arrival", "start", "sample", "finished", "failed", "run_end"):
    check(k in kinds, f"event {k}")
check(not any(e["event"] == "estimate_below_peak" for e in events), "no estimate below a peak")
late_start = [e for e in events if e["event"] == "start" and e["job"] == "late"][0]
check(late_start["t"] >= 1.0, "late starts after its arrival")
samples = [e for e in events if e["event"] == "sample"]
check(all(k in samples[0] for k in ("step_s", "data_wait_s", "dense_s", "embedding_s", "allreduce_update_s",
                                    "pool_peak_bytes", "busy_share", "partners")), "sample fields")
# The phases are parts of the step: each sample's together at most its step, and over the run most
# of the steps' time outside the data wait. That share is a matter of timing, so it is summed over
# the run (one sample's can be low on a loaded machine) and left out under a sanitizer, whose
# instrumentation slows the code between the phases most (RECMIX_UNDER_SANITIZER).
busy = measured = 0.0
for e in samples:
    parts = e["dense_s"] + e["embedding_s"] + e["allreduce_update_s"]
    check(0 < parts <= e["step_s"] * 1.001, f"phases of {e}")
    busy += parts
    measured += max(0.0, e["step_s"] - e["data_wait_s"])
if not os.environ.get("RECMIX_UNDER_SANITIZER"):
    check(busy >= 0.5 * measured, f"the phases cover {busy:.3f} s of {measured:.3f} s of steps")
for r in s["rank_usage"]:
    check(0 < r["busy_share"] <= 1.0 and r["peak_bytes"] > 0, f"rank usage {r}")
PY
for name in wide narrow late; do
  for f in train.log metrics.jsonl; do test -s "run/jobs/$name/$f" || fail "no $f for $name"; done
done
grep -q "failed 'bad-row'" run.err || fail "the failure is not reported on the console"

# Live = simulated: the run's decisions, replayed through recmix sim with the same jobs, arrival
# times and measured run times, are the same decisions in the same order.
if [[ $part != co-location ]]; then
  "$recmix" sim --replay run > replay.out 2>&1 || { cat replay.out; fail "the simulator decided otherwise than the live run"; }
  grep -q "the same decisions in the same order" replay.out || { cat replay.out; fail "no replay verdict"; }
fi

# The same jobs alone, on the same ranks and threads: the same final weights, bit for bit.
same_as_solo run 2 wide
same_as_solo run 1 narrow
same_as_solo run 2 late
if [[ $part == co-location ]]; then
  echo "co-location part passed"
  exit 0
fi
fi  # the first run

if in_part placement; then

# Memory: random job shapes, optimizers, batch sizes, embedding tiers, table storage types and bf16
# GEMMs against random per-rank capacities.
# Every job either finishes or is rejected as never fitting; no estimate is below its job's
# measured peak; no rank's jobs held more than its capacity at once; and each run replayed
# through the simulator makes the same decisions.
"$recmix" data synth -o multihot.h5 --rows 4k --tables 3 --table-rows 300,50,1000 --dense 4 --multi-hot --pooling 1 5 \
  --seed 5 >/dev/null
for seed_capacity in 11:448 12:1024 13:8192; do
  seed=${seed_capacity%:*}
  $py - "$seed" "${seed_capacity#*:}" > "random-$seed.toml" <<'PY'
import random, sys
rng = random.Random(int(sys.argv[1]))
tiers = random.Random(100 + int(sys.argv[1]))  # apart, so the other draws stay as they were
precision = random.Random(200 + int(sys.argv[1]))
gemms = random.Random(300 + int(sys.argv[1]))
print("[scheduler]")
print(f'memory_capacity = "{sys.argv[2]}KiB"')
print(f"colocation_limit = {rng.randint(1, 3)}")
print("cores_per_rank = 4")
print("slowdown_limit = 100")
print("round_interval_s = 0.1")
for i in range(8):
    dim = rng.choice([4, 8, 16, 32])
    bottom = [rng.choice([8, 16, 64, 128]) for _ in range(rng.randint(0, 2))] + [dim]
    top = [rng.choice([8, 32, 128]) for _ in range(rng.randint(0, 2))] + [1]
    print(f'\n[[job]]\nname = "r{i}"\nranks = {rng.randint(1, 2)}\nseed = {i}\narrival = {0.1 * i}')
    print(f"model = {{ embedding_dim = {dim}, bottom_mlp = {bottom}, top_mlp = {top}, "
          f'interaction = "{rng.choice(["dot", "cat"])}" }}')
    print(f'optimizer = {{ dense = "{rng.choice(["sgd", "adagrad", "adam"])}", '
          f'sparse = "{rng.choice(["sgd", "adagrad", "rowwise_adagrad"])}", lr = 0.01 }}')
    print(f'data = {{ train = "{rng.choice(["train.h5", "multihot.h5"])}" }}')
    print(f"train = {{ batch_size = {rng.choice([32, 64, 256, 1024])}, steps = 20 }}")
    kept = []
    if tiers.random() < 0.4:  # hot/cold tiers: the estimate counts hot rows and staging slots
        print(f"embedding = {{ hot_fraction = {tiers.choice([0.05, 0.2, 0.5])} }}")
    if precision.random() < 0.5:  # 16-bit tables, tiered or not: the estimate counts 2 bytes a weight
        kept.append(f'embedding = "{precision.choice(["fp16", "bf16"])}"')
    # bf16 GEMMs (refused by this CPU backend without AVX512_BF16, so under the strict emulator):
    # the estimate counts the operands' bf16 copies.
    if gemms.random() < 0.3:
        kept.append('dense = "bf16"')
        print('device = { kind = "cpu-strict" }')
    if kept:
        print(f"precision = {{ {', '.join(kept)} }}")
PY
  "${mpirun[@]}" -np 2 "$recmix" run "random-$seed.toml" --run-dir "random-$seed" -q > "random-$seed.out" 2>&1 || {
    cat "random-$seed.out"; fail "the random memory run $seed failed"; }
  "$recmix" sim --replay "random-$seed" > replay.out 2>&1 || { cat replay.out; fail "random run $seed: live != simulated"; }
  $py - "random-$seed" <<'PY' || { cat "random-$seed.out"; fail "memory checks of the random run"; }
import json, sys
run = sys.argv[1]
s = json.load(open(f"{run}/summary.json"))
events = [json.loads(l) for l in open(f"{run}/events.jsonl")]
capacity = events[0]["memory_capacity_bytes"]
bad = []
for j in s["jobs"]:
    if j["state"] == "rejected":
        if j["estimate_bytes"] <= capacity: bad.append(f"{j['name']} rejected though its estimate fits")
    elif j["state"] != "finished":
        bad.append(f"{j['name']} {j['state']}: {j.get('error')}")
    elif j["estimate_below_peak"] or j["measured_peak_bytes"] > j["estimate_bytes"]:
        bad.append(f"{j['name']}: estimate {j['estimate_bytes']} below its peak {j['measured_peak_bytes']}")
for r in s["rank_usage"]:
    if r["peak_bytes"] > capacity: bad.append(f"rank {r['rank']} held {r['peak_bytes']} > {capacity}")
if any(e["event"] == "estimate_below_peak" for e in events): bad.append("estimate_below_peak events")
finished = sum(j["state"] == "finished" for j in s["jobs"])
print(f"random run {run}: capacity {capacity} B, {finished} finished, "
      f"{sum(j['state'] == 'rejected' for j in s['jobs'])} rejected")
if bad or finished == 0:
    print("\n".join(bad) or "nothing finished"); sys.exit(1)
PY
done

# Out of memory: with pools of half their estimate, a job runs out of its share, is restarted
# once with twice the share, and ends with the weights of a run that never failed, bit for bit.
job tight 12 "[32, 16, 8]" "[32, 1]" 128 200
run_spec tight 'ranks = 2'
printf 'include = ["run-tight.toml"]\n[scheduler]\nmemory_headroom = 0.5\nround_interval_s = 0.1\n' > tight-jobs.toml
"${mpirun[@]}" -np 2 "$recmix" run tight-jobs.toml --run-dir tight > tight.out 2> tight.err || {
  cat tight.err; fail "the out-of-memory restart run failed"; }
grep '"event":"memory_restart"' tight/events.jsonl | grep -q "out of memory" || { cat tight.err; fail "no memory_restart event"; }
grep '"event":"finished"' tight/events.jsonl | grep -q '"job":"tight"' || { cat tight.err; fail "tight did not finish after its restart"; }
grep -q "ran out of its memory share" tight.err || fail "the restart is not reported on the console"
same_as_solo tight 2 tight  # restarted with more memory = never failed

# Moving apart: on two one-core ranks told they have two cores each, a job that arrives when both
# ranks are busy shares a rank with a running job. The newcomer is made a noisy neighbour
# (RECMIX_SLOWDOWN_INJECTION: the step times of a job beside it count 4x), so that its partner
# measures a slowdown past the limit of 3 whatever the machine's load (sharing a core alone costs
# about 2x), against its step time alone over the 1.5 s before the newcomer came. The newcomer has the higher priority, so the partner is the one moved apart: stopped
# with a checkpoint, placed again away from the newcomer, and it ends with the weights of a run
# that was never moved, bit for bit.
job steady 14 "[256, 128, 8]" "[256, 1]" 128 8000
job filler 15 "[256, 128, 8]" "[256, 1]" 128 6000
job intruder 16 "[256, 128, 8]" "[256, 1]" 128 3000
run_spec steady 'ranks = 1'
run_spec filler 'ranks = 1'
run_spec intruder 'ranks = 1\narrival = 1.5\npriority = 1'
printf 'include = ["run-steady.toml", "run-filler.toml", "run-intruder.toml"]\n[scheduler]\nround_interval_s = 0.1\ncores_per_rank = 2\nslowdown_limit = 3\n' > apart.toml
rm -rf apart
RECMIX_SLOWDOWN_INJECTION=intruder:4 "${mpirun[@]}" -np 2 "$recmix" run apart.toml --run-dir apart > apart.out 2> apart.err || {
  cat apart.err; fail "the move-apart run failed"; }
moved=$($py - apart <<'PY'
import json, sys
events = [json.loads(l) for l in open(f"{sys.argv[1]}/events.jsonl")]
moves = [e for e in events if e["event"] == "move_apart"]
finished = {e["job"] for e in events if e["event"] == "finished"}
ok = moves and moves[0]["slowdown"] > 3 and moves[0]["partners"] == ["intruder"] and finished == {"steady", "filler", "intruder"}
print(moves[0]["job"] if ok else "")
PY
)
[[ -n "$moved" ]] || { cat apart.err; fail "no job was moved apart from the noisy newcomer, or not every job finished"; }
grep -q "apart" apart.err || fail "the move is not reported on the console"
[[ $moved != intruder ]] || fail "the job of higher priority was the one moved apart"
same_as_solo apart 1 "$moved"  # moved apart = never moved
# Live = simulated with a move-apart: the replay stops the job where the live service did (outside
# the policy), queues it again when its checkpoint was reported, and keeps it off its partner's
# rank, as the live ranks did.
"$recmix" sim --replay apart > replay.out 2>&1 || { cat replay.out; fail "the move-apart run: live != simulated"; }
grep -q "the same decisions in the same order" replay.out || { cat replay.out; fail "no replay verdict (move-apart)"; }

# Live = simulated where cores refuse starts: three one-thread jobs on two ranks of one core each,
# co-location allowed: the third cannot share a rank's only core and waits for the first to end,
# in the live run and in its replay alike.
job core-a 21 "[8]" "[8, 1]" 64 300
job core-b 22 "[8]" "[8, 1]" 64 500
job core-c 23 "[8]" "[8, 1]" 64 200
for name in core-a core-b core-c; do run_spec $name 'ranks = 1'; done
printf 'include = ["run-core-a.toml", "run-core-b.toml", "run-core-c.toml"]\n[scheduler]\nround_interval_s = 0.1\ncores_per_rank = 1\ncolocation_limit = 2\nslowdown_limit = 100\n' > cores.toml
"${mpirun[@]}" -np 2 "$recmix" run cores.toml --run-dir cores > cores.out 2> cores.err || { cat cores.err; fail "the one-core run failed"; }
$py - cores <<'PY' || { cat cores.err; fail "a job shared a one-core rank"; }
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
sys.exit(0 if all(j["state"] == "finished" and not j["partners"] for j in s["jobs"]) else 1)
PY
"$recmix" sim --replay cores > replay.out 2>&1 || { cat replay.out; fail "the one-core run: live != simulated"; }
grep -q "the same decisions in the same order" replay.out || { cat replay.out; fail "no replay verdict (cores)"; }

# Preemption: with las, the long two-rank job is demoted once it has had 0.2 rank-seconds, and
# the short job's arrival takes a rank from it: it stops with a checkpoint at a step all its
# ranks agree on, waits, resumes from that checkpoint and ends with the weights of an
# uninterrupted run, bit for bit.
job longer 8 "[256, 128, 8]" "[256, 1]" 128 2500
job short 9 "[8]" "[8, 1]" 64 300
run_spec longer 'ranks = 2'
run_spec short 'ranks = 1\narrival = 0.5'
printf 'include = ["run-longer.toml", "run-short.toml"]\n[scheduler]\npolicy = "las"\nround_interval_s = 0.1\nlas_threshold_s = 0.2\nlas_lease_s = 0.1\n' > las.toml
"${mpirun[@]}" -np 2 "$recmix" run las.toml --run-dir las > las.out 2> las.err || { cat las.err; fail "the las run failed"; }
$py - las <<'PY' || { cat las.err; fail "no preemption and resume"; }
import json, sys
events = [json.loads(l) for l in open(f"{sys.argv[1]}/events.jsonl")]
def has(kind, **kv):
    return any(e["event"] == kind and all(e.get(k) == v for k, v in kv.items()) for e in events)
ok = has("preempt", job="longer") and has("stopped", job="longer") and has("start", job="longer", resume=True) \
    and has("finished", job="longer", step=2500) and has("finished", job="short")
sys.exit(0 if ok else 1)
PY
"$recmix" sim --replay las > replay.out 2>&1 || { cat replay.out; fail "the las run: live != simulated"; }
same_as_solo las 2 longer  # preempted and resumed = uninterrupted

fi  # placement

if in_part interrupts; then
# SIGTERM to mpirun: every running job stops with a checkpoint and the run exits with status 3;
# --resume continues both jobs, which end with the weights of uninterrupted runs, bit for bit.
# Both starts give the same command (--resume auto), as a requeued batch job does.
job halted 10 "[256, 128, 8]" "[256, 1]" 128 8000
job halted1 11 "[256, 128, 8]" "[256, 1]" 64 8000
run_spec halted 'ranks = 2'
run_spec halted1 'ranks = 1'
printf 'include = ["run-halted.toml", "run-halted1.toml"]\n[scheduler]\nround_interval_s = 0.1\ncores_per_rank = 2\nslowdown_limit = 100\n' > term.toml
"${mpirun[@]}" -np 2 "$recmix" run term.toml --run-dir term --resume auto > term.out 2> term.err &
run_pid=$!
running() {  # both jobs past their first samples
  $py -c "
import json, sys
try: s = json.load(open('term/status.json'))
except Exception: sys.exit(1)
sys.exit(0 if sum(j['state'] == 'running' and j['step'] > 0 for j in s['jobs']) == 2 else 1)"
}
for _ in $(seq 300); do running && break; sleep 0.1; done
running || { kill $run_pid; cat term.err; fail "the jobs to interrupt did not start"; }
kill -TERM $run_pid
rc=0; wait $run_pid || rc=$?
((rc != 0)) || fail "an interrupted run exited 0"
grep -q -- "--resume term" term.out || { cat term.out term.err; fail "no resume hint"; }
$py - term <<'PY' || { cat term.err; fail "the interrupted run did not stop its jobs with checkpoints"; }
import json, sys
events = [json.loads(l) for l in open(f"{sys.argv[1]}/events.jsonl")]
stopped = {e["job"]: e["step"] for e in events if e["event"] == "stopped"}
s = json.load(open(f"{sys.argv[1]}/summary.json"))
ok = any(e["event"] == "terminating" for e in events) and set(stopped) == {"halted", "halted1"} \
    and all(0 < v < 8000 for v in stopped.values()) and s["interrupted"]
sys.exit(0 if ok else 1)
PY
"${mpirun[@]}" -np 2 "$recmix" run term.toml --run-dir term --resume auto > resume.out 2> resume.err || {
  cat resume.err; fail "recmix run --resume failed"; }
grep -q "no run in term yet, starting one" term.out || fail "--resume auto did not say it starts a run"
grep -q "continuing the run in term" resume.out || fail "--resume auto did not say it continues the run"
grep -q '"event":"start".*"job":"halted".*"resume":true\|"job":"halted".*"resume":true' term/events.jsonl || fail "halted did not resume"
same_as_solo term 2 halted  # interrupted by SIGTERM and resumed = uninterrupted
same_as_solo term 1 halted1
# Its report: the two parts one after the other on one time axis (run_start's unix_s), the stop
# said in the header and the parts' table, no placement of part 2 beside one of part 1.
"$recmix" report term -o term.html > term-report.out 2> term-report.err || { cat term-report.err; fail "recmix report term"; }
$py "$src/tests/report/report_tables_check.py" --resumed term.html term || fail "the report of the resumed run is wrong"

# Interrupted on 2 ranks, resumed on 1: the two-rank job continues on the one rank from its
# checkpoint and ends within 1e-5 (relative, per tensor) of the uninterrupted two-rank run. The
# sums run in another order on one rank, so the bound is rounding over a short run, as in the
# trainer's own N -> M test: large batches keep the run short and the steps slow enough to stop.
job shrinking 13 "[512, 256, 8]" "[512, 256, 1]" 2048 30
sed -i 's/dense = "adagrad"/dense = "sgd"/; s/sparse = "rowwise_adagrad"/sparse = "sgd"/; s/lr = 0.05/lr = 0.02/' shrinking.toml
run_spec shrinking 'ranks = 2'
printf 'include = ["run-shrinking.toml"]\n[scheduler]\nround_interval_s = 0.1\n' > shrink.toml
"${mpirun[@]}" -np 2 "$recmix" run shrink.toml --run-dir shrink > shrink.out 2> shrink.err &
run_pid=$!
shrinking_running() {
  $py -c "
import json, sys
try: s = json.load(open('shrink/status.json'))
except Exception: sys.exit(1)
sys.exit(0 if any(j['state'] == 'running' and j['step'] > 0 for j in s['jobs']) else 1)"
}
for _ in $(seq 300); do shrinking_running && break; sleep 0.05; done
kill -TERM $run_pid
wait $run_pid && fail "the interrupted two-rank run exited 0 (it was not interrupted: make the job longer)"
"$recmix" run shrink.toml --resume shrink > shrink-resume.out 2> shrink-resume.err || {
  cat shrink-resume.err; fail "resuming on 1 rank failed"; }
grep -q "asked for 2 ranks; the resumed run has 1" shrink-resume.err || fail "the rank change is not reported"
"${mpirun[@]}" -np 2 "$recmix" train shrinking.toml > /dev/null 2> solo.err || { cat solo.err; fail "solo shrinking"; }
$py - shrink/jobs/shrinking/checkpoints/ckpt-000000030.h5 solo/shrinking/checkpoints/ckpt-000000030.h5 shrink/events.jsonl <<'PY' ||
import h5py, json, numpy as np, sys
def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out
a, b = datasets(sys.argv[1]), datasets(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
worst = 0.0
for k in a:
    if a[k].dtype.kind == "f" and np.abs(b[k]).max() > 0:
        worst = max(worst, float(np.abs(a[k].astype(np.float64) - b[k]).max() / np.abs(b[k]).max()))
stopped = [json.loads(l)["step"] for l in open(sys.argv[3]) if '"event":"stopped"' in l]
print(f"stopped at step {stopped} of 30 on 2 ranks, resumed on 1: largest relative difference {worst:.2e}")
sys.exit(0 if stopped and 0 < stopped[0] < 30 and worst <= 1e-5 else 1)
PY
  fail "the job resumed on another rank count is not within 1e-5 of an uninterrupted run"

fi  # interrupts

if in_part failures; then
# A job that fails on one rank inside a step (a fault injected on rank 1 after step 40's forward
# exchange, before its backward collectives, which rank 1 can no longer post) ends alone: its
# rank 0 leaves at its next collective (the guarded communicator's status word), every rank
# reports, nothing is stuck, and the job sharing rank 0 ends with the weights of its solo run.
job broken 19 "[16, 8]" "[16, 1]" 128 4000
job beside 20 "[32, 8]" "[32, 1]" 128 600
run_spec broken 'ranks = 2'
run_spec beside 'ranks = 1'
printf 'include = ["run-broken.toml", "run-beside.toml"]\n[scheduler]\nround_interval_s = 0.1\ncores_per_rank = 2\nslowdown_limit = 100\nstuck_timeout_s = 60\n' > broken.toml
RECMIX_FAULT_INJECTION=broken:40:1:mid timeout 120 "${mpirun[@]}" -np 2 "$recmix" run broken.toml --run-dir broken \
  > broken.out 2> broken.err || { cat broken.err; fail "the run with a job failing inside a step failed"; }
$py - broken <<'PY' || { cat broken.err; fail "the job failing inside a step did not end alone"; }
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
jobs = {j["name"]: j for j in s["jobs"]}
events = [json.loads(l) for l in open(f"{sys.argv[1]}/events.jsonl")]
ok = not s.get("stuck") and not s.get("interrupted") and jobs["broken"]["state"] == "failed" \
    and jobs["broken"]["error"].startswith("rank 1: error: fault injected inside step 40") \
    and jobs["beside"]["state"] == "finished" and "broken" in jobs["beside"]["partners"] \
    and not any(e["event"] == "stuck" for e in events)
print(jobs["broken"].get("error"))
sys.exit(0 if ok else 1)
PY
same_as_solo broken 1 beside

# A rank that fails inside a checkpoint write leaves its peer waiting inside parallel HDF5's own
# collectives, which the guard does not see. After stuck_timeout_s the run names the job, stops
# the other job with a checkpoint and ends instead of hanging; --resume finishes the other job,
# which ends with the weights of an uninterrupted run, bit for bit.
job wedged 17 "[16, 8]" "[16, 1]" 128 4000
job bystander 18 "[256, 128, 8]" "[256, 1]" 128 6000
run_spec wedged 'ranks = 2'
run_spec bystander 'ranks = 1'
printf 'include = ["run-wedged.toml", "run-bystander.toml"]\n[scheduler]\nround_interval_s = 0.1\ncores_per_rank = 2\nslowdown_limit = 100\nstuck_timeout_s = 2\n' > stuck.toml
start=$SECONDS
RECMIX_FAULT_INJECTION=wedged:300:1:checkpoint timeout 120 "${mpirun[@]}" -np 2 "$recmix" run stuck.toml --run-dir stuck \
  > stuck.out 2> stuck.err && fail "a run with a stuck job exited 0"
(( SECONDS - start < 60 )) || fail "the run with a stuck job took $((SECONDS - start)) s to end"
grep -q "stuck in a collective" stuck.err || { cat stuck.err; fail "the stuck job is not reported"; }
$py - stuck <<'PY' || { cat stuck.err; fail "the stuck run's summary is wrong"; }
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
jobs = {j["name"]: j for j in s["jobs"]}
ok = s["stuck"] and s["interrupted"] and jobs["wedged"]["state"] == "failed" \
    and "rank 1: I/O error: fault injected in the checkpoint write of step 300" in jobs["wedged"]["error"] \
    and jobs["bystander"]["state"] == "queued"
sys.exit(0 if ok else 1)
PY
"${mpirun[@]}" -np 2 "$recmix" run stuck.toml --resume stuck > stuck-resume.out 2> stuck-resume.err || {
  cat stuck-resume.err; fail "resuming after a stuck job failed"; }
same_as_solo stuck 1 bystander  # stopped for a stuck job and resumed = uninterrupted

# Under the strict device emulator (recmix run --device, whatever the specs say): two jobs share
# rank 0 (one of them on both ranks), each with its own backend, device memory and device
# communicator; any host access to either job's device memory kills the run. Both replay their
# steps' dense pieces from graphs captured side by side (device.graphs = true) and end with the
# weights of their eager solo runs under the emulator (recmix train --device --graphs false), bit
# for bit.
job strict-a 17 "[16, 8]" "[16, 1]" 64 300 $'[device]\ngraphs = true'
job strict-b 18 "[8]" "[8, 1]" 64 400 $'[device]\ngraphs = true'
run_spec strict-a 'ranks = 2'
run_spec strict-b 'ranks = 1'
printf 'include = ["run-strict-a.toml", "run-strict-b.toml"]\n[scheduler]\nround_interval_s = 0.1\ncores_per_rank = 2\nslowdown_limit = 100\n' > strict.toml
"${mpirun[@]}" -np 2 "$recmix" run strict.toml --run-dir strict --device cpu-strict > strict.out 2> strict.err || {
  cat strict.err; fail "the cpu-strict run failed"; }
$py - strict <<'PY' || fail "the cpu-strict jobs were not co-located"
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
jobs = {j["name"]: j for j in s["jobs"]}
events = [json.loads(l) for l in open(f"{sys.argv[1]}/events.jsonl")]
starts = [e for e in events if e["event"] == "start"]
ok = all(j["state"] == "finished" for j in jobs.values()) and "strict-b" in jobs["strict-a"]["partners"] \
    and len(starts) == 2 and all(e["device"] == "cpu-strict" for e in starts)
sys.exit(0 if ok else 1)
PY
grep -q "replayed from captured graphs" strict/jobs/strict-a/train.log || fail "strict-a's log does not say it replays graphs"
same_as_solo strict 2 strict-a --device cpu-strict --graphs false
same_as_solo strict 1 strict-b --device cpu-strict --graphs false

# A bad jobs file: one clear error naming the file, the job and the key.
expect_error() {  # expect_error <pattern> <command...>
  local pattern=$1; shift
  if "$@" > bad.out 2> bad.err; then fail "'$*' succeeded"; fi
  grep -q "$pattern" bad.err || { cat bad.err; fail "no '$pattern' in the error of '$*'"; }
}
sed 's/batch_size = 128, steps = 1200/batch_sise = 128, steps = 1200/' jobs.toml > typo.toml
expect_error "typo.toml, \[\[job\]\] 1 ('wide'): unknown key 'train.batch_sise'" "$recmix" run typo.toml
sed 's/policy = "complementary"/policy = "best"/' jobs.toml > policy.toml
expect_error "unknown policy 'best'" "${mpirun[@]}" -np 2 "$recmix" run policy.toml
printf '[[job]]\nname = "x"\n' > nodata.toml
expect_error "no jobs\|train\|data" "$recmix" run nodata.toml

# recmix submit into a running run; recmix status; recmix close. The run stays open (--stay-open)
# after its jobs end, whenever that is, until recmix close, so the submissions never race its end.
job long 6 "[16, 8]" "[16, 1]" 64 300
run_spec long 'ranks = 1'
printf 'include = ["run-long.toml"]\n[scheduler]\nround_interval_s = 0.2\nmemory_capacity = "32MiB"\n' > live.toml
"${mpirun[@]}" -np 2 "$recmix" run live.toml --run-dir live --stay-open > live.out 2> live.err &
run_pid=$!
for _ in $(seq 200); do [[ -f live/status.json ]] && break; sleep 0.1; done
[[ -f live/status.json ]] || { kill $run_pid; cat live.err; fail "no status.json"; }
job extra 7 "[8]" "[8, 1]" 64 40
"$recmix" submit extra.toml --run live > submit.out || { kill $run_pid; fail "submit of a good job failed"; }
printf 'name = "broken"\n[train\n' > broken.toml
expect_error "broken.toml" "$recmix" submit broken.toml --run live
sed 's/train = "train.h5"/train = "nowhere.h5"/; s/name = "extra"/name = "lost"/' extra.toml > lost.toml
expect_error "nowhere.h5" "$recmix" submit lost.toml --run live
expect_error "exists already" "$recmix" submit run-long.toml --run live
sed 's/name = "extra"/name = "huge"/; s/embedding_dim = 8/embedding_dim = 4096/; s/bottom_mlp = \[8\]/bottom_mlp = [4096]/' extra.toml > huge.toml
"$recmix" submit huge.toml --run live > /dev/null || { kill $run_pid; fail "submit of huge failed client-side"; }
"$recmix" close live > close.out || { kill $run_pid; fail "recmix close failed"; }
wait $run_pid || { cat live.err; fail "the live run failed"; }
grep -q '"event":"close_requested"' live/events.jsonl || fail "no close_requested event"
expect_error "has finished" "$recmix" close live
"$recmix" status live > status.out
cat status.out
grep -q "^extra  *finished" status.out || fail "the submitted job did not finish"
grep -q "^long  *finished" status.out || fail "the first job did not finish"
grep -q "huge.*can never fit.*estimate" status.out || fail "huge is not rejected for memory"
grep -q '"event":"rejected".*never fit' live/events.jsonl || fail "no rejected event"
fi  # failures
echo "run end-to-end ($part): all checks passed"
