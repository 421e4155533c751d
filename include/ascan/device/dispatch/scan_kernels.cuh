// ascan/device/dispatch/scan_kernels.cuh: the forward-scan kernels.
//
// All three kernels run one routine, scan_sequence: a group of threads (some lanes of a warp, or
// a whole block) walks one sequence tile by tile. A tile is a few runs of one 16-byte vector per
// thread (striped: each warp-wide load is contiguous). Per tile each thread
//   1. loads its vector of every run (whole vectors inside the sequence in one 16-byte access,
//      guarded scalars at the sequence's two ends),
//   2. folds each vector's steps into one Affine pair (thread layer),
//   3. scans the group's pairs, all runs at once, with the carried state (warp or block layer),
//      which yields the state entering each of its vectors and advances the carry past the tile,
//   4. runs the recurrence over each vector from that state and stores it, rounded once.
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

/// Loads the `kVec` elements [v, v + kVec) of a sequence whose element v lives at `p[v]`: one
/// 16-byte load when all of them lie inside [lo, hi), else guarded scalars; positions outside
/// [lo, hi) are not read and take `fill`.
template <int kVec, class T>
__device__ __forceinline__ void load_vector(const T* p, int64_t v, int64_t lo, int64_t hi,
                                            T (&r)[kVec], T fill) {
  if (kVec > 1 && v >= lo && v + kVec <= hi) {
    static_assert(kVec == 1 || kVec * sizeof(T) == 16, "vectors are 16 bytes");
    *reinterpret_cast<uint4*>(r) = __ldg(reinterpret_cast<const uint4*>(p + v));
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) r[i] = (v + i >= lo && v + i < hi) ? p[v + i] : fill;
  }
}

/// Stores the elements of [v, v + kVec) that lie inside [lo, hi) to `p[v]`.
template <int kVec, class T>
__device__ __forceinline__ void store_vector(T* p, int64_t v, int64_t lo, int64_t hi,
                                             const T (&r)[kVec]) {
  if (kVec > 1 && v >= lo && v + kVec <= hi) {
    *reinterpret_cast<uint4*>(p + v) = *reinterpret_cast<const uint4*>(r);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (v + i >= lo && v + i < hi) p[v + i] = r[i];
  }
}

/// Scans sequence `seq` with a group of `kLanes` threads, this one at position `rank`. `group`
/// provides the striped scan_state of WarpScan or BlockScan. With `active` false the group still
/// takes part in every shuffle and barrier but reads and writes nothing. `kOneTile`: the
/// dispatch guarantees span_bound <= tile.
///
/// A tile is kRuns runs of kLanes vectors (kVec elements each: 16 bytes, or one element on the
/// scalar path); lane r holds vector r of every run. So each load instruction of a warp reads
/// one contiguous stretch (fully coalesced), and each thread still has kRuns independent loads
/// per stream in flight.
template <class T, int kLanes, int kItems, bool kReverse, bool kVector, bool kOneTile, class Group>
__device__ __forceinline__ void scan_sequence(const ScanParams<T>& p, int64_t seq, bool active,
                                              int rank, Group& group) {
  using C = compute_t<T>;
  constexpr int kVec = kAccessItems<T, kVector>;
  static_assert(kItems % kVec == 0, "items per thread are whole vectors");
  constexpr int kRuns = kItems / kVec;
  constexpr int64_t kRun = int64_t(kLanes) * kVec;
  constexpr int64_t kTile = kRun * kRuns;

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
  // Grid position of this thread's vector in run j of the k-th tile in scan order.
  auto position = [&](int64_t k, int j) {
    return (kReverse ? tiles - 1 - k : k) * kTile + j * kRun + int64_t(rank) * kVec;
  };

  alignas(16) T ga[kRuns][kVec];
  alignas(16) T xa[kRuns][kVec];
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    load_vector<kVec>(g, position(0, j), lo, hi, ga[j], one);
    load_vector<kVec>(x, position(0, j), lo, hi, xa[j], zero);
  }

