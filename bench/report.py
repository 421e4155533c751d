#!/usr/bin/env python3
"""The benchmark tables of bench/RESULTS.md and README.md, made from the committed JSON.

    python3 bench/report.py --check     # exit 1 if a generated table differs from its JSON
    python3 bench/report.py --write     # rewrite every generated table in place
    python3 bench/report.py --table KIND FILE...   # print one table
    python3 bench/report.py --plots DIR   # PNG plots of PLOTS (below) into DIR (matplotlib)
    python3 bench/report.py --heatmaps FILE... --out DIR [--commit SHA]
                                          # one PNG per dtype and pass of --ascan_sweep runs

A generated table sits between two markers in the Markdown file, the first naming its kind and
its raw files (paths from the repository root; raw JSON is committed gzip-compressed, FILE.json.gz,
and read either way):

    <!-- report: rows:layout/ bench/results/layout_a209248_run1.json.gz bench/results/layout_a209248_run2.json.gz -->
    | case | ...
    <!-- /report -->

Kinds:
  grid-forward FILE...   the (8, 1536, T) forward rows over the runs: the run with the lowest
                      efficiency (its scan and copy µs, GB/s, per-pair spread, ⚑ where its
                      copy was an outlier), the range over the runs, CUB's lowest beside it
                      (bold: at the 0.90 target)
  grid-backward FILE...  the same for the backward rows (target 0.85)
  grid-summary FILE...   README's efficiency table: one line per dtype and pass, T across the
                      top, the lowest over the runs
  rows FILE...        layout and varlen rows over several runs: the run with the lowest
                      efficiency (../shared/BENCHMARKING.md's rule) and the range over the runs
  rows:PREFIX FILE... the same, only the cases that start with PREFIX (e.g. varlen/)
  peers SPEC...       python/bench/peers.py's table from its JSON runs, SPEC = FILE[:dtype:pass
                      [:min_T]]: the rows of FILE of that dtype and pass (fwd, fwdbwd) and T at
                      least min_T; a row measured in more than one SPEC comes from the first
  ab SPEC...          an A/B of builds measured on one machine, SPEC = LABEL=FILE (several
                      files per label: its runs): for the few-long-sequence rows (B·C <= 128,
                      T >= 2^20), each label's scan µs over its runs (lowest-highest); then, over
                      every other scan row, the range of each other label's lowest scan time
                      against the first label's (+: slower than the first label)
  sweep-paths FILE... the --ascan_sweep cells where both paths were also timed forced
                      (sweep/path/ rows): per dtype, pass and cell, the lowest efficiency over the
                      runs of the dispatch's choice and of each path forced
  sweep-flat FILE...  the --ascan_sweep cells where the flat kernel was also timed forced
                      (sweep/path/.../flat rows): per dtype, pass and cell, the lowest efficiency
                      over the runs of the dispatch's choice, of one block per sequence and of
                      the flat kernel forced, and flat over one block
  status SPEC...      where the targets hold, at a glance, SPEC = FAMILY=FILE (a family's runs:
                      several files each): per benchmark and per dtype and pass, the rows at
                      target of the rows measured (each row's lowest efficiency over its runs;
                      the sweep's launch-bound cells by scan <= copy + 1 µs). FAMILY: grid (the
                      (8, 1536, T) rows and, apart, the few-long-sequence rows of the same
                      files), layout (channel-last rows), varlen (packed rows, by layout),
                      sweep (--ascan_sweep cells)
  candidates FILE...  the layout/ and varlen/ tuning rows (--ascan_tune_windows,
                      --ascan_tune_rows) over several runs: per pass, one line a case, the
                      lowest efficiency over the runs of the library's row and of each
                      candidate's (the best of the line in bold, – where one did not run)
  sweep FILE...       the cells of --ascan_sweep runs under target, per dtype and pass: the
                      lowest efficiency over the runs, with that run's scan and copy µs; where
                      that copy takes under 5 µs (launch-bound) the issue's rule there, scan
                      time <= copy time + 1 µs, is shown beside it

The heatmaps (--heatmaps) draw the same cells: efficiency over S (y) and T (x), the lowest of
the runs, each cell annotated with it and the copy µs of that run; the colours part at the
target, cells under it are outlined (dashed where launch-bound and within copy + 1 µs). Each is
stamped with the GPU, date and command of the first file's context and the commit (--commit,
else the context's "commit", else "?").

Efficiency is the benchmark's own counter (copy time / scan time, both medians of the same run);
the script computes nothing but GB/s (bytes_per_second / 1e9), the lowest of the runs and, for
the sweep's launch-bound cells, scan time against copy time + 1 µs.
"""
import gzip
import json
import os
import re
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["bench/RESULTS.md", "README.md"]
TARGET = {"forward": 0.90, "backward": 0.85}
BEGIN = re.compile(r"^<!-- report: (\S+)((?: \S+)+) -->$")
END = "<!-- /report -->"


