"""ascan against the PyTorch scans people use today, in one process, on one table.

Peers (each in its own layout, inputs prepared outside the timing):
  ascan           ascan.scan, (B, C, T)                     (the reference of every speed-up)
  ascan btc       ascan.scan(layout="btc"), (B, T, C)
  accel warp      accelerated-scan 0.3.1, accelerated_scan.warp.scan (CUDA, JIT-compiled at
                  import; T a power of two), (B, C, T)
  accel scalar    accelerated-scan 0.3.1, accelerated_scan.scalar.scan (Triton), (B, C, T)
  fla fused       fla-core 0.6.0, fla.ops.hgrn.fused_recurrent_hgrn(x, log g), (B, T, C)
  fla chunk       fla-core 0.6.0, fla.ops.hgrn.chunk_hgrn(x, log g), (B, T, C)
  torch loop      ascan.reference.scan_loop in the dtype (T <= --loop-max-t)

Timing as bench/scan_bench.cu: per row `--warmup` untimed calls, then `--reps` calls, each after a
memset that flushes the L2 (1 GB by default, outside the events: larger than the C++ bench's
256 MB so that it also hides the host-side cost of queueing each Python call, ascan's about 14 us
forward and 130 us with autograd on a slow CPU), bracketed by CUDA events on the current stream,
one synchronize at the end; the median. Every row times its own same-traffic copy (a
device-to-device copy of bytes / 2, bytes = 3 N elements forward, 3 N + 5 N forward+backward),
so `eff` = copy / ascan is comparable with the C++ table. The forward+backward pass is
`out = scan(g, x); out.backward(grad)` through each peer's autograd. A peer whose host-side cost
per call exceeds the flush's time would still show it. Every peer's output is checked against
ascan's (relative L2 error over the row); a peer that raises is marked `fail` (its reason in the
notes), one that disagrees `wrong`, one that cannot take the shape `n/a`, a serial-over-T peer
past --serial-max-t `skip`.

Offline peers: `pip install --no-deps --no-index python/bench/wheels/*.whl` (pure-Python wheels
kept in the repository, plus ninja for accelerated-scan's JIT build; refetch with
python/bench/fetch_wheels.sh).

  python python/bench/peers.py                       # seed grid + long rows, f32 and bf16
  python python/bench/peers.py --grid seed --dtypes f32 --passes fwd --out table.md
  python python/bench/peers.py --list                # the rows and the peers found (no GPU)
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the source tree's ascan when not installed

SEED_T = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 1000, 50000]
SEED_BC = (8, 1536)
LONG = [(1, 1, 1 << 28), (1, 16, 1 << 22), (2, 4, 1 << 24), (1, 128, 1 << 20)]
DTYPE_NAMES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64"}
PEERS = ["ascan", "ascan btc", "accel warp", "accel scalar", "fla fused", "fla chunk",
         "torch loop"]
FLUSH_BYTES = 1024 << 20


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--grid", choices=["seed", "long", "all"], default="all")
    p.add_argument("--shapes", default="", help="BxCxT[,BxCxT...] in place of the grid")
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--passes", default="fwd,fwdbwd")
    p.add_argument("--peers", default=",".join(PEERS),
                   help="comma-separated subset of: " + ", ".join(PEERS))
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--loop-max-t", type=int, default=1024)
    p.add_argument("--serial-max-t", type=int, default=1 << 22,
                   help="skip peers that walk time serially (fla fused) past this T")
    p.add_argument("--slow-call-s", type=float, default=0.5,
                   help="a peer whose one call takes longer is timed over 3 calls")
    p.add_argument("--flush-mb", type=int, default=1024,
                   help="L2 flush size (the C++ bench's is 256 MB; 1 GB, about 0.3 ms of "
                        "memset, also hides the host-side cost of queueing a Python call)")
    p.add_argument("--out", default="", help="also write the table (markdown) here")
    p.add_argument("--json", default="", help="also write every measurement here")
    p.add_argument("--list", action="store_true", help="print the rows and peers, run nothing")
    return p.parse_args(argv)


def rows_of(args):
    if args.shapes:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",")]
    else:
        shapes = []
        if args.grid in ("seed", "all"):
            shapes += [(SEED_BC[0], SEED_BC[1], T) for T in SEED_T]
        if args.grid in ("long", "all"):
            shapes += LONG
    rows = []
    for dt in args.dtypes.split(","):
        for pas in args.passes.split(","):
            for shape in shapes:
                rows.append((dt.strip(), pas.strip(), shape))
    return rows


# ---- peers -----------------------------------------------------------------------------------


def load_peers(wanted):
    """name -> (callable(g, x, g_btc_log, x_btc) -> out in (B, C, T) or (B, T, C), layout) or the
    reason it is unavailable."""
    import torch

    import ascan
    from ascan.reference import scan_loop

    peers = {}
    if "ascan" in wanted:
        peers["ascan"] = ("bct", lambda d: ascan.scan(d["g"], d["x"]))
    if "ascan btc" in wanted:
        peers["ascan btc"] = ("btc", lambda d: ascan.scan(d["g_btc"], d["x_btc"], layout="btc"))
    if "accel warp" in wanted:
        try:
            os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(HERE / "results" / "torch_ext"))
            try:  # the JIT build needs a ninja on PATH: the pip package's, wherever it went
                import ninja

                os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
            except Exception:  # noqa: BLE001
                pass
            from accelerated_scan.warp import scan as warp_scan

            peers["accel warp"] = ("bct", lambda d: warp_scan(d["g"], d["x"]))
        except Exception as e:  # noqa: BLE001
            peers["accel warp"] = f"import failed: {type(e).__name__}: {str(e)[:120]}"
    if "accel scalar" in wanted:
        try:
            from accelerated_scan.scalar import scan as scalar_scan

            peers["accel scalar"] = ("bct", lambda d: scalar_scan(d["g"], d["x"]))
        except Exception as e:  # noqa: BLE001
            peers["accel scalar"] = f"import failed: {type(e).__name__}: {str(e)[:120]}"
    if "fla fused" in wanted or "fla chunk" in wanted:
        try:
            from fla.ops.hgrn import chunk_hgrn, fused_recurrent_hgrn

            if "fla fused" in wanted:
                peers["fla fused"] = (
                    "btc", lambda d: fused_recurrent_hgrn(d["x_btc"], d["logg_btc"])[0])
            if "fla chunk" in wanted:
                peers["fla chunk"] = ("btc", lambda d: chunk_hgrn(d["x_btc"], d["logg_btc"])[0])
        except Exception as e:  # noqa: BLE001
            for name in ("fla fused", "fla chunk"):
                if name in wanted:
                    peers[name] = f"import failed: {type(e).__name__}: {str(e)[:120]}"
    if "torch loop" in wanted:
        peers["torch loop"] = ("bct", lambda d: scan_loop(d["g"], d["x"]))
    del torch
    return peers


def applicable(name, shape, args, dtype_bits=32):
    B, C, T = shape
    if name == "torch loop" and T > args.loop_max_t:
        return f"skip (T > {args.loop_max_t})"
    if name == "fla fused" and T > args.serial_max_t:
        return f"skip (serial over T > {args.serial_max_t})"
    if name == "accel warp" and (T & (T - 1)) != 0:
        return "n/a (T not a power of 2)"
    if name == "accel warp" and dtype_bits == 16 and T > 2048:
        # on the H200 its 16-bit kernel writes out of bounds at T = 4096 (an illegal address at
        # the next synchronize; earlier it corrupts other tensors): not run, it would end the run
        return "n/a (16-bit T > 2048 faults)"
    return None


# ---- timing ----------------------------------------------------------------------------------


class Timer:
    def __init__(self, torch, reps, warmup, slow_call_s, flush_bytes=FLUSH_BYTES):
        self.torch = torch
        self.reps = reps
        self.warmup = warmup
        self.slow_call_s = slow_call_s
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")

    def median_us(self, fn):
        torch = self.torch
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()  # the first warm-up call, timed on the host: a slow peer gets 3 timed calls only
        torch.cuda.synchronize()
        slow = time.perf_counter() - t0 > self.slow_call_s
        for i in range(0 if slow else self.warmup - 1):
            self.flush.fill_(i & 0xFF)
            fn()
        reps = 3 if slow else self.reps
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        stops = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            self.flush.fill_(i & 0xFF)
            starts[i].record()
            fn()
            stops[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, stops)) * 1e3


def make_data(torch, shape, dtype, fwdbwd, device="cuda"):
    gen = torch.Generator(device=device).manual_seed(0)
    g = torch.empty(shape, device=device, dtype=dtype)
    x = torch.empty(shape, device=device, dtype=dtype)
    g.uniform_(0.9, 0.999, generator=gen)  # long memory, no overflow over long T
    x.normal_(generator=gen)
    d = {"g": g, "x": x}
    d["g_btc"] = g.transpose(1, 2).contiguous()
    d["x_btc"] = x.transpose(1, 2).contiguous()
    d["logg_btc"] = d["g_btc"].float().log().to(dtype)
    if fwdbwd:
        for k in ("g", "x", "g_btc", "x_btc", "logg_btc"):
            d[k].requires_grad_()
        d["grad"] = torch.randn(shape, device=device, dtype=dtype, generator=gen)
        d["grad_btc"] = d["grad"].transpose(1, 2).contiguous()
    return d


def run_row(torch, timer, peers, dt, pas, shape, args, device="cuda"):
    dtype = getattr(torch, DTYPE_NAMES[dt])
    B, C, T = shape
    N = B * C * T
    elem = torch.empty((), dtype=dtype).element_size()
    fwdbwd = pas == "fwdbwd"
    streams = 8 if fwdbwd else 3
    row = {"dtype": dt, "pass": pas, "shape": list(shape), "bytes": streams * N * elem,
           "peers": {}, "notes": {}}
    try:
        d = make_data(torch, shape, dtype, fwdbwd, device)
    except torch.cuda.OutOfMemoryError:
        row["notes"]["all"] = "out of memory for the inputs"
        return row
    copy_bytes = streams * N * elem // 2
    try:
        src = torch.empty(copy_bytes, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        row["copy_us"] = timer.median_us(lambda: dst.copy_(src))
        del src, dst
    except torch.cuda.OutOfMemoryError:
        row["copy_us"] = None
    reference = None
    for name in PEERS:
        if name not in peers:
            continue
        entry = peers[name]
        if isinstance(entry, str):
            row["peers"][name] = "unavailable"
            row["notes"][name] = entry
            continue
        skip = applicable(name, shape, args, 8 * elem)
        if skip:
            row["peers"][name] = skip.split(" ")[0]
            row["notes"][name] = skip
            continue
        layout, fn = entry
        grad = d.get("grad_btc" if layout == "btc" else "grad")
        leaves = [d[k] for k in ("g", "x", "g_btc", "x_btc", "logg_btc")]
        if fwdbwd:
            def call(fn=fn, grad=grad):
                for t in leaves:  # no accumulation into earlier gradients (host-side only)
                    t.grad = None
                fn(d).backward(grad)
        else:
            def call(fn=fn):
                with torch.no_grad():
                    fn(d)
        try:
            with torch.no_grad():
                out = fn(d)
            got = out.transpose(1, 2) if layout == "btc" else out
            if reference is None:
                reference = got.float()
                err = 0.0
            else:
                err = ((got.float() - reference).norm() / reference.norm()).item()
            del out, got
            us = timer.median_us(call)
            for t in leaves:
                t.grad = None
            bound = 3e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-3
            row["peers"][name] = us
            if not math.isfinite(err) or err > bound:
                row["notes"][name] = f"wrong: relative L2 error {err:.3g} against ascan"
                row["peers"][name] = ("wrong", us)
        except torch.cuda.OutOfMemoryError:
            row["peers"][name] = "oom"
            row["notes"][name] = "out of memory"
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            row["peers"][name] = "fail"
            row["notes"][name] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"
            if device == "cuda":
                torch.cuda.synchronize()
    del d, reference
    torch.cuda.empty_cache()
    return row


# ---- the table -------------------------------------------------------------------------------


def fmt_us(us):
    return f"{us:,.1f}" if us < 100 else f"{us:,.0f}"


def table(rows, peer_names):
    head = ["dtype", "pass", "B×C×T", "copy µs", "ascan µs (eff)"] + [
        f"{p} µs (×)" for p in peer_names if p != "ascan"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 3)]
    notes = []
    for r in rows:
        B, C, T = r["shape"]
        cells = [r["dtype"], "fwd" if r["pass"] == "fwd" else "fwd+bwd", f"{B}×{C}×{T}"]
        copy = r.get("copy_us")
        cells.append(fmt_us(copy) if copy else "–")
        ours = r["peers"].get("ascan")
        if isinstance(ours, float):
            cells.append(f"{fmt_us(ours)} ({copy / ours:.2f})" if copy else fmt_us(ours))
        else:
            cells.append(str(ours))
        for p in peer_names:
            if p == "ascan":
                continue
            v = r["peers"].get(p, "–")
            if isinstance(v, float):
                cells.append(f"{fmt_us(v)} ({v / ours:.1f}×)" if isinstance(ours, float)
                             else fmt_us(v))
            elif isinstance(v, (tuple, list)):
                cells.append(f"wrong {fmt_us(v[1])}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
        for p, n in r["notes"].items():
            if not n.startswith("skip") and not n.startswith("n/a"):
                notes.append(f"- {r['dtype']} {r['pass']} {B}×{C}×{T}, {p}: {n}")
    text = "\n".join(lines)
    if notes:
        text += "\n\nNotes:\n" + "\n".join(dict.fromkeys(notes))
    return text


def main(argv=None):
    args = parse_args(argv)
    wanted = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in PEERS]
    if unknown:
        sys.exit(f"unknown peers: {unknown} (take {PEERS})")
    if "ascan" not in wanted:
        wanted.insert(0, "ascan")
    rows = rows_of(args)
    if args.list:
        for r in rows:
            print(*r)
        print(f"{len(rows)} rows; peers: {', '.join(wanted)}")
        return 0
    import torch

    import ascan

    if not ascan.is_available():
        sys.exit("peers.py needs a CUDA GPU and the compiled ascan._C "
                 "(pip install --no-build-isolation ./python)")
    peers = load_peers(wanted)
    names = [p for p in PEERS if p in peers]
    timer = Timer(torch, args.reps, args.warmup, args.slow_call_s, args.flush_mb << 20)
    props = torch.cuda.get_device_properties(0)
    try:
        import subprocess

        commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001 - no git, or no repository
        commit = ""
    header = (f"GPU {props.name}, torch {torch.__version__}, ascan {ascan.__version__} "
              f"(commit {commit or 'unknown'}), "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, median of {args.reps} "
              f"calls each after a {args.flush_mb} MB L2 flush; (×) = peer time / ascan time; "
              f"eff = copy / ascan; command: {' '.join(sys.argv)}")

    def write(results, done):
        # after every row, so that a run cut short keeps the rows it measured
        text = header + "\n\n" + table(results, names)
        if not done:
            text += f"\n\n(partial: {len(results)} of {len(rows)} rows)"
        if args.out:
            Path(args.out).write_text(text + "\n")
        if args.json:
            Path(args.json).write_text(json.dumps({"header": header, "rows": results}, indent=1))
        return text

    results = []
    for i, (dt, pas, shape) in enumerate(rows):
        t0 = time.perf_counter()
        try:
            results.append(run_row(torch, timer, peers, dt, pas, shape, args))
        except Exception:  # noqa: BLE001 - keep the table going
            traceback.print_exc()
            results.append({"dtype": dt, "pass": pas, "shape": list(shape), "peers": {},
                            "notes": {"all": "row failed: see the log"}})
        print(f"[{i + 1}/{len(rows)}] {dt} {pas} {shape}: {time.perf_counter() - t0:.1f} s",
              file=sys.stderr, flush=True)
        write(results, done=False)
    print(write(results, done=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
