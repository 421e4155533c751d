// ascan/device/dispatch/flat_packed.cuh: packed sequences along time, (C, total) with offsets,
// on the flat tiles (device/agent/flat_tiles.cuh).
//
// Two modes. With a workspace, windows: each channel's row is cut into windows of one tile
// whatever the sequences are (PackedWindows), one block each, staged in shared memory, joined
// along the row by a decoupled look-back (flat_window_kernel); the work of a block does not depend
// on the lengths, so one long sequence among short ones spreads over as many blocks as any other.
// Without one (or with Path::kFlat), whole sequences: a block takes the sequences of one channel
// that start in its window (PackedSequences, flat_kernel), nothing crosses from one block to
// another, and a sequence longer than a window keeps its block busy for all of it.
#pragma once

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../agent/flat_tiles.cuh"
#include "../status.cuh"
#include "dispatch.cuh"
#include "flat_kernels.cuh"
#include "row_kernels.cuh"
#include "tuning.cuh"

namespace ascan {
namespace detail {

#if defined(__CUDACC__)

/// The staged halo's thread: the block's last, whose warp does not search (warps 0 and 1 find the
/// window's sequences, Problem::find).
template <int kThreads>
constexpr int kHaloRank = kThreads - 1;
/// Whether the halo's elements inside the row come by cp.async of their own size (4 and 8 bytes),
/// or are loaded (16-bit: cp.async copies 4, 8 or 16 bytes).
template <class T>
constexpr bool kHaloCopies = sizeof(T) == 4 || sizeof(T) == 8;

/// Stages window `r` into `view`, stream by stream, thread `rank` taking vectors rank,
/// rank + kThreads, ... (kVectors of them; each warp's copies one contiguous stretch): 16-byte
/// asynchronous copies (cp.async: no register holds them while they fly) where a vector lies inside
/// the row [row_lo, row_hi), the elements one by one with the stream's fill outside it otherwise
/// (the row's edge vectors, and the scalar path). The halo (kStagedHalo) is the last thread's
/// (kHaloRank): 4- and 8-byte elements inside the row by copies of one element; 16-bit ones (no
/// 2-byte cp.async) loaded into `held`, which the caller stores into the halo after the window's
/// search, so that their loads fly during it. The copies are committed; the caller waits for them
/// (__pipeline_wait_prior) and holds a barrier before any thread reads the window.
template <class Problem, int kThreads, int kVectors, class View, class Held>
__device__ __forceinline__ void stage_window(const typename Problem::Params& p, const FlatRange& r,
                                             const View& view, int rank, Held& held) {
  using T = typename Problem::Storage;
  constexpr int kVec = Problem::kVec;
  const auto element = [&](const T* src, int64_t v, int s) {
    return v >= r.row_lo && v < r.row_hi ? src[v] : Problem::fill(s);
  };
  // a span inside its row (all but a row's edge windows): copies only, no test
  constexpr bool kCopies = kVec * sizeof(T) == 16;
  const bool inside = kCopies && view.origin >= r.row_lo &&
                      view.origin + int64_t(View::kVectors) * kVec <= r.row_hi;
#pragma unroll
  for (int s = 0; s < Problem::kStagedStreams; ++s) {
    const T* src = Problem::stream(p, s);
    if (inside) {
#pragma unroll
      for (int i = 0; i < kVectors; ++i) {
        const uint32_t V = uint32_t(i) * kThreads + rank;
        __pipeline_memcpy_async(view.slot(s, V), src + view.origin + int64_t(V) * kVec, 16);
      }
    } else {
#pragma unroll 1
      for (int i = 0; i < kVectors; ++i) {
        const uint32_t V = uint32_t(i) * kThreads + rank;
        const int64_t v = view.origin + int64_t(V) * kVec;
        T* dst = view.slot(s, V);
        if constexpr (kCopies) {
          if (v >= r.row_lo && v + kVec <= r.row_hi) {
            __pipeline_memcpy_async(dst, src + v, 16);
            continue;
          }
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) dst[k] = element(src, v + k, s);
      }
    }
    if constexpr (Problem::kStagedHalo) {
      // Nsight Compute's source view had every warp at the window search's first barrier while
      // thread 0's halo loads came back one stream after another, each stored before the next
      // was loaded: copies, or loads whose stores wait for the search, leave it nothing to wait on
      if (rank == kHaloRank<kThreads>) {
        const auto put = [&](int i, int64_t v) {
          const bool in_row = v >= r.row_lo && v < r.row_hi;
          if constexpr (kHaloCopies<T>) {
            if (in_row)
              __pipeline_memcpy_async(view.halo + i, src + v, sizeof(T));
            else
              view.halo[i] = Problem::fill(s);
          } else {
            held[i] = in_row ? src[v] : Problem::fill(s);
          }
        };
        put(2 * s, view.origin - 1);
        put(2 * s + 1, view.origin + View::kVectors * kVec);
      }
    }
  }
  __pipeline_commit();
}

/// Whether the windows of `Problem` are blocked (a thread's vectors consecutive) or striped:
/// without states every problem is blocked and lean (a thread's marks come from its own bits,
/// read once by ThreadMarks, and its vectors' code is the pairs and nothing else); with them as
/// Problem::kBlockedWindow says. The shared memory a window takes follows (window_shared_bytes).
template <class Problem, bool kStates>
constexpr bool kWindowBlocked = !kStates || Problem::kBlockedWindow;
/// The staged window of kThreads threads of kItems elements (StagedWindow), its slots padded where
/// that spares its blocked reads bank conflicts (window_padded).
template <class Problem, int kThreads, int kItems, bool kStates>
using WindowView =
    StagedWindow<typename Problem::Storage, Problem::kVec, int64_t(kThreads) * kItems,
                 window_padded(kWindowBlocked<Problem, kStates>, kItems / Problem::kVec,
                               int(Problem::kVec * sizeof(typename Problem::Storage)))>;
template <class Problem, int kThreads, int kItems, bool kStates>
constexpr int window_shared_bytes() {
  using View = WindowView<Problem, kThreads, kItems, kStates>;
  return int(Problem::kStagedStreams * View::kStreamElements * sizeof(typename Problem::Storage));
}

/// Packed window kernel: block `range` scans window range / channels (in scan order) of channel
/// range % channels (PackedWindows), kItems elements a thread, staged in shared memory
/// (stage_window) so that a block holds its window at the cost of shared memory only and a
/// multiprocessor keeps several windows' bytes in flight while each looks back. The copies go out
/// before the window's sequences are searched for, so the search's round trips overlap them; the
/// sequence starts go into a bitmask (PackedWindows::mark_starts).
///
/// Blocked (kWindowBlocked: every call without states, and the forward scan with them), a thread
/// takes kItems consecutive elements (CUB's blocked arrangement), folds them in one pass into one
/// Segment, and the block scans one Segment a thread; its outputs go over its inputs in shared
/// memory and the block stores them in coalesced stretches. Without states (kStates false) a
/// thread reads its marks once (ThreadMarks) and its vectors' code is the pairs and their scan
/// and nothing else (the Problem's lean_read / lean_write): the code of the window is about a
/// fifth of the code with states, whose per-element state lookups it leaves out; on the H200 f32
/// forward 0.67 -> 0.91 of the copy, bf16 forward 0.31 -> 0.91, backward 0.46 -> 0.77 and 0.34
/// -> 0.74 (bench/RESULTS.md). With states, the backward pass stays striped: a thread takes
/// vector rank of each of the window's runs of kThreads vectors, the block scans each run, and
/// the gradients go to memory from registers; its neighbours come by shuffle (measured with
/// states' code: blocked, f32 forward 0.65 against 0.42 striped, backward 0.37 against 0.55).
///
/// The block publishes the window's Segment: as the state after the window where the window
/// holds a sequence start in scan order (nothing before it matters for that state), as its
/// aggregate otherwise. Then, unless its first element starts a sequence (window 0 always does),
/// one warp finds the state before the window from the windows before it (row_look_back: the
/// nearest published state and the aggregates after it, folded in order with the same fmas as
/// the sequential definition, so the same bits whatever the timing), and a window without a start
/// publishes its state (the same fma). The block's Segments are scanned once, before the
/// look-back (SegmentBlockScan::exclusive_scan); last each thread reads its elements again and
/// scans them from the state entering them.
template <class Problem, int kThreads, int kItems, int kMinBlocks, bool kStates>
__global__ void __launch_bounds__(kThreads, launch_min_blocks(kThreads, kMinBlocks))
    flat_window_kernel(const typename Problem::Params p,
                       const RowStates<typename Problem::C> states, const int64_t ranges) {
  using C = typename Problem::C;
  using T = typename Problem::Storage;
  constexpr bool kReverse = Problem::kReverse;
  constexpr bool kLean = !kStates;
  constexpr bool kBlocked = kWindowBlocked<Problem, kStates>;
  constexpr int kVec = Problem::kVec;
  static_assert(kItems % kVec == 0, "items per thread are whole vectors");
  constexpr int kVectors = kItems / kVec;  // a thread's
  constexpr int kRuns = kBlocked ? 1 : kVectors;
  constexpr int64_t kSpan = int64_t(kThreads) * kItems;
  using View = WindowView<Problem, kThreads, kItems, kStates>;
  using Scan = SegmentBlockScan<C, kThreads, kReverse, kRuns>;
  __shared__ typename Scan::TempStorage storage;
  __shared__ C carry_in;
  __shared__ T halo[2 * Problem::kStagedStreams];
  __shared__ uint32_t starts[kSpan / 32 + 2];  // the window's start bits (mark_starts)
  extern __shared__ uint4 staged[];            // kStagedStreams * View::kStreamElements elements
  Scan scan(storage);
  const int rank = static_cast<int>(threadIdx.x);
  const uint64_t tag = states.tag << 2;
  const FastDivisor none = FastDivisor::of(1);  // packed marks come from the offsets

  for (int64_t range = blockIdx.x; range < ranges; range += gridDim.x) {
    FlatRange r = Problem::window(p, range);
    const bool any = r.hi > r.lo;  // a row's last window may be empty; the same in every thread
    const View view{reinterpret_cast<T*>(staged), halo, r.lo - r.lo % kVec};
    if (range != blockIdx.x) __syncthreads();  // the previous window is read and stored
    T held[2 * Problem::kStagedStreams] = {};  // the 16-bit halo, loaded, stored after find
    if (any) stage_window<Problem, kThreads, kVectors>(p, r, view, rank, held);
    for (int i = rank; i < kSpan / 32 + 2; i += kThreads) starts[i] = 0;
    Problem::find(p, r);  // its barriers order the zeroing before the marking
    if constexpr (Problem::kStagedHalo && !kHaloCopies<T>) {
      if (any && rank == kHaloRank<kThreads>) {
#pragma unroll
        for (int i = 0; i < 2 * Problem::kStagedStreams; ++i) halo[i] = held[i];
      }
    }
    Problem problem = Problem::at(p, r, kBlocked);
    if constexpr (kStates) problem.template empties<kThreads>(p, rank);
    if (any)
      problem.seqs.template mark_starts<kThreads>(starts, view.origin - r.row_lo, kSpan, r.closes,
                                                  rank);
    // Grid position of this thread's vector j: consecutive (blocked) or striped.
    const auto position = [&](int j) {
      return kBlocked ? view.origin + int64_t(rank) * kItems + j * kVec
                      : view.origin + (int64_t(j) * kThreads + rank) * kVec;
    };
    // Vector j's pairs and marks, from the staged elements; elements outside the window (its
    // lead-in, or past its end) fold as the identity.
    const int32_t n = static_cast<int32_t>(r.hi - r.lo);  // a window is under 2^31 elements
    const auto pairs = [&](int j, typename Problem::Work& work, typename Problem::Marks& marks) {
      const int64_t v = position(j);
      typename Problem::Loaded loaded;
      problem.load_staged(loaded, v, view);
      const int32_t rel = static_cast<int32_t>(v - r.lo);
      marks = problem.marks(rel, n, none);
      problem.convert(loaded, v, marks, p, work);
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        const bool inside = rel + i >= 0 && rel + i < n;
        work.a[i] = inside ? work.a[i] : C(1);
        work.b[i] = inside ? work.b[i] : C(0);
      }
    };
    Segment<C> aggregate[kRuns];
#pragma unroll
    for (int j = 0; j < kRuns; ++j) aggregate[j] = segment_identity<C>();
    Segment<C> exclusive[kRuns];
    Segment<C> total = segment_identity<C>();
    // the lean path's marks and edges (unused otherwise)
    uint64_t head_bits = 0, tail_bits = 0;
    typename Problem::LeanEdges edges{};
    const auto lean = [&](int j, typename Problem::Work& work) {
      const auto bits = [&](uint64_t b) {
        return static_cast<uint32_t>(b >> (j * kVec)) & ((1u << kVec) - 1);
      };
      problem.template lean_read<kVectors>(view, rank, j, edges, bits(head_bits), bits(tail_bits),
                                           work);
      return bits(kReverse ? tail_bits : head_bits);  // the vector's first elements in scan order
    };
    if (any) {
      __pipeline_wait_prior(0);
      __syncthreads();  // every thread's copies have landed, and the start bits are set
      if constexpr (kLean) {
        const int32_t origin_lo = static_cast<int32_t>(r.lo - view.origin);
        const ThreadMarks<kItems> tm(starts, rank * kItems, origin_lo, origin_lo + n);
        head_bits = tm.head;
        tail_bits = tm.tail;
        edges = problem.template lean_edges<kVectors>(view, rank);
#pragma unroll
        for (int k = 0; k < kVectors; ++k) {
          const int j = kReverse ? kVectors - 1 - k : k;
          typename Problem::Work work;
          const uint32_t first = lean(j, work);
          aggregate[0] = compose(aggregate[0], segment_reduce<kReverse>(work.a, work.b, first));
        }
      } else {
#pragma unroll
        for (int k = 0; k < kVectors; ++k) {
          const int j = kReverse ? kVectors - 1 - k : k;
          typename Problem::Work work;
          typename Problem::Marks marks;
          pairs(j, work, marks);
          const Segment<C> folded = segment_reduce<kReverse>(work.a, work.b, marks.first);
          if constexpr (kBlocked)
            aggregate[0] = compose(aggregate[0], folded);
          else
            aggregate[j] = folded;
        }
      }
      scan.exclusive_scan(aggregate, exclusive, total);
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
        const C x = row_look_back<C, kWarpThreads, 1, 4 * kWarpThreads, true>(row, q, 0, rank, tag);
        if (rank == 0) {
          carry_in = x;
          if (!total.cut) row_publish_state(record, fma(total.a, x, total.b), tag);
        }
      }
      __syncthreads();
      carry = carry_in;
    }
    if (any) {
      C incoming[kRuns];
#pragma unroll
      for (int j = 0; j < kRuns; ++j) incoming[j] = apply(exclusive[j], carry);
      C state = incoming[0];
#pragma unroll
      for (int k = 0; k < kVectors; ++k) {
        const int j = kReverse ? kVectors - 1 - k : k;
        if constexpr (kLean) {
          typename Problem::Work work;
          const uint32_t first = lean(j, work);
          segment_scan<kReverse>(state, work.a, work.b, first);
          state = work.b[kReverse ? 0 : kVec - 1];
          problem.template lean_write<kVectors>(view, rank, j, work);
        } else {
          typename Problem::Work work;
          typename Problem::Marks marks;
          pairs(j, work, marks);
          if constexpr (!kBlocked) state = incoming[j];
          segment_scan<kReverse>(state, work.a, work.b, marks.first);
          state = work.b[kReverse ? 0 : kVec - 1];
          const int64_t v = position(j);
          if constexpr (Problem::kStagedOutputs > 0) {
            alignas(16) T y[1][kVec];
            problem.outputs(work, v, marks, p, y);
            view.put(0, v, y[0]);  // over its gates, which only this thread reads
          } else {
            problem.store(work, v, marks, p);
          }
        }
      }
      // outputs staged in place of inputs go out striped, each warp's stores one stretch
      constexpr int kOutputs = kLean ? Problem::kLeanOutputs : Problem::kStagedOutputs;
      if constexpr (kOutputs > 0) {
        __syncthreads();  // every thread's outputs are in place
        const auto put = [&](int o, int i, auto inside) {
          const int64_t v = view.origin + (int64_t(i) * kThreads + rank) * kVec;
          alignas(16) T y[kVec];
          view.vector(Problem::window_output_slot(o), v, y);
          store_vector<kVec, decltype(inside)::value>(Problem::window_output(p, o), v, r.lo, r.hi,
                                                      y);
        };
        // a whole window (all but a row's edge windows): 16-byte stores, no test
        const bool whole = kVec > 1 && r.lo == view.origin && r.hi == view.origin + kSpan;
#pragma unroll
        for (int o = 0; o < kOutputs; ++o) {
          if (whole) {
#pragma unroll
            for (int i = 0; i < kVectors; ++i) put(o, i, std::bool_constant<kVec != 1>{});
          } else {
#pragma unroll 1
            for (int i = 0; i < kVectors; ++i) put(o, i, std::false_type{});
          }
        }
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

/// The dynamic shared memory a window kernel may take within the default allowance (48 KiB with
/// its static shared memory, a few KiB at most); launch_flat_windows raises the allowance past it.
constexpr int kWindowDefaultShared = 40 * 1024;

/// The most blocks per multiprocessor a window kernel with states is bounded for
/// (launch_flat_windows).
constexpr int kWindowStatesMinBlocks = 6;

/// The blocks per multiprocessor a window kernel of policy F is bounded for: F.window_min_blocks
/// on the vector path (one on the scalar path), at most kWindowStatesMinBlocks with states.
constexpr int window_min_blocks(const FlatPolicy& F, bool vector, bool states) {
  const int blocks = vector ? F.window_min_blocks : 1;
  return states && blocks > kWindowStatesMinBlocks ? kWindowStatesMinBlocks : blocks;
}

/// The elements a thread holds of a window of packed `Problem` under policy F = Flat::kPolicy, and
/// the shared memory of the window's slots, with states or without (window_shared_bytes).
template <class Problem, class Flat>
constexpr int kWindowThreadItems =
    int(window_elements<typename Problem::Storage>(Flat::kPolicy, Problem::kVec > 1) /
        Flat::kPolicy.threads);
template <class Problem, class Flat, bool kStates>
constexpr int kWindowShared = window_shared_bytes<Problem, Flat::kPolicy.threads,
                                                  kWindowThreadItems<Problem, Flat>, kStates>();

/// Launches the window kernel of packed `Problem` (FlatWindowForward, FlatWindowBackward) with
/// policy F = Flat::kPolicy: one block per window, records in `workspace`.
template <class Problem, class Flat>
cudaError_t launch_flat_windows(typename Problem::Params p, void* workspace, cudaStream_t stream) {
  constexpr FlatPolicy F = Flat::kPolicy;
  constexpr bool kVector = Problem::kVec > 1;
  // Calls with states look up each vector's sequence states and hold more: at 7 blocks (72
  // registers) the f32 backward window with states spills 204-208 bytes a thread against 124-140
  // at 6 (ptxas, sm_90; the tuning runs measured the lean kernel only), so they keep at most
  // kWindowStatesMinBlocks (the library's policies ask at most six; the benchmark's candidates
  // ask more).
  constexpr int kMinBlocks = window_min_blocks(F, kVector, false);
  constexpr int kMinBlocksStates = window_min_blocks(F, kVector, true);
  constexpr int kItems = kWindowThreadItems<Problem, Flat>;
  constexpr int kShared = kWindowShared<Problem, Flat, false>;
  constexpr int kSharedStates = kWindowShared<Problem, Flat, true>;
  // the most a block may opt in to on sm_86, sm_89 and sm_120 (99 KiB), less the kernel's static
  // shared memory; the library's windows stay within kWindowDefaultShared (run_flat_packed)
  static_assert(kShared <= 96 * 1024 && kSharedStates <= 96 * 1024,
                "a window's slots fit the shared memory a block may have");
  p.window = int64_t(F.threads) * kItems;
  p.windows = packed_windows(p.length, p.window, Problem::kVec);
  const int64_t ranges = p.channels * p.windows;  // the host keeps it under 2^31
  const auto states = RowStates<typename Problem::C>::carve(workspace, call_tag());
  const auto launch = [&](auto kernel, auto shared) -> cudaError_t {
    // within kWindowDefaultShared the default allowance holds the window; past it (the
    // benchmark's larger windows) the allowance is raised on every launch, as row_kernel's is: a
    // host call that does not synchronize
    if constexpr (decltype(shared)::value > kWindowDefaultShared) {
      if (const cudaError_t e = allow_dynamic_shared(kernel, decltype(shared)::value);
          e != cudaSuccess)
        return e;
    }
    return launch_kernel(kernel, ranges, F.threads, decltype(shared)::value, stream, p, states,
                         ranges);
  };
  if (Problem::has_states(p))
    return launch(&flat_window_kernel<Problem, F.threads, kItems, kMinBlocksStates, true>,
                  std::integral_constant<int, kSharedStates>{});
  return launch(&flat_window_kernel<Problem, F.threads, kItems, kMinBlocks, false>,
                std::integral_constant<int, kShared>{});
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
  // the library's windows launch within the default allowance (no call raises it); the vector
  // path's are the larger, and reversed problems stage the same slots
  using Vectors = Windows<T, false, true>;
  static_assert(kWindowShared<Vectors, Flat, false> <= kWindowDefaultShared &&
                    kWindowShared<Vectors, Flat, true> <= kWindowDefaultShared,
                "the library's windows fit the default shared memory allowance");
  // and their blocked reads meet at most 2-way bank conflicts (window_padded takes the layout with
  // fewer; 8 vectors a thread padded and 5 unpadded meet none, 6 meet 2-way either way)
  constexpr int kVectorsPerThread = kWindowThreadItems<Vectors, Flat> / Vectors::kVec;
  static_assert(blocked_window_conflicts(kVectorsPerThread, 16,
                                         window_padded(true, kVectorsPerThread, 16)) <= 2,
                "the library's windows read their slots with at most 2-way bank conflicts");
  // the workspace covers the scalar path's windows (more of them), whatever the pointers
  const double ranges =
      double(p.channels) * double(packed_windows(p.length, window_elements<T>(F, false), 1));
  const bool windowed =
      scratch.mode != Scratch::kNone && path == Path::kAuto && ranges <= double(kMaxTiles);
  const size_t bytes = windowed ? RowStates<C>::bytes(int64_t(ranges), 1) : 0;
  // a size query and the windows need no device query; whole sequences size their windows by
  // the multiprocessor count
  return with_scratch(scratch, bytes, stream, [&](void* workspace) -> cudaError_t {
    if (windowed) {
      if (reverse)
        return vector ? launch_flat_windows<Windows<T, true, true>, Flat>(p, workspace, stream)
                      : launch_flat_windows<Windows<T, true, false>, Flat>(p, workspace, stream);
      return vector ? launch_flat_windows<Windows<T, false, true>, Flat>(p, workspace, stream)
                    : launch_flat_windows<Windows<T, false, false>, Flat>(p, workspace, stream);
    }
    int sms = 0;
    if (const cudaError_t e = multiprocessors(sms); e != cudaSuccess) return e;
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