#pragma unroll 1
  for (int64_t k = 0; k < tiles; ++k) {
    C a[kRuns][kVec], b[kRuns][kVec];
#pragma unroll
    for (int j = 0; j < kRuns; ++j)
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        a[j][i] = to_compute<C>(ga[j][i]);
        b[j][i] = to_compute<C>(xa[j][i]);
      }
    if (!kOneTile && k + 1 < tiles) {  // the next tile's loads go out before this one's scan
#pragma unroll
      for (int j = 0; j < kRuns; ++j) {
        load_vector<kVec>(g, position(k + 1, j), lo, hi, ga[j], one);
        load_vector<kVec>(x, position(k + 1, j), lo, hi, xa[j], zero);
      }
    }
    Affine<C> aggregate[kRuns];
#pragma unroll
    for (int j = 0; j < kRuns; ++j) aggregate[j] = thread_reduce<kReverse>(a[j], b[j]);
    C incoming[kRuns];
    group.scan_state(aggregate, incoming, carry);
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      thread_scan<kReverse>(incoming[j], a[j], b[j]);
      alignas(16) T ya[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) ya[i] = to_storage<T>(b[j][i]);
      store_vector<kVec>(o, position(k, j), lo, hi, ya);
    }
  }

  if (active && rank == 0 && p.final_state != nullptr)
    p.final_state[bi * p.state_batch_stride + ci * p.state_channel_stride] = to_storage<T>(carry);
}

/// Blocks needed to give every sequence its group; the grid may be smaller (a grid-stride loop
/// covers the rest), so no count of sequences overflows the grid.
__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Warp-shuffle kernel: kThreads / kLanes sequences per block, one lane group each. `kOneTile`:
/// the dispatch guarantees that every sequence fits in one tile (no loop, no prefetch).
template <class T, int kThreads, int kLanes, int kItems, bool kReverse, bool kVector, bool kOneTile>
__global__ void __launch_bounds__(kThreads)
    warp_scan_kernel(const ScanParams<T> p) {
  constexpr int kGroups = kThreads / kLanes;
  using Group = WarpScan<compute_t<T>, kLanes, kReverse>;
  Group group;
  const int rank = Group::rank();
  const int64_t units = ceil_div(p.sequences, kGroups);
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
    const int64_t seq = unit * kGroups + threadIdx.x / kLanes;
    scan_sequence<T, kLanes, kItems, kReverse, kVector, kOneTile>(p, seq, seq < p.sequences, rank,
                                                                  group);
  }
}

/// Shared-memory block kernel: one sequence per block, in one tile.
template <class T, int kThreads, int kItems, bool kReverse, bool kVector>
__global__ void __launch_bounds__(kThreads)
    block_scan_kernel(const ScanParams<T> p) {
  using Group = BlockScan<compute_t<T>, kThreads, kReverse, kItems / kAccessItems<T, kVector>>;
  __shared__ typename Group::TempStorage storage;
  Group group(storage);
  for (int64_t seq = blockIdx.x; seq < p.sequences; seq += gridDim.x)
    scan_sequence<T, kThreads, kItems, kReverse, kVector, true>(p, seq, true, threadIdx.x, group);
}

/// Chunked block kernel: one sequence per block, walked tile by tile with a carried state.
template <class T, int kThreads, int kItems, bool kReverse, bool kVector>
__global__ void __launch_bounds__(kThreads)
    chunked_scan_kernel(const ScanParams<T> p) {
  using Group = BlockScan<compute_t<T>, kThreads, kReverse, kItems / kAccessItems<T, kVector>>;
  __shared__ typename Group::TempStorage storage;
  Group group(storage);
  for (int64_t seq = blockIdx.x; seq < p.sequences; seq += gridDim.x)
    scan_sequence<T, kThreads, kItems, kReverse, kVector, false>(p, seq, true, threadIdx.x, group);
}

}  // namespace detail
}  // namespace ascan
