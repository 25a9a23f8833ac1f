#!/usr/bin/env python3
"""Checks that recmix report's tables hold the numbers of the inputs report_test.sh made.

Each table is found by its caption (or its <details> summary) and compared with figures
computed here from the input files: every eval record of a run, the summary figures of 10^6
train records, the jobs of a recmix run, the metrics of every simulated policy. Tables print
figures to six significant digits and bytes in binary units (report/format.hpp): no cell of any
page may hold a raw double ("3.8097000015113736e-05", "2338944.6 bytes").
Usage: report_tables_check.py <work dir of report_test.sh>
       report_tables_check.py --resumed <page> <run dir>   (the page of a stopped and resumed recmix run)
"""
import html.parser
import json
import math
import os
import re
import sys


class Tables(html.parser.HTMLParser):
    """Every <table> of a page as (title, header, rows); the title is its caption or summary."""

    def __init__(self):
        super().__init__()
        self.tables, self.text, self.title, self.row, self.cell = [], None, "", None, None
        self.header_row = False

    def handle_starttag(self, tag, attrs):
        if tag in ("caption", "summary"):
            self.text = ""
        elif tag == "table":
            self.tables.append([self.title, [], []])
        elif tag == "tr":
            self.row, self.header_row = [], False
        elif tag in ("td", "th"):
            self.cell = ""
            self.header_row = self.header_row or tag == "th"

    def handle_endtag(self, tag):
        if tag in ("caption", "summary"):
            self.title, self.text = self.text, None
            if tag == "caption":
                self.tables[-1][0] = self.title
        elif tag in ("td", "th") and self.row is not None:
            self.row.append(self.cell)
            self.cell = None
        elif tag == "tr" and self.row is not None:
            table = self.tables[-1]
            if self.header_row and not table[1]:
                table[1] = self.row
            else:
                table[2].append(self.row)
            self.row = None
        elif tag == "table":
            self.title = ""

    def handle_data(self, data):
        if self.text is not None:
            self.text += data
        if self.cell is not None:
            self.cell += data


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# A number in a cell: a decimal fraction, or anything with an exponent.
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")


def raw_figure(cell):
    """The first number in the cell printed as a raw double: an exponent, or a fraction with more
    than six significant digits ("0.6931471805599453"); None when there is none."""
    for m in NUMBER.finditer(cell):
        token = m.group(0)
        if "e" in token.lower():
            return token
        if "." in token and len(token.lstrip("-").replace(".", "").lstrip("0")) > 6:
            return token
    return None


def tables_of(path):
    parser = Tables()
    parser.feed(open(path, encoding="utf-8").read())
    for title, _, rows in parser.tables:
        for row in rows:
            for cell in row:
                raw = raw_figure(cell)
                check(raw is None, f"{path}: table '{title}' prints a raw double {raw!r} in {row}")
    return {t[0]: (t[1], t[2]) for t in parser.tables}


UNITS = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}


def parse_bytes(cell):
    """ "2.23 MiB" -> 2338324.48; NaN for anything else."""
    number, _, unit = cell.partition(" ")
    try:
        return float(number) * UNITS[unit]
    except (ValueError, KeyError):
        return math.nan


def same(a, b, digits=6):
    """Equal to the digits a table prints (six significant ones, or three for bytes)."""
    return math.isclose(float(a), float(b), rel_tol=0.6 * 10 ** (1 - digits), abs_tol=1e-12)


def table(tables, title, page):
    if title not in tables:
        failures.append(f"{page}: no table '{title}' (tables: {sorted(tables)[:12]} ...)")
        return [], []
    return tables[title]


def records(path):
    for line in open(path):
        yield json.loads(line)


