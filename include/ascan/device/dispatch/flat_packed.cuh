// ascan/device/dispatch/flat_packed.cuh: packed sequences along time, (C, total) with offsets,
// on the flat tiles (device/agent/flat_tiles.cuh).
//
// Two modes. With a workspace, windows: each channel's row is cut into windows of one tile
// whatever the sequences are (PackedWindows), one block each, staged in shared memory, joined
// along the row by a decoupled look-back (flat_window_kernel); the work of a block does not depend on the lengths, so one
// long sequence among short ones spreads over as many blocks as any other. Without one (or with
// Path::kFlat), whole sequences: a block takes the sequences of one channel that start in its
// window (PackedSequences, flat_kernel), nothing crosses from one block to another, and a
// sequence longer than a window keeps its block busy for all of it.
#pragma once

#include <cuda_pipeline_primitives.h>
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

/// Stages this thread's vectors of window `w` (run j at w.position(0, j)) into `view`'s slots,
/// stream by stream: 16-byte asynchronous copies (cp.async: no register holds them while they
/// fly) where a vector lies inside the row [row_lo, row_hi), the elements one by one with the
/// stream's fill outside it otherwise (the row's edge vectors, and the scalar path). Thread 0
/// stages the halo. The copies are committed; the caller waits for them (__pipeline_wait_prior)
/// and holds a barrier before any thread reads another's elements.
template <class Problem, class Walk, class T, int64_t kSpan>
__device__ __forceinline__ void stage_window(const typename Problem::Params& p, const FlatRange& r,
                                             const Walk& w, T* slots, T* halo) {
  constexpr int kVec = Problem::kVec;
  constexpr int kStreams = Problem::kStagedStreams;
  const auto element = [&](const T* src, int64_t v, int s) {
    return v >= r.row_lo && v < r.row_hi ? src[v] : Problem::fill(s);
  };
#pragma unroll
  for (int s = 0; s < kStreams; ++s) {
    const T* src = Problem::stream(p, s);
#pragma unroll
    for (int j = 0; j < Walk::kRuns; ++j) {
      const int64_t v = w.position(0, j);
      T* dst = slots + s * kSpan + (v - w.origin);
      if constexpr (kVec * sizeof(T) == 16) {
        if (v >= r.row_lo && v + kVec <= r.row_hi) {
          __pipeline_memcpy_async(dst, src + v, 16);
          continue;
        }
      }
#pragma unroll
      for (int i = 0; i < kVec; ++i) dst[i] = element(src, v + i, s);
    }
    if constexpr (Problem::kStagedHalo) {
      if (threadIdx.x == 0) {
        halo[2 * s] = element(src, w.origin - 1, s);
        halo[2 * s + 1] = element(src, w.origin + kSpan, s);
      }
    }
  }
  __pipeline_commit();
}

