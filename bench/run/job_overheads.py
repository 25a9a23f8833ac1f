#!/usr/bin/python3
"""Each job type's fixed time outside its training steps, from recmix runs where it ran alone.

    job_overheads.py RUN_DIR... > overheads.csv

For every job that never shared a rank (no sample with partners) and finished in one launch:
(finished - start) less the time of its steps (the step-weighted sample means of its first rank
times the steps they cover): opening the data, building the model, the final checkpoint. Per type
(the job's name up to its first '.'), the mean over such jobs: type,overhead_s,jobs."""
import json
import sys
from collections import defaultdict

sums = defaultdict(lambda: [0.0, 0])
for run in sys.argv[1:]:
    events = [json.loads(l) for l in open(f"{run}/events.jsonl") if l.strip()]
    for job in {e["job"] for e in events if e["event"] == "submitted"}:
        starts = [e["t"] for e in events if e["event"] == "start" and e["job"] == job]
        ends = [e["t"] for e in events if e["event"] == "finished" and e["job"] == job]
        samples = [e for e in events if e["event"] == "sample" and e["job"] == job]
        if len(starts) != 1 or len(ends) != 1 or not samples or any(e.get("partners") for e in samples):
            continue
        rank = min(e["rank"] for e in samples)
        in_steps, last = 0.0, 0
        for e in samples:
            if e["rank"] == rank:
                in_steps += (e["step"] - last) * e["step_s"]
                last = e["step"]
        s = sums[job.split(".")[0]]
        s[0] += ends[0] - starts[0] - in_steps
        s[1] += 1
print("type,overhead_s,jobs")
for t in sorted(sums):
    print(f"{t},{sums[t][0] / sums[t][1]:.4f},{sums[t][1]}")
