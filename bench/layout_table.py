#!/usr/bin/env python3
"""Markdown table of the layout and varlen rows of one or more ascan_bench JSON files.

    python3 bench/layout_table.py RUN1.json [RUN2.json ...]

One row per case (dtype, layout, shape, pass): the scan and copy medians of the run with the
lowest efficiency (the rule of ../BENCHMARKING.md: the lowest of the runs), and the range of the
efficiency over the runs. Only rows named layout/scan/... and varlen/scan/... are read.
"""
import json
import sys


def cases(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        name = b["name"].split("/iterations")[0]
        parts = name.split("/")
        if len(parts) < 3 or parts[0] not in ("layout", "varlen") or parts[1] != "scan":
            continue
        key = "/".join([parts[0]] + parts[2:])
        if b.get("error_occurred"):
            continue  # a row that did not run (its error is in the raw file)
        out[key] = (b["scan_us"], b["copy_us"], b["efficiency"])
    return out


def main(paths):
    runs = [cases(p) for p in paths]
    keys = []
    for r in runs:
        keys += [k for k in r if k not in keys]
    print("| case | pass | scan µs | copy µs | efficiency (lowest) | range over runs | target |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for k in keys:
        vals = [r[k] for r in runs if k in r]
        low = min(vals, key=lambda v: v[2])
        bwd = k.endswith("/bwd")
        case = k[: -len("/bwd")] if bwd else k
        target = 0.85 if bwd else 0.90
        mark = "" if low[2] >= target else " ✗"
        effs = [v[2] for v in vals]
        print(
            f"| {case} | {'backward' if bwd else 'forward'} | {low[0]:.1f} | {low[1]:.1f} | "
            f"{low[2]:.3f}{mark} | {min(effs):.3f}-{max(effs):.3f} | {target:.2f} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
