// ascan/device/dispatch/row_kernels.cuh: the row path, for every layout that is not
// time-contiguous, and for packed variable-length sequences.
//
// A "row" is one time step of every channel: (b, t) for a dense (B, C, T) view, t for packed
// sequences. The path reads rows: a thread owns kVec channels (one 16-byte vector where every
// array is channel-contiguous and aligned, one channel otherwise) and walks kRows consecutive
// rows, so on a channel-contiguous layout a group of kRowLanes lanes reads kRowLanes * 16
// contiguous bytes of each row. All rows of all sequences form one flat list in scan order (the
// order the recurrence runs: rows ascending, or descending for a reverse scan and for the
// backward pass of a forward one); a sequence boundary is a reset, the pair (0, a*h0 + b) in the
// scan's algebra, which cuts every dependency on the rows before it. The flat list is cut into
// tiles of kRowGroups * kRows rows times one slab of kRowLanes * kVec channels, one block each,
// whatever the sequences' lengths: load balance does not depend on how the rows split into
// sequences (packed batches, many short sequences, one long one).
//
// The tiles of one slab are joined by a decoupled look-back along the flat list (one chain per
// slab). Each tile publishes its aggregate, one Affine pair per channel, as soon as it has
// scanned its rows (or at once its inclusive state, the state after its last row, when it holds
// a reset: that depends on nothing before it), then looks back for the nearest tile that has
// published its inclusive state and folds the aggregates in between onto it, one tile at a time
// (x = A * x + B per channel, in order). That fold is the same chain of fmas as the plain
// sequential definition inc(k) = A_k * inc(k - 1) + B_k, whichever tile it starts from, so the
// result does not depend on timing: bitwise identical run after run. A tile's look-back stops at
// the first reset it meets, so packed sequences never wait on each other. The records are one
// per (tile, channel), each published and read with one 16-byte access holding the call's tag
// (RowRecord): no flag, no fence; every thread of the block takes part in the look-back, a few
// lanes per channel reading the tiles before it a window at a time.
//
// The look-back costs each tile round trips through L2 while its staged rows hold shared memory,
// so where the chains are many the path walks instead: one block per (sequence of a dense
// batch, slab) scans that sequence's tiles in order, carrying the state in shared memory, with
// nothing looked back and no workspace (row_kernel's walk mode; the dispatch's rule is
// row_walks'). Every call made without a workspace (scan(args, stream)) walks.
//
// Calls on the vector path (every array channel-contiguous on the 16-byte grid) that look back,
// dense or packed without states, take dense_row_kernel (dense_rows.cuh) instead: the same tiles
// and look-back, without the segment machinery, at about half the instructions per element.
// Which kernel and mode a call takes is run_rows' choice (row_dispatch.cuh).
#pragma once

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../affine.cuh"
#include "../agent/tile_lookback.cuh"
#include "../status.cuh"
#include "dispatch.cuh"
#include "scan_kernels.cuh"

namespace ascan {
namespace detail {

/// Lanes along channels per row group: kRowLanes * 16 bytes of each row (128) per group.
constexpr int kRowLanes = 8;
constexpr int kRowThreads = 256;
constexpr int kRowGroups = kRowThreads / kRowLanes;          ///< 32 row groups per tile
constexpr int kRowWarps = kRowThreads / kWarpThreads;        ///< 8
constexpr int kRowGroupsPerWarp = kWarpThreads / kRowLanes;  ///< 4

/// Rows per thread: forward 8 (two streams in), backward 4 (three): 64 or 48 KiB of staged rows
/// per block on the vector path (RowStage), three blocks per multiprocessor.
template <bool kBackward>
constexpr int kRowsPerThread = kBackward ? 4 : 8;

/// One array of the row path: its pointer and strides in elements. With packed sequences the
/// batch stride is 0 and the time index is the row's position in the packed axis.
template <class P>
struct RowArray {
  P* ptr;
  int64_t batch_stride, channel_stride, time_stride;
};

/// The row path's arguments, forward and backward. Forward: in = {gates, tokens}, out =
/// {out}; state_in = h0, state_out = final state. Backward: in = {gates, states, grad_out}, out =
/// {grad_gates, grad_tokens}; state_in = h0, state_in2 = grad_final_state, state_out =
/// grad_initial_state.
template <class T>
struct RowParams {
  RowArray<const T> in[3];
  RowArray<T> out[2];
  int64_t channels;
  int64_t rows;              ///< all rows: batch * length, or the packed length
  int64_t length;            ///< dense: rows per sequence
  int64_t segments;          ///< dense: batch; packed: the sequence count
  const int32_t* offsets32;  ///< packed offsets (both null: dense)
  const int64_t* offsets64;
  const T* state_in;
  const T* state_in2;
  T* state_out;
  int64_t state_batch_stride, state_channel_stride;
  int64_t slabs;   ///< channel slabs
  int64_t tiles;   ///< look-back mode: tiles per slab
  int64_t window;  ///< walk mode: positions per part (chains are parts times slabs)
};

/// One channel's look-back record of one tile: the aggregate pair of the tile's rows for that
/// channel, and once known the state after them, with this call's tag and what is published.
/// A float record is one 16-byte word, {a or the state, b, tag and status}, written and read with
/// one access (as the time-contiguous path's records, agent/tile_lookback.cuh), so publishing
/// needs no fence. A double record keeps the aggregate and the state in fields of their own and
/// releases its tag word after writing them.
template <class C>
struct RowRecord;
template <>
struct alignas(16) RowRecord<float> {
  uint4 word;
};
template <>
struct alignas(32) RowRecord<double> {
  double a, b, state;
  uint64_t tag;
};

/// Look-back records of the row path: [slab][tile][channel of the slab].
template <class C>
struct RowStates {
  RowRecord<C>* records;
  uint64_t tag;

