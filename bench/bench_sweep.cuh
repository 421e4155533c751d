// bench/bench_sweep.cuh: the --ascan_sweep rows (issue 20): efficiency over the number of
// sequences S and their length T, time-contiguous, forward and backward, f32 and bf16, each cell
// a copy row and a scan row measured as the grid's are (run_row, run_measured). Included by
// scan_bench.cu only (its anonymous namespace).
#pragma once

#include "bench_grid.cuh"
#include "bench_harness.cuh"
#include "bench_rows.cuh"
#include "bench_tuning.cuh"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

// The sweep's axes, and its cut: cells of more than 2^28 elements are left out (the largest
// grid row's size; its buffers fit the device in f32 and bf16).
constexpr int64_t kSweepSequences[] = {1, 4, 16, 64, 256, 1024, 4096, 16384, 65536};
constexpr int64_t kSweepLengths[] = {1,    7,    33,   100,   300,   700,
                                     1500, 3000, 5000, 12000, 40000, 100000};
constexpr int64_t kSweepMaxElements = int64_t{1} << 28;

/// The sweep's cells, S outer and T inner, S * T <= kSweepMaxElements. A cell of S sequences is
/// the time-contiguous shape (B, C, T) = (1, S, T): B = 1 and C = S. Time-contiguous sequences
/// lie one after another, T elements each, whatever the split of S into B * C, so the split does
/// not change the memory the call reads and writes.
std::vector<Extent> sweep_cells() {
  std::vector<Extent> cells;
  for (int64_t s : kSweepSequences)
    for (int64_t t : kSweepLengths)
      if (s * t <= kSweepMaxElements) cells.push_back({1, s, t});
  return cells;
}

/// The name of a sweep case, "<dtype>/S<S>_T<T>[/bwd]" (the grid's "<dtype>/<B>x<C>x<T>[/bwd]").
template <class T>
std::string sweep_case_name(const Extent& shape, bool backward) {
  return std::string(DtypeInfo<T>::kName) + "/S" + std::to_string(shape.sequences()) + "_T" +
         std::to_string(shape.length) + (backward ? "/bwd" : "");
}

/// The cells where both of the dispatch's paths are also timed, forced (sweep/path/ rows): few
/// sequences of a few tiles or more, where the choice between one block per sequence and many
/// blocks per sequence is made (the map's few-long-sequence corner).
inline bool sweep_both_paths(const Extent& shape) {
  return shape.sequences() <= 256 && shape.length >= 3000;
}

/// The cells where the flat kernel is also timed, forced against one block per sequence
/// (sweep/path/ rows): lengths up to 2048, twice the longest the library gives it
/// (FlatPolicy::max_length), so the sweep shows the crossover on both sides.
inline bool sweep_flat(const Extent& shape) { return shape.length <= 2048; }

/// The rows of one cell in T: sweep/copy/<case> (the copy alone) and sweep/scan/<case>
/// (ascan::scan or ascan::scan_backward, paired with its own copy), as the grid's copy and scan
/// rows of the same shape would be; in the cells of sweep_both_paths also
/// sweep/path/<case>/{one_block,multi_block}, and in those of sweep_flat
/// sweep/path/<case>/{one_block,flat}, each path forced (measure_path).
template <class T>
void register_sweep_case(const Extent& shape, bool backward) {
  const std::string case_name = sweep_case_name<T>(shape, backward);
  g_case_order.push_back("sweep/" + case_name);
  auto add = [&](Op op, const std::string& name, int path_row) {
    register_row(name, [=](benchmark::State& st) {
      run_row<T>(st, op, "sweep/" + case_name, shape, false, backward, false, [&](double* ms) {
        return op == Op::kPath ? measure_path<T>(shape, backward, path_row, ms)
                               : measure_scan<T>(shape, false, backward, false, ms);
      });
    });
  };
  add(Op::kCopy, "sweep/copy/" + case_name, -1);
  add(backward ? Op::kBackward : Op::kScan, "sweep/scan/" + case_name, -1);
  const bool flat = sweep_flat(shape);
  if (sweep_both_paths(shape) || flat) add(Op::kPath, "sweep/path/" + case_name + "/one_block", 0);
  if (sweep_both_paths(shape)) add(Op::kPath, "sweep/path/" + case_name + "/multi_block", 1);
  if (flat) add(Op::kPath, "sweep/path/" + case_name + "/flat", 2);
}

/// Every sweep row in T: the forward cells, then the backward cells.
template <class T>
void register_sweep() {
  for (bool backward : {false, true})
    for (const Extent& shape : sweep_cells()) register_sweep_case<T>(shape, backward);
}

}  // namespace
