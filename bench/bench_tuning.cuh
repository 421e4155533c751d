// bench/bench_tuning.cuh: the sweeps. --ascan_tune: tune/ rows, each kernel of the one-block
// CandidateTable forced on the standard grid (or the --ascan_shapes), and LongCandidateTable's
// tile walks on its sequences of more than 4096 elements; --ascan_tune_multi: path/ rows (each
// path forced on the crossover and short-tile shapes) and tune/ rows (each multi-block
// LookbackCandidate). Included by scan_bench.cu only (its anonymous namespace).
#pragma once

#include "bench_grid.cuh"
#include "bench_harness.cuh"
#include "bench_rows.cuh"

#include <ascan/ascan.cuh>

#include <benchmark/benchmark.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

/// The shapes of the short-tile sweep (--ascan_tune_multi): few sequences that make few of the
/// multi-block path's tiles (LookbackTuning::kShortPolicy), forward and backward.
std::vector<GridRow> short_grid() {
  const std::vector<Dtype> f32_bf16 = {Dtype::kF32, Dtype::kBF16};
  std::vector<GridRow> grid;
  for (bool backward : {false, true})
    for (Extent e : {Extent{1, 8, int64_t{1} << 16}, Extent{1, 32, int64_t{1} << 16},
                     Extent{1, 128, int64_t{1} << 16}, Extent{1, 8, int64_t{1} << 18},
                     Extent{1, 32, int64_t{1} << 18}, Extent{1, 4, int64_t{1} << 20}})
      grid.push_back({e, f32_bf16, false, backward});
  return grid;
}

/// The shapes of the tiny-tile sweep (--ascan_tune_multi): the sweep's cells of few sequences whose
/// multi-block calls make a few dozen of the short tiles or fewer (S <= 16, T >= 5000), where the
/// scan is bound by one chain's latency rather than by bandwidth, and those of 64 and 256
/// sequences, whose multi-block grids are about one wave of tiles (0.66-0.89 of the copy in the
/// sweep at a00a584).
std::vector<GridRow> few_long_grid() {
  const std::vector<Dtype> f32_bf16 = {Dtype::kF32, Dtype::kBF16};
  std::vector<GridRow> grid;
  for (bool backward : {false, true})
    for (int64_t s : {1, 4, 16, 64, 256})
      for (int64_t t : {5000, 12000, 40000, 100000})
        grid.push_back({{1, s, t}, f32_bf16, false, backward});
  return grid;
}

/// The shapes of the path crossover sweep (--ascan_tune_multi): S sequences of 2^16 elements around
/// the one-block path's fill of the GPU (132 SMs), both paths forced.
std::vector<GridRow> crossover_grid() {
  const std::vector<Dtype> f32_bf16 = {Dtype::kF32, Dtype::kBF16};
  std::vector<GridRow> grid;
  for (bool backward : {false, true})
    for (int64_t s : {132, 264, 396, 528, 792, 1056, 2112})
      grid.push_back({{1, s, int64_t{1} << 16}, f32_bf16, false, backward});
  for (bool backward : {false, true})
    for (int64_t s : {16, 128, 528})
      grid.push_back({{1, s, int64_t{1} << 20}, f32_bf16, false, backward});
  return grid;
}

