// ascan/device/dispatch/scan_kernels.cuh: the forward-scan kernels.
//
// All three kernels run one routine, scan_sequence: a group of threads (some lanes of a warp, or
// a whole block) walks one sequence tile by tile. Per tile each thread
//   1. loads its `kItems` consecutive steps (16-byte vectors where the whole vector is inside the
//      sequence, guarded scalars at its two ends),
//   2. folds them into one Affine pair (thread layer),
//   3. scans the pairs of the group with the carried state (warp or block layer), which yields
//      the state entering this thread and advances the carry past the tile,
//   4. runs the recurrence over its items from that state and stores them, rounded once.
// The next tile's loads are issued before the current tile is scanned.
//
// Tiles are laid on a grid anchored at the 16-byte boundary at or before the sequence's first
// element, so every vector load is aligned whatever the sequence's offset; the `lead` elements in
// front of the sequence, and those past its end, are masked to the identity (1, 0) and neither
// read nor written.
#pragma once

#include <cstdint>

#include "../../affine.cuh"
#include "../../block/block_scan.cuh"
#include "../../thread/thread_scan.cuh"
#include "../../warp/warp_scan.cuh"

namespace ascan {
namespace detail {

/// What every scan kernel reads: the arguments flattened, sizes in elements, offsets 64-bit.
template <class T>
struct ScanParams {
  const T* gates;
  const T* tokens;
  T* out;
  int64_t sequences;  ///< batch * channels
  int64_t channels;
  int64_t batch_stride;
  int64_t channel_stride;
  int64_t length;
  /// Span bound of every sequence on the tile grid: length plus the largest lead. Every group
  /// runs ceil(span_bound / tile) tiles, so groups that share shuffles stay in step.
  int64_t span_bound;
  const T* initial_state;  ///< nullable
  T* final_state;          ///< nullable
  int64_t state_batch_stride;
  int64_t state_channel_stride;
};

/// Elements per access: one 16-byte vector on the vector path, one element on the scalar path.
template <class T, bool kVector>
constexpr int kAccessItems = kVector ? static_cast<int>(16 / sizeof(T)) : 1;

/// Loads elements [v0, v0 + kItems) of a sequence whose element v lives at `p[v]`; positions
/// outside [lo, hi) are not read and take `fill`.
template <int kItems, bool kVector, class T>
__device__ __forceinline__ void load_tile_items(const T* p, int64_t v0, int64_t lo, int64_t hi,
                                                T (&r)[kItems], T fill) {
  constexpr int kVec = kAccessItems<T, kVector>;
  static_assert(kItems % kVec == 0, "items per thread are whole vectors");
#pragma unroll
  for (int j = 0; j < kItems; j += kVec) {
    const int64_t v = v0 + j;
    if (kVec > 1 && v >= lo && v + kVec <= hi) {
      *reinterpret_cast<uint4*>(&r[j]) = __ldg(reinterpret_cast<const uint4*>(p + v));
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) r[j + i] = (v + i >= lo && v + i < hi) ? p[v + i] : fill;
    }
  }
}

/// Stores elements [v0, v0 + kItems) to `p[v]`, only those inside [lo, hi).
template <int kItems, bool kVector, class T>
__device__ __forceinline__ void store_tile_items(T* p, int64_t v0, int64_t lo, int64_t hi,
                                                 const T (&r)[kItems]) {
  constexpr int kVec = kAccessItems<T, kVector>;
#pragma unroll
  for (int j = 0; j < kItems; j += kVec) {
    const int64_t v = v0 + j;
    if (kVec > 1 && v >= lo && v + kVec <= hi) {
      *reinterpret_cast<uint4*>(p + v) = *reinterpret_cast<const uint4*>(&r[j]);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i)
        if (v + i >= lo && v + i < hi) p[v + i] = r[j + i];
    }
  }
}