/// Packed window kernel: block `range` scans window range / channels (in scan order) of channel
/// range % channels (PackedWindows), one tile of kItems elements a thread, staged in shared
/// memory (stage_window) so that a block holds its window at the cost of shared memory only and
/// a multiprocessor keeps several windows' bytes in flight while each looks back. The copies go
/// out before the window's sequences are searched for, so the search's round trips overlap them.
/// The block folds the window's pairs into one Segment and publishes it: as the state after the
/// window where the window holds a sequence start in scan order (nothing before it matters for
/// that state), as its aggregate otherwise. Then, unless its first element starts a sequence
/// (window 0 always does), one warp finds the state before the window from the windows before it
/// (row_look_back: the nearest published state and the aggregates after it, folded in order with
/// the same fmas as the sequential definition, so the same bits whatever the timing), and a window
/// without a start publishes its state (the same fma). Last the block reads its elements again
/// from shared memory, scans them from that state and stores them.
template <class Problem, int kThreads, int kItems, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, launch_min_blocks(kThreads, kMinBlocks))
    flat_window_kernel(const typename Problem::Params p,
                       const RowStates<typename Problem::C> states, const int64_t ranges) {
  using C = typename Problem::C;
  using T = typename Problem::Storage;
  constexpr int kVec = Problem::kVec;
  using Walk = FlatWalk<kThreads, kItems, kVec, Problem::kReverse>;
  constexpr int kRuns = Walk::kRuns;
  constexpr int64_t kSpan = Walk::kTile;
  using Scan = SegmentBlockScan<C, kThreads, Problem::kReverse, kRuns>;
  __shared__ typename Scan::TempStorage storage;
  __shared__ C carry_in;
  __shared__ T halo[2 * Problem::kStagedStreams];
  __shared__ uint32_t starts[kSpan / 32 + 1];  // the window's start bits (mark_starts)
  extern __shared__ uint4 staged[];  // kStagedStreams * kSpan elements
  T* const slots = reinterpret_cast<T*>(staged);
  Scan scan(storage);
  const int rank = static_cast<int>(threadIdx.x);
  const uint64_t tag = states.tag << 2;
  const FastDivisor none = FastDivisor::of(1);  // packed marks come from the offsets

  for (int64_t range = blockIdx.x; range < ranges; range += gridDim.x) {
    FlatRange r = Problem::window(p, range);
    const Walk w(r, rank);  // windows lie on the grid: one tile, none where the window is empty
    if (range != blockIdx.x) __syncthreads();  // the previous window's elements are read
    if (w.tiles > 0) stage_window<Problem, Walk, T, kSpan>(p, r, w, slots, halo);
    for (int i = rank; i < kSpan / 32 + 1; i += kThreads) starts[i] = 0;
    Problem::find(p, r);  // its barriers order the zeroing before the marking
    Problem problem = Problem::at(p, r);
    problem.template empties<kThreads>(p, rank);
    if (w.tiles > 0)
      problem.seqs.template mark_starts<kThreads>(starts, w.origin - r.row_lo, kSpan, r.closes,
                                                  rank);
    const StagedWindow<T, kSpan> view{slots, halo, w.origin};
    // One run's pairs and marks, from the staged elements: elements outside the window (its
    // lead-in, or past its end) fold as the identity.
    const auto pairs = [&](int j, typename Problem::Work& work, typename Problem::Marks& marks) {
      typename Problem::Loaded loaded;
      problem.load_staged(loaded, w.position(0, j), view);
      const int32_t rel = w.relative(0, j);
      marks = problem.marks(rel, w.n, none);
      problem.convert(loaded, w.position(0, j), marks, p, work);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const bool inside = rel + i >= 0 && rel + i < w.n;
        work.a[i] = inside ? work.a[i] : C(1);
        work.b[i] = inside ? work.b[i] : C(0);
      }
    };
    Segment<C> aggregate[kRuns];
    Segment<C> total = segment_identity<C>();
    if (w.tiles > 0) {  // the same in every thread
      __pipeline_wait_prior(0);
      __syncthreads();  // every thread's copies have landed, and the start bits are set
#pragma unroll
      for (int j = 0; j < kRuns; ++j) {
        typename Problem::Work work;
        typename Problem::Marks marks;
        pairs(j, work, marks);
        aggregate[j] = segment_reduce<Problem::kReverse>(work.a, work.b, marks.first);
      }
      total = scan.reduce(aggregate);
    }
    // the window's place in its row in scan order (as PackedWindows::window), its row's records
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
        typename Problem::Work work;
        typename Problem::Marks marks;
        pairs(j, work, marks);
        segment_scan<Problem::kReverse>(incoming[j], work.a, work.b, marks.first);
        problem.store(work, w.position(0, j), marks, p);
      }
    }
  }
}

/// The elements of a packed window under policy F: F.threads * F.window_items on the vector path
/// (whole 16-byte vectors a thread), as many runs of one element each on the scalar path (so a
/// window's code is the same length either way).
template <class T>
constexpr int64_t window_elements(const FlatPolicy& F, bool vector) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  return int64_t(F.threads) * (vector ? F.window_items : F.window_items / kVec);
}

/// The windows of each channel of a packed call of `length` times, windows of `window` elements
/// on the vector grid from the row's first element (so a row's last window may be empty).
inline int64_t packed_windows(int64_t length, int64_t window, int vec) {
  return ceil_div(length + vec - 1, window);
}

/// Launches the window kernel of packed `Problem` (FlatWindowForward, FlatWindowBackward) with
/// policy F = Flat::kPolicy: one block per window, records in `workspace`.
template <class Problem, class Flat>
cudaError_t launch_flat_windows(typename Problem::Params p, void* workspace, cudaStream_t stream) {
  using T = typename Problem::Storage;
  constexpr FlatPolicy F = Flat::kPolicy;
  constexpr bool kVector = Problem::kVec > 1;
  constexpr int kMinBlocks = kVector ? F.window_min_blocks : 1;
  constexpr int kItems = int(window_elements<T>(F, kVector) / F.threads);
  constexpr int kShared = int(Problem::kStagedStreams * F.threads * kItems * sizeof(T));
  static_assert(kShared <= 32 * 1024, "a window's slots fit the default shared memory allowance");
  p.window = int64_t(F.threads) * kItems;
  p.windows = packed_windows(p.length, p.window, Problem::kVec);
  const int64_t ranges = p.channels * p.windows;  // the host keeps it under 2^31
  const auto states = RowStates<typename Problem::C>::carve(workspace, call_tag());
  return launch_kernel(&flat_window_kernel<Problem, F.threads, kItems, kMinBlocks>, ranges,
                       F.threads, kShared, stream, p, states, ranges);
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
  // the workspace covers the scalar path's windows (more of them), whatever the pointers
  const double ranges =
      double(p.channels) * double(packed_windows(p.length, window_elements<T>(F, false), 1));
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
