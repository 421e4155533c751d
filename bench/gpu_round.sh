#!/usr/bin/env bash
# bench/gpu_round.sh: one round on a GPU machine that has no compiler for the project (the
# lent H200: no GoogleTest or Google Benchmark libraries, no network), from binaries built
# elsewhere by bench/gpu_prepare.sh into $DEV (default build/dev), from the repository root:
#
#   TESTS=1 SANITIZE=1 BENCH=bench/rounds/standard.txt bash bench/gpu_round.sh
#   NCU_SOURCE=1 PROFILE=bench/rounds/profile_source.txt bash bench/gpu_round.sh
#
# (the parts it runs must be there: a device call that carries the test binaries and the
# benchmark together passes its 64 MiB, so those go in separate calls, as gpu_prepare.sh prints)
#
# What it runs, each where asked:
#   TESTS=1     every GPU test binary in $DEV/t, the larger ones in GoogleTest shards, all in
#               parallel (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX)
#   SANITIZE=1  compute-sanitizer memcheck and racecheck on the small cases named below
#   PYTESTS=1   python/tests against the package built into $DEV/pyascan (PYTHONPATH)
#   BENCH=FILE  ascan_bench runs, one line of FILE each: a name, then ascan_bench's arguments
#               (`grid_run1 --benchmark_filter=^(copy|scan)/`); lines starting with # are skipped;
#               a line that starts with @DIR runs DIR's ascan_bench instead of $DEV's (another
#               build, prepared with DEV=DIR, for an A/B in one call: `@build/exp ab_b_run1 ...`),
#               its build's commit beside its JSON (<name>.commit)
#   PROFILE=FILE Nsight Compute on one launch of one benchmark row, one line of FILE each: a name,
#               the kernel (a regular expression on its function name), then ascan_bench's
#               arguments (`window_bwd flat_window_kernel --benchmark_filter=^varlen/scan/...`);
#               clocks left as they are (--clock-control none), the launch after the row's three
#               warm-ups, the sections of NCU_SECTIONS; text reports in profile.tgz; with
#               NCU_SOURCE=1 also each report's source page, every SASS instruction with its
#               executions and warp stall samples (<name>_sass.csv: which barrier or load waits)
#   GPU_NAME=TEXT runs nothing (exit 0, saying so) unless the GPU's name contains TEXT (`H200`):
#               a device call that asks for one card and is lent another then costs only its start,
#               and the device time left stays for the card the round's figures are for
# Every job is stopped at DEADLINE seconds from the start (default 540, under the device's 600 s
# a command), and a run that would start after it is skipped and said so. Outputs, under $OUT
# (or bench/results/round), written as each part ends so that a stop keeps what finished:
# gpu_tests_<commit>.log (a header with the GPU, driver, date, build and the command, each job's
# summary and exit status, then the logs), pytest_<commit>.log, bench.tgz (each run's JSON,
# <name>.json, its console output, <name>.txt, and COMMIT) and profile.tgz (each profile's
# report, <name>.txt, with NCU_SOURCE=1 its source page, <name>_sass.csv, and COMMIT); a short
# table last on stdout. The commit is the one each part was built from (gpu_prepare.sh's stamps).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT="$PWD"
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }
DEV="$(absolute "${DEV:-build/dev}")"
OUT="$(absolute "${OUT:-bench/results/round}")"
DEADLINE="${DEADLINE:-540}"
GPU="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
if [ -n "${GPU_NAME:-}" ] && [[ "$GPU" != *"$GPU_NAME"* ]]; then
  echo "gpu_round.sh: GPU_NAME=$GPU_NAME, but the GPU is ${GPU:-none found}: nothing run"
  exit 0
fi
mkdir -p "$OUT"
LOGS="$(mktemp -d)"
export LD_LIBRARY_PATH="$DEV/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# the commit each part was built from (gpu_prepare.sh), else this checkout's
built() { cat "$1" 2>/dev/null || echo "$(git rev-parse --short HEAD)-unstamped"; }
summary=()
left() { echo $((DEADLINE - SECONDS)); }  # seconds to the deadline
capped() { local l; l=$(left); echo $((l < $1 ? l : $1)); }  # capped N: left, at most N

# The small cases the sanitizers run (each tool is 10-100x slower than the test alone); each a
# GoogleTest filter the environment may replace (the cases of the kernels a change touched).
# The layout cases: the packed flat kernel (f32, bf16) and the dense row kernel's packed 16-bit
# backward half slab (f16, bf16).
MEMCHECK_SCAN="${MEMCHECK_SCAN:-ScanTest/0.SmallMultiBlock:ScanTest/3.SmallLongSequence:ScanTest/0.SmallLengths:ScanTest/3.SmallLengths}"
MEMCHECK_BWD="${MEMCHECK_BWD:-ScanBackwardTest/0.SmallLengths:ScanBackwardTest/3.SmallLengths:ScanBackwardTest/3.SmallLongSequence:ScanBackwardTest/0.SmallLongSequence}"
MEMCHECK_LAYOUT="${MEMCHECK_LAYOUT:-LayoutTest/0.BackwardPackedFlat:LayoutTest/3.BackwardPackedFlat:LayoutTest/2.BackwardPackedRowsWithoutStatesShort:LayoutTest/3.BackwardPackedRowsWithoutStatesShort}"
RACECHECK_SCAN="${RACECHECK_SCAN:-ScanTest/0.SmallLengths}"
RACECHECK_LAYOUT="${RACECHECK_LAYOUT:-LayoutTest/0.BackwardPackedFlat:LayoutTest/3.BackwardPackedRowsWithoutStatesShort}"

