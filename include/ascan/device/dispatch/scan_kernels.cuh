// ascan/device/dispatch/scan_kernels.cuh: the kernels, for any Problem (the forward scan,
// device/agent/forward_problem.cuh; the backward pass, device/agent/backward_problem.cuh).
//
// One block (or lane group) per sequence, no scratch memory:
//   warp_kernel      kThreads / kLanes sequences per block, one lane group each; shuffles only.
//   block_kernel     one sequence per block, in one tile (warps meet in shared memory) or walked
//                    tile by tile with a carried state (the chunked kernel).
// Each walks its sequences with a grid-stride loop, so any number of sequences fits a 1-D grid.
//
// Many blocks per sequence, for few long sequences (scratch memory for the tile states):
//   lookback_kernel  every tile of every sequence scanned by one block, tiles of a sequence
//                    joined by decoupled look-back (device/agent/tile_lookback.cuh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "../../block/block_scan.cuh"
#include "../../warp/warp_scan.cuh"
#include "../agent/backward_problem.cuh"
#include "../agent/forward_problem.cuh"
#include "../agent/tile_lookback.cuh"
#include "tuning.cuh"

namespace ascan {
namespace detail {

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Warp-shuffle kernel: kThreads / kLanes sequences per block, one lane group each. `kOneTile`:
/// the dispatch guarantees that every sequence fits in one tile (no loop, no prefetch).
/// `kMinBlocks`: the blocks per multiprocessor the register budget must allow (the occupancy
/// target of the policy row).
template <class Problem, int kThreads, int kLanes, int kItems, bool kOneTile, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    warp_kernel(const typename Problem::Params p) {
  constexpr int kGroups = kThreads / kLanes;
  using Group = WarpScan<typename Problem::C, kLanes, Problem::kReverse>;
  Group group;
  const int rank = Group::rank();
  const int64_t units = ceil_div(p.sequences, kGroups);
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {  // groups stay in step
    const int64_t seq = unit * kGroups + threadIdx.x / kLanes;
    scan_sequence<Problem, kLanes, kItems, kOneTile>(p, seq, seq < p.sequences, rank, group);
  }
}

/// Block kernels: one sequence per block, in one tile (`kOneTile`, the shared-memory block
/// kernel) or tile by tile (the chunked kernel).
template <class Problem, int kThreads, int kItems, bool kOneTile, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    block_kernel(const typename Problem::Params p) {
  using Group = BlockScan<typename Problem::C, kThreads, Problem::kReverse, kItems / Problem::kVec>;
  __shared__ typename Group::TempStorage storage;
  Group group(storage);
  for (int64_t seq = blockIdx.x; seq < p.sequences; seq += gridDim.x)
    scan_sequence<Problem, kThreads, kItems, kOneTile>(p, seq, true, threadIdx.x, group);
}

/// Multi-block kernel: block b scans tile k = b / S (in scan order) of sequence b % S, S the
/// number of sequences; its record in the workspace's tile states is seq * chunks + k, and the
/// sequence's `groups` groups of tiles start at group seq * groups. Per tile: load, scan the
/// block's pairs, look back for the state before the tile (warp 0; it publishes the tile's
/// aggregate and, at the end of a group, the group's), and store. The last tile of a sequence
/// hands the final carry to Problem::finish.
///
/// A block waits only on lower-numbered blocks, which the hardware starts first (blocks are
/// dispatched in index order; CUB's single-pass scan rests on the same fact), so the look-back
/// always makes progress. Taking the next tile before looking back for the current one (to keep
/// loads in flight) made every tile's aggregate wait on an earlier look-back and measured 0.15-
/// 0.2 of the copy on the H200; it was dropped.
///
/// The look-back takes longer than the tile's loads (bench/RESULTS.md has the phase profile), so
/// throughput comes from tiles resident per multiprocessor. `kHold` says where the elements wait
/// meanwhile: in registers (two 4096-element blocks per multiprocessor), reloaded from L2, or in
/// shared memory (four or five blocks).
template <class Problem, int kThreads, int kItems, int kMinBlocks, LookbackHold kHold>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    lookback_kernel(const typename Problem::Params p, const TileStates<typename Problem::C> tiles,
                    const int64_t chunks, const int64_t groups) {
  using C = typename Problem::C;
  constexpr bool kReverse = Problem::kReverse;
  constexpr int kVec = Problem::kVec;
  static_assert(kItems % kVec == 0, "items per thread are whole vectors");
  constexpr int kRuns = kItems / kVec;
  constexpr int64_t kRun = int64_t(kThreads) * kVec;
  constexpr int64_t kTile = kRun * kRuns;
  using Group = BlockScan<C, kThreads, kReverse, kRuns>;
  __shared__ typename Group::TempStorage storage;
  __shared__ C entering_slot;
  constexpr bool kShared = kHold == LookbackHold::kShared;
  __shared__ typename Problem::Loaded held[kShared ? kRuns : 1][kShared ? kThreads : 1];
  Group group(storage);
  const int rank = static_cast<int>(threadIdx.x);
  // Position-major: a tile's predecessor started S blocks earlier, so its aggregate is more
  // likely published by the time the look-back asks (measured: +0.05-0.13 with 8-128 sequences).
  const int64_t k = blockIdx.x / p.sequences;
  const int64_t seq = blockIdx.x - k * p.sequences;
  const int64_t tile = seq * chunks + k;
  const Problem problem = Problem::template at<kThreads>(p, seq, true, rank);
  const int64_t origin = (kReverse ? chunks - 1 - k : k) * kTile + int64_t(rank) * kVec;

  typename Problem::Loaded loaded[kRuns];
#pragma unroll
  for (int j = 0; j < kRuns; ++j) problem.load(loaded[j], origin + j * kRun);
  typename Problem::Work work[kRuns];
  Affine<C> aggregate[kRuns];
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    problem.convert(loaded[j], origin + j * kRun, work[j]);
    aggregate[j] = thread_reduce<kReverse>(work[j].a, work[j].b);
    if constexpr (kShared) held[j][rank] = loaded[j];
  }
  Affine<C> exclusive[kRuns], tile_map;
  group.exclusive_scan(aggregate, exclusive, tile_map);

