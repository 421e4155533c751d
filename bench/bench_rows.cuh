// bench/bench_rows.cuh: the steps every benchmark row shares, whatever it measures: the forward
// scan and the backward pass side by side (Direction), the two-phase call, the paired copy on
// poisoned outputs, the check, the counters and the summary (run_measured, report_row).
// Included by scan_bench.cu only (its anonymous namespace).
#pragma once

#include "bench_check.cuh"
#include "bench_harness.cuh"

#include <ascan/ascan.cuh>

#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// The two directions. Direction<T, false> is the forward scan, Direction<T, true> the backward
// pass: their arguments over the case's buffers (g_ws), their two-phase entry points and the
// kernels' problem, so that one measuring function serves both.

template <class T, bool kBackward>
struct Direction;

template <class T>
struct Direction<T, false> {
  using Args = ascan::ScanArgs<T>;
  template <class U, bool kReverse, bool kVector>
  using Problem = ascan::detail::ForwardProblem<U, kReverse, kVector>;
  static constexpr const char* kEntry = "ascan::scan";
  static constexpr const char* kWith = "scan_with";

  /// A time-contiguous (B, C, T) case; `states`: with an initial and a final state per sequence.
  static Args args(const Extent& shape, bool reverse, bool states) {
    Args args;
    args.gates = static_cast<const T*>(g_ws.gates);
    args.tokens = static_cast<const T*>(g_ws.tokens);
    args.out = static_cast<T*>(g_ws.out);
    args.shape = ascan::time_contiguous(shape.batch, shape.channels, shape.length);
    args.reverse = reverse;
    if (states) {
      args.initial_state = static_cast<const T*>(g_ws.h0);
      args.final_state = static_cast<T*>(g_ws.final);
    }
    return args;
  }
  static ascan::Status entry(const Args& args, void* w, size_t& b) {
    return ascan::scan(args, w, b, g_gpu.stream);
  }
  static ascan::Status with(const Args& args, void* w, size_t& b, ascan::detail::Path path) {
    return ascan::detail::scan_with(args, ascan::detail::Scratch::two_phase(w, b), g_gpu.stream,
                                    path);
  }
  static auto params(const Args& args, bool& vector) {
    return ascan::detail::make_params(args, vector);
  }
};

template <class T>
struct Direction<T, true> {
  using Args = ascan::ScanBackwardArgs<T>;
  template <class U, bool kReverse, bool kVector>
  using Problem = ascan::detail::BackwardProblem<U, kReverse, kVector>;
  static constexpr const char* kEntry = "ascan::scan_backward";
  static constexpr const char* kWith = "scan_backward_with";

  /// A time-contiguous (B, C, T) case; no backward row has states.
  static Args args(const Extent& shape, bool reverse, bool /*states*/) {
    Args args;
    args.gates = static_cast<const T*>(g_ws.gates);
    args.states = static_cast<const T*>(g_ws.tokens);  // any values: the pass takes them as given
    args.grad_out = static_cast<const T*>(g_ws.grad);
    args.grad_gates = static_cast<T*>(g_ws.out);
    args.grad_tokens = static_cast<T*>(g_ws.grad2);
    args.shape = ascan::time_contiguous(shape.batch, shape.channels, shape.length);
    args.reverse = reverse;
    return args;
  }
  static ascan::Status entry(const Args& args, void* w, size_t& b) {
    return ascan::scan_backward(args, w, b, g_gpu.stream);
  }
  static ascan::Status with(const Args& args, void* w, size_t& b, ascan::detail::Path path) {
    return ascan::detail::scan_backward_with(args, ascan::detail::Scratch::two_phase(w, b),
                                             g_gpu.stream, path);
  }
  static auto params(const Args& args, bool& vector) {
    return ascan::detail::make_backward_params(args, vector);
  }
};

/// f(Direction<T, backward>{}): one generic lambda for both directions.
template <class T, class F>
std::string with_direction(bool backward, const F& f) {
  return backward ? f(Direction<T, true>{}) : f(Direction<T, false>{});
}