/// Scans sequence `seq` with a group of `kLanes` threads, this one at position `rank`. `group`
/// provides scan_state (WarpScan or BlockScan). With `active` false the group still takes part
/// in every shuffle and barrier but reads and writes nothing. `kOneTile`: the dispatch
/// guarantees span_bound <= tile.
template <class T, int kLanes, int kItems, bool kReverse, bool kVector, bool kOneTile, class Group>
__device__ __forceinline__ void scan_sequence(const ScanParams<T>& p, int64_t seq, bool active,
                                              int rank, Group& group) {
  using C = compute_t<T>;
  constexpr int64_t kTile = int64_t(kLanes) * kItems;

  const int64_t bi = active ? seq / p.channels : 0;
  const int64_t ci = active ? seq - bi * p.channels : 0;
  const int64_t offset = bi * p.batch_stride + ci * p.channel_stride;
  // Elements between the 16-byte boundary and the sequence's first element (gates, tokens and
  // out share their misalignment on the vector path, so one lead serves all three).
  const int64_t lead =
      kVector ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(p.gates + offset) % 16 / sizeof(T))
              : 0;
  // Element v of the tile grid is element v - lead of the sequence.
  const T* g = p.gates + (offset - lead);
  const T* x = p.tokens + (offset - lead);
  T* o = p.out + (offset - lead);
  const int64_t lo = lead;
  const int64_t hi = active ? lead + p.length : lead;

  C carry = C(0);
  if (active && p.initial_state != nullptr)
    carry = to_compute<C>(
        p.initial_state[bi * p.state_batch_stride + ci * p.state_channel_stride]);

  const T one = to_storage<T>(C(1));
  const T zero = to_storage<T>(C(0));
  const int64_t tiles = kOneTile ? 1 : (p.span_bound + kTile - 1) / kTile;
  auto tile_start = [&](int64_t k) {
    return (kReverse ? tiles - 1 - k : k) * kTile + int64_t(rank) * kItems;
  };

  alignas(16) T ga[kItems];
  alignas(16) T xa[kItems];
  load_tile_items<kItems, kVector>(g, tile_start(0), lo, hi, ga, one);
  load_tile_items<kItems, kVector>(x, tile_start(0), lo, hi, xa, zero);

#pragma unroll 1
  for (int64_t k = 0; k < tiles; ++k) {
    const int64_t v0 = tile_start(k);
    C a[kItems], b[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      a[i] = to_compute<C>(ga[i]);
      b[i] = to_compute<C>(xa[i]);
    }
    if (!kOneTile && k + 1 < tiles) {  // the next tile's loads go out before this one's scan
      load_tile_items<kItems, kVector>(g, tile_start(k + 1), lo, hi, ga, one);
      load_tile_items<kItems, kVector>(x, tile_start(k + 1), lo, hi, xa, zero);
    }
    const Affine<C> aggregate = thread_reduce<kReverse>(a, b);
    const C incoming = group.scan_state(aggregate, carry);
    thread_scan<kReverse>(incoming, a, b);
    alignas(16) T ya[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) ya[i] = to_storage<T>(b[i]);
    store_tile_items<kItems, kVector>(o, v0, lo, hi, ya);
  }

  if (active && rank == 0 && p.final_state != nullptr)
    p.final_state[bi * p.state_batch_stride + ci * p.state_channel_stride] = to_storage<T>(carry);
}

/// Blocks needed to give every sequence its group; the grid may be smaller (a grid-stride loop
/// covers the rest), so no count of sequences overflows the grid.
__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Warp-shuffle kernel: kThreads / kLanes sequences per block, one lane group each.
template <class T, int kThreads, int kLanes, int kItems, bool kReverse, bool kVector>
__global__ void __launch_bounds__(kThreads)
    warp_scan_kernel(const ScanParams<T> p) {
  constexpr int kGroups = kThreads / kLanes;
  using Group = WarpScan<compute_t<T>, kLanes, kReverse>;
  Group group;
  const int rank = Group::rank();
  const int64_t units = ceil_div(p.sequences, kGroups);
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int64_t seq = unit * kGroups + threadIdx.x / kLanes;
    scan_sequence<T, kLanes, kItems, kReverse, kVector, false>(p, seq, seq < p.sequences, rank,
                                                               group);
  }
}

/// Shared-memory block kernel: one sequence per block, in one tile.
template <class T, int kThreads, int kItems, bool kReverse, bool kVector>
__global__ void __launch_bounds__(kThreads)
    block_scan_kernel(const ScanParams<T> p) {
  using Group = BlockScan<compute_t<T>, kThreads, kReverse>;
  __shared__ typename Group::TempStorage storage;
  Group group(storage);
  for (int64_t seq = blockIdx.x; seq < p.sequences; seq += gridDim.x)
    scan_sequence<T, kThreads, kItems, kReverse, kVector, true>(p, seq, true, threadIdx.x, group);
}

/// Chunked block kernel: one sequence per block, walked tile by tile with a carried state.
template <class T, int kThreads, int kItems, bool kReverse, bool kVector>
__global__ void __launch_bounds__(kThreads)
    chunked_scan_kernel(const ScanParams<T> p) {
  using Group = BlockScan<compute_t<T>, kThreads, kReverse>;
  __shared__ typename Group::TempStorage storage;
  Group group(storage);
  for (int64_t seq = blockIdx.x; seq < p.sequences; seq += gridDim.x)
    scan_sequence<T, kThreads, kItems, kReverse, kVector, false>(p, seq, true, threadIdx.x, group);
}

}  // namespace detail
}  // namespace ascan