  static constexpr size_t kAlign = 128;
  static constexpr size_t record_bytes(int64_t tiles, int64_t width) {
    return (static_cast<size_t>(tiles * width) * sizeof(RowRecord<C>) + kAlign - 1) / kAlign *
           kAlign;
  }
  /// Bytes of workspace for `tiles` tiles of `width` channels, with room to align any workspace.
  static constexpr size_t bytes(int64_t tiles, int64_t width) {
    return kAlign - 1 + record_bytes(tiles, width);
  }
  static RowStates carve(void* workspace, uint64_t tag) {
    const uintptr_t base = (reinterpret_cast<uintptr_t>(workspace) + kAlign - 1) / kAlign * kAlign;
    return RowStates{reinterpret_cast<RowRecord<C>*>(base), tag};
  }
};

enum RowStatus : uint64_t { kRowEmpty = 0, kRowAggregate = 1, kRowInclusive = 2 };

#if defined(__CUDACC__)

}  // namespace detail
}  // namespace ascan
#include <cuda/annotated_ptr>
namespace ascan {
namespace detail {

/// A pair with a reset mark: `cut` means the pair holds a state (its rows begin at or after a
/// reset), so nothing before it matters and its `a` is not used.
template <class C, int kVec>
struct CutPairs {
  C a[kVec];
  C b[kVec];
  bool cut;
};

/// earlier then later, per channel; a later pair that is cut ignores the earlier one entirely
/// (no 0 * inf from a previous sequence can reach it).
template <class C, int kVec>
__device__ __forceinline__ void compose_into(const CutPairs<C, kVec>& e, CutPairs<C, kVec>& l) {
  if (l.cut) return;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    l.b[v] = fma(l.a[v], e.b[v], l.b[v]);
    l.a[v] = e.a[v] * l.a[v];
  }
  l.cut = e.cut;
}

/// Publishes a tile's aggregate (a, b) for one channel; `tag` is the call's tag shifted left by 2.
__device__ __forceinline__ void row_publish_aggregate(RowRecord<float>* r, float a, float b,
                                                      uint64_t tag) {
  const uint64_t w = tag | kRowAggregate;
  store_relaxed_16(r, __float_as_uint(a), __float_as_uint(b), low_word(w), high_word(w));
}
__device__ __forceinline__ void row_publish_aggregate(RowRecord<double>* r, double a, double b,
                                                      uint64_t tag) {
  r->a = a;
  r->b = b;
  store_release(&r->tag, tag | kRowAggregate);
}
/// Publishes the state after a tile for one channel.
__device__ __forceinline__ void row_publish_state(RowRecord<float>* r, float x, uint64_t tag) {
  const uint64_t w = tag | kRowInclusive;
  store_relaxed_16(r, __float_as_uint(x), 0u, low_word(w), high_word(w));
}
__device__ __forceinline__ void row_publish_state(RowRecord<double>* r, double x, uint64_t tag) {
  r->state = x;
  store_release(&r->tag, tag | kRowInclusive);
}
/// Reads a record: its status for this call (kRowEmpty when not this call's), with the aggregate
/// in (a, b) or the state in a.
__device__ __forceinline__ uint32_t row_read(const RowRecord<float>* r, uint64_t tag, float& a,
                                             float& b) {
  const uint4 v = load_relaxed_16(r);
  const uint64_t w = (uint64_t(v.w) << 32) | v.z;
  if ((w & ~uint64_t(3)) != tag) return kRowEmpty;
  a = __uint_as_float(v.x);
  b = __uint_as_float(v.y);
  return uint32_t(w & 3);
}
__device__ __forceinline__ uint32_t row_read(const RowRecord<double>* r, uint64_t tag, double& a,
                                             double& b) {
  const uint64_t w = load_acquire(&r->tag);
  if ((w & ~uint64_t(3)) != tag) return kRowEmpty;
  if ((w & 3) == kRowInclusive) {
    a = __ldcg(&r->state);
  } else {
    a = __ldcg(&r->a);
    b = __ldcg(&r->b);
  }
  return uint32_t(w & 3);
}

/// The state before tile `tile` of a slab for channel `ch` of it, found by kG consecutive lanes
/// of one warp (this one `slot`). They read the records of the tiles before it kG at a time, up
/// to kReach tiles and kMaxRounds rounds (round r: lane `slot` reads tile tile-1-r*kG-slot), find
/// the nearest tile whose state is published with every tile after it showing its aggregate, and
/// fold those aggregates onto that state in order (x = a * x + b): the chain of fmas of the
/// sequential definition, whichever tile it starts from, so the state is the same bits whenever
/// it is found. Where no such tile is within reach yet, they wait and read again. Tile 0 of a
/// slab always publishes its state at once (its first row begins a sequence), so the wait ends.
/// The fold is unrolled over the kG lanes (every shuffle issued ahead of the chain of fmas), or
/// with kLoop a loop of as many steps as there are tiles to fold (compact code, but each step
/// waits for its shuffles): the same fmas either way. Measured on the H200, the loop makes the
/// channel-last skewed rows (a long sequence's tiles fold up to 32 aggregates each) 3-30% slower
/// (bf16 forward 0.52 -> 0.40 of the copy); the packed time-contiguous windows (flat_packed.cuh)
/// take it, where unrolled measured 0.02-0.06 slower backward and within 0.012 forward
/// (bench/RESULTS.md, "What was tried and dropped").
template <class C, int kG, int kWidth, int kReach, bool kLoop = false, int kMaxRounds = 4>
__device__ __forceinline__ C row_look_back(const RowRecord<C>* slab_records, int64_t tile, int ch,
                                           int slot, uint64_t tag) {
  constexpr int kRounds =
      kReach / kG > kMaxRounds ? kMaxRounds : (kReach / kG > 0 ? kReach / kG : 1);
  const int first = int(threadIdx.x % kWarpThreads) - slot;
  const unsigned mask = (kG == kWarpThreads ? 0xffffffffu : ((1u << kG) - 1u)) << first;
  unsigned sleep = 32;
  const LookbackWatch watch;
  for (;;) {
    C a[kRounds], b[kRounds];
    int found = -1, nearest = 0;
    // one window of kG tiles per round, the next only where this one ends in aggregates: most
    // look-backs find the state in the first (the tile before is done), and records read are L2
    // traffic on top of the rows
#pragma unroll
    for (int r = 0; r < kRounds; ++r) {
      const int64_t j = tile - 1 - int64_t(r) * kG - slot;
      a[r] = C(0);
      b[r] = C(0);
      const uint32_t status = j >= 0 ? row_read(slab_records + j * kWidth + ch, tag, a[r], b[r])
                                     : uint32_t(kRowInclusive);  // before the slab: not reached
      const unsigned inc = (__ballot_sync(mask, status == kRowInclusive) & mask) >> first;
      const unsigned empty = (__ballot_sync(mask, status == kRowEmpty) & mask) >> first;
      if (inc != 0) {
        const int n = __ffs(int(inc)) - 1;
        if ((empty & ((1u << n) - 1u)) == 0) {
          found = r;
          nearest = n;
        }
        break;
      }
      if (empty != 0) break;
    }
    if (found >= 0) {
      C x = C(0);
#pragma unroll
      for (int r = kRounds - 1; r >= 0; --r) {
        if (r > found) continue;
        if constexpr (kLoop) {
          // from the nearest state on, each tile's aggregate in turn (found and nearest are the
          // same in every lane): as many steps as tiles to fold, the same fmas
#pragma unroll 1
          for (int k = r == found ? nearest : kG - 1; k >= 0; --k) {
            const C fa = __shfl_sync(mask, a[r], first + k);
            const C fb = __shfl_sync(mask, b[r], first + k);
            x = r == found && k == nearest ? fa : fma(fa, x, fb);
          }
        } else {
#pragma unroll
          for (int k = kG - 1; k >= 0; --k) {
            const C fa = __shfl_sync(mask, a[r], first + k);
            const C fb = __shfl_sync(mask, b[r], first + k);
            if (r < found || k < nearest)
              x = fma(fa, x, fb);
            else if (k == nearest)
              x = fa;
          }
        }
      }
      return x;
    }
    watch.check();
    __nanosleep(sleep);
    sleep = sleep < 512 ? 2 * sleep : sleep;
  }
}

/// The row path's segment cursor: the sequence [start, end) (rows) that holds a row, its index,
/// and the row its time index counts from (its start when dense, 0 when packed).
struct RowSegment {
  int64_t n, start, end, time_base;
};

template <class T>
struct RowWalk {
  const RowParams<T>& p;

