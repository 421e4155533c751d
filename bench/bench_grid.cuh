// bench/bench_grid.cuh: the standard grid (standard_grid: the shapes, dtypes and directions,
// the few-long-sequence rows among them) and its copy/, scan/ and cub/ rows on time-contiguous
// (B, C, T) cases (run_row, register_case). Included by scan_bench.cu only (its anonymous
// namespace).
#pragma once

#include "bench_cub.cuh"
#include "bench_harness.cuh"
#include "bench_rows.cuh"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

// The grid. One row is a shape, the dtypes it runs in, and a direction; every (row, dtype) pair
// becomes one case (copy, scan and cub rows).

struct GridRow {
  Extent shape;
  std::vector<Dtype> dtypes;
  bool reverse = false;
  bool backward = false;  ///< the backward pass (5 streams) instead of the forward scan
  bool states = false;    ///< forward with initial_state and final_state (2 more (B, C) arrays)
};

std::vector<GridRow> standard_grid() {
  const std::vector<Dtype> all = {Dtype::kF32, Dtype::kBF16, Dtype::kF16};
  const std::vector<Dtype> f32_bf16 = {Dtype::kF32, Dtype::kBF16};
  std::vector<GridRow> grid;
  // Seed grid: accelerated-scan's published benchmark, so results compare directly.
  for (int k = 7; k <= 16; ++k) grid.push_back({{8, 1536, int64_t{1} << k}, all});
  // Odd lengths: no power-of-two tiling to lean on.
  grid.push_back({{8, 1536, 1000}, f32_bf16});
  grid.push_back({{8, 1536, 50000}, f32_bf16});
  // Reverse direction, one length.
  grid.push_back({{8, 1536, 4096}, f32_bf16, /*reverse=*/true});
  // The forward scan with an initial and a final state per sequence.
  for (int k : {7, 12, 16})
    grid.push_back({{8, 1536, int64_t{1} << k}, f32_bf16, false, false, true});
  // The backward pass over the same shapes (not the states rows).
  const size_t forward_rows = grid.size() - 3;
  for (size_t i = 0; i < forward_rows; ++i) {
    GridRow row = grid[i];
    row.backward = true;
    grid.push_back(row);
  }
  // Few long sequences (the multi-block path), forward and backward.
  for (bool backward : {false, true})
    for (Extent e : {Extent{1, 1, int64_t{1} << 28}, Extent{1, 16, int64_t{1} << 22},
                     Extent{2, 4, int64_t{1} << 24}, Extent{1, 128, int64_t{1} << 20}})
      grid.push_back({e, f32_bf16, false, backward});
  return grid;
}

std::string shape_name(const Extent& e) {
  return std::to_string(e.batch) + "x" + std::to_string(e.channels) + "x" +
         std::to_string(e.length);
}

/// The name of a grid case, "<dtype>/<B>x<C>x<T>[/reverse][/bwd][/states]".
template <class T>
std::string grid_case_name(const GridRow& row) {
  return std::string(DtypeInfo<T>::kName) + "/" + shape_name(row.shape) +
         (row.reverse ? "/reverse" : "") + (row.backward ? "/bwd" : "") +
         (row.states ? "/states" : "");
}

/// ascan::scan (with an initial and a final state where `states`) or ascan::scan_backward on
/// the time-contiguous case of `shape`.
template <class T>
std::string measure_scan(const Extent& shape, bool reverse, bool backward, bool states,
                         double* ms) {
  return with_direction<T>(backward, [&](auto dir) {
    using Dir = decltype(dir);
    return measure_entry<Dir>(Dir::args(shape, reverse, states), ms);
  });
}

/// Runs a row on the time-contiguous case of `shape` (buffers "<dtype>/<B>x<C>x<T>", checked on
/// its first and last sequence); `measure` as run_measured's.
template <class T, class Measure>
void run_row(benchmark::State& state, Op op, const std::string& case_name, const Extent& shape,
             bool reverse, bool backward, bool states, const Measure& measure) {
  const std::string key = std::string(DtypeInfo<T>::kName) + "/" + shape_name(shape);
  const RowCase row{key, shape, nullptr, reverse, backward, states};
  run_measured<T>(state, op, case_name, row, measure, [&] { return contiguous_ends(shape); });
}

/// The copy, scan and cub rows of the grid case of `row` in T (see the top of scan_bench.cu).
template <class T>
void register_case(const GridRow& row) {
  const std::string case_name = grid_case_name<T>(row);
  g_case_order.push_back(case_name);
  auto add = [&](Op op, const char* prefix) {
    const Extent shape = row.shape;
    const bool reverse = row.reverse;
    const bool backward = row.backward;
    const bool states = row.states;
    register_row(std::string(prefix) + "/" + case_name, [=](benchmark::State& st) {
      run_row<T>(st, op, case_name, shape, reverse, backward, states, [&](double* ms) {
        return op == Op::kCub ? measure_cub<T>(shape, ms)
                              : measure_scan<T>(shape, reverse, backward, states, ms);
      });
    });
  };
  // A reverse or states case moves the bytes of the plain forward case (the states add 2 * B * C
  // elements, in the bytes counter): its copy row would repeat. The CUB
  // baseline is a forward scan.
  if (!row.reverse && !row.states) add(Op::kCopy, "copy");
  add(row.backward ? Op::kBackward : Op::kScan, "scan");
  if (!row.reverse && !row.backward && !row.states) add(Op::kCub, "cub");
}

}  // namespace