  if (rank < kWarpThreads) {
    // Only the first two groups of tiles start from the initial carry. The last tile may write
    // the final state over it (they may alias): it does so only after every earlier tile has
    // published its aggregate, and the fence orders this tile's read before its publication.
    const bool starts = k < 2 * kTilesPerGroup;
    const C initial = starts ? problem.initial_carry(p) : C(0);
    if (starts && chunks > 1) __threadfence();
    const C entering =
        chunks == 1 ? initial : look_back(tiles, tile - k, seq * groups, k, tile_map, initial);
    if (rank == 0) {
      entering_slot = entering;
      if (k == chunks - 1) problem.finish(p, advance_state(tile_map, entering));
    }
  }
  __syncthreads();
  const C entering = entering_slot;
  if constexpr (kHold != LookbackHold::kRegisters) {  // take the elements back and convert again
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      if constexpr (kShared)
        loaded[j] = held[j][rank];
      else
        problem.reload(loaded[j], origin + j * kRun);  // from L2 by now
    }
#pragma unroll
    for (int j = 0; j < kRuns; ++j) problem.convert(loaded[j], origin + j * kRun, work[j]);
  }
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    thread_scan<kReverse>(apply(exclusive[j], entering), work[j].a, work[j].b);
    problem.store(work[j], origin + j * kRun);
  }
}