  __device__ __forceinline__ bool packed() const {
    return p.offsets32 != nullptr || p.offsets64 != nullptr;
  }
  /// Offset i of the packed sequences, clamped into [0, rows]; the first is 0 and the last is
  /// rows whatever the device holds.
  __device__ __forceinline__ int64_t offset(int64_t i) const {
    return clamped_offset(p.offsets32, p.offsets64, p.segments, p.rows, i);
  }
  __device__ __forceinline__ RowSegment at_index(int64_t n) const {
    if (!packed()) return {n, n * p.length, n * p.length + p.length, n * p.length};
    return {n, offset(n), offset(n + 1), 0};
  }
  /// The sequence that holds row r (0 <= r < rows).
  __device__ __forceinline__ RowSegment find(int64_t r) const {
    if (!packed()) return at_index(r / p.length);
    int64_t lo = 0, hi = p.segments - 1;  // offset(lo) <= r throughout
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (offset(mid) <= r)
        lo = mid;
      else
        hi = mid - 1;
    }
    return at_index(lo);
  }
  /// Moves the cursor to row r, one row on from the row it holds (in scan order).
  template <bool kDesc>
  __device__ __forceinline__ void step(RowSegment& s, int64_t r) const {
    if constexpr (kDesc) {
      while (r < s.start && s.n > 0) s = at_index(s.n - 1);
    } else {
      while (r >= s.end && s.n < p.segments - 1) s = at_index(s.n + 1);
    }
  }
  template <class P>
  __device__ __forceinline__ int64_t element(const RowArray<P>& a, const RowSegment& s, int64_t r,
                                             int64_t c) const {
    return s.n * a.batch_stride + (r - s.time_base) * a.time_stride + c * a.channel_stride;
  }
  __device__ __forceinline__ int64_t state(int64_t n, int64_t c) const {
    return n * p.state_batch_stride + c * p.state_channel_stride;
  }
};

