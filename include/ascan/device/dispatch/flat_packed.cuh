// ascan/device/dispatch/flat_packed.cuh: packed sequences along time, (C, total) with offsets,
// on the flat tiles (device/agent/flat_tiles.cuh).
//
// Two modes. With a workspace, windows: each channel's row is cut into windows of one tile
// whatever the sequences are (PackedWindows), one block each, joined along the row by a decoupled
// look-back (flat_lookback_kernel); the work of a block does not depend on the lengths, so one
// long sequence among short ones spreads over as many blocks as any other. Without one (or with
// Path::kFlat), whole sequences: a block takes the sequences of one channel that start in its
// window (PackedSequences, flat_kernel), nothing crosses from one block to another, and a
// sequence longer than a window keeps its block busy for all of it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../agent/flat_tiles.cuh"
#include "../status.cuh"
#include "dispatch.cuh"
#include "flat_kernels.cuh"
#include "row_kernels.cuh"
#include "tuning.cuh"

namespace ascan {
namespace detail {

#if defined(__CUDACC__)

/// Flat look-back kernel: block `range` scans window range / channels (in scan order) of channel
/// range % channels (PackedWindows), one tile of kItems elements a thread held in registers from
/// its loads to its stores. It folds the window's pairs into one Segment and publishes it: as the
/// state after the window where the window holds a sequence start in scan order (nothing before
/// it matters for that state), as its aggregate otherwise. Then, unless its first element starts
/// a sequence (window 0 always does), one warp finds the state before the window from the windows
/// before it (row_look_back: the nearest published state and the aggregates after it, folded in
/// order with the same fmas as the sequential definition, so the same bits whatever the timing),
/// and a window without a start publishes its state (the same fma). Last the block scans the
/// window from that state and stores it.
template <class Problem, int kThreads, int kItems, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, launch_min_blocks(kThreads, kMinBlocks))
    flat_lookback_kernel(const typename Problem::Params p,
                         const RowStates<typename Problem::C> states, const int64_t ranges) {
  using C = typename Problem::C;
  constexpr int kVec = Problem::kVec;
  using Walk = FlatWalk<kThreads, kItems, kVec, Problem::kReverse>;
  constexpr int kRuns = Walk::kRuns;
  using Scan = SegmentBlockScan<C, kThreads, Problem::kReverse, kRuns>;
  __shared__ typename Scan::TempStorage storage;
  __shared__ C carry_in;
  Scan scan(storage);
  const int rank = static_cast<int>(threadIdx.x);
  const uint64_t tag = states.tag << 2;
  const FastDivisor none = FastDivisor::of(1);  // packed marks come from the offsets

  for (int64_t range = blockIdx.x; range < ranges; range += gridDim.x) {
    const FlatRange r = Problem::range(p, range, 0);
    const Problem problem = Problem::at(p, r);
    problem.template empties<kThreads>(p, rank);
    const Walk w(r, rank);  // windows lie on the grid: one tile, none where the window is empty
    typename Problem::Work work[kRuns];
    typename Problem::Marks marks[kRuns];
    Segment<C> aggregate[kRuns];
    Segment<C> total = segment_identity<C>();
    if (w.tiles > 0) {  // the same in every thread
      typename Problem::Loaded loaded[kRuns];
#pragma unroll
      for (int j = 0; j < kRuns; ++j) problem.load(loaded[j], w.position(0, j));
#pragma unroll
      for (int j = 0; j < kRuns; ++j) {
        const int32_t rel = w.relative(0, j);
        marks[j] = problem.marks(rel, w.n, none);
        problem.convert(loaded[j], w.position(0, j), marks[j], p, work[j]);
        // elements outside the window (its lead-in, or past its end) fold as the identity
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const bool inside = rel + i >= 0 && rel + i < w.n;
          work[j].a[i] = inside ? work[j].a[i] : C(1);
          work[j].b[i] = inside ? work[j].b[i] : C(0);
        }
        aggregate[j] = segment_reduce<Problem::kReverse>(work[j].a, work[j].b, marks[j].first);
      }
      total = scan.reduce(aggregate);
    }
    // the window's place in its row in scan order (as PackedWindows::range), its row's records
    const int64_t q = range / p.channels;
    RowRecord<C>* const row = states.records + r.channel * p.windows;
    RowRecord<C>* const record = row + q;
    // total and r.opens are the same in every thread
    if (rank == 0) {
      if (total.cut)
        row_publish_state(record, total.b, tag);
      else
        row_publish_aggregate(record, total.a, total.b, tag);
    }
    C carry = C(0);
    if (!r.opens) {  // the window's first pairs continue a sequence from the windows before
      if (rank < kWarpThreads) {
        const C x = row_look_back<C, kWarpThreads, 1, 4 * kWarpThreads>(row, q, 0, rank, tag);
        if (rank == 0) {
          carry_in = x;
          if (!total.cut) row_publish_state(record, fma(total.a, x, total.b), tag);
        }
      }
      __syncthreads();
      carry = carry_in;
    }
    if (w.tiles > 0) {
      C incoming[kRuns];
      scan.scan_state(aggregate, incoming, carry);
#pragma unroll
      for (int j = 0; j < kRuns; ++j) {
        segment_scan<Problem::kReverse>(incoming[j], work[j].a, work[j].b, marks[j].first);
        problem.store(work[j], w.position(0, j), marks[j], p);
      }
    }
  }
}

