"""The peer benchmark's parts that need no GPU: its grid, its argument handling and its table."""

import importlib.util
import os

import pytest

PEERS_PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench",
                        "peers.py")


@pytest.fixture(scope="module")
def peers():
    spec = importlib.util.spec_from_file_location("ascan_bench_peers", PEERS_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # import-safe: nothing runs, nothing touches a GPU
    return module


def test_grid(peers, capsys):
    assert peers.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "f32 fwd (8, 1536, 128)" in out and "bf16 fwdbwd (1, 1, 268435456)" in out
    assert "64 rows" in out
    args = peers.parse_args(["--shapes", "2x3x4,1x1x1024", "--dtypes", "f32", "--passes", "fwd"])
    assert peers.rows_of(args) == [("f32", "fwd", (2, 3, 4)), ("f32", "fwd", (1, 1, 1024))]


def test_unknown_peer(peers):
    with pytest.raises(SystemExit, match="unknown peers"):
        peers.main(["--peers", "ascan,cub", "--list"])


def test_applicable(peers):
    args = peers.parse_args([])
    assert peers.applicable("accel warp", (8, 1536, 1000), args).startswith("n/a")
    assert peers.applicable("accel warp", (8, 1536, 1024), args) is None
    assert peers.applicable("accel warp", (8, 1536, 2048), args, 16) is None
    assert peers.applicable("accel warp", (8, 1536, 4096), args, 16).startswith("n/a")
    assert peers.applicable("accel warp", (8, 1536, 4096), args, 32) is None
    assert peers.applicable("torch loop", (8, 1536, 2048), args).startswith("skip")
    assert peers.applicable("fla fused", (1, 1, 1 << 28), args).startswith("skip")
    assert peers.applicable("fla chunk", (1, 1, 1 << 28), args) is None


def test_table(peers):
    rows = [
        {"dtype": "f32", "pass": "fwd", "shape": [8, 1536, 4096], "copy_us": 30.0,
         "peers": {"ascan": 31.0, "ascan btc": 40.0, "accel warp": 62.0, "accel scalar": "fail",
                   "fla fused": ("wrong", 90.0), "torch loop": "skip"},
         "notes": {"accel scalar": "RuntimeError: boom", "fla fused": "wrong: relative L2 0.5",
                   "torch loop": "skip (T > 1024)"}},
        {"dtype": "bf16", "pass": "fwdbwd", "shape": [1, 1, 1 << 28], "copy_us": 900.0,
         "peers": {"ascan": 1000.0, "accel warp": "oom"}, "notes": {"accel warp": "out of memory"}},
    ]
    text = peers.table(rows, ["ascan", "ascan btc", "accel warp", "accel scalar", "fla fused",
                              "torch loop"])
    lines = text.splitlines()
    assert lines[0].startswith("| dtype | pass | B×C×T | copy µs | ascan µs (eff) |")
    assert "| f32 | fwd | 8×1536×4096 | 30.0 | 31.0 (0.97) | 40.0 (1.3×) | 62.0 (2.0×) | fail |" \
        " wrong 90.0 | skip |" in text
    assert "| bf16 | fwd+bwd | 1×1×268435456 | 900 | 1,000 (0.90) | – | oom |" in text
    assert "- f32 fwd 8×1536×4096, accel scalar: RuntimeError: boom" in text
    assert "torch loop: skip" not in text  # skips are in the cells, not the notes


def test_run_row_on_cpu(peers, cpu_ops):
    # one row end to end on the CPU: ascan through the CPU stand-in kernels, a peer that agrees,
    # one that disagrees, one that raises, one that cannot take the shape
    import torch

    import ascan

    class OneCall:
        def median_us(self, fn):
            fn()
            return 1.0

    table_peers = {
        "ascan": ("bct", lambda d: ascan.scan(d["g"], d["x"])),
        "ascan btc": ("btc", lambda d: ascan.scan(d["g_btc"], d["x_btc"], layout="btc")),
        "accel warp": ("bct", lambda d: d["x"] * 0),
        "accel scalar": ("bct", lambda d: 1 / 0),
        "torch loop": "import failed: ModuleNotFoundError: nothing",
    }
    for pas in ("fwd", "fwdbwd"):
        args = peers.parse_args([])
        row = peers.run_row(torch, OneCall(), table_peers, "f32", pas, (2, 3, 50), args,
                            device="cpu")
        p = row["peers"]
        assert p["ascan"] == 1.0 and p["ascan btc"] == 1.0, row
        assert p["accel warp"] == "n/a"  # T = 50 is not a power of two
        assert p["accel scalar"] == "fail" and "ZeroDivisionError" in row["notes"]["accel scalar"]
        assert p["torch loop"] == "unavailable"
        assert row["copy_us"] == 1.0
        assert row["bytes"] == (8 if pas == "fwdbwd" else 3) * 2 * 3 * 50 * 4
    row = peers.run_row(torch, OneCall(), table_peers, "f32", "fwd", (2, 3, 64),
                        peers.parse_args([]), device="cpu")
    assert row["peers"]["accel warp"] == ("wrong", 1.0)
    assert "wrong" in row["notes"]["accel warp"]
    assert "| f32 | fwd | 2×3×64 |" in peers.table([row], list(table_peers))