/// Where one array's element of a thread's channels is, row after row in scan order: one time
/// stride on within a sequence (an add), computed afresh from the row and its sequence where a
/// sequence begins (dense batches may have a batch stride other than length * time stride).
template <class P, bool kDesc>
struct RowCursor {
  P* at = nullptr;
  int64_t n = -1;
  /// Moves to row r of sequence s, the row after the last one it was moved to (or the first).
  template <class W>
  __device__ __forceinline__ void to(const W& walk, const RowArray<P>& a, const RowSegment& s,
                                     int64_t r, int64_t c) {
    if (s.n == n) {
      at += kDesc ? -a.time_stride : a.time_stride;
    } else {
      at = a.ptr + walk.element(a, s, r, c);
      n = s.n;
    }
  }
};

template <int kVec, class T>
__device__ __forceinline__ void load_row(const T* base, int64_t at, int64_t cstride, T (&v)[kVec]) {
  if constexpr (kVec * sizeof(T) == 16) {
    const uint4 w = *reinterpret_cast<const uint4*>(base + at);
    memcpy(v, &w, 16);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) v[i] = base[at + i * cstride];
  }
}
template <int kVec, class T>
__device__ __forceinline__ void store_row(T* base, int64_t at, int64_t cstride,
                                          const T (&v)[kVec]) {
  if constexpr (kVec * sizeof(T) == 16) {
    uint4 w;
    memcpy(&w, v, 16);
    store_vector_16(base + at, w);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) base[at + i * cstride] = v[i];
  }
}

/// Where a thread holds the rows it loaded. On the vector path the loads go straight to shared
/// memory by asynchronous copies (cp.async, no registers held while they fly), one 16-byte slot
/// per (array, row, thread), consecutive threads in consecutive slots; each thread reads back
/// only its own slots, so a walking block reloads them for its next tile without a barrier. The
/// block's residency is then set by shared memory, not registers, and more blocks per
/// multiprocessor overlap one block's look-back with another's loads. The scalar path holds its
/// rows in registers.
template <class T, int kVec, int kRows, int kArrays, bool kShared = kVec * sizeof(T) == 16>
struct RowStage {
  T v[kArrays][kRows][kVec];
  __device__ __forceinline__ explicit RowStage(uint4*) {}
  __device__ __forceinline__ void load(int array, int row, const T* src, int64_t cstride) {
    load_row<kVec>(src, 0, cstride, v[array][row]);
  }
  __device__ __forceinline__ void wait() {}
  __device__ __forceinline__ void get(int array, int row, T (&out)[kVec]) const {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = v[array][row][i];
  }
  static constexpr int shared_bytes() { return 0; }
};
template <class T, int kVec, int kRows, int kArrays>
struct RowStage<T, kVec, kRows, kArrays, true> {
  uint4* slots;  // dynamic shared memory: [array][row][thread]
  __device__ __forceinline__ explicit RowStage(uint4* s) : slots(s) {}
  __device__ __forceinline__ uint4* slot(int array, int row) const {
    return slots + (array * kRows + row) * kRowThreads + threadIdx.x;
  }
  __device__ __forceinline__ void load(int array, int row, const T* src, int64_t) {
    __pipeline_memcpy_async(slot(array, row), src, 16);
  }
  __device__ __forceinline__ void wait() {
    __pipeline_commit();
    __pipeline_wait_prior(0);
  }
  __device__ __forceinline__ void get(int array, int row, T (&out)[kVec]) const {
    const uint4 w = *slot(array, row);
    memcpy(out, &w, 16);
  }
  static constexpr int shared_bytes() { return kArrays * kRows * kRowThreads * 16; }
};

/// Calls f(i) for the rows i < valid of a thread's kRows, in order: unrolled whole, or by two
/// where `kByTwo` (16-bit vectors, 8 channels a thread: unrolled whole, the compiler keeps every
/// row's loads in flight and spills).
template <int kRows, bool kByTwo, class F>
__device__ __forceinline__ void for_rows(int valid, F&& f) {
  if constexpr (kByTwo) {
#pragma unroll 2
    for (int i = 0; i < kRows; ++i) {
      if (i >= valid) break;
      f(i);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (i >= valid) break;
      f(i);
    }
  }
}

template <class T, bool kBackward, int kVec>
using RowStageOf = RowStage<T, kVec, kRowsPerThread<kBackward>, kBackward ? 3 : 2>;
/// Dynamic shared memory of a row-path block: its staged rows.
template <class T, bool kBackward, int kVec>
constexpr int kRowStageBytes = RowStageOf<T, kBackward, kVec>::shared_bytes();
/// Blocks per multiprocessor the launch bounds ask for: three, which the staged rows (64 KiB
/// forward, 48 KiB backward, none on the register path) with about 6 KiB more each (the tile
/// scan's exchange, the block's reservation) leave room for in 227 KiB (checked in row_kernel).
constexpr int kRowMinBlocks = 3;