/// Times `call(workspace, bytes)` after a size query `call(nullptr, bytes)` (CUB's two-phase
/// rule, the library's full dispatch); the workspace is allocated before timing.
template <class Call>
std::string measure_two_phase(const char* what, const Call& call, double* ms) {
  size_t bytes = 0;
  if (const ascan::Status st = call(nullptr, bytes); !st.ok())
    return std::string(what) + " (size query): " + st.message;
  if (std::string err = ensure_scratch(bytes); !err.empty()) return err;
  return time_median(
      [&]() -> std::string {
        size_t b = bytes;
        const ascan::Status st = call(g_ws.scratch, b);
        if (st.ok()) return {};
        return std::string(what) + ": " + st.message;
      },
      ms);
}

/// ascan::scan or ascan::scan_backward (Dir) on `args`, through the two-phase entry point.
template <class Dir>
std::string measure_entry(const typename Dir::Args& args, double* ms) {
  return measure_two_phase(
      Dir::kEntry, [&](void* w, size_t& b) { return Dir::entry(args, w, b); }, ms);
}

// ---------------------------------------------------------------------------------------------
// One benchmark row.

enum class Op { kCopy, kScan, kCub, kTune, kBackward, kPath, kLookback };

struct Summary {
  double scan_us = NAN, copy_us = NAN, cub_us = NAN, cub_copy_us = NAN;
};
std::vector<std::string> g_case_order;       // case names in registration order
std::map<std::string, double> g_copy_alone;  // copy rows' medians (ms) by buffers and streams
std::map<std::string, Summary> g_summary;    // filled by the rows that ran

// The time (the operation's median, the copy's on a copy row), the counters and the summary of
// a row that ran; `bytes` the traffic the operation must move.
void report_row(benchmark::State& state, Op op, const std::string& case_name,
                const std::string& copy_key, double bytes, double copy_ms, double op_ms) {
  if (op == Op::kCopy) op_ms = copy_ms;

  for (auto _ : state) state.SetIterationTime(op_ms / 1e3);

  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["copy_us"] = copy_ms * 1e3;
  state.counters["scan_us"] = op_ms * 1e3;
  state.counters["efficiency"] = copy_ms / op_ms;
  if (op != Op::kCopy) {
    // the spread of the paired samples, and the paired copy against the case's copy row (the
    // same bytes timed alone in this process): more than 10% off flags the row's copy
    state.counters["ratio_p10"] = g_pair.ratio_p10;
    state.counters["ratio_p90"] = g_pair.ratio_p90;
    const auto alone = g_copy_alone.find(copy_key);
    if (alone != g_copy_alone.end()) {
      const double vs = copy_ms / alone->second;
      state.counters["copy_vs_alone"] = vs;
      state.counters["copy_outlier"] = vs > 1.1 || vs < 1.0 / 1.1 ? 1.0 : 0.0;
    }
  } else {
    g_copy_alone[copy_key] = copy_ms;
  }
  if (op == Op::kTune || op == Op::kPath || op == Op::kLookback) return;
  Summary& sum = g_summary[case_name];
  if (op == Op::kScan || op == Op::kBackward) {
    sum.scan_us = op_ms * 1e3;
    sum.copy_us = copy_ms * 1e3;
  } else if (op == Op::kCub) {
    sum.cub_us = op_ms * 1e3;
    sum.cub_copy_us = copy_ms * 1e3;
  } else if (std::isnan(sum.copy_us)) {
    sum.copy_us = copy_ms * 1e3;
  }
}

/// What a row runs on: the case's buffers (workspace key "<dtype>/<buffers>": rows that share it
/// share them; `offsets`: a packed batch's cu_seqlens) and what its check reads.
struct RowCase {
  std::string key;
  Extent extent;
  const std::vector<int32_t>* offsets = nullptr;
  bool reverse = false;
  bool backward = false;  ///< the backward pass (5 streams) instead of the forward scan (3)
  bool states = false;    ///< forward with initial_state and final_state (2 more (B, C) arrays)
};