/// The windows of a packed call under policy F, the same count for every channel: one tile of
/// F.window_items elements a thread each, on the vector grid from the row's first element (so a
/// row's last window may be empty).
template <int kVec>
int64_t packed_windows(int64_t length, const FlatPolicy& F) {
  return ceil_div(length + kVec - 1, int64_t(F.threads) * F.window_items);
}

/// Launches the look-back kernel of packed `Problem` (FlatWindowForward, FlatWindowBackward)
/// with policy F = Flat::kPolicy: one block per window, records in `workspace`.
template <class Problem, class Flat>
cudaError_t launch_flat_windows(typename Problem::Params p, void* workspace, cudaStream_t stream) {
  constexpr FlatPolicy F = Flat::kPolicy;
  constexpr int kMinBlocks = Problem::kVec > 1 ? F.window_min_blocks : 1;
  p.window = int64_t(F.threads) * F.window_items;
  p.windows = packed_windows<Problem::kVec>(p.length, F);
  const int64_t ranges = p.channels * p.windows;  // the host keeps it under 2^31
  const auto states = RowStates<typename Problem::C>::carve(workspace, call_tag());
  return launch_kernel(&flat_lookback_kernel<Problem, F.threads, F.window_items, kMinBlocks>,
                       ranges, F.threads, 0, stream, p, states, ranges);
}

/// Runs a validated, non-empty packed (C, total) call: windows joined by a look-back
/// (`Windows<T, reverse, vector>`) where the call has a workspace and `path` is kAuto, whole
/// sequences (`Whole<T, reverse, vector>`) otherwise (no workspace, or Path::kFlat).
template <template <class, bool, bool> class Whole, template <class, bool, bool> class Windows,
          class T, class Flat>
Status run_flat_packed(const typename Whole<T, false, false>::Params& p, bool reverse, bool vector,
                       Path path, const Scratch& scratch, cudaStream_t stream) {
  using C = compute_t<T>;
  constexpr FlatPolicy F = Flat::kPolicy;
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // the larger count: vector or scalar
  const double ranges = double(p.channels) * double(packed_windows<kVec>(p.length, F));
  const bool windowed =
      scratch.mode != Scratch::kNone && path == Path::kAuto && ranges <= double(kMaxTiles);
  const size_t bytes = windowed ? RowStates<C>::bytes(int64_t(ranges), 1) : 0;
  int sms = 0;
  if (Status st = current_multiprocessors(sms); !st.ok()) return st;
  return with_scratch(scratch, bytes, stream, [&](void* workspace) {
    if (windowed) {
      if (reverse)
        return vector ? launch_flat_windows<Windows<T, true, true>, Flat>(p, workspace, stream)
                      : launch_flat_windows<Windows<T, true, false>, Flat>(p, workspace, stream);
      return vector ? launch_flat_windows<Windows<T, false, true>, Flat>(p, workspace, stream)
                    : launch_flat_windows<Windows<T, false, false>, Flat>(p, workspace, stream);
    }
    if (reverse)
      return vector ? launch_flat_packed<Whole<T, true, true>, Flat>(p, sms, stream)
                    : launch_flat_packed<Whole<T, true, false>, Flat>(p, sms, stream);
    return vector ? launch_flat_packed<Whole<T, false, true>, Flat>(p, sms, stream)
                  : launch_flat_packed<Whole<T, false, false>, Flat>(p, sms, stream);
  });
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