/// The row path's kernel, in one of two modes.
///
/// Look-back (kWalk false): one block per (tile, slab), tile-major, so a tile's predecessors in
/// its chain have lower block indices; the tile's state comes from the decoupled look-back.
///
/// Walk (kWalk true): one block per chain of (part, slab), where a part is `p.window`
/// consecutive positions (a dense batch's sequence, or all rows): the block walks its tiles in
/// order, carrying the state from one to the next in shared memory. Nothing is looked back and
/// no workspace is used: where the chains fill the GPU (many sequences of channels) this is the
/// faster mode (row_walks), and it serves every call made without a workspace.
template <class T, bool kBackward, bool kDesc, int kVec, bool kWalk>
__global__ void __launch_bounds__(kRowThreads, launch_min_blocks(kRowThreads, kRowMinBlocks))
    row_kernel(const RowParams<T> p, const RowStates<compute_t<T>> st) {
  using C = compute_t<T>;
  using Pairs = CutPairs<C, kVec>;
  constexpr int kRows = kRowsPerThread<kBackward>;
  constexpr int kTileRows = kRowGroups * kRows;
  constexpr int kWidth = kRowLanes * kVec;
  constexpr int kArrays = kBackward ? 3 : 2;
  using Stage = RowStageOf<T, kBackward, kVec>;
  static_assert(kRowMinBlocks * (kRowStageBytes<T, kBackward, kVec> + 6 * 1024) <= 227 * 1024,
                "the staged rows leave no room for kRowMinBlocks blocks per multiprocessor");
  extern __shared__ uint4 row_shared[];

  __shared__ Pairs warp_total[kRowWarps][kRowLanes];
  __shared__ C carry_shared[kWidth];
  __shared__ bool need_shared;

  const int tid = threadIdx.x;
  const int lane = tid % kRowLanes;
  const int group = tid / kRowLanes;  // row group, 0 .. kRowGroups-1
  const int warp = tid / kWarpThreads;
  const int group_in_warp = (tid % kWarpThreads) / kRowLanes;
  const RowWalk<T> walk{p};
  const auto row_of = [&](int64_t pos) { return kDesc ? p.rows - 1 - pos : pos; };

  // The block's slab and positions: tiles of kTileRows positions from `lo`, none at or past `hi`.
  const int64_t slab = int64_t(blockIdx.x) % p.slabs;
  const int64_t c0 = slab * kWidth + int64_t(lane) * kVec;
  const bool active = c0 < p.channels;  // whole vectors: kVec divides channels on the vector path
  int64_t lo = 0, hi = p.rows, first_tile = 0, end_tile = 0;
  if constexpr (kWalk) {
    lo = int64_t(blockIdx.x) / p.slabs * p.window;
    hi = lo + p.window < p.rows ? lo + p.window : p.rows;
    end_tile = ceil_div(hi - lo, int64_t(kTileRows));
  } else {
    first_tile = int64_t(blockIdx.x) / p.slabs;
    end_tile = first_tile + 1;
    // the lines of the records this tile will publish, into L2 ahead of its successors' reads
    constexpr int kRecordLines = int(kWidth * sizeof(RowRecord<C>) / 128);
    constexpr int kPerLine = int(128 / sizeof(RowRecord<C>));
    if (tid < kRecordLines)
      cuda::apply_access_property(
          st.records + (slab * p.tiles + first_tile) * kWidth + tid * kPerLine, 128,
          cuda::access_property::normal{});
  }

  // Packed sequences with no rows: their final state is their initial state (backward: the
  // gradient of h0 is that of the final state). The first tile of each slab writes them.
  if (walk.packed() && p.state_out != nullptr && lo == 0 && first_tile == 0) {
    for (int64_t n = tid / kRowLanes; n < p.segments; n += kRowGroups) {
      if (walk.offset(n + 1) > walk.offset(n) || !active) continue;
      const T* src = kBackward ? p.state_in2 : p.state_in;
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + v;
        p.state_out[walk.state(n, c)] =
            src != nullptr ? src[walk.state(n, c)] : to_storage<T>(C(0));
      }
    }
  }

  // What a thread knows of a tile it loaded: the sequence of its first position, and which of
  // its positions begin (first) and end (last) a sequence.
  struct Loaded {
    RowSegment seg0;
    uint32_t first_mask, last_mask;
  };

  // ---- load a tile's rows into the stage: forward a, b at each position; backward g at each
  // position, the gate one position earlier (a[t+1] in the forward's order) and the state one
  // later (x[t-1]). Arrays: 0 gates (backward: one position earlier), 1 tokens (backward:
  // grad_out), 2 (backward) states one position later.
  const auto load_tile = [&](Stage& stage, int64_t tile) {
    Loaded t{RowSegment{}, 0u, 0u};
    const int64_t p0 = lo + tile * kTileRows + int64_t(group) * kRows;  // the thread's first
    constexpr int kFrom = kBackward ? -1 : 0, kTo = kBackward ? kRows + 1 : kRows;
    const int64_t from = p0 + kFrom < 0 ? 0 : p0 + kFrom;
    RowSegment seg{};
    if (from < hi) seg = walk.find(row_of(from));
    RowCursor<const T, kDesc> in_at[kArrays];
#pragma unroll
    for (int i = kFrom; i < kTo; ++i) {
      const int64_t pos = p0 + i;
      if (pos < 0) continue;
      if (pos >= hi) break;
      const int64_t r = row_of(pos);
      walk.template step<kDesc>(seg, r);
      if (i >= 0 && i < kRows) {
        if (i == 0) t.seg0 = seg;
        const bool is_first = kDesc ? r == seg.end - 1 : r == seg.start;
        const bool is_last = kDesc ? r == seg.start : r == seg.end - 1;
        t.first_mask |= uint32_t(is_first) << i;
        t.last_mask |= uint32_t(is_last) << i;
      }
      if (!active) continue;
#pragma unroll
      for (int k = 0; k < kArrays; ++k) in_at[k].to(walk, p.in[k], seg, r, c0);
      if constexpr (kBackward) {
        // the gate of position i serves position i + 1, the state of position i serves i - 1
        if (i + 1 < kRows) stage.load(0, i + 1, in_at[0].at, p.in[0].channel_stride);
        if (i >= 0 && i < kRows) stage.load(1, i, in_at[2].at, p.in[2].channel_stride);
        if (i >= 1) stage.load(2, i - 1, in_at[1].at, p.in[1].channel_stride);
      } else {
        stage.load(0, i, in_at[0].at, p.in[0].channel_stride);
        stage.load(1, i, in_at[1].at, p.in[1].channel_stride);
      }
    }
    return t;
  };

  // ---- scan a loaded tile (the stage's current one) and store it
  const auto scan_tile = [&](const Stage& stage, int64_t tile, const Loaded& t) {
    const int64_t p0 = lo + tile * kTileRows + int64_t(group) * kRows;
    const uint32_t first_mask = t.first_mask, last_mask = t.last_mask;
    const int valid = p0 >= hi ? 0 : (hi - p0 < kRows ? int(hi - p0) : kRows);

    // The value at a reset (the first position of a sequence in scan order): forward a*h0 + b,
    // backward g + gT.
    const auto reset_value = [&](int64_t n, int v, C alpha, C beta) -> C {
      const T* h = kBackward ? p.state_in2 : p.state_in;
      const C h0 = h != nullptr ? to_compute<C>(h[walk.state(n, c0 + v)]) : C(0);
      return kBackward ? beta + h0 : fma(alpha, h0, beta);
    };
    // The element pair of position i: (alpha, beta).
    const auto element = [&](int i, C(&alpha)[kVec], C(&beta)[kVec]) {
      T ta[kVec], tb[kVec];
      stage.get(0, i, ta);
      stage.get(1, i, tb);
      widen<kVec>(ta, alpha);
      widen<kVec>(tb, beta);
    };

    // ---- this thread's aggregate
    Pairs mine;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      mine.a[v] = C(1);
      mine.b[v] = C(0);
    }
    mine.cut = false;
    if (valid > 0) {
      RowSegment s = t.seg0;
      for_rows<kRows, kVec >= 8>(valid, [&](int i) {
        if (active) {
          C alpha[kVec], beta[kVec];
          element(i, alpha, beta);
          if (first_mask >> i & 1) {
            walk.template step<kDesc>(s, row_of(p0 + i));
#pragma unroll
            for (int v = 0; v < kVec; ++v) mine.b[v] = reset_value(s.n, v, alpha[v], beta[v]);
          } else {
#pragma unroll
            for (int v = 0; v < kVec; ++v) {
              mine.b[v] = fma(alpha[v], mine.b[v], beta[v]);
              mine.a[v] *= alpha[v];
            }
          }
        }
        if (first_mask >> i & 1) mine.cut = true;
      });
    }

    // ---- the tile's scan across row groups: Kogge-Stone over a warp's four groups, then the
    // warps' totals in order through shared memory (a fixed tree: deterministic).
    Pairs incl = mine;
