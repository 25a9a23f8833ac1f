#!/usr/bin/env bash
# recmix report end to end: a real training run (and a second one to overlay), a `recmix run` with
# a preemption, a `recmix sim --json` with its --timeline-csv, and a metrics.jsonl of 10^6 lines
# become HTML pages; headless Chromium opens each (report_browser.py) and the test checks that it
# rendered every chart with no console error and no network request, that the tables hold the
# inputs' numbers, and that the large page stays under 5 MB and loads in under 2 s. Bad input is
# one clear error naming the culprit, or a page that says what it skipped.
# Exit 77 (skipped) only where Chromium cannot be started, after every check that needs no browser.
# Usage: report_test.sh <recmix binary> <source dir>   (KEEP_WORK=1 keeps the pages and screenshots)
set -euo pipefail
recmix=$1 src=$2
source "$(dirname "$0")/../lib.sh"
scratch report
py=/usr/bin/python3
cd "$work"

# --- inputs ---
"$recmix" data synth -o train.h5 --rows 20k --tables 4 --table-rows 100,2000,30,500 --dense 5 --seed 3 >/dev/null
job() {  # job <name> <seed> <lr> <run dir>
  job_toml name="$1" seed="$2" run_dir="$4" lr="$3" eval=train.h5 steps=150 log_interval_s=0 eval_interval=50 \
    eval_batches=10 checkpoint=50 > "$1.toml"
}
job a 1 0.05 runs/a
job b 2 0.02 runs/b
"$recmix" train a.toml > /dev/null 2> a.err || { cat a.err; fail "training run a"; }
"$recmix" train b.toml > /dev/null 2> b.err || { cat b.err; fail "training run b"; }

# A recmix run on 2 ranks: las preempts the two-rank job for the others, which resume it later.
sched_job() {  # sched_job <name> <seed> <ranks> <arrival> <steps>
  job_toml name="$1" seed="$2" ranks="$3" arrival="$4" bottom_mlp="[128, 64, 8]" top_mlp="[128, 1]" eval=train.h5 \
    steps="$5" log_interval_s=0.05 eval_interval=300 eval_batches=4 checkpoint=300 > "s-$1.toml"
}
sched_job alpha 1 2 0 1500
sched_job beta 2 1 0 1200
sched_job gamma 3 1 1.0 600
printf 'include = ["s-alpha.toml", "s-beta.toml", "s-gamma.toml"]\n[scheduler]\npolicy = "las"\nround_interval_s = 0.1\ncolocation_limit = 2\ncores_per_rank = 2\nmemory_capacity = "256MiB"\nlas_threshold_s = 0.3\nlas_lease_s = 0.1\n' > jobs.toml
"$src/launch/recmix-mpirun" -np 2 "$recmix" run jobs.toml --run-dir runs/sched -q > run.out 2>&1 || { cat run.out; fail "recmix run"; }

# The simulator on a small trace of the simulator's own format.
$py - <<'PY'
import random
random.seed(7)
with open("trace.csv", "w") as f:
    f.write("arrival_s,duration_s,gpus,type\n")
    t = 0.0
    for i in range(60):
        t += random.expovariate(1 / 120)
        f.write(f"{t:.0f},{random.choice([300, 600, 1200, 3600])},{random.choice([1, 1, 2, 4])},"
                f"{random.choice(['dlrm-small', 'dlrm-medium'])}\n")
PY
"$recmix" sim --trace trace.csv --trace-format recmix --mix trace --gpus 8 --policy all --traces-dir "$work/none" \
  --json sim.json --timeline-csv timeline.csv --quiet > sim.out 2>&1 || { cat sim.out; fail "recmix sim"; }

# 10^6 train records (a loss with a known minimum and maximum), and 1000 evaluations.
mkdir -p runs/big
$py - <<'PY'
import math
with open("runs/big/metrics.jsonl", "w") as f:
    for step in range(1, 1_000_001):
        loss = 0.7 * math.exp(-step / 200000) + 0.05 * math.sin(step / 997) + 0.3
        if step == 654321:
            loss = 2.5  # one spike: the drawn curve must keep it
        f.write(f'{{"device_peak_bytes":{1000000 + step // 1000},"elapsed_s":{step * 0.001},"epoch":0,"loss":{loss!r},'
                f'"samples_per_s":{100000 + step % 5000},"step":{step},"type":"train"}}\n')
        if step % 1000 == 0:
            f.write(f'{{"auc":{0.7 + step / 1e7!r},"logloss":{0.5 - step / 1e7!r},"samples":4096,"step":{step},"type":"eval"}}\n')
PY

# --- reports ---
report() { "$recmix" report "$@" > report.out 2> report.err || { cat report.err; fail "recmix report $*"; }; }
report runs/a -o train.html
report runs/a runs/b -o compare.html
report runs/sched -o run.html
report sim.json timeline.csv -o sim.html
start=$(date +%s%N)
report runs/big -o big.html
echo "recmix report of 10^6 + 10^3 records: $(( ($(date +%s%N) - start) / 1000000 )) ms, $(stat -c %s big.html) bytes"
ls *.tmp.* 2>/dev/null && fail "a temporary file was left behind"
(( $(stat -c %s big.html) < 5000000 )) || fail "big.html is $(stat -c %s big.html) bytes, not under 5 MB"