def read_json(path):
    """A raw file (from the repository root, or absolute): JSON, or gzip-compressed JSON (.gz)."""
    full = os.path.join(ROOT, path)
    with (gzip.open(full, "rt") if full.endswith(".gz") else open(full)) as f:
        return json.load(f)


def load(path):
    return read_json(path)["benchmarks"]


def row_name(b):
    """A raw row's benchmark name without Google Benchmark's suffixes (/iterations:1/...)."""
    return b["name"].split("/iterations")[0]


def split(name):
    """'scan/f32/8x1536x128/bwd/iterations:1/manual_time' -> ('scan', 'f32/8x1536x128', True)."""
    parts = name.split("/iterations")[0].split("/")
    bwd = parts[-1] == "bwd"
    if bwd:
        parts = parts[:-1]
    return parts[0], "/".join(parts[1:]), bwd


def grid_rows(paths, backward):
    """The grid's scan and CUB rows over the runs `paths`: [(case, [row per run])] in the first
    run's order, and {case: [CUB row per run]}; rows that did not run are left out."""
    scans, cubs = {}, {}
    for path in paths:
        for b in load(path):
            op, case, bwd = split(b["name"])
            if bwd != backward or b.get("error_occurred") or op not in ("scan", "cub"):
                continue
            (scans if op == "scan" else cubs).setdefault(case, []).append(b)
    return list(scans.items()), cubs


def lowest(rows):
    """The row of the run with the lowest efficiency (../shared/BENCHMARKING.md's rule)."""
    return min(rows, key=lambda b: b["efficiency"])


def bold(eff, target):
    return f"**{eff:.3f}**" if eff >= target else f"{eff:.3f}"


def spread(b):
    """A paired row's 10th-90th percentile of its per-pair ratios, and its copy's flag."""
    if "ratio_p10" not in b:
        return "–"
    flag = " ⚑" if b.get("copy_outlier", 0.0) != 0.0 else ""
    return f"{b['ratio_p10']:.3f}-{b['ratio_p90']:.3f}{flag}"


def grid_table(paths, backward):
    scans, cubs = grid_rows(paths, backward)
    target = TARGET["backward" if backward else "forward"]
    head = ("| case (dtype/B×C×T) | scan µs | copy µs | scan GB/s | efficiency (lowest) | "
            "range over runs | pairs p10-p90 |")
    rule = "|---|---:|---:|---:|---:|---:|---:|"
    if not backward:
        head += " CUB µs | CUB efficiency |"
        rule += "---:|---:|"
    lines = [head, rule]
    for case, rows in scans:
        b = lowest(rows)
        effs = [r["efficiency"] for r in rows]
        line = (f"| {case} | {b['scan_us']:.1f} | {b['copy_us']:.1f} | "
                f"{b['bytes_per_second'] / 1e9:.0f} | {bold(b['efficiency'], target)} | "
                f"{min(effs):.3f}-{max(effs):.3f} | {spread(b)} |")
        if not backward:
            c = lowest(cubs[case]) if case in cubs else None
            line += f" {c['scan_us']:.1f} | {c['efficiency']:.3f} |" if c else " – | – |"
        lines.append(line)
    return lines