#pragma unroll
    for (int d = 1; d < kRowGroupsPerWarp; d *= 2) {
      Pairs e;
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        e.a[v] = __shfl_up_sync(0xffffffffu, incl.a[v], d * kRowLanes);
        e.b[v] = __shfl_up_sync(0xffffffffu, incl.b[v], d * kRowLanes);
      }
      e.cut = __shfl_up_sync(0xffffffffu, int(incl.cut), d * kRowLanes) != 0;
      if (group_in_warp >= d) compose_into(e, incl);
    }
    Pairs excl;  // groups of this warp before this one
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      excl.a[v] = __shfl_up_sync(0xffffffffu, incl.a[v], kRowLanes);
      excl.b[v] = __shfl_up_sync(0xffffffffu, incl.b[v], kRowLanes);
    }
    excl.cut = __shfl_up_sync(0xffffffffu, int(incl.cut), kRowLanes) != 0;
    if (group_in_warp == 0) {
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        excl.a[v] = C(1);
        excl.b[v] = C(0);
      }
      excl.cut = false;
    }
    if (group_in_warp == kRowGroupsPerWarp - 1) warp_total[warp][lane] = incl;
    if (tid == 0) {
      // does the tile's first position need the state before the tile?
      need_shared = !(first_mask & 1);
    }
    __syncthreads();
    Pairs before;  // every group of the tile before this thread's
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      before.a[v] = C(1);
      before.b[v] = C(0);
    }
    before.cut = false;
    for (int w = 0; w < warp; ++w) {
      Pairs tw = warp_total[w][lane];
      compose_into(before, tw);
      before = tw;
    }
    compose_into(before, excl);  // excl := before then excl
    const bool need = need_shared;

    // ---- the state before the tile: carried (walk), or looked back, kG lanes per channel.
    // Lane 0 of each channel publishes the tile's aggregate for it (or at once its state, when
    // the tile holds a reset), the lanes look back, and lane 0 publishes the state.
    constexpr int kG = kRowThreads / kWidth;
    const int lb_ch = tid / kG, lb_slot = tid % kG;
    if constexpr (kWalk) {
      if (tile == 0 && lb_slot == 0) carry_shared[lb_ch] = C(0);
    } else {
      // the tile's total for channel lb_ch (lane 0 of the channel): the warps' totals in order
      CutPairs<C, 1> total{{C(1)}, {C(0)}, false};
      for (int w = 0; lb_slot == 0 && w < kRowWarps; ++w) {
        const Pairs& tw = warp_total[w][lb_ch / kVec];
        CutPairs<C, 1> e{{tw.a[lb_ch % kVec]}, {tw.b[lb_ch % kVec]}, tw.cut};
        compose_into(total, e);
        total = e;
      }
      const C ta = total.a[0], tb = total.b[0];
      const uint64_t tag = st.tag << 2;
      RowRecord<C>* const slab_records = st.records + slab * p.tiles * kWidth;
      RowRecord<C>* const own = slab_records + tile * kWidth + lb_ch;
      if (lb_slot == 0) {
        if (total.cut)
          row_publish_state(own, tb, tag);
        else
          row_publish_aggregate(own, ta, tb, tag);
      }
      C x = C(0);
      if (tile > 0 && need)
        x = row_look_back<C, kG, kWidth, kWarpThreads>(slab_records, tile, lb_ch, lb_slot, tag);
      if (lb_slot == 0) {
        carry_shared[lb_ch] = x;
        if (!total.cut) row_publish_state(own, fma(ta, x, tb), tag);
      }
    }
    __syncthreads();

    // ---- scan the thread's rows from its carry and store
    C x[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const C in = carry_shared[lane * kVec + v];
      x[v] = excl.cut ? excl.b[v] : fma(excl.a[v], in, excl.b[v]);
    }
    if (valid > 0 && active) {
      RowSegment s = t.seg0;
      RowCursor<T, kDesc> out_at[kBackward ? 2 : 1];
      for_rows<kRows, kVec >= 8>(valid, [&](int i) {
        const int64_t r = row_of(p0 + i);
        walk.template step<kDesc>(s, r);
#pragma unroll
        for (int k = 0; k < (kBackward ? 2 : 1); ++k) out_at[k].to(walk, p.out[k], s, r, c0);
        C alpha[kVec], beta[kVec];
        element(i, alpha, beta);
        if (first_mask >> i & 1) {
#pragma unroll
          for (int v = 0; v < kVec; ++v) x[v] = reset_value(s.n, v, alpha[v], beta[v]);
        } else {
#pragma unroll
          for (int v = 0; v < kVec; ++v) x[v] = fma(alpha[v], x[v], beta[v]);
        }
        const bool is_last = last_mask >> i & 1;
        if constexpr (kBackward) {
          // x is d: grad_tokens = d; grad_gates = d * x[t-1] (h0 at the sequence's first row)
          C prev[kVec];
          if (is_last) {
#pragma unroll
            for (int v = 0; v < kVec; ++v)
              prev[v] =
                  p.state_in != nullptr ? to_compute<C>(p.state_in[walk.state(s.n, c0 + v)]) : C(0);
          } else {
            T tx[kVec];
            stage.get(2, i, tx);
            widen<kVec>(tx, prev);
          }
          T gg[kVec], gt[kVec];
#pragma unroll
          for (int v = 0; v < kVec; ++v) {
            gg[v] = to_storage<T>(x[v] * prev[v]);
            gt[v] = to_storage<T>(x[v]);
          }
          store_row<kVec>(out_at[0].at, 0, p.out[0].channel_stride, gg);
          store_row<kVec>(out_at[1].at, 0, p.out[1].channel_stride, gt);
          if (is_last && p.state_out != nullptr) {
            // grad h0 = a[first] * d[first]: the gate of this position
            T g0[kVec];
            load_row<kVec>(p.in[0].ptr, walk.element(p.in[0], s, r, c0), p.in[0].channel_stride,
                           g0);
            C a0[kVec];
            widen<kVec>(g0, a0);
#pragma unroll
            for (int v = 0; v < kVec; ++v)
              p.state_out[walk.state(s.n, c0 + v)] = to_storage<T>(a0[v] * x[v]);
          }
        } else {
          T o[kVec];
#pragma unroll
          for (int v = 0; v < kVec; ++v) o[v] = to_storage<T>(x[v]);
          store_row<kVec>(out_at[0].at, 0, p.out[0].channel_stride, o);
          if (is_last && p.state_out != nullptr) {
#pragma unroll
            for (int v = 0; v < kVec; ++v) p.state_out[walk.state(s.n, c0 + v)] = o[v];
          }
        }
      });
    }
    if constexpr (kWalk) {
      // the carry into the next tile: the state after this tile's last row, held by the last
      // row group's threads (x after their last valid row; a thread past the end holds its
      // carry unchanged, which is the state after the last row). The next tile reads it after
      // its first barrier.
      __syncthreads();
      if (group == kRowGroups - 1) {
#pragma unroll
        for (int v = 0; v < kVec; ++v) carry_shared[lane * kVec + v] = x[v];
      }
    }
  };

  Stage stage(row_shared);
  if constexpr (kWalk) {
    for (int64_t tile = 0; tile < end_tile; ++tile) {
      const Loaded t = load_tile(stage, tile);
      stage.wait();
      scan_tile(stage, tile, t);
    }
  } else {
    const Loaded t = load_tile(stage, first_tile);
    stage.wait();
    scan_tile(stage, first_tile, t);
  }
}

