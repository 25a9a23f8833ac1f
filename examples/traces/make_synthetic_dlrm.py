#!/usr/bin/env python3
"""Writes synthetic_dlrm.csv, the small trace recmix ships so that `recmix sim` runs from a fresh
clone: 400 DLRM training jobs in the simulator's own CSV (docs/scheduler.md). It is made up, not
measured: Poisson arrivals (mean gap 5 min), log-normal run times (median 30 min, sigma 1.2, from
2 min to 2 days), GPU counts 1/2/4/8 at 80/8/7/5% (single-GPU jobs dominate as in the public
Philly trace, 93% there), DLRM presets small/medium/large/xlarge at 40/35/20/5% as the
simulator's own mixes draw them. The public traces come from scripts/fetch-traces.sh.
Usage: make_synthetic_dlrm.py [OUT]"""
import math
import random
import sys


def pick(rng, weighted):
    x, acc = rng.random(), 0.0
    for value, weight in weighted:
        acc += weight
        if x < acc:
            return value
    return weighted[-1][0]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "synthetic_dlrm.csv"
    rng = random.Random(2026)
    t = 0.0
    rows = ["arrival_s,duration_s,gpus,type"]
    for _ in range(400):
        t += rng.expovariate(1 / 300.0)
        duration = min(2 * 86400, max(120, math.exp(rng.gauss(math.log(1800), 1.2))))
        gpus = pick(rng, [(1, 0.80), (2, 0.08), (4, 0.07), (8, 0.05)])
        kind = pick(rng, [("dlrm-small", 0.40), ("dlrm-medium", 0.35), ("dlrm-large", 0.20), ("dlrm-xlarge", 0.05)])
        rows.append(f"{t:.0f},{duration:.0f},{gpus},{kind}")
    with open(out, "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
