#!/usr/bin/env bash
# python/bench/gpu_run.sh: on a CUDA machine without network, from the repository root:
#
#   bash python/bench/gpu_run.sh build           # install the peers' wheels, build ascan._C
#   bash python/bench/gpu_run.sh test            # the Python tests (GPU ones included)
#   bash python/bench/gpu_run.sh bench-seed      # peers on (8, 1536, T), f32 and bf16
#   bash python/bench/gpu_run.sh bench-long      # peers on the few-long-sequence rows
#
# Each step fits in 10 minutes on an H200 host with 16 cores; outputs go to $OUT (or
# python/bench/results/). ASCAN_CUDA_ARCHS defaults to the visible GPU's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"
OUT="${OUT:-$ROOT/python/bench/results}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1
case "${1:-all}" in
  build|all)
    "$PY" -m pip install --no-deps --no-index python/bench/wheels/*.whl
    # ninja on PATH (from the wheel, wherever pip put its scripts) for a parallel build
    PATH="$("$PY" -c 'import ninja; print(ninja.BIN_DIR)'):$PATH"
    start=$SECONDS
    MAX_JOBS="${MAX_JOBS:-$(nproc)}" "$PY" -m pip install --no-build-isolation ./python \
      2>&1 | tail -n 3
    echo "ascan._C built in $((SECONDS - start)) s" | tee "$OUT/build_time.txt"
    ;;&
  test|all)
    (cd "$OUT" && "$PY" -m pytest "$ROOT/python/tests" -rs -q --durations=20 \
      -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log")
    ;;&
  bench-seed|all)
    "$PY" python/bench/peers.py --grid seed --out "$OUT/peers_seed.md" \
      --json "$OUT/peers_seed.json"
    ;;&
  bench-long|all)
    "$PY" python/bench/peers.py --grid long --out "$OUT/peers_long.md" \
      --json "$OUT/peers_long.json"
    ;;
  build|test|bench-seed) ;;
  *) echo "usage: $0 [build|test|bench-seed|bench-long|all]" >&2; exit 2 ;;
esac
