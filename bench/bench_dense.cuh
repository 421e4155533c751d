// bench/bench_dense.cuh: the --ascan_tune_rows rows. Channel-last calls on the 16-byte vector
// grid without states (the layout/ cases and the packed channel-last varlen/ cases) run
// dense_row_kernel in the block shape dense_tile picks (dispatch/row_dispatch.cuh). These rows run
// that kernel in other block shapes (threads x rows a thread, 128-byte slabs of channels) on the
// same calls, forward order, each paired with its copy and checked as every row is:
//
//   layout/tune/<dtype>/channel_last/<shape>[/bwd]/t<threads>_r<rows>
//   varlen/tune/<dtype>/channel_last/<batch>[/bwd]/t<threads>_r<rows>
//
// beside the library's own row of the same call (layout/scan/..., varlen/scan/...), to choose
// dense_tile's shapes and cut-offs from one run over every case. Included by scan_bench.cu only
// (its anonymous namespace).
#pragma once

#include "bench_harness.cuh"
#include "bench_layouts.cuh"
#include "bench_rows.cuh"

#include <ascan/ascan.cuh>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

namespace {

/// A dense block shape: kThreads threads, kRows rows a thread, kLanes 16-byte lanes along channels
/// (kThreads / kLanes row groups, so kThreads / kLanes * kRows rows a tile, and slabs of kLanes
/// * 16 bytes of channels: the library's 8 lanes, 128 bytes; 4 lanes halve the slab, doubling
/// the chains and the look-back lanes a channel). Named t<threads>_r<rows>, _l<lanes> where not 8.
template <int kThreads, int kRows, int kLanes = ascan::detail::kDenseLanes>
struct DenseCandidate {
  template <int kBytes>
  static constexpr bool fits = true;  // every element size
  static constexpr int threads = kThreads;
  static constexpr int rows = kRows;
  static constexpr int lanes = kLanes;
  static std::string name() {
    return "t" + std::to_string(kThreads) + "_r" + std::to_string(kRows) +
           (kLanes == ascan::detail::kDenseLanes ? "" : "_l" + std::to_string(kLanes));
  }
};

// The candidates: the library's shapes (DenseTile: 256 x 8 short forward, 256 x 12 tall, 128 x 8
// narrow, 128 x 16 narrow tall (64 KiB staged, three blocks a multiprocessor; 128 x 12 before the
// runs of 6f3021d, kept here); backward 256 x 4 and x 5 short, 256 x 8 tall, 128 x 8 and x 12
// narrow), then other shapes: forward 512 x 8 (128 KiB, one block; eight look-back lanes a channel
// in 16-bit types, where 256 threads have four), backward 128 x 10 and 256 x 6; and, for the short
// rows, where a call of T = 128 is one wave of one-tile chains that load, scan and store with
// nothing to overlap, 128 x 4 forward and backward (tiles of 64 rows: twice the blocks, each done
// sooner) and 256 x 4 forward (128 rows, as 128 x 8, in twice the threads). Each stays within the
// 227 KiB a block may have on sm_90.
//
// Then the same block shapes in 4 lanes (64-byte slabs): twice the chains, and twice the
// look-back lanes a channel, for the calls whose chains are few (the packed batches: one chain a
// slab; 16-bit types, whose 128-byte slabs give a channel 4 look-back lanes in 256 threads).
// Last, tiles of 128 rows in narrower slabs, for the short rows: a 16-bit (8, 128, 1536) call is
// 192 one-tile chains in 128-byte slabs, two blocks on some multiprocessors and one on the rest;
// 128 x 4 and 64 x 8 in 4 lanes (64-byte slabs) make it 384 blocks, 64 x 4 and 128 x 2 in 2 lanes
// (32 bytes, a DRAM sector) 768. On an H100 none beat the library's row by more than the runs'
// spread (bench/RESULTS.md, "128-row tiles in narrower slabs for the short rows"). Last of all,
// tiles of one warp, 32 x 8 in 2 lanes and 32 x 16 in 4 (128 rows of 32 or 64 bytes): each
// block's barriers then wait on no other warp, so one warp's stores start as soon as its own
// loads are in, where in the wider blocks every warp of a tile waits for the tile's last load.
using ForwardDense =
    std::tuple<DenseCandidate<256, 8>, DenseCandidate<256, 12>, DenseCandidate<128, 8>,
               DenseCandidate<128, 12>, DenseCandidate<128, 16>, DenseCandidate<512, 8>,
               DenseCandidate<128, 4>, DenseCandidate<256, 4>, DenseCandidate<256, 8, 4>,
               DenseCandidate<256, 4, 4>, DenseCandidate<128, 8, 4>, DenseCandidate<128, 16, 4>,
               DenseCandidate<128, 4, 4>, DenseCandidate<64, 8, 4>, DenseCandidate<64, 4, 2>,
               DenseCandidate<128, 2, 2>, DenseCandidate<32, 8, 2>, DenseCandidate<32, 16, 4>>;
using BackwardDense =
    std::tuple<DenseCandidate<256, 4>, DenseCandidate<256, 5>, DenseCandidate<256, 8>,
               DenseCandidate<128, 8>, DenseCandidate<128, 12>, DenseCandidate<128, 10>,
               DenseCandidate<256, 6>, DenseCandidate<128, 4>, DenseCandidate<256, 5, 4>,
               DenseCandidate<256, 8, 4>, DenseCandidate<128, 8, 4>, DenseCandidate<128, 12, 4>,
               DenseCandidate<128, 4, 4>, DenseCandidate<64, 8, 4>, DenseCandidate<64, 4, 2>,
               DenseCandidate<32, 8, 2>, DenseCandidate<32, 16, 4>>;

/// Candidate `Candidate`'s blocks on channel-last case `c` (dense, or packed: one batch of every
/// row), launched as run_rows launches the library's: the call's row parameters
/// (make_row_params), the dense kernel's view of them (dense_params), its workspace
/// (dense_block_scratch_bytes); the backward pass in descending rows (it runs against the forward
/// order, which these rows keep).
template <class T, bool kBackward, class Candidate>
std::string measure_dense(const LayoutCase& c, double* ms) {
  using Dir = Direction<T, kBackward>;
  namespace d = ascan::detail;
  constexpr int kThreads = Candidate::threads, kRows = Candidate::rows, kLanes = Candidate::lanes;
  const typename Dir::Args args = case_args<Dir>(c);
  if (const ascan::Status st = ascan::can_implement(args); !st.ok()) return st.message;
  if (c.layout != Layout::kChannelLast) return "not a channel-last call";
  bool vector = false;
  const d::RowParams<T> p = d::make_row_params(args, vector);
  if (!vector) return "not on the 16-byte vector grid: the dense kernel takes vector calls";
  const d::DenseRowParams<T> dp = d::dense_params<T, kBackward>(p);
  size_t bytes = 0;
  if (!d::dense_block_scratch_bytes<T, kBackward, kThreads, kRows, kLanes>(
          dp.batch, dp.length, dp.channels, bool(c.offsets), bytes))
    return "too many tiles for one grid";
  if (std::string err = ensure_scratch(bytes); !err.empty()) return err;
  const auto launch = [&](auto packed) {
    return d::launch_dense_rows<T, kBackward, kBackward, kThreads, kRows, kLanes,
                                decltype(packed)::value>(dp, g_ws.scratch, g_gpu.stream);
  };
  return time_median(
      [&] {
        return cuda_check(c.offsets ? launch(std::true_type{}) : launch(std::false_type{}),
                          "launch_dense_rows");
      },
      ms);
}

/// Every --ascan_tune_rows row of elements T: the channel-last layout cases, then the packed
/// channel-last cases, forward then backward, each with its copy row, the library's row and
/// every candidate's row.
template <class T>
void register_dense_tuning() {
  const auto measure = [](const LayoutCase& c) {
    return [c](auto candidate, auto direction, double* ms) {
      return measure_dense<T, decltype(direction)::value, decltype(candidate)>(c, ms);
    };
  };
  for (const LayoutCase& c : layout_cases())
    for (bool backward : {false, true})
      register_candidates<T, ForwardDense, BackwardDense>("layout", c, backward, measure(c));
  for (const LayoutCase& c : varlen_cases(sizeof(T)))
    if (c.layout == Layout::kChannelLast)
      for (bool backward : {false, true})
        register_candidates<T, ForwardDense, BackwardDense>("varlen", c, backward, measure(c));
}

}  // namespace