__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// Multi-block kernel, pipelined (forward scan, vector path): persistent blocks of kThreads
/// compute threads and one look-back warp take tiles by ticket (position-major, as
/// lookback_kernel). The compute threads copy each tile into shared memory with cp.async
/// kAhead tiles ahead, so loads stay in flight whatever the look-back costs; per tile they
/// reduce it and publish its aggregate (before waiting on anything), hand it to the look-back
/// warp, and scan the tile before it with the state the look-back warp found meanwhile:
///
///   compute, pass i:  copy tile i+kAhead; reduce tile i, publish; take the state entering tile
///                     i-1; hand tile i over; scan tile i-1 from shared memory and store.
///   look-back warp:   take a tile, look back for it (tile_lookback.cuh), hand its state over.
///
/// Each thread copies and reads only its own slots, so the stages need no barrier; the compute
/// threads meet at named barrier 1 (block scan), and hand tiles and states to the look-back warp
/// at barriers 2 and 3, alternately, so that neither side runs two hand-overs ahead.
///
/// Progress: a tile's aggregate is published before its block waits on any look-back, and
/// tickets go out in order. Take the lowest-numbered tile whose look-back waits: every earlier
/// tile was taken by a running block whose wait, if any, is on a later tile, so it gets
/// published. Neither co-residency nor the order in which blocks start matters.
template <class Problem, int kThreads, int kItems, int kAhead, int kMinBlocks>
__global__ void __launch_bounds__(kThreads + kWarpThreads, kMinBlocks)
    lookback_pipelined_kernel(const typename Problem::Params p,
                              const TileStates<typename Problem::C> states, const int64_t chunks,
                              const int64_t groups) {
  using C = typename Problem::C;
  using Loaded = typename Problem::Loaded;
  constexpr bool kReverse = Problem::kReverse;
  constexpr int kVec = Problem::kVec;
  static_assert(kItems % kVec == 0 && kVec > 1, "whole 16-byte vectors");
  constexpr int kRuns = kItems / kVec;
  constexpr int64_t kRun = int64_t(kThreads) * kVec;
  constexpr int64_t kTile = kRun * kRuns;
  constexpr int kStages = kAhead + 2;  // the tile scanned, the tile reduced, kAhead in flight
  constexpr int kRing = kAhead + 3;    // tickets are taken a pass before their copies go out
  constexpr int kScanBarrier = 1, kHandBarrier = 2, kStateBarrier = 3;
  constexpr int kAll = kThreads + kWarpThreads;
  using Group = BlockScan<C, kThreads, kReverse, kRuns, kScanBarrier>;
  struct Hand {
    int64_t tile;  // < 0: no more tiles
    Affine<C> map;
    C initial;
  };
  __shared__ typename Group::TempStorage storage;
  __shared__ int64_t ring[kRing];
  __shared__ Hand hand;
  __shared__ C state_slot;
  extern __shared__ __align__(16) unsigned char pipelined_stages[];
  auto* stage = reinterpret_cast<Loaded(*)[kRuns][kThreads]>(pipelined_stages);
  const int rank = static_cast<int>(threadIdx.x);
  const int64_t total = p.sequences * chunks;

  if (rank == 0) {  // in order: a block's tickets rise with its passes
#pragma unroll
    for (int r = 0; r < kAhead + 2; ++r) ring[r] = atomicAdd(states.ticket, 1u);
  }
  __syncthreads();

  if (rank >= kThreads) {  // the look-back warp
    for (;;) {
      named_barrier_sync(kHandBarrier, kAll);
      const Hand h = hand;
      if (h.tile < 0) return;
      const int64_t k = h.tile / p.sequences, seq = h.tile - k * p.sequences;
      const C entering =
          chunks == 1 ? h.initial
                      : look_back(states, seq * chunks, seq * groups, k, h.map, h.initial, false);
      if (rank == kThreads) state_slot = entering;
      named_barrier_arrive(kStateBarrier, kAll);
    }
  }

  Group group(storage);
  auto origin_of = [&](int64_t k) {
    return (kReverse ? chunks - 1 - k : k) * kTile + int64_t(rank) * kVec;
  };
  auto copy = [&](int64_t t, int s) {
    if (t < total) {
      const int64_t k = t / p.sequences, seq = t - k * p.sequences;
      const Problem problem = Problem::template at<kThreads>(p, seq, true, rank);
      const int64_t origin = origin_of(k);
#pragma unroll
      for (int j = 0; j < kRuns; ++j) problem.load_async(stage[s][j][rank], origin + j * kRun);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int r = 0; r < kAhead; ++r) copy(ring[r], r);

  int64_t previous = -1;  // the tile reduced in the last pass, to scan in this one
  Affine<C> previous_exclusive[kRuns], previous_map = affine_identity<C>();
#pragma unroll 1
  for (int64_t i = 0;; ++i) {
    const int64_t t = ring[i % kRing];
    unsigned int claimed = 0;
    if (rank == 0) claimed = atomicAdd(states.ticket, 1u);  // tile i+kAhead+2, stored at the end
    copy(ring[(i + kAhead) % kRing], static_cast<int>((i + kAhead) % kStages));
    cp_async_wait<kAhead>();  // this thread's copies of tile i have landed

    Affine<C> exclusive[kRuns], map = affine_identity<C>();
    C initial = C(0);
    if (t < total) {
      const int64_t k = t / p.sequences, seq = t - k * p.sequences;
      const Problem problem = Problem::template at<kThreads>(p, seq, true, rank);
      const int64_t origin = origin_of(k);
      Affine<C> aggregate[kRuns];
#pragma unroll
      for (int j = 0; j < kRuns; ++j) {
        typename Problem::Work work;
        problem.convert(stage[i % kStages][j][rank], origin + j * kRun, work);
        aggregate[j] = thread_reduce<kReverse>(work.a, work.b);
      }
      group.exclusive_scan(aggregate, exclusive, map);
      if (rank == 0) {
        // As lookback_kernel: the first two groups read the initial carry before publishing.
        const bool starts = k < 2 * kTilesPerGroup;
        if (starts) initial = problem.initial_carry(p);
        if (starts && chunks > 1) __threadfence();
        if (chunks > 1) publish(states.tiles + seq * chunks + k, map);
      }
    }

    C entering = C(0);
    if (previous >= 0) {
      named_barrier_sync(kStateBarrier, kAll);
      entering = state_slot;
    }
    if (rank == 0) hand = Hand{t < total ? t : -1, map, initial};
    named_barrier_arrive(kHandBarrier, kAll);

    if (previous >= 0) {
      const int64_t k = previous / p.sequences, seq = previous - k * p.sequences;
      const Problem problem = Problem::template at<kThreads>(p, seq, true, rank);
      const int64_t origin = origin_of(k);
      const int s = static_cast<int>((i + kStages - 1) % kStages);
#pragma unroll
      for (int j = 0; j < kRuns; ++j) {
        typename Problem::Work work;
        problem.convert(stage[s][j][rank], origin + j * kRun, work);
        thread_scan<kReverse>(apply(previous_exclusive[j], entering), work.a, work.b);
        problem.store(work, origin + j * kRun);
      }
      if (rank == 0 && k == chunks - 1) problem.finish(p, advance_state(previous_map, entering));
    }
    if (t >= total) return;
    previous = t;
    previous_map = map;
#pragma unroll
    for (int j = 0; j < kRuns; ++j) previous_exclusive[j] = exclusive[j];
    if (rank == 0) ring[(i + kAhead + 2) % kRing] = claimed;
  }
}

/// Launches row `kRow` of `Table` for `Problem`: grid, block and template arguments from the row.
template <class Problem, class Table, int kRow>
cudaError_t launch_row(const typename Problem::Params& p, cudaStream_t stream) {
  constexpr ScanPolicy P = Table::kPolicies[kRow];
  constexpr int64_t kMaxGrid = 2147483647;  // a grid-stride loop covers the rest
  // The occupancy target is measured on the vector path; the scalar path holds kVec times more
  // runs and keeps its registers rather than spill.
  constexpr int kMinBlocks = Problem::kVec > 1 ? P.min_blocks : 1;
  if constexpr (P.kind == KernelKind::kWarp) {
    const int64_t blocks = ceil_div(p.sequences, P.threads / P.lanes);
    warp_kernel<Problem, P.threads, P.lanes, P.items, (P.max_span <= P.tile()), kMinBlocks>
        <<<static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid), P.threads, 0, stream>>>(p);
  } else {
    block_kernel<Problem, P.threads, P.items, P.kind == KernelKind::kBlock, kMinBlocks>
        <<<static_cast<unsigned>(p.sequences < kMaxGrid ? p.sequences : kMaxGrid), P.threads, 0,
           stream>>>(p);
  }
  return cudaGetLastError();
}