/// Runs one row of `op` on `row`: a copy row times the copy alone; every other row times
/// `measure(&ms)` paired with its own copy (time_median), sample by sample, on poisoned outputs,
/// then checks the sequences `check_seqs()` and reports (report_row).
template <class T, class Measure, class CheckSeqs>
void run_measured(benchmark::State& state, Op op, const std::string& case_name, const RowCase& row,
                  const Measure& measure, const CheckSeqs& check_seqs) {
  if (const std::string& err = gpu_setup(); !err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  const int streams = row.backward ? 5 : 3;
  std::string err = workspace_for<T>(row.key, row.extent, row.offsets);
  double copy_ms = 0.0, op_ms = 0.0;
  if (err.empty() && op == Op::kCopy) err = measure_copy<T>(streams, &copy_ms);
  if (err.empty() && op != Op::kCopy) {
    g_pair = Pairing{};
    g_pair.copy_bytes = size_t(streams) * size_t(g_ws.n) * sizeof(T) / 2;
    g_pair.copy_dst = g_ws.copy_dst;
    g_pair.copy_src = g_ws.copy_src;
    if (err.empty()) err = poison_outputs<T>();
    if (err.empty()) err = measure(&op_ms);
    copy_ms = g_pair.copy_ms;
    const Pairing timed = g_pair;
    g_pair.copy_bytes = 0;
    if (err.empty() && !(copy_ms > 0.0)) err = "the paired copy took no samples";
    if (err.empty() && g_ws.copy_in_arrays) {
      // the copy wrote over outputs and the upstream gradient: once more, unpaired, on the
      // inputs as they were filled, for the check (one timed launch after the warm-ups)
      err = restore_inputs<T>();
      const int reps = g_gpu.reps;
      g_gpu.reps = 1;
      double again = 0.0;
      if (err.empty()) err = measure(&again);
      g_gpu.reps = reps;
      g_pair = timed;  // the row reports the timed run's spread
      g_pair.copy_bytes = 0;
    }
    if (err.empty())
      err = row.backward
                ? check_backward_seqs<T>(check_seqs(), row.reverse)
                : check_output_seqs<T>(check_seqs(), row.reverse, row.states && op == Op::kScan);
  }
  if (!err.empty()) {
    cudaGetLastError();  // clear a non-sticky error so the next case starts clean
    state.SkipWithError(err.c_str());
    return;
  }
  // States rows move two (B, C) arrays more; the copy row of the same shape stands beside them.
  const double bytes = (double(streams) * double(g_ws.n) +
                        (row.states ? 2.0 * double(row.extent.sequences()) : 0.0)) *
                       sizeof(T);
  report_row(state, op, case_name, row.key + "/" + std::to_string(streams), bytes, copy_ms, op_ms);
  if (g_ws.copy_in_arrays) state.counters["copy_in_arrays"] = 1.0;
}

/// Registers `run` as every row is: timed by the row itself (time_median), one iteration whose
/// time is the median, in microseconds.
template <class Run>
void register_row(const std::string& name, Run run) {
  benchmark::RegisterBenchmark(name.c_str(), std::move(run))
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMicrosecond);
}

/// One line per case that ran, in registration order: ascan's and CUB's medians beside the copy.
void print_summary(FILE* f) {
  bool any = false;
  for (const std::string& name : g_case_order) any |= g_summary.count(name) > 0;
  if (!any) return;
  std::fprintf(f, "\n%-26s %10s %10s %6s %10s %8s\n", "case", "scan_us", "copy_us", "eff", "cub_us",
               "cub_eff");
  for (const std::string& name : g_case_order) {
    auto it = g_summary.find(name);
    if (it == g_summary.end()) continue;
    const Summary& s = it->second;
    auto num = [](double v, int prec) {
      char buf[32];
      if (std::isnan(v))
        std::snprintf(buf, sizeof buf, "-");
      else
        std::snprintf(buf, sizeof buf, "%.*f", prec, v);
      return std::string(buf);
    };
    std::fprintf(f, "%-26s %10s %10s %6s %10s %8s\n", name.c_str(), num(s.scan_us, 1).c_str(),
                 num(s.copy_us, 1).c_str(), num(s.copy_us / s.scan_us, 3).c_str(),
                 num(s.cub_us, 1).c_str(), num(s.cub_copy_us / s.cub_us, 3).c_str());
  }
}

}  // namespace
