#!/usr/bin/env bash
# The built-in example (`recmix run --demo`, what scripts/demo.sh runs) teaches what it should
# (docs/run.md, The demo):
#   - each job trains one epoch of data large enough for its planted signal: eval AUC well above
#     0.5 (each job above 0.8; the data's Bayes AUC is about 0.9), the eval logloss near the train
#     loss (no overfit), a train loss curve of several points that falls;
#   - with 2 cores a rank (as on a 4-core machine; --cores-per-rank here) some jobs share a rank;
#   - its report is written.
# Usage: demo_run.sh <recmix binary> <source dir>
set -euo pipefail
recmix=$1 src=$(cd "$2" && pwd)
source "$(dirname "$0")/../lib.sh"
scratch demo
cd "$work"

"$src/launch/recmix-mpirun" -np 2 "$recmix" run --demo --run-dir d --cores-per-rank 2 -q > run.out 2>&1 ||
  { cat run.out; fail "the demo failed"; }
/usr/bin/python3 - d <<'PY' || { cat run.out; fail "the demo does not teach what it should"; }
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
assert len(s["jobs"]) == 4, s["jobs"]
shared = [j["name"] for j in s["jobs"] if j["partners"]]
assert shared, "no job shared a rank with 2 cores a rank"
assert "none_colocated" not in s, s["none_colocated"]
for j in s["jobs"]:
    name = j["name"]
    assert j["state"] == "finished", j
    records = [json.loads(l) for l in open(f"{d}/jobs/{name}/metrics.jsonl")]
    train = [r for r in records if r["type"] == "train"]
    evals = [r for r in records if r["type"] == "eval"]
    assert len(train) >= 4, f"{name}: {len(train)} train points"
    assert len(evals) >= 4, f"{name}: {len(evals)} evaluations"
    first, last = train[0]["loss"], sum(r["loss"] for r in train[-3:]) / 3
    assert last < first, f"{name}: the loss went from {first} to {last}"
    assert evals[-1]["auc"] > 0.8, f"{name}: eval AUC {evals[-1]['auc']}"
    assert abs(evals[-1]["logloss"] - last) < 0.1, f"{name}: eval logloss {evals[-1]['logloss']} vs train {last}"
    assert max(r["epoch"] for r in train) == 0, f"{name}: more than one epoch"
print("shared a rank:", ", ".join(shared))
PY
"$recmix" report d -o d/report.html -q > report.out 2>&1 || { cat report.out; fail "the demo's report failed"; }
[[ -s d/report.html ]] || fail "no report"
echo "demo: ok"
