#!/usr/bin/env bash
# bench/gpu_prepare.sh: builds, on a machine without a GPU, what bench/gpu_round.sh runs on one
# that has no compiler for the project, into $DEV (default build/dev), from the repository root:
#
#   bash bench/gpu_prepare.sh [bench] [tests] [python]      (default: bench tests)
#
#   bench    ascan_bench (Release, ASCAN_BUILD_BENCH=ON)
#   tests    the GPU test binaries: scan_test, scan_backward_test, layout_test,
#            lookback_hook_test, capture_test, packed_offsets_test (or those TEST_TARGETS names,
#            space-separated: the tests of the kernels a change touched, in a fraction of the time)
#   python   the PyTorch package (pip install --target $DEV/pyascan ./python; needs the Python
#            and torch of the GPU machine: PYTHON, default python3)
#
# Built for CMAKE_ARCHS (default 90-real: sm_90 code, no PTX; the Python package for ARCHS,
# default 90) with --compress-mode=size in build/gpu, so the folder fits a carry of 64 MiB with
# the source tree; then the GoogleTest and Google Benchmark shared libraries they link are copied
# into $DEV/devlibs by ../shared/tools/bundle-runtime-libs (BUNDLE; gpu_round.sh puts them on
# LD_LIBRARY_PATH); each part names the commit it was built from (a "-dirty" suffix where the
# tree had changes) in $DEV/ascan_bench.commit, $DEV/t/COMMIT and $DEV/pyascan/COMMIT. Prints the
# folder's size last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
DEV="${DEV:-build/dev}"
ARCHS="${ARCHS:-90}"
CMAKE_ARCHS="${CMAKE_ARCHS:-90-real}"
JOBS="${JOBS:-$(nproc)}"
BUILD=build/gpu
# the workplace's tool that copies the GoogleTest and Google Benchmark shared libraries a build
# links into <folder>/devlibs
BUNDLE="${BUNDLE:-$ROOT/../shared/tools/bundle-runtime-libs}"
[ -x "$BUNDLE" ] || { echo "gpu_prepare.sh: no $BUNDLE (set BUNDLE)" >&2; exit 2; }
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(bench tests)
mkdir -p "$DEV/t"

# the commit built; "-dirty" where the sources differ from it (untracked files included)
commit="$(git rev-parse --short HEAD)"
[ -z "$(git status --porcelain -- include bench tests python CMakeLists.txt)" ] ||
  commit="$commit-dirty"

targets=()
for w in "${what[@]}"; do
  case "$w" in
    bench) targets+=(ascan_bench) ;;
    tests)
      # shellcheck disable=SC2206  # the names split on spaces
      targets+=(${TEST_TARGETS:-scan_test scan_backward_test layout_test lookback_hook_test
                capture_test packed_offsets_test}) ;;
    python) ;;
    *) echo "gpu_prepare.sh: unknown part '$w' (bench, tests, python)" >&2; exit 2 ;;
  esac
done

# the parts rebuilt go first, so that nothing of an older build is left beside the new one
for w in "${what[@]}"; do
  case "$w" in
    bench) rm -f "$DEV/ascan_bench" "$DEV/ascan_bench.commit" ;;
    tests) rm -rf "$DEV/t" && mkdir -p "$DEV/t" ;;
    python) rm -rf "$DEV/pyascan" ;;
  esac
done
if [ ${#targets[@]} -gt 0 ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$CMAKE_ARCHS" \
    -DCMAKE_CUDA_FLAGS=--compress-mode=size -DASCAN_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}"
  for t in "${targets[@]}"; do
    exe="$(find "$BUILD" -type f -name "$t" -perm -u+x | head -n 1)"
    [ -n "$exe" ] || { echo "gpu_prepare.sh: $t not found under $BUILD" >&2; exit 1; }
    # without the host symbol tables (the device code and its line table stay): about 12% of
    # each binary, which the carry needs
    if [ "$t" = ascan_bench ]; then
      cp "$exe" "$DEV/" && strip --strip-unneeded "$DEV/$t"
      echo "$commit" >"$DEV/ascan_bench.commit"
    else
      cp "$exe" "$DEV/t/" && strip --strip-unneeded "$DEV/t/$t"
      echo "$commit" >"$DEV/t/COMMIT"
    fi
  done
  # the shared libraries of GoogleTest and Google Benchmark, which the GPU machine lacks
  "$BUNDLE" "$DEV" >/dev/null
fi

for w in "${what[@]}"; do
  [ "$w" = python ] || continue
  NVCC_APPEND_FLAGS=--compress-mode=size MAX_JOBS="$JOBS" ASCAN_CUDA_ARCHS="$ARCHS" \
    "${PYTHON:-python3}" -m pip install --no-deps --no-build-isolation --target "$DEV/pyascan" \
    "$ROOT/python"
  find "$DEV/pyascan" -name '*.so' -path '*ascan*' -exec strip --strip-unneeded {} +
  echo "$commit" >"$DEV/pyascan/COMMIT"
done

# What a device call carries: the working tree and the carried paths travel together within 64
# MiB, so the tests and the benchmark go in separate calls (both at once exceed it).
tree_kib=$(git ls-files -z | xargs -0 du -cbk 2>/dev/null | tail -n 1 | cut -f1)
part() {  # part NAME PATH...: the MiB a call carrying PATH... takes with the tree
  local name=$1 kib paths
  shift
  kib=$(($(du -sck "$@" 2>/dev/null | tail -n 1 | cut -f1) + tree_kib))
  paths="$(printf '"%s",' "$@" | sed 's/,$//')"
  printf '%-6s carry [%s]: %d MiB with the tree%s\n' "$name" "$paths" $((kib / 1024)) \
    "$( ((kib > 65536)) && echo ' -- over the 64 MiB a call carries')"
}
[ -x "$DEV/ascan_bench" ] && part bench "$DEV/ascan_bench" "$DEV/ascan_bench.commit" "$DEV/devlibs"
[ -e "$DEV/t/COMMIT" ] && part tests "$DEV/t" "$DEV/devlibs"
[ -e "$DEV/pyascan/COMMIT" ] && part python "$DEV/pyascan"
du -sh "$DEV"