# job LOG COMMAND...: COMMAND in the background, stopped at the deadline, its output and then
# its exit status ("exit N"; 124: stopped) in $LOGS/LOG.log
job() {
  local log=$1
  shift
  (timeout "$(left)" "$@"; echo "exit $?") >"$LOGS/$log.log" 2>&1 </dev/null &
}
# shard NAME BINARY SHARDS: SHARDS GoogleTest shards of BINARY
shard() {
  local name=$1 bin=$2 shards=$3 i
  [ -x "$bin" ] || { echo "$bin not built, not run" >"$LOGS/$name.log"; return; }
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i job "${name}_$i" "$bin"
  done
}
sanitize() {  # sanitize LOG TOOL BINARY FILTER
  local log=$1 tool=$2 bin=$3 filter=$4
  [ -x "$bin" ] || { echo "$bin not built, not run" >"$LOGS/$log.log"; return; }
  job "$log" compute-sanitizer --tool "$tool" --error-exitcode 1 "$bin" \
    ${filter:+"--gtest_filter=$filter"}
}

if [ "${TESTS:-0}" = 1 ] || [ "${SANITIZE:-0}" = 1 ]; then
  COMMIT="$(built "$DEV/t/COMMIT")"
  start=$SECONDS
  if [ "${TESTS:-0}" = 1 ]; then
    shard scan_test "$DEV/t/scan_test" 2
    shard scan_backward_test "$DEV/t/scan_backward_test" 2
    shard layout_test "$DEV/t/layout_test" 4
    for t in lookback_hook_test capture_test packed_offsets_test; do shard "$t" "$DEV/t/$t" 1; done
  fi
  if [ "${SANITIZE:-0}" = 1 ]; then
    sanitize memcheck memcheck "$DEV/t/scan_test" "$MEMCHECK_SCAN"
    sanitize memcheck_bwd memcheck "$DEV/t/scan_backward_test" "$MEMCHECK_BWD"
    sanitize memcheck_layout memcheck "$DEV/t/layout_test" "$MEMCHECK_LAYOUT"
    sanitize memcheck_packed memcheck "$DEV/t/packed_offsets_test" ""
    sanitize racecheck racecheck "$DEV/t/scan_test" "$RACECHECK_SCAN"
    sanitize racecheck_layout racecheck "$DEV/t/layout_test" "$RACECHECK_LAYOUT"
  fi
  wait
  line() {  # one log's summary: GoogleTest's and the sanitizer's verdicts, and the exit status
    grep -hoE '^\[  (PASSED|FAILED)  \] [0-9]+ tests?|ERROR SUMMARY: [0-9]+ errors?|[0-9]+ hazards displayed|not built, not run|^exit [0-9]+' \
      "$1" | tr '\n' ' '
  }
  {
    echo "# GPU tests: $GPU, $(date -u +%F), build $COMMIT"
    echo "# command: bench/gpu_round.sh with TESTS=${TESTS:-0} SANITIZE=${SANITIZE:-0}" \
      "(tests: scan_test and scan_backward_test in 2 shards, layout_test in 4, the others whole)"
    if [ "${SANITIZE:-0}" = 1 ]; then
      echo "# compute-sanitizer memcheck: $MEMCHECK_SCAN; $MEMCHECK_BWD; $MEMCHECK_LAYOUT;" \
        "packed_offsets_test all. racecheck: $RACECHECK_SCAN; $RACECHECK_LAYOUT"
    fi
    echo "tests done after $((SECONDS - start)) s"
    for f in "$LOGS"/*.log; do echo "== $(basename "$f"): $(line "$f")"; done
    for f in "$LOGS"/*.log; do
      printf '\n== %s\n' "$(basename "$f")"
      grep -vE '^\[ +(RUN|OK) +\]' "$f"
    done
  } >"$OUT/gpu_tests_$COMMIT.log"
  for f in "$LOGS"/*.log; do summary+=("$(basename "$f" .log): $(line "$f")"); done
fi

if [ "${PYTESTS:-0}" = 1 ]; then
  COMMIT="$(built "$DEV/pyascan/COMMIT")"
  if (($(left) < 1)); then
    summary+=("python/tests: skipped (past DEADLINE=$DEADLINE s)")
  else
    (cd "$LOGS" && PYTHONPATH="$DEV/pyascan" timeout "$(left)" python3 -m pytest \
      "$ROOT/python/tests" -q -rs -p no:cacheprovider >"$OUT/pytest_$COMMIT.log" 2>&1 </dev/null)
    summary+=("python/tests: exit $?, $(tail -n 1 "$OUT/pytest_$COMMIT.log")")
  fi
fi

# each_run LIST PART RUN: RUN NAME ARGS... for each line of LIST ("NAME ARGS...", split as
# written and never globbed; empty lines and lines starting with # skipped), its output under
# $LOGS/PART, none started past the deadline; each run's exit status and time in the summary, and
# $OUT/PART.tgz packed again after every run, so that a stop keeps what finished
each_run() {
  local list=$1 part=$2 run=$3 name rest start status bin
  mkdir -p "$LOGS/$part"
  built "$DEV/ascan_bench.commit" >"$LOGS/$part/COMMIT"
  summary+=("$part: ascan_bench built at $(cat "$LOGS/$part/COMMIT")")
  while read -r name rest; do
    case "$name" in '' | '#'*) continue ;; esac
    bin="$DEV"
    if [ "${name:0:1}" = @ ]; then  # @DIR NAME ARGS...: DIR's build
      local dir="${name:1}"
      read -r name rest <<<"$rest"
      if [ -z "$dir" ] || [ -z "$name" ] || [ "${name:0:1}" = '#' ]; then  # no DIR, or no NAME
        summary+=("$part: a line '@$dir ${name:-}' names no build or no run, skipped")
        continue
      fi
      bin="$(absolute "$dir")"
      built "$bin/ascan_bench.commit" >"$LOGS/$part/$name.commit"
    fi
    if (($(left) < 1)); then
      summary+=("$part $name: skipped (past DEADLINE=$DEADLINE s)")
      continue
    fi
    start=$SECONDS
    set -f
    # shellcheck disable=SC2086
    "$run" "$name" $rest </dev/null
    status=$?
    set +f
    summary+=("$part $name: exit $status, $((SECONDS - start)) s$([ "$bin" = "$DEV" ] ||
      echo ", built at $(cat "$LOGS/$part/$name.commit")")")
    tar -czf "$OUT/$part.tgz" -C "$LOGS/$part" .
  done <"$list"
}
bench_run() {  # bench_run NAME ARGS...: ascan_bench ARGS..., its JSON and console output
  local name=$1
  shift
  LD_LIBRARY_PATH="$bin/devlibs:$LD_LIBRARY_PATH" timeout "$(left)" "$bin/ascan_bench" "$@" \
    --benchmark_out="$LOGS/bench/$name.json" \
    --benchmark_out_format=json >"$LOGS/bench/$name.txt" 2>&1
}
profile_run() {  # profile_run NAME KERNEL ARGS...: ncu on KERNEL's first timed launch
  local name=$1 kernel=${2:-}
  shift 2 || shift $#
  if [ $# -eq 0 ]; then  # a kernel with no row would profile the whole default set
    echo "no ascan_bench arguments, not run" >"$LOGS/profile/$name.txt"
    return 2
  fi
  local report=()  # NCU_SOURCE=1: the report kept (in $LOGS only) for its source page
  [ "${NCU_SOURCE:-0}" != 1 ] ||
    report=(--export "$LOGS/$name" --force-overwrite --print-summary none)
  LD_LIBRARY_PATH="$bin/devlibs:$LD_LIBRARY_PATH" timeout "$(left)" ncu --clock-control none \
    --kernel-name-base function \
    --kernel-name "regex:$kernel" --launch-skip 3 --launch-count 1 "${section_args[@]}" \
    ${report[@]+"${report[@]}"} "$bin/ascan_bench" "$@" >"$LOGS/profile/$name.txt" 2>&1
  local status=$?
  # the details the console would have printed, then the source page, each within the deadline
  # (at most 60 s; none where nothing is left: `timeout 0` would not stop it)
  if [ "${NCU_SOURCE:-0}" = 1 ] && [ -f "$LOGS/$name.ncu-rep" ]; then
    (($(capped 60) < 1)) || timeout "$(capped 60)" ncu --import "$LOGS/$name.ncu-rep" \
      --page details >>"$LOGS/profile/$name.txt" 2>&1
    (($(capped 60) < 1)) || timeout "$(capped 60)" ncu --import "$LOGS/$name.ncu-rep" \
      --page source --print-source sass --csv >"$LOGS/profile/${name}_sass.csv" 2>&1
  fi
  return $status
}

[ -z "${BENCH:-}" ] || each_run "$BENCH" bench bench_run
if [ -n "${PROFILE:-}" ]; then
  sections="${NCU_SECTIONS:-SpeedOfLight MemoryWorkloadAnalysis SchedulerStats WarpStateStats Occupancy LaunchStats InstructionStats SourceCounters}"
  section_args=()
  set -f
  for s in $sections; do section_args+=(--section "$s"); done
  set +f
  each_run "$PROFILE" profile profile_run
fi

echo "== round on $GPU, $SECONDS s"
printf '%s\n' "${summary[@]}"