def main(work):
    os.chdir(work)
    # A run's every evaluation: step and AUC exactly as metrics.jsonl holds them.
    t = tables_of("train.html")
    head, rows = table(t, "Eval AUC against step: every point", "train.html")
    evals = [r for r in records("runs/a/metrics.jsonl") if r["type"] == "eval"]
    check(len(evals) == 3, f"runs/a has {len(evals)} evaluations, not 3")
    check(len(rows) == len(evals) and all(int(r[1]) == e["step"] and same(r[2], e["auc"]) for r, e in zip(rows, evals)),
          f"train.html: eval AUC rows {rows} differ from {evals}")
    head, rows = table(t, "Runs", "train.html")
    train = [r for r in records("runs/a/metrics.jsonl") if r["type"] == "train"]
    check(rows and rows[0][2] == "150" and int(rows[0][4]) == 150 and same(rows[0][5], train[-1]["loss"]),
          f"train.html: the runs table {rows} does not give 150 records and the last loss {train[-1]['loss']}")
    head, rows = table(t, "runs/a: sharding plan: 4 tables over 1 rank", "train.html")
    check(len(rows) == 1 and rows[0][0] == "0" and rows[0][3] == "t0 t1 t2 t3", f"train.html: sharding plan rows {rows}")
    head, rows = table(t, "Checkpoints", "train.html")
    check([r[1] for r in rows] == ["50", "100", "150"], f"train.html: checkpoint steps {[r[1] for r in rows]}")
    check([r[4] for r in rows] == ["no (pruned)", "yes", "yes"], f"train.html: checkpoints on disk {[r[4] for r in rows]}")

    # Two runs overlaid: both in the loss table, each with its own numbers.
    t = tables_of("compare.html")
    head, rows = table(t, "Training loss against step: every point", "compare.html")
    for run in ("a", "b"):
        mine = [(int(r[1]), r[2]) for r in rows if r[0] == f"runs/{run} loss"]
        want = [(r["step"], r["loss"]) for r in records(f"runs/{run}/metrics.jsonl") if r["type"] == "train"]
        check(len(mine) == len(want) and all(m[0] == w[0] and same(m[1], w[1]) for m, w in zip(mine, want)),
              f"compare.html: runs/{run}'s loss rows differ from its metrics.jsonl")

    # 10^6 train records: summary figures over every point, computed here the same way (sum in file order).
    t = tables_of("big.html")
    head, rows = table(t, "Training loss against step: figures over every point", "big.html")
    train = [r for r in records("runs/big/metrics.jsonl") if r["type"] == "train"]
    losses = [r["loss"] for r in train]
    lo, hi = min(losses), max(losses)
    want = {"points": len(losses), "first loss": losses[0], "last loss": losses[-1],
            "min loss": lo, "max loss": hi, "mean loss": sum(losses) / len(losses)}
    row = rows[0] if rows else []
    got = dict(zip([h.replace(" (binary cross-entropy)", "") for h in head], row))
    check(int(got.get("points", -1)) == want["points"], f"big.html: points {got.get('points')}")
    for k in ("first loss", "last loss", "min loss", "max loss"):
        check(same(got.get(k, "nan"), want[k]), f"big.html: {k} {got.get(k)} != {want[k]!r}")
    check(hi == 2.5 and int(float(row[9])) == 654321 if len(row) > 9 else False, f"big.html: the spike's step {row}")
    check(math.isclose(float(got.get("mean loss", "nan")), want["mean loss"], rel_tol=1e-5),
          f"big.html: mean loss {got.get('mean loss')} != {want['mean loss']}")
    # The drawn curve is reduced, but keeps the spike.
    page = open("big.html", encoding="utf-8").read()
    tag = '<script type="application/json" id="report-data">'
    start = page.index(tag) + len(tag)
    charts = json.loads(page[start:page.index("</script>", start)])
    loss = [c for c in charts if c["title"] == "Training loss against step"][0]["series"][0]
    check(len(loss["y"]) <= 2002 and max(loss["y"]) == 2.5 and loss["x"][loss["y"].index(2.5)] == 654321,
          f"big.html: the drawn loss has {len(loss['y'])} points and a maximum of {max(loss['y'])}")
    head, rows = table(t, "Eval AUC against step: figures over every point", "big.html")
    check(rows and int(rows[0][1]) == 1000, f"big.html: eval AUC points {rows[:1]}")

    # A recmix run: every job's state, steps and summary figures; the preemption in the placements.
    t = tables_of("run.html")
    summary = json.load(open("runs/sched/summary.json"))
    head, rows = table(t, "Jobs", "run.html")
    by_name = {r[0]: dict(zip(head, r)) for r in rows}
    for j in summary["jobs"]:
        r = by_name.get(j["name"], {})
        check(r.get("state") == j["state"] and int(r.get("steps", -1)) == j["steps"],
              f"run.html: job {j['name']}: {r} against {j}")
        check(same(parse_bytes(r.get("estimate", "")), j["estimate_bytes"], 3) and
              same(parse_bytes(r.get("measured peak", "")), j["measured_peak_bytes"], 3),
              f"run.html: job {j['name']}'s memory figures {r} differ from summary.json")
    check(sorted(by_name) == ["alpha", "beta", "gamma"], f"run.html: jobs {sorted(by_name)}")
    head, rows = table(t, "Placements", "run.html")
    events = [json.loads(l) for l in open("runs/sched/events.jsonl")]
    starts = sum(len(e["ranks"]) for e in events if e["event"] == "start")
    check(len(rows) == starts, f"run.html: {len(rows)} placements for {starts} (job, rank) starts")
    preempted = any(e["event"] == "preempt" for e in events)
    check(not preempted or any(r[6] == "preempt" for r in rows), "run.html: the preemption is not in the placements")
    head, rows = table(t, "Ranks (summary.json)", "run.html")
    check(len(rows) == len(summary["rank_usage"]) and
          all(same(parse_bytes(r[2]), u["peak_bytes"], 3) for r, u in zip(rows, summary["rank_usage"])),
          f"run.html: rank peaks {rows}")

    # The simulator: every policy's every metric, exactly as the JSON holds it.
    t = tables_of("sim.html")
    sim = json.load(open("sim.json"))
    head, rows = table(t, "Summary metrics per policy", "sim.html")
    check(head[1:] == [p["policy"] for p in sim["policies"]], f"sim.html: policies {head[1:]}")
    by_metric = {r[0]: r[1:] for r in rows}
    for i, p in enumerate(sim["policies"]):
        for k, v in p.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                got = by_metric.get(k, [None] * (i + 1))[i]
                check(got is not None and same(got, v), f"sim.html: {p['policy']} {k} {got} != {v}")
    # Each policy's CDF runs through the 101 percentiles the JSON holds, from level 0 to 1 (six
    # policies: more points than a table lists, so their figures: count, first, last).
    head, rows = table(t, "Job completion time CDF per policy: figures over every point", "sim.html")
    by_policy = {r[0]: r for r in rows}
    for p in sim["policies"]:
        want = p.get("jct_percentiles_s", [])
        r = by_policy.get(p["policy"])
        check(len(want) == 101 and r is not None and r[1] == "101", f"sim.html: {p['policy']}: CDF points {r}")
        if r is not None and len(want) == 101:
            unit = 3600.0 if "(h)" in head[2] else 1.0
            check(abs(float(r[2]) * unit - want[0]) <= 1e-4 * max(1.0, want[0]) and
                  abs(float(r[3]) * unit - want[-1]) <= 1e-4 * max(1.0, want[-1]) and
                  float(r[4]) == 0 and float(r[5]) == 1, f"sim.html: {p['policy']}: CDF ends {r} against {want[0]}, {want[-1]}")
    return report()