/// Whether the arrays of a row-path call can take 16-byte vectors along channels: every array
/// channel-contiguous, aligned to 16 bytes, with time and batch strides in whole vectors, and
/// whole vectors of channels.
template <class T, class P>
bool row_vector_ok(const RowArray<P>& a, int64_t channels) {
  constexpr int64_t kVec = 16 / sizeof(T);
  return channels % kVec == 0 && a.channel_stride == 1 &&
         reinterpret_cast<uintptr_t>(a.ptr) % 16 == 0 && a.time_stride % kVec == 0 &&
         a.batch_stride % kVec == 0;
}

/// Tiles of the look-back mode with vectors of kVec channels: (slabs, tiles per slab).
template <class T, bool kBackward>
void row_grid(int64_t channels, int64_t rows, int kVec, int64_t& slabs, int64_t& tiles) {
  const int64_t kTileRows = int64_t(kRowGroups) * kRowsPerThread<kBackward>;
  slabs = ceil_div(channels, int64_t(kRowLanes) * kVec);
  tiles = ceil_div(rows, kTileRows);
}

/// Scratch bytes of a look-back call (the larger of the vector and the scalar grid, so that the
/// size does not depend on the pointers); false when the grid would exceed one launch.
template <class T, bool kBackward>
bool row_scratch_bytes(int64_t channels, int64_t rows, size_t& bytes) {
  using C = compute_t<T>;
  bytes = 0;
  for (int vec : {int(16 / sizeof(T)), 1}) {
    int64_t slabs, tiles;
    row_grid<T, kBackward>(channels, rows, vec, slabs, tiles);
    if (double(slabs) * double(tiles) > double(kMaxTiles)) return false;
    const size_t b = RowStates<C>::bytes(slabs * tiles, int64_t(kRowLanes) * vec);
    bytes = b > bytes ? b : bytes;
  }
  return true;
}