// The tuning sweep (--ascan_tune): the same call with a kernel of a candidate table forced, to
// measure the choices and crossovers recorded beside the table in
// include/ascan/device/dispatch/tuning.cuh. Items are whole 16-byte vectors (runs) per thread.
template <int kBytes>
struct CandidateTable {
  using K = ascan::detail::KernelKind;
  static constexpr int V = 16 / kBytes;  // elements per 16-byte vector
  // kLoop keeps a warp row looping over tiles; a warp row with max_span == tile runs one tile;
  // block rows are one tile by construction. The last field is the occupancy target (blocks per
  // multiprocessor the registers must allow). The current sweep: block sizes and occupancy for
  // one tile of 128 (earlier sweeps' candidates and results: bench/RESULTS.md).
  static constexpr int64_t kLoop = INT64_MAX;
  static constexpr int kA = 128 / (2 * V), kB = 128 / V;  // lanes for one tile of 128
  static constexpr ascan::detail::ScanPolicy kPolicies[] = {
      {128, K::kWarp, 128, kA, 2 * V, 10}, {128, K::kWarp, 256, kA, 2 * V, 5},
      {128, K::kWarp, 512, kA, 2 * V, 2},  {128, K::kWarp, 128, kB, V, 16},
      {128, K::kWarp, 256, kB, V, 8},      {128, K::kWarp, 512, kB, V, 4},
      {128, K::kWarp, 128, kA, 2 * V, 1},  {128, K::kWarp, 128, kB, V, 1},
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};
// The current sweep for float and the 16-bit types: the grid's short rows under their floor
// (f32 T = 128, 16-bit T = 128, 256, 512, bf16 backward T = 128), the table's row first in each
// tile size, then other lane counts, vectors per lane, block sizes and occupancy targets.
template <>
struct CandidateTable<4> {
  using K = ascan::detail::KernelKind;
  static constexpr ascan::detail::ScanPolicy kPolicies[] = {
      {128, K::kWarp, 128, 32, 4, 16}, {128, K::kWarp, 128, 32, 4, 8},
      {128, K::kWarp, 256, 32, 4, 8},  {128, K::kWarp, 128, 16, 8, 16},
      {128, K::kWarp, 128, 16, 8, 8},  {128, K::kWarp, 128, 16, 8, 1},
      {128, K::kWarp, 128, 8, 16, 8},  {128, K::kBlock, 32, 32, 4, 32},
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};
template <>
struct CandidateTable<2> {
  using K = ascan::detail::KernelKind;
  static constexpr ascan::detail::ScanPolicy kPolicies[] = {
      {128, K::kWarp, 128, 8, 16},         {128, K::kWarp, 128, 8, 16, 8},
      {128, K::kWarp, 128, 16, 8, 16},     {128, K::kWarp, 128, 16, 8, 8},
      {128, K::kWarp, 128, 16, 8, 1},      {128, K::kWarp, 256, 16, 8, 8},
      {256, K::kWarp, 128, 16, 16},        {256, K::kWarp, 128, 16, 16, 8},
      {256, K::kWarp, 128, 32, 8, 16},     {256, K::kWarp, 128, 32, 8, 8},
      {256, K::kWarp, 256, 32, 8, 8},      {256, K::kBlock, 32, 32, 8, 32},
      {512, K::kBlock, 64, 64, 8, 32},     {512, K::kBlock, 64, 64, 8, 16},
      {512, K::kWarp, 128, 32, 16, 8},     {512, K::kWarp, 128, 32, 16, 1},
      {512, K::kBlock, 32, 32, 16, 16},    {512, K::kWarp, 256, 32, 16, 4},
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

/// Candidates for sequences longer than the one-tile rows (--ascan_tune on shapes of at least 256
/// sequences of more than 4096 elements, e.g. --ascan_shapes=1x1024x100000): the tile walk
/// (kChunked) in other block sizes, tile lengths and occupancy targets. Where the sequences make
/// only a few waves of one-block-per-sequence blocks (the sweep's cells of 256 to 4096 sequences of
/// 3000 to 10^5 elements, 0.75-0.88 of the copy), how many blocks a multiprocessor holds decides
/// the waves and the last wave's fill: these rows measure it. The first rows are the library's own
/// tile walks (f32: 256 x 4 at 4 blocks, forward from 4097 to 8192 elements; 128 x 8 at 4, forward
/// up to 4096; 256 x 8 at 3, forward beyond 8192 and backward beyond 1024; 16-bit: 256 x 16 at 3,
/// forward beyond 8192 where the sequences do not fill the GPU; 128 x 32 at 4, forward up to 8192
/// and beyond where they do; 128 x 8 at 8, backward beyond 2048 and forward from 2049 to 4096).
/// The same table serves both directions.
template <int kBytes>
struct LongCandidateTable {
  using K = ascan::detail::KernelKind;
  static constexpr int V = 16 / kBytes;  // elements per 16-byte vector
  static constexpr int64_t kAny = INT64_MAX;
  static constexpr ascan::detail::ScanPolicy kPolicies[] = {
      {kAny, K::kChunked, 256, 256, V, 4},     {kAny, K::kChunked, 128, 128, 2 * V, 4},
      {kAny, K::kChunked, 256, 256, 2 * V, 3}, {kAny, K::kChunked, 128, 128, V, 8},
      {kAny, K::kChunked, 64, 64, V, 16},      {kAny, K::kChunked, 64, 64, 2 * V, 8},
      {kAny, K::kChunked, 512, 512, V, 2},
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};
template <>
struct LongCandidateTable<2> {
  using K = ascan::detail::KernelKind;
  static constexpr int64_t kAny = INT64_MAX;
  static constexpr ascan::detail::ScanPolicy kPolicies[] = {
      {kAny, K::kChunked, 256, 256, 16, 3}, {kAny, K::kChunked, 128, 128, 32, 4},
      {kAny, K::kChunked, 128, 128, 8, 8},  {kAny, K::kChunked, 128, 128, 16, 6},
      {kAny, K::kChunked, 64, 64, 8, 16},   {kAny, K::kChunked, 64, 64, 16, 8},
      {kAny, K::kChunked, 256, 256, 8, 6},
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};
/// Sequences longer than this take the long candidates (the tables' one-tile rows end at 2048
/// elements and their tile walks of one or two tiles at 4096 or 8192), in calls of at least
/// kLongCandidateSequences sequences.
constexpr int64_t kLongCandidateLength = 4096;
constexpr int64_t kLongCandidateSequences = 256;

/// Row `row` of LongCandidateTable forced: the forward scan's or the backward pass's tile walk
/// launched directly on the time-contiguous case of `shape`, in forward order on the vector path
/// (the only variant instantiated).
template <class T>
std::string measure_long_row(const Extent& shape, bool backward, int row, double* ms) {
  return with_direction<T>(backward, [&](auto dir) -> std::string {
    using Dir = decltype(dir);
    using Table = LongCandidateTable<sizeof(T)>;
    using Problem = typename Dir::template Problem<T, false, true>;
    const typename Dir::Args args = Dir::args(shape, false, false);
    if (const ascan::Status st = ascan::can_implement(args); !st.ok()) return st.message;
    bool vector = false;
    const auto params = Dir::params(args, vector);
    if (!vector) return "not on the 16-byte vector grid: the long candidates run the vector path";
    return time_median(
        [&]() -> std::string {
          return cuda_check(
              ascan::detail::launch_selected<Problem, Table>(
                  row, params, g_gpu.stream, std::make_integer_sequence<int, Table::kCount>{}),
              "launch_selected");
        },
        ms);
  });
}

/// Row `row` of CandidateTable forced: the forward scan's or the backward pass's kernel launched
/// directly on the time-contiguous case of `shape`.
template <class T>
std::string measure_row(const Extent& shape, bool reverse, bool backward, int row, double* ms) {
  return with_direction<T>(backward, [&](auto dir) -> std::string {
    using Dir = decltype(dir);
    const typename Dir::Args args = Dir::args(shape, reverse, false);
    if (const ascan::Status st = ascan::can_implement(args); !st.ok()) return st.message;
    bool vector = false;
    const auto params = Dir::params(args, vector);
    return time_median(
        [&]() -> std::string {
          return cuda_check(
              ascan::detail::launch_scan_row<Dir::template Problem, T, CandidateTable<sizeof(T)>>(
                  row, reverse, vector, params, g_gpu.stream),
              "launch_scan_row");
        },
        ms);
  });
}

// The multi-block sweeps (--ascan_tune_multi). Path rows force one path of the library's
// dispatch (default tables); lookback rows run one candidate tile shape of the multi-block kernel
// (forward direction, vector path) to choose LookbackTuning.
using ascan::detail::LookbackHold;
template <class T, int kThreads, int kVectors, int kMinBlocks, LookbackHold kHold,
          int kRegisterVectors = 0, int kUnroll = 0, int kPacePercent = 0>
struct LookbackCandidate {
  static constexpr int kV = 16 / int(sizeof(T));
  static constexpr ascan::detail::LookbackPolicy kPolicy{
      kThreads,   (kVectors + kRegisterVectors) * kV,
      kMinBlocks, 4,
      kHold,      kRegisterVectors* kV,
      kUnroll,    kPacePercent / 100.0};
  static std::string name() {
    return "multi_t" + std::to_string(kThreads) + "_v" + std::to_string(kVectors) +
           (kUnroll > 0 ? "_u" + std::to_string(kUnroll) : std::string()) +
           (kRegisterVectors > 0 ? "_r" + std::to_string(kRegisterVectors) : std::string()) + "_m" +
           std::to_string(kMinBlocks) +
           (kPacePercent > 0 ? "_p" + std::to_string(kPacePercent) : std::string()) +
           (kHold == LookbackHold::kReload   ? "_reload"
            : kHold == LookbackHold::kShared ? "_shared"
                                             : "_staged");
  }
};
constexpr LookbackHold kStaged = LookbackHold::kStaged;  // the holds of the current candidates
// Staged candidates: v = vectors per thread staged in shared memory, r = vectors per thread held
// in registers, u = staged vectors per loop iteration (none: fully unrolled), p = the first
// wave's pace in percent of the device's peak memory bandwidth (none: not paced).

// The tiny tiles (LookbackTuning::kTinyPolicy: 64 x 3) and their neighbours, in either direction
// (registered on the few-long shapes only).
template <class T>
using TinyCandidates =
    std::tuple<LookbackCandidate<T, 64, 1, 8, kStaged>, LookbackCandidate<T, 64, 3, 8, kStaged>,
               LookbackCandidate<T, 64, 5, 8, kStaged>, LookbackCandidate<T, 128, 1, 8, kStaged>,
               LookbackCandidate<T, 128, 3, 8, kStaged>>;
template <class T>
using ForwardCandidates =
    std::tuple<LookbackCandidate<T, 64, 17, 6, kStaged, 8>,
               LookbackCandidate<T, 64, 17, 6, kStaged, 8, 0, 80>,
               LookbackCandidate<T, 64, 13, 8, kStaged, 6, 2>,
               LookbackCandidate<T, 64, 13, 8, kStaged, 6, 2, 70>,
               LookbackCandidate<T, 64, 13, 8, kStaged, 6, 2, 80>,
               LookbackCandidate<T, 64, 13, 8, kStaged, 6, 2, 90>,
               LookbackCandidate<T, 64, 13, 8, kStaged, 4, 2, 80>,
               LookbackCandidate<T, 64, 11, 8, kStaged, 4, 2, 80>,
               LookbackCandidate<T, 64, 9, 8, kStaged, 4, 2, 80>,
               LookbackCandidate<T, 64, 15, 7, kStaged, 6, 2, 80>>;
// Backward: the main tile paced or not, and the register kernel (LookbackFallbackTuning's
// backward policy: 256 x 2 vectors reloaded, 4 blocks; 16-bit's kShortPolicy, which no backward
// call takes).
template <class T>
using BackwardCandidates = std::tuple<LookbackCandidate<T, 64, 9, 8, kStaged>,
                                      LookbackCandidate<T, 64, 9, 8, kStaged, 0, 0, 70>,
                                      LookbackCandidate<T, 64, 9, 8, kStaged, 0, 0, 80>,
                                      LookbackCandidate<T, 64, 9, 8, kStaged, 0, 0, 90>,
                                      LookbackCandidate<T, 256, 2, 4, LookbackHold::kReload>>;

/// One path of the library's dispatch forced (row 0: one block per sequence, 1: multi-block,
/// 2: the flat kernel), forward or backward, default tables.
template <class T>
std::string measure_path(const Extent& shape, bool backward, int row, double* ms) {
  using ascan::detail::Path;
  const Path path = row == 0 ? Path::kOneBlock : row == 1 ? Path::kMultiBlock : Path::kFlat;
  return with_direction<T>(backward, [&](auto dir) {
    using Dir = decltype(dir);
    const typename Dir::Args args = Dir::args(shape, false, false);
    return measure_two_phase(
        Dir::kWith, [&](void* w, size_t& b) { return Dir::with(args, w, b, path); }, ms);
  });
}

/// What a lookback row measures: measure_lookback of one candidate.
using LookbackMeasure = std::string (*)(const Extent&, bool, double*);

/// The multi-block kernel with the tile shape of `Candidate` launched directly (forward order,
/// vector path) in the direction it was registered for (kBackward).
template <class T, class Candidate, bool kBackward>
std::string measure_lookback(const Extent& shape, bool backward, double* ms) {
  using C = ascan::compute_t<T>;
  constexpr int kVec = 16 / int(sizeof(T));
  ascan::detail::Plan plan;
  const ascan::Status st = ascan::detail::make_plan<C, kVec, Candidate>(
      shape.sequences(), shape.length, ascan::detail::Path::kMultiBlock, true, plan);
  if (!st.ok()) return st.message;
  if (std::string err = ensure_scratch(plan.bytes); !err.empty()) return err;
  if (backward != kBackward) return "candidate registered for the other direction";
  using Dir = Direction<T, kBackward>;
  using Problem = typename Dir::template Problem<T, false, true>;
  bool vector = false;
  const auto params = Dir::params(Dir::args(shape, false, false), vector);
  return time_median(
      [&] {
        return cuda_check(ascan::detail::launch_lookback<Problem, Candidate,
                                                         ascan::detail::FallbackOf<Candidate>>(
                              params, g_ws.scratch, g_gpu.stream),
                          "launch_lookback");
      },
      ms);
}

const char* kind_name(ascan::detail::KernelKind k) {
  return k == ascan::detail::KernelKind::kWarp    ? "warp"
         : k == ascan::detail::KernelKind::kBlock ? "block"
                                                  : "chunked";
}

// Tuning rows: every candidate kernel that can scan this shape in one launch.
template <class T>
void register_tuning(const GridRow& grid_row) {
  using Table = CandidateTable<sizeof(T)>;
  const std::string case_name = grid_case_name<T>(grid_row);  // no states rows here
  for (int r = 0; r < Table::kCount; ++r) {
    const auto& policy = Table::kPolicies[r];
    const bool warp_one_tile =
        policy.kind == ascan::detail::KernelKind::kWarp && policy.max_span <= policy.tile();
    const bool one_tile = policy.kind == ascan::detail::KernelKind::kBlock || warp_one_tile;
    if (one_tile && grid_row.shape.length > policy.tile()) continue;
    const std::string name = "tune/" + case_name + "/" + kind_name(policy.kind) + "_t" +
                             std::to_string(policy.threads) + "_l" + std::to_string(policy.lanes) +
                             "_i" + std::to_string(policy.items) + (warp_one_tile ? "_one" : "") +
                             "_m" + std::to_string(policy.min_blocks);
    const Extent shape = grid_row.shape;
    const bool reverse = grid_row.reverse;
    const bool backward = grid_row.backward;
    register_row(name, [=](benchmark::State& st) {
      run_row<T>(st, Op::kTune, case_name, shape, reverse, backward, false,
                 [&](double* ms) { return measure_row<T>(shape, reverse, backward, r, ms); });
    });
  }
  // Long sequences: the tile walk's candidates (forward order only; f32 and bf16), where the
  // library takes one block per sequence or near it (not the grid's few-long rows, which take
  // the multi-block path: one block walking 2^28 elements takes a fraction of a second).
  if constexpr (!std::is_same_v<T, __half>) {
    using Long = LongCandidateTable<sizeof(T)>;
    if (grid_row.shape.length <= kLongCandidateLength || grid_row.reverse ||
        grid_row.shape.sequences() < kLongCandidateSequences)
      return;
    for (int r = 0; r < Long::kCount; ++r) {
      const auto& policy = Long::kPolicies[r];
      const std::string name = "tune/" + case_name + "/long_t" + std::to_string(policy.threads) +
                               "_i" + std::to_string(policy.items) + "_m" +
                               std::to_string(policy.min_blocks);
      const Extent shape = grid_row.shape;
      const bool backward = grid_row.backward;
      register_row(name, [=](benchmark::State& st) {
        run_row<T>(st, Op::kTune, case_name, shape, false, backward, false,
                   [&](double* ms) { return measure_long_row<T>(shape, backward, r, ms); });
      });
    }
  }
}

// Multi-block sweep rows: both paths (`paths`) on the crossover, short-tile and few-long shapes;
// every lookback candidate of the direction's list (`candidates`) on the short-tile and few-long
// shapes and the long rows of the standard grid, and the tiny candidates (`tiny`) beside them
// on the short-tile and few-long shapes, where calls take the tiny tiles.
template <class T>
void register_multi_tuning(const GridRow& row, bool paths, bool candidates, bool tiny) {
  if constexpr (std::is_same_v<T, __half>) {
    return;  // the sweep covers float and bfloat16
  } else {
    const std::string case_name = std::string(DtypeInfo<T>::kName) + "/" + shape_name(row.shape) +
                                  (row.backward ? "/bwd" : "");
    const Extent shape = row.shape;
    const bool backward = row.backward;
    auto reg = [&](const std::string& name, Op op, int r, LookbackMeasure m) {
      register_row(name, [=](benchmark::State& st) {
        run_row<T>(st, op, case_name, shape, false, backward, false, [&](double* ms) {
          return op == Op::kPath ? measure_path<T>(shape, backward, r, ms) : m(shape, backward, ms);
        });
      });
    };
    if (paths) {
      reg("path/" + case_name + "/one_block", Op::kPath, 0, nullptr);
      reg("path/" + case_name + "/multi_block", Op::kPath, 1, nullptr);
    }
    if (!candidates) return;
    auto each = [&](auto candidates, auto direction) {
      std::apply(
          [&](auto... c) {
            (reg("tune/" + case_name + "/" + decltype(c)::name(), Op::kLookback, -1,
                 &measure_lookback<T, decltype(c), decltype(direction)::value>),
             ...);
          },
          candidates);
    };
    if (backward) {
      each(BackwardCandidates<T>{}, std::true_type{});
      if (tiny) each(TinyCandidates<T>{}, std::true_type{});
    } else {
      each(ForwardCandidates<T>{}, std::false_type{});
      if (tiny) each(TinyCandidates<T>{}, std::false_type{});
    }
  }
}

}  // namespace