template <class Problem, class Table, int... kRows>
cudaError_t launch_selected(int row, const typename Problem::Params& p, cudaStream_t stream,
                            std::integer_sequence<int, kRows...>) {
  cudaError_t e = cudaErrorInvalidValue;
  ((row == kRows ? (e = launch_row<Problem, Table, kRows>(p, stream), 0) : 0), ...);
  return e;
}

/// Launches row `row` (a run-time index) of a dispatch table for the problem
/// `Problem<T, reverse, vector>`: ScanTuning<sizeof(T)> in the library, candidate tables in the
/// tuning benchmark.
template <template <class, bool, bool> class Problem, class T, class Table = ScanTuning<sizeof(T)>>
cudaError_t launch_scan_row(int row, bool reverse, bool vector,
                            const typename Problem<T, false, false>::Params& p,
                            cudaStream_t stream) {
  using Rows = std::make_integer_sequence<int, Table::kCount>;
  if (reverse)
    return vector ? launch_selected<Problem<T, true, true>, Table>(row, p, stream, Rows{})
                  : launch_selected<Problem<T, true, false>, Table>(row, p, stream, Rows{});
  return vector ? launch_selected<Problem<T, false, true>, Table>(row, p, stream, Rows{})
                : launch_selected<Problem<T, false, false>, Table>(row, p, stream, Rows{});
}

}  // namespace detail
}  // namespace ascan