/// The chains of the walk mode: (part, slab) for every part of `p.window` positions. Dense
/// batches walk each sequence apart (parts = batch) where that grid fits one launch; otherwise,
/// and for packed sequences, one chain per slab walks every row.
template <class T>
void row_chains(RowParams<T>& p, int kVec, int64_t& chains) {
  p.slabs = ceil_div(p.channels, int64_t(kRowLanes) * kVec);
  const bool packed = p.offsets32 != nullptr || p.offsets64 != nullptr;
  const bool apart = !packed && double(p.segments) * double(p.slabs) <= double(kMaxTiles);
  p.window = apart ? p.length : p.rows;
  chains = (apart ? p.segments : 1) * p.slabs;
}

template <class T, bool kBackward, bool kDesc, int kVec, bool kWalk>
cudaError_t launch_rows(RowParams<T> p, void* workspace, cudaStream_t stream) {
  using C = compute_t<T>;
  RowStates<C> st{};
  int64_t blocks = 0;
  if constexpr (kWalk) {
    row_chains(p, kVec, blocks);
  } else {
    row_grid<T, kBackward>(p.channels, p.rows, kVec, p.slabs, p.tiles);
    blocks = p.slabs * p.tiles;
    st = RowStates<C>::carve(workspace, call_tag());
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (const cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) return e;
    if (capture != cudaStreamCaptureStatusNone) {
      // a graph replays the call's tag: its flags start from zero on every replay
      const cudaError_t e = cudaMemsetAsync(
          st.records, 0, RowStates<C>::record_bytes(p.slabs * p.tiles, int64_t(kRowLanes) * kVec),
          stream);
      if (e != cudaSuccess) return e;
    }
  }
  constexpr int kShared = kRowStageBytes<T, kBackward, kVec>;
  constexpr auto kKernel = &row_kernel<T, kBackward, kDesc, kVec, kWalk>;
  if constexpr (kShared > 0) {
    // the default allowance is 48 KiB less the static shared memory, which the staged rows
    // exceed; set on every launch: a host call that does not synchronize
    const cudaError_t e = allow_dynamic_shared(kKernel, kShared);
    if (e != cudaSuccess) return e;
  }
  return launch_kernel(kKernel, blocks, kRowThreads, kShared, stream, p, st);
}

/// Whether a call with a workspace walks (see row_kernel): where its chains fill the walking
/// blocks' waves (resident blocks times multiprocessors) to at least kRowWalkFill. A chain is a
/// whole sequence of a slab, so a wave left part empty idles until its longest chain ends. On the
/// H200 (bench/RESULTS.md, "Channel-last and packed layouts: the row path";
/// bench/results/row_modes_probe.txt), f32 forward (backward) walking against looking back, of a
/// same-traffic copy: (8, 8192, 1536), 384 chains, 0.97 of a wave: 0.90 (0.89) against
/// 0.78 (0.74); (16, 2048, 2048), 1024 chains, 2.6 waves filled to 0.86: 0.87 (0.87) against
/// 0.79 (0.77); (4, 4096, 4096), 512 chains, 1.3 waves filled to 0.65: 0.73 (0.71) against
/// 0.80 (0.77).
constexpr double kRowWalkFill = 0.8;

template <class T, bool kBackward, int kVec>
Status row_walks(RowParams<T> p, bool& walk) {
  // the grid the call would walk with, on the current device
  int64_t chains = 0;
  row_chains(p, kVec, chains);
  constexpr auto kKernel = &row_kernel<T, kBackward, false, kVec, true>;
  int device = 0, sms = 0, resident = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess)
    e = prepare_staged<kKernel, kRowThreads, kRowStageBytes<T, kBackward, kVec>, false>(device,
                                                                                        resident);
  if (e != cudaSuccess) {
    clear_our_error(e);
    return Status::cuda_error(e);
  }
  const double waves = double(chains) / (double(resident > 0 ? resident : 1) * sms);
  walk = waves / std::ceil(waves) >= kRowWalkFill;
  return Status::success();
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