def grid_summary(paths):
    """README's table: per dtype, pass and T, the lowest efficiency over the runs."""
    cols, cells = [], {}
    for path in paths:
        for b in load(path):
            op, case, bwd = split(b["name"])
            if op != "scan" or b.get("error_occurred"):
                continue
            parts = case.split("/")
            dtype, dims = parts[0], parts[1].split("x")
            t = dims[-1]
            if dims[:2] != ["8", "1536"]:  # a few-long-sequence row: named by its shape
                n = int(t)
                t = f"({dims[0]},{dims[1]},2^{n.bit_length() - 1})" if n & (n - 1) == 0 else t
            col = f"{t} rev" if parts[-1] == "reverse" else t
            if col not in cols:
                cols.append(col)
            key = (dtype, bwd, col)
            cells[key] = min(cells.get(key, b["efficiency"]), b["efficiency"])
    # powers of two first, in order, then the other lengths, then the reverse rows
    def order(c):
        if c.startswith("("):  # the long rows after the grid's lengths, by length
            return (False, True, False, int(c.rstrip(")").split("^")[-1]))
        t = int(c.split()[0])
        return (c.endswith("rev"), False, t & (t - 1) != 0, t)
    cols.sort(key=order)
    dtypes = []
    for (dtype, _, _) in cells:
        if dtype not in dtypes:
            dtypes.append(dtype)
    lines = ["| dtype, pass | " + " | ".join(cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for dtype in dtypes:
        for bwd in (False, True):
            vals = [cells.get((dtype, bwd, c)) for c in cols]
            text = ["–" if v is None else f"{v:.2f}" for v in vals]
            lines.append(f"| {dtype} {'backward' if bwd else 'forward'} | " + " | ".join(text) + " |")
    return lines


def rows_table(paths, prefix=""):
    """The layout/ and varlen/ scan rows of `paths` (those whose case starts with `prefix`), and
    the varlen/whole/ rows (the flat path forced on packed time-contiguous calls)."""
    runs = []
    for p in paths:
        out = {}
        for b in load(p):
            name = row_name(b)
            parts = name.split("/")
            if len(parts) < 3 or parts[0] not in ("layout", "varlen"):
                continue
            if parts[1] not in ("scan", "whole"):  # whole: packed, whole sequences forced
                continue
            if b.get("error_occurred"):
                continue  # a row that did not run (its error is in the raw file)
            case = "/".join([parts[0]] + (["whole"] if parts[1] == "whole" else []) + parts[2:])
            if case.startswith(prefix):
                # paired runs add the spread of the per-pair ratios and the copy's outlier flag
                pair = (b["ratio_p10"], b["ratio_p90"]) if "ratio_p10" in b else None
                out[case] = (b["scan_us"], b["copy_us"], b["efficiency"], pair,
                             b.get("copy_outlier", 0.0) != 0.0, b.get("copy_vs_alone"))
        runs.append(out)
    keys = []
    for r in runs:
        keys += [k for k in r if k not in keys]
    paired = any(v[3] is not None for r in runs for v in r.values())
    lines = ["| case | pass | scan µs | copy µs | efficiency (lowest) | range over runs | target |"
             + (" pairs p10-p90 | copy |" if paired else ""),
             "|---|---|---:|---:|---:|---:|---:|" + ("---:|---|" if paired else "")]
    for k in keys:
        vals = [r[k] for r in runs if k in r]
        low = min(vals, key=lambda v: v[2])
        bwd = k.endswith("/bwd")
        case = k[: -len("/bwd")] if bwd else k
        target = TARGET["backward" if bwd else "forward"]
        mark = "" if low[2] >= target else " ✗"
        effs = [v[2] for v in vals]
        line = (f"| {case} | {'backward' if bwd else 'forward'} | {low[0]:.1f} | "
                f"{low[1]:.1f} | {low[2]:.3f}{mark} | {min(effs):.3f}-{max(effs):.3f} | "
                f"{target:.2f} |")
        if paired:
            # the lowest run's per-pair spread; its copy against the copy row of the same bytes
            spread = f"{low[3][0]:.3f}-{low[3][1]:.3f}" if low[3] else "–"
            copy = (f"⚑ {low[5]:.2f}× its row" if low[4] else
                    (f"{low[5]:.2f}× its row" if low[5] is not None else "–"))
            line += f" {spread} | {copy} |"
        lines.append(line)
    return lines


def candidates_table(paths):
    """The layout/ and varlen/ tuning rows of `paths` (<group>/tune/<case>/<candidate>) beside
    the library's row of each case (<group>/scan/<case>): forward, then backward, one line a case,
    the lowest efficiency over the runs of each, the best of the line in bold."""
    runs = {}  # (case, column) -> efficiencies over the runs; column None: the library
    cases, columns = [], {False: [], True: []}
    for path in paths:
        for b in load(path):
            parts = row_name(b).split("/")
            if (len(parts) < 4 or parts[0] not in ("layout", "varlen")
                    or parts[1] not in ("scan", "tune") or b.get("error_occurred")):
                continue
            column = parts[-1] if parts[1] == "tune" else None
            case = "/".join([parts[0]] + parts[2:len(parts) - (column is not None)])
            runs.setdefault((case, column), []).append(b["efficiency"])
            if case not in cases:
                cases.append(case)
            bwd = case.endswith("/bwd")
            if column is not None and column not in columns[bwd]:
                columns[bwd].append(column)
    lines = []
    for bwd in (False, True):
        tuned = [c for c in cases if c.endswith("/bwd") == bwd and
                 any((c, k) in runs for k in columns[bwd])]
        if not tuned:
            continue
        if lines:
            lines.append("")
        names = columns[bwd]
        lines += [f"{'backward' if bwd else 'forward'}:", "",
                  "| case | library | " + " | ".join(names) + " |",
                  "|---|---:|" + "---:|" * len(names)]
        for case in tuned:
            # rounded as shown, so that equal cells are bold alike
            lows = [round(min(runs[(case, k)]), 3) if (case, k) in runs else None
                    for k in [None] + names]
            best = max(v for v in lows if v is not None)
            cells = ["–" if v is None else (f"**{v:.3f}**" if v == best else f"{v:.3f}")
                     for v in lows]
            shown = case[: -len("/bwd")] if bwd else case
            lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    if not lines:
        raise SystemExit(f"report.py: no tuning rows (<group>/tune/...) in {paths}")
    return lines


def peers_table(specs):
    sys.path.insert(0, os.path.join(ROOT, "python", "bench"))
    import peers  # its table(); peers.py imports torch only to measure

    rows, seen, names, used = [], set(), [], []
    for spec in specs:
        path, *sel = spec.split(":")
        data = read_json(path)
        taken = 0
        for r in data["rows"]:
            key = (r["dtype"], r["pass"], tuple(r["shape"]))
            if key in seen or not isinstance(r["peers"].get("ascan"), float):
                continue
            if sel and (r["dtype"] != sel[0] or r["pass"] != sel[1]):
                continue
            if len(sel) > 2 and r["shape"][2] < int(sel[2]):
                continue
            seen.add(key)
            rows.append(r)
            names += [n for n in r["peers"] if n not in names]
            taken += 1
        used.append(f"{path} ({taken} rows)")
    names = [n for n in peers.PEERS if n in names]
    return peers.table(rows, names).split("\n") + ["", "Rows from " + "; ".join(used) + "."]


def labelled_files(kind, specs):
    """LABEL=FILE specs -> (the labels in first-seen order, {label: [its files]})."""
    labels, files = [], {}
    for spec in specs:
        label, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"report.py: {kind} wants LABEL=FILE, not {spec}")
        if label not in files:
            labels.append(label)
        files.setdefault(label, []).append(path)
    return labels, files


def ab_table(specs):
    labels, files = labelled_files("ab", specs)
    times = {lb: {} for lb in labels}  # times[label][row]: scan µs per run
    runs = {lb: len(files[lb]) for lb in labels}
    for label in labels:
        for path in files[label]:
            for b in load(path):
                op, case, bwd = split(b["name"])
                if op != "scan" or b.get("error_occurred"):
                    continue
                row = case + (" bwd" if bwd else "")
                times[label].setdefault(row, []).append(b["scan_us"])
    rows = [r for r in times[labels[0]] if all(r in times[lb] for lb in labels)]

    def long_row(row):
        dims = row.split(" ")[0].split("/")[1].split("x")
        return len(dims) == 3 and int(dims[0]) * int(dims[1]) <= 128 and int(dims[2]) >= 1 << 20
    lines = ["| row (dtype/B×C×T) | " + " | ".join(f"{lb} µs" for lb in labels) + " |",
             "|---|" + "---:|" * len(labels)]
    for row in filter(long_row, rows):
        cells = [f"{min(times[lb][row]):.1f}-{max(times[lb][row]):.1f}" for lb in labels]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    others = [r for r in rows if not long_row(r)]
    base = labels[0]
    for lb in labels[1:] if others else []:
        gaps = [(min(times[lb][r]) / min(times[base][r]) - 1.0, r) for r in others]
        slow, fast = max(gaps), min(gaps)
        lines.append("")
        lines.append(f"{lb} against {base}, lowest scan time of each of the other {len(others)} "
                     f"scan rows (+: {lb} slower): from {100 * fast[0]:+.1f}% ({fast[1]}) to "
                     f"{100 * slow[0]:+.1f}% ({slow[1]}).")
    lines += ["", "Runs: " + ", ".join(f"{lb} {runs[lb]}" for lb in labels) + "; files: " +
              ", ".join(s.partition("=")[2] for s in specs) + "."]
    return lines


SWEEP = re.compile(r"^sweep/(copy|scan)/([^/]+)/S(\d+)_T(\d+)(/bwd)?$")
LAUNCH_BOUND_US = 5.0  # a copy under this is launch-bound: the rule there is scan <= copy + 1 µs
LAUNCH_SLACK_US = 1.0


def sweep_cells(paths):
    """{(dtype, pass): {(S, T): lowest}} over the --ascan_sweep scan rows of the runs `paths`;
    lowest = (efficiency, scan µs, copy µs, runs) of the run with the lowest efficiency, `runs`
    the number of runs that measured the cell. Rows that did not run are left out."""
    cells = {}
    for p in paths:
        for b in load(p):
            m = SWEEP.match(row_name(b))
            if not m or m.group(1) != "scan" or b.get("error_occurred"):
                continue
            key = (m.group(2), "backward" if m.group(5) else "forward")
            cell = (int(m.group(3)), int(m.group(4)))
            vals = (b["efficiency"], b["scan_us"], b["copy_us"])
            old = cells.setdefault(key, {}).get(cell)
            runs = 1 if old is None else old[3] + 1
            low = vals if old is None or vals[0] < old[0] else old[:3]
            cells[key][cell] = low + (runs,)
    order = ["f32", "bf16", "f16"]

    def rank(key):
        dtype, pas = key
        return (order.index(dtype) if dtype in order else len(order), dtype, pas == "backward")
    return dict(sorted(cells.items(), key=lambda kv: rank(kv[0])))


SWEEP_PATH = re.compile(
    r"^sweep/path/([^/]+)/S(\d+)_T(\d+)(/bwd)?/(one_block|multi_block|flat)$")


def fmt_efficiency(v):
    """An efficiency to three places, or a dash where the row was not measured."""
    return "–" if v is None else f"{v:.3f}"


def forced_paths(paths):
    """(dtype, pass) -> {(S, T): {path: lowest efficiency}} from the sweep/path/ rows."""
    forced = {}
    for p in paths:
        for b in load(p):
            m = SWEEP_PATH.match(row_name(b))
            if not m or b.get("error_occurred"):
                continue
            key = (m.group(1), "backward" if m.group(4) else "forward")
            cell = forced.setdefault(key, {}).setdefault((int(m.group(2)), int(m.group(3))), {})
            cell[m.group(5)] = min(cell.get(m.group(5), 9.0), b["efficiency"])
    if not forced:
        raise SystemExit(f"report.py: no sweep/path rows in {paths}")
    return forced


def sweep_paths_table(paths):
    chosen = sweep_cells(paths)
    forced = forced_paths(paths)
    lines = ["| dtype, pass | S | T | dispatch (lowest) | one block per sequence | "
             "multi-block | the faster forced path |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for key in chosen:
        for (s, t), cell in sorted(forced.get(key, {}).items()):
            auto = chosen[key].get((s, t))
            one, multi = cell.get("one_block"), cell.get("multi_block")
            if multi is None:
                continue
            best = "–" if one is None or multi is None else (
                "one block" if one > multi else "multi-block")
            lines.append(f"| {key[0]} {key[1]} | {s} | {t} | {fmt_efficiency(auto[0] if auto else None)} | "
                         f"{fmt_efficiency(one)} | {fmt_efficiency(multi)} | {best} |")
    lines += ["", f"Lowest efficiency of {len(paths)} run(s): " + ", ".join(paths) + "."]
    return lines


def sweep_flat_table(paths):
    """The cells where the flat kernel was timed forced against one block per sequence."""
    chosen = sweep_cells(paths)
    forced = forced_paths(paths)
    lines = ["| dtype, pass | S | T | dispatch (lowest) | one block per sequence | flat | "
             "flat / one block |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for key in chosen:
        for (s, t), cell in sorted(forced.get(key, {}).items()):
            one, flat = cell.get("one_block"), cell.get("flat")
            if flat is None:
                continue
            auto = chosen[key].get((s, t))
            ratio = "–" if one is None else f"{flat / one:.2f}"
            lines.append(f"| {key[0]} {key[1]} | {s} | {t} | {fmt_efficiency(auto[0] if auto else None)} | "
                         f"{fmt_efficiency(one)} | {fmt_efficiency(flat)} | {ratio} |")
    lines += ["", f"Lowest efficiency of {len(paths)} run(s): " + ", ".join(paths) + "."]
    return lines


def launch_ok(scan_us, copy_us):
    """For a launch-bound cell (copy under 5 µs): None otherwise, else scan <= copy + 1 µs."""
    if copy_us >= LAUNCH_BOUND_US:
        return None
    return scan_us <= copy_us + LAUNCH_SLACK_US


def sweep_table(paths):
    lines = []
    for (dtype, pas), cells in sweep_cells(paths).items():
        target = TARGET[pas]
        under = [(c, v) for c, v in sorted(cells.items()) if v[0] < target]
        if lines:
            lines.append("")
        lines.append(f"**{dtype} {pas}** (target {target:.2f}): {len(under)} of {len(cells)} "
                     "cells under target")
        if not under:
            continue
        lines += ["",
                  "| S | T | efficiency (lowest) | scan µs | copy µs | copy < 5 µs | "
                  "scan ≤ copy + 1 µs |",
                  "|---:|---:|---:|---:|---:|---|---|"]
        for (s, t), (eff, scan, copy, _) in under:
            ok = launch_ok(scan, copy)
            lines.append(f"| {s} | {t} | {eff:.3f} | {scan:.2f} | {copy:.2f} | "
                         f"{'no' if ok is None else 'yes'} | "
                         f"{'–' if ok is None else ('yes' if ok else 'no ✗')} |")
    if not lines:
        raise SystemExit(f"report.py: no sweep rows in {paths}")
    short = [f"{dtype} {pas} S{s}_T{t} ({v[3]})" for (dtype, pas), cells in
             sweep_cells(paths).items() for (s, t), v in sorted(cells.items()) if v[3] < len(paths)]
    lines += ["", f"Lowest efficiency of {len(paths)} run(s): " + ", ".join(paths) + "."]
    if short:
        lines.append("Cells measured in fewer runs (count): " + ", ".join(short) + ".")
    return lines


STATUS_COLUMNS = [(d, pas) for d in ("f32", "bf16", "f16") for pas in ("forward", "backward")]


def status_rows(family, paths):
    """{(benchmark, dtype, pass): {row: [(efficiency, scan µs, copy µs) per run]}} of one family's
    runs; `benchmark` names the table's line."""
    out = {}
    for path in paths:
        for b in load(path):
            if b.get("error_occurred"):
                continue
            name = row_name(b)
            if family == "sweep":
                m = SWEEP.match(name)
                if not m or m.group(1) != "scan":
                    continue
                bench, dtype, bwd = "S × T sweep", m.group(2), bool(m.group(5))
            elif family == "grid":
                op, case, bwd = split(b["name"])
                if op != "scan":
                    continue
                dtype, dims = case.split("/")[0], case.split("/")[1].split("x")
                bench = ("(8, 1536, T) grid" if dims[:2] == ["8", "1536"]
                         else "few long sequences")
            elif family in ("layout", "varlen"):
                parts = name.split("/")
                if len(parts) < 4 or parts[0] != family or parts[1] != "scan":
                    continue
                dtype, bwd = parts[2], parts[-1] == "bwd"
                bench = ("channel-last (B, T, C)" if family == "layout" else
                         f"packed, {parts[3].replace('_', '-')}")
            else:
                raise SystemExit(f"report.py: status family '{family}' is not one of grid, layout, "
                                 "varlen, sweep")
            key = (bench, dtype, "backward" if bwd else "forward")
            out.setdefault(key, {}).setdefault(name, []).append(
                (b["efficiency"], b["scan_us"], b["copy_us"]))
    return out


def runs_name(paths):
    """'3 runs, `grid_2da5d59_run*.json.gz`': the count and the files' names, the part where
    they differ as *."""
    names = [os.path.basename(p) for p in paths]
    head = os.path.commonprefix(names)
    tail = os.path.commonprefix([n[len(head):][::-1] for n in names])[::-1]
    shown = names[0] if len(set(names)) == 1 else head + "*" + tail
    return f"{len(names)} run{'s' if len(names) > 1 else ''}, `{shown}`"


def status_table(specs):
    families, files = labelled_files("status", specs)
    benches, counts = [], {}
    for family in families:
        for (bench, dtype, pas), rows in status_rows(family, files[family]).items():
            if bench not in benches:
                benches.append(bench)
            hit = 0
            for runs in rows.values():
                eff, scan, copy = min(runs)
                ok = launch_ok(scan, copy) if family == "sweep" else None
                hit += eff >= TARGET[pas] or bool(ok)
            counts[(bench, dtype, pas)] = (hit, len(rows), family, len(files[family]))
    cols = [c for c in STATUS_COLUMNS if any((b,) + c in counts for b in benches)]
    lines = ["| benchmark | " + " | ".join(f"{d} {p}" for d, p in cols) + " | runs |",
             "|---|" + "---:|" * len(cols) + "---|"]
    for bench in benches:
        cells, runs = [], ""
        for c in cols:
            n = counts.get((bench,) + c)
            cells.append("–" if n is None else f"{n[0]} / {n[1]}")
            if n:
                runs = runs_name(files[n[2]])
        lines.append(f"| {bench} | " + " | ".join(cells) + f" | {runs} |")
    return lines


def table(kind, files):
    if kind == "status" and files:
        return status_table(files)
    if kind == "peers" and files:
        return peers_table(files)
    if kind == "sweep" and files:
        return sweep_table(files)
    if kind == "candidates" and files:
        return candidates_table(files)
    if kind == "ab" and files:
        return ab_table(files)
    if kind == "sweep-paths" and files:
        return sweep_paths_table(files)
    if kind == "sweep-flat" and files:
        return sweep_flat_table(files)
    if kind == "grid-forward" and files:
        return grid_table(files, False)
    if kind == "grid-backward" and files:
        return grid_table(files, True)
    if kind == "grid-summary" and files:
        return grid_summary(files)
    if kind == "rows" and files:
        return rows_table(files)
    if kind.startswith("rows:") and files:
        return rows_table(files, kind[len("rows:"):])
    raise SystemExit(f"report.py: unknown table '{kind}' for {files}")


def regenerate(text):
    """The document with every generated table made again; and the number of tables."""
    out, lines, i, count = [], text.split("\n"), 0, 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not m:
            continue
        end = i
        while end < len(lines) and lines[end] != END:
            end += 1
        if end == len(lines):
            raise SystemExit(f"report.py: '{m.group(0)}' has no '{END}'")
        out += table(m.group(1), m.group(2).split())
        out.append(END)
        i = end + 1
        count += 1
    return "\n".join(out), count


# The plots: (file name, kind, raw files, commit measured, command), each stamped with the GPU
# and date of its first raw file and with the commit and command given here.
PLOTS = [
    ("grid.png", "grid", [f"bench/results/grid_2da5d59_run{k}.json.gz" for k in (1, 2, 3)], "2da5d59",
     "ascan_bench --benchmark_filter='^(copy|scan|cub)/' (three runs; each point the lowest)"),
    ("row_path_channel_last.png", "rows:layout/",
     [f"bench/results/layout_e167f4f_run{k}.json.gz" for k in (1, 2, 3)], "e167f4f",
     "ascan_bench --benchmark_filter='^layout/' (three runs)"),
    ("row_path_packed.png", "rows:varlen/",
     [f"bench/results/varlen_e167f4f_run{k}.json.gz" for k in (1, 2, 3)], "e167f4f",
     "ascan_bench --benchmark_filter='^varlen/' (three runs)"),
]


def stamp(files, commit, command):
    ctx = read_json(files[0])["context"]
    head = f"{ctx.get('gpu', '?')}, {ctx.get('date', '?')[:10]}, commit {commit}"
    return head + "\n" + "\n".join(textwrap.wrap(command, 110))


def plot_heatmap(plt, cells, dtype, pas, note, runs):
    """Efficiency over S (y) and T (x) for one dtype and pass; `cells` as sweep_cells' over
    `runs` runs (a value marked * was measured in fewer; –: not measured, or cut)."""
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    target = TARGET[pas]
    ss = sorted({c[0] for c in cells})
    ts = sorted({c[1] for c in cells})
    grid = [[cells[(s, t)][0] if (s, t) in cells else float("nan") for t in ts] for s in ss]
    top = max([1.0] + [v[0] for v in cells.values()])
    norm = TwoSlopeNorm(vmin=min([0.5] + [v[0] for v in cells.values()]), vcenter=target,
                        vmax=top + 1e-9)
    cmap = plt.get_cmap("RdYlGn").copy()
    cmap.set_bad("lightgray")
    fig, ax = plt.subplots(figsize=(1.0 * len(ts) + 2.5, 0.62 * len(ss) + 2.2))
    im = ax.imshow(grid, cmap=cmap, norm=norm, origin="lower", aspect="auto")
    for i, s in enumerate(ss):
        for j, t in enumerate(ts):
            v = cells.get((s, t))
            if v is None:
                ax.text(j, i, "–", ha="center", va="center", fontsize=7, color="dimgray")
                continue
            eff, scan, copy, count = v
            fewer = "*" if count < runs else ""
            shade = norm(eff)  # white text on the darkest colours
            ax.text(j, i, f"{eff:.3f}{fewer}\n{copy:.1f} µs", ha="center", va="center",
                    fontsize=6.5, color="white" if shade < 0.12 or shade > 0.92 else "black")
            if eff < target:
                ok = launch_ok(scan, copy)
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                                       linewidth=1.6 if not ok else 1.0,
                                       linestyle="--" if ok else "-"))
    ax.set_xticks(range(len(ts)))
    ax.set_xticklabels([str(t) for t in ts], fontsize=7)
    ax.set_yticks(range(len(ss)))
    ax.set_yticklabels([str(s) for s in ss], fontsize=7)
    ax.set_xlabel("T (sequence length)", fontsize=8)
    ax.set_ylabel("S (sequences), time-contiguous (1, S, T)", fontsize=8)
    under = sum(1 for v in cells.values() if v[0] < target)
    ax.set_title(f"{dtype} {pas}: efficiency (copy time / scan time) and copy µs per cell; "
                 f"target {target:.2f}, {under} of {len(cells)} cells under it (outlined; dashed: "
                 f"copy < {LAUNCH_BOUND_US:.0f} µs and scan ≤ copy + {LAUNCH_SLACK_US:.0f} µs)"
                 + ("; *: measured in fewer runs" if any(v[3] < runs for v in cells.values())
                    else ""), fontsize=7)
    bar = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
    bar.ax.axhline(target, color="black", linewidth=1.0)
    bar.ax.tick_params(labelsize=7)
    fig.suptitle(note, fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def heatmaps(paths, out_dir, commit=None):
    """One PNG per dtype and pass of the --ascan_sweep runs `paths`: heatmap_<dtype>_<pass>.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ctx = read_json(paths[0])["context"]
    commit = commit or ctx.get("commit", "?")
    command = ctx.get("command", ctx.get("executable", "?"))
    runs = f" (lowest of {len(paths)} runs)" if len(paths) > 1 else ""
    note = stamp(paths, commit, command + runs)
    all_cells = sweep_cells(paths)
    if not all_cells:
        raise SystemExit(f"report.py: no sweep rows in {paths}")
    os.makedirs(out_dir, exist_ok=True)
    for (dtype, pas), cells in all_cells.items():
        fig = plot_heatmap(plt, cells, dtype, pas, note, len(paths))
        name = os.path.join(out_dir, f"heatmap_{dtype}_{pas}.png")
        fig.savefig(name, dpi=110)
        plt.close(fig)
        print(name)


def plot_grid(plt, paths, note):
    """Efficiency against T (powers of two) per dtype and pass, ascan beside CUB and the copy:
    each point the lowest over the runs."""
    low = {}
    for path in paths:
        for b in load(path):
            op, case, bwd = split(b["name"])
            parts = case.split("/")
            t = int(parts[1].split("x")[-1])
            if (op not in ("scan", "cub") or len(parts) != 2 or t & (t - 1)
                    or not parts[1].startswith("8x1536x") or b.get("error_occurred")):
                continue
            key = (parts[0], bwd, op, t)
            low[key] = min(low.get(key, b["efficiency"]), b["efficiency"])
    series = {}
    for (dtype, bwd, op, t), eff in low.items():
        series.setdefault((dtype, bwd, op), []).append((t, eff))
    dtypes = sorted({k[0] for k in series}, key=["f32", "bf16", "f16"].index)
    fig, axes = plt.subplots(2, len(dtypes), figsize=(4.2 * len(dtypes), 6.5), sharey=True)
    for col, dtype in enumerate(dtypes):
        for row, bwd in enumerate((False, True)):
            ax = axes[row][col]
            for op, style in (("scan", "o-"), ("cub", "s--")):
                pts = sorted(series.get((dtype, bwd, op), []))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style,
                            label="ascan" if op == "scan" else "CUB", markersize=4)
            ax.axhline(1.0, color="gray", linewidth=0.8, label="copy")
            ax.axhline(TARGET["backward" if bwd else "forward"], color="red", linestyle=":",
                       linewidth=0.8, label="target")
            ax.set_xscale("log", base=2)
            ax.set_ylim(0, 1.1)
            ax.set_title(f"{dtype} {'backward' if bwd else 'forward'}, (8, 1536, T)", fontsize=9)
            ax.set_xlabel("T", fontsize=8)
            if col == 0:
                ax.set_ylabel("efficiency (copy time / scan time)", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle(note, fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def plot_rows(plt, paths, note, prefix=""):
    """Each layout or varlen row's lowest efficiency over the runs, with its target."""
    lines = rows_table(paths, prefix)[2:]
    cells = [[c.strip() for c in l.strip("|").split("|")] for l in lines]
    labels = [f"{c[0]} {'bwd' if c[1] == 'backward' else 'fwd'}" for c in cells]
    effs = [float(c[4].split()[0]) for c in cells]
    targets = [float(c[6]) for c in cells]
    fig, ax = plt.subplots(figsize=(10, 0.28 * len(cells) + 1.5))
    y = range(len(cells))
    ax.barh(y, effs, color=["tab:green" if e >= t else "tab:orange" for e, t in zip(effs, targets)])
    ax.scatter(targets, y, marker="|", color="red", s=120, label="target", zorder=3)
    ax.axvline(1.0, color="gray", linewidth=0.8)
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.1)
    ax.set_xlabel("efficiency, lowest of the runs (copy time / scan time)", fontsize=8)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(note, fontsize=7)
    fig.tight_layout()
    return fig


def plots(out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out_dir, exist_ok=True)
    for name, kind, files, commit, command in PLOTS:
        note = stamp(files, commit, command)
        prefix = kind.split(":", 1)[1] if ":" in kind else ""
        fig = (plot_grid(plt, files, note) if kind == "grid"
               else plot_rows(plt, files, note, prefix))
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
        print(os.path.join(out_dir, name))


def main(argv):
    if len(argv) == 2 and argv[0] == "--plots":
        plots(argv[1])
        return 0
    if argv and argv[0] == "--heatmaps":
        files, out, commit, rest = [], None, None, argv[1:]
        while rest:
            if rest[0] in ("--out", "--commit") and len(rest) > 1:
                if rest[0] == "--out":
                    out = rest[1]
                else:
                    commit = rest[1]
                rest = rest[2:]
            else:
                files.append(rest[0])
                rest = rest[1:]
        if files and out:
            heatmaps(files, out, commit)
            return 0
    if len(argv) >= 3 and argv[0] == "--table":
        print("\n".join(table(argv[1], argv[2:])))
        return 0
    if argv not in (["--check"], ["--write"]):
        print(__doc__)
        return 2
    stale = []
    for doc in DOCS:
        path = os.path.join(ROOT, doc)
        with open(path) as f:
            text = f.read()
        new, count = regenerate(text)
        print(f"{doc}: {count} generated tables")
        if new != text:
            stale.append(doc)
            if argv == ["--write"]:
                with open(path, "w") as f:
                    f.write(new)
    if stale and argv == ["--check"]:
        print("report.py: tables out of date with their JSON in " + ", ".join(stale) +
              " (run python3 bench/report.py --write)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