def report():
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def resumed(page, run_dir):
    """A recmix run stopped and resumed: its two parts one after the other on the page's time axis,
    the stop between them said, no two placements of a rank's lane overlapping."""
    t = tables_of(page)
    events = [json.loads(l) for l in open(os.path.join(run_dir, "events.jsonl"))]
    starts = [e for e in events if e["event"] == "run_start"]
    check(len(starts) == 2 and all("unix_s" in e for e in starts), f"{run_dir}: run_start events {starts}")
    head, rows = table(t, "Parts of the run (each recmix run over the directory)", page)
    check(len(rows) == 2, f"{page}: parts {rows}")
    if len(rows) == 2 and len(starts) == 2:
        # Part 2 starts at its wall-clock time after part 1's run_start (itself at t), after part 1's last event.
        want = starts[0]["t"] + starts[1]["unix_s"] - starts[0]["unix_s"]
        check(abs(float(rows[1][1]) - want) < 1e-3 and float(rows[1][1]) >= float(rows[0][2]),
              f"{page}: part 2 starts at {rows[1][1]} s, not {want} (part 1 ends at {rows[0][2]})")
        check("wall-clock" in rows[1][4], f"{page}: part 2 placed by {rows[1][4]}")
        text = open(page, encoding="utf-8").read()
        check(f"in 2 parts (stopped at {float(rows[0][2]):.1f} s, resumed at {float(rows[1][1]):.1f} s)" in text,
              f"{page}: the header does not give the stop")
        # The whole span: part 2's start and its last event (or its run_end's makespan).
        second = events[events.index(starts[1]):]
        span = float(rows[1][1]) + max([e["t"] for e in second] + [e.get("makespan_s", 0) for e in second])
        shown = re.search(r"([0-9.]+) s from the first event to the last", text)
        check(shown is not None and abs(float(shown.group(1)) - span) <= 0.051,
              f"{page}: the span is {shown and shown.group(1)} s, not {span:.2f} s")
    head, rows = table(t, "Placements", page)
    lanes = {}
    for r in rows:
        lanes.setdefault((r[1], r[2]), []).append((float(r[3]), float(r[4]), r[0]))
    for lane, spans in lanes.items():
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            check(a[1] <= b[0] + 1e-3, f"{page}: rank {lane[0]} lane {lane[1]}: {a} overlaps {b}")
    check(sum(r[7] == "yes" for r in rows) >= 1, f"{page}: no resumed placement in {rows}")
    return report()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--resumed":
        sys.exit(resumed(sys.argv[2], sys.argv[3]))
    sys.exit(main(sys.argv[1]))