# --- the tables hold the inputs' numbers ---
$py "$src/tests/report/report_tables_check.py" "$work" || fail "a table does not hold the input's numbers"

# --- bad input: one clear error line naming the culprit, or a page that says what it skipped ---
expect_error() {  # expect_error <pattern> <recmix report arguments...>
  local pattern=$1; shift
  if "$recmix" report "$@" > bad.out 2> bad.err; then fail "'recmix report $*' succeeded"; fi
  grep -q -- "$pattern" bad.err || { cat bad.err; fail "no '$pattern' in the error of 'recmix report $*'"; }
  [[ $(wc -l < bad.err) == 1 ]] || { cat bad.err; fail "'recmix report $*' printed more than one line"; }
}
expect_error "runs/nope: no such file or directory" runs/nope -o x.html
mkdir -p empty
expect_error "empty: empty directory" empty -o x.html
echo "hello" > notes.txt
expect_error "notes.txt: not a file recmix report reads" notes.txt -o x.html
head -c 300 sim.json > cut.json
expect_error "cut.json: not valid JSON (byte 301: the file ends early, truncated?)" cut.json -o x.html
expect_error "train.html: already exists; --force replaces it" runs/a -o train.html
expect_error "runs: is a directory" runs/a -o runs
expect_error "runs/a/metrics.jsonl: is one of the inputs" runs/a -o runs/a/metrics.jsonl --force
expect_error "runs/sched/jobs/beta/train.log: is one of the inputs" runs/sched -o runs/sched/jobs/beta/train.log --force
expect_error "runs: not a run itself, but holds 4 run(s)" runs -o x.html
test ! -e x.html || fail "a failed report left x.html"
mkdir -p runs/cut
head -n 20 runs/a/metrics.jsonl > runs/cut/metrics.jsonl
sed -n 21p runs/a/metrics.jsonl | head -c 40 >> runs/cut/metrics.jsonl  # a line cut short
report runs/cut -o cut.html
grep -q "skipped 1 of 21 lines (line 21: not JSON" cut.html || fail "cut.html does not say what it skipped"
grep -q "skipped:.*line 21" report.err || fail "recmix report did not print what it skipped"
grep -q "holds no sharding plan\|train.log: absent" cut.html || fail "cut.html does not say that the plan is absent"
report runs/a -o train.html --force

# --- in Chromium ---
set +e
$py "$src/tests/report/report_browser.py" --screenshot-dir "$work" train.html compare.html run.html sim.html big.html \
  cut.html > browser.jsonl 2> browser.err
status=$?
set -e
if [[ $status == 77 ]]; then cat browser.err; exit 77; fi
[[ $status == 0 ]] || { cat browser.err; fail "report_browser.py failed"; }
$py - browser.jsonl <<'PY' || fail "a page did not render as it should"
import json, sys
expected = {
    "train.html": ["Training loss against step", "Training loss against training time", "Eval AUC against step",
                   "Eval AUC against training time", "Eval logloss against step", "Eval logloss against training time",
                   "Throughput against training time", "Device memory peak against step"],
    "run.html": ["Placements per rank", "Utilisation per rank over time", "Device memory per rank over time",
                 "Queueing and completion time per job", "Memory estimate against measured peak per job",
                 "Training loss against step", "Eval AUC against step"],
    "sim.html": ["Job completion time CDF per policy",
                 "Completion and queueing time per policy", "Utilisation per policy", "GPU utilisation over time",
                 "Effective utilisation over time", "Queued jobs over time", "Running jobs over time"],
}
expected["compare.html"] = expected["train.html"]
expected["big.html"] = expected["train.html"]
ok = True
def bad(page, what):
    global ok
    ok = False
    print(f"{page}: {what}")
for line in open(sys.argv[1]):
    p = json.loads(line)
    page = p["page"]
    if p["problems"]: bad(page, f"console errors: {p['problems']}")
    if p["requests"]: bad(page, f"network requests: {p['requests']}")
    if p.get("errors"): bad(page, f"{p['errors']} script errors")
    if p["rendered"] != len(p["figures"]) or not p["figures"]:
        bad(page, f"{p['rendered']} of {len(p['figures'])} charts rendered")
    titles = [f["title"] for f in p["figures"]]
    for t in expected.get(page, []):
        if t not in titles: bad(page, f"no chart '{t}'")
    for f in p["figures"]:
        if f["drawn"] <= 0 or f["width"] < 200 or f["height"] < 100 or f.get("data_pixels", 0) < 50:
            bad(page, f"chart '{f['title']}' is empty: {f}")
    if page == "big.html":
        print(f"big.html: loaded and drawn in {p['load_s']} s (page's own clock: {p['render_ms']} ms)")
        if p["load_s"] >= 2.0: bad(page, f"took {p['load_s']} s to load, not under 2 s")
    if page == "compare.html":
        loss = [f for f in p["figures"] if f["title"] == "Training loss against step"][0]
        if loss["drawn"] < 2 * 150: bad(page, "the two runs are not both drawn")
sys.exit(0 if ok else 1)
PY
echo "report test passed"
