#!/usr/bin/python3
"""The recmix sim trace of a recmix run jobs file, for simulating the run (bench/run/live_vs_sim.sh).

    jobs_to_trace.py JOBS.toml PAIRS.csv [--summary SUMMARY.json] [--overheads OVERHEADS.csv] > trace.csv

One line per [[job]], by arrival: arrival_s = its arrival, duration_s = steps x the solo step time
PAIRS.csv (recmix pairs) measured for its type (the job's name up to its first '.'), gpus = its
ranks, type = its type, and memory_gib = the memory estimate of its spec when a summary.json of a
run of those jobs gives it (recmix run's analytic estimate: it depends on the spec alone). With
--overheads (job_overheads.py), the type's time outside its steps (data, model build, final
checkpoint) is added to duration_s. Jobs files with include are not followed."""
import argparse
import csv
import json
import sys
import tomllib

ap = argparse.ArgumentParser()
ap.add_argument("jobs")
ap.add_argument("pairs")
ap.add_argument("--summary")
ap.add_argument("--overheads")
a = ap.parse_args()
jobs = tomllib.load(open(a.jobs, "rb"))["job"]
solo = {r["type"]: float(r["solo_step_s"]) for r in csv.DictReader(open(a.pairs)) if not r["other"]}
estimate = {j["name"]: j["estimate_bytes"] for j in json.load(open(a.summary))["jobs"]} if a.summary else {}
overhead = {r["type"]: float(r["overhead_s"]) for r in csv.DictReader(open(a.overheads))} if a.overheads else {}
print("arrival_s,duration_s,gpus,type" + (",memory_gib" if estimate else ""))
for j in sorted(jobs, key=lambda j: j.get("arrival", 0.0)):
    t = j["name"].split(".")[0]
    if t not in solo:
        sys.exit(f"{a.jobs}: job '{j['name']}': no solo line for type '{t}' in {a.pairs}")
    if a.overheads and t not in overhead:
        sys.exit(f"{a.jobs}: job '{j['name']}': no line for type '{t}' in {a.overheads}")
    duration = j["train"]["steps"] * solo[t] + overhead.get(t, 0.0)
    line = f'{j.get("arrival", 0.0)},{duration:.6f},{j.get("ranks", 1)},{t}'
    if estimate:
        line += f',{estimate[j["name"]] / 2**30:.6f}'
    print(line)
