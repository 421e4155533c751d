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
// the first reset it meets, so packed sequences never wait on each other.
//
// Without a workspace (scan(args, stream)) one block walks each slab's tiles in order, carrying
// the state: correct for every call, fast only where the slabs alone fill the GPU.
#pragma once

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime_api.h>

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
constexpr int kRowGroups = kRowThreads / kRowLanes;       ///< 32 row groups per tile
constexpr int kRowWarps = kRowThreads / kWarpThreads;     ///< 8
constexpr int kRowGroupsPerWarp = kWarpThreads / kRowLanes;  ///< 4
/// Aggregates a look-back loads per round (one per row group), folded in order by warp 0.
constexpr int kFoldBatch = 16;

/// Rows per thread: forward 8 (two streams in), backward 4 (three): 32 or 48 KiB of shared
/// memory per block on the vector path (RowStage), three or four blocks per multiprocessor.
template <bool kBackward, int kVec>
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
  int64_t rows;      ///< all rows: batch * length, or the packed length
  int64_t length;    ///< dense: rows per sequence
  int64_t segments;  ///< dense: batch; packed: the sequence count
  const int32_t* offsets32;  ///< packed offsets (both null: dense)
  const int64_t* offsets64;
  const T* state_in;
  const T* state_in2;
  T* state_out;
  int64_t state_batch_stride, state_channel_stride;
  int64_t slabs;  ///< channel slabs: chains of tiles
  int64_t tiles;  ///< tiles per slab
};

/// Look-back records of the row path: one flag per tile ((tag << 2) | status), one aggregate
/// pair and one inclusive state per channel of the slab.
template <class C>
struct RowStates {
  uint64_t* flags;    ///< [slab][tile]
  Affine<C>* pairs;   ///< [slab][tile][channel of the slab]
  C* inclusive;       ///< [slab][tile][channel of the slab]
  uint64_t tag;

  static constexpr size_t kAlign = 128;
  static constexpr size_t round_up(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }
  static constexpr size_t flag_bytes(int64_t tiles) {
    return round_up(static_cast<size_t>(tiles) * sizeof(uint64_t));
  }
  /// Bytes of workspace for `tiles` tiles of `width` channels, with room to align any workspace.
  static constexpr size_t bytes(int64_t tiles, int64_t width) {
    return kAlign - 1 + flag_bytes(tiles) +
           round_up(static_cast<size_t>(tiles * width) * sizeof(Affine<C>)) +
           round_up(static_cast<size_t>(tiles * width) * sizeof(C));
  }
  static RowStates carve(void* workspace, int64_t tiles, int64_t width, uint64_t tag) {
    const uintptr_t base = (reinterpret_cast<uintptr_t>(workspace) + kAlign - 1) / kAlign * kAlign;
    RowStates s;
    s.flags = reinterpret_cast<uint64_t*>(base);
    s.pairs = reinterpret_cast<Affine<C>*>(base + flag_bytes(tiles));
    s.inclusive = reinterpret_cast<C*>(
        base + flag_bytes(tiles) + round_up(static_cast<size_t>(tiles * width) * sizeof(Affine<C>)));
    s.tag = tag;
    return s;
  }
};

enum RowStatus : uint64_t { kRowEmpty = 0, kRowAggregate = 1, kRowInclusive = 2 };

#if defined(__CUDACC__)

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
    if (i <= 0) return 0;
    if (i >= p.segments) return p.rows;
    const int64_t v = p.offsets32 != nullptr ? int64_t(__ldg(p.offsets32 + i)) : __ldg(p.offsets64 + i);
    return v < 0 ? 0 : (v > p.rows ? p.rows : v);
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
__device__ __forceinline__ void store_row(T* base, int64_t at, int64_t cstride, const T (&v)[kVec]) {
  if constexpr (kVec * sizeof(T) == 16) {
    uint4 w;
    memcpy(&w, v, 16);
    *reinterpret_cast<uint4*>(base + at) = w;
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) base[at + i * cstride] = v[i];
  }
}

/// Where a thread holds the rows it loaded. On the vector path the loads go straight to shared
/// memory by asynchronous copies (cp.async, no registers held while they fly), one 16-byte slot
/// per (array, row, thread), consecutive threads in consecutive slots; the block's residency is
/// then set by shared memory, not registers, and more blocks per multiprocessor overlap one
/// block's look-back with another's loads. The scalar path holds its rows in registers.
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

/// The row path's kernel. One block per (tile, slab), tile-major, so a tile's predecessors in
/// its chain have lower block indices; with `sequential`, one block per slab walks its tiles in
/// order and nothing is looked back.
template <class T, bool kBackward, bool kDesc, int kVec>
__global__ void __launch_bounds__(kRowThreads, 3)
    row_kernel(const RowParams<T> p, const RowStates<compute_t<T>> st, const bool sequential) {
  using C = compute_t<T>;
  using Pairs = CutPairs<C, kVec>;
  constexpr int kRows = kRowsPerThread<kBackward, kVec>;
  constexpr int kTileRows = kRowGroups * kRows;
  constexpr int kWidth = kRowLanes * kVec;
  using Stage = RowStage<T, kVec, kRows, kBackward ? 3 : 2>;
  extern __shared__ uint4 row_shared[];

  __shared__ Pairs warp_total[kRowWarps][kRowLanes];
  __shared__ C carry_shared[kWidth];
  __shared__ Affine<C> fold_shared[kFoldBatch][kWidth];
  __shared__ int64_t found_shared;
  __shared__ bool need_shared;

  const int tid = threadIdx.x;
  const int lane = tid % kRowLanes;
  const int group = tid / kRowLanes;                 // row group, 0 .. kRowGroups-1
  const int warp = tid / kWarpThreads;
  const int group_in_warp = (tid % kWarpThreads) / kRowLanes;
  const RowWalk<T> walk{p};

  const int64_t slab = sequential ? int64_t(blockIdx.x) : int64_t(blockIdx.x) % p.slabs;
  const int64_t c0 = slab * kWidth + int64_t(lane) * kVec;
  const bool active = c0 < p.channels;  // whole vectors: kVec divides channels on the vector path
  const int64_t first_tile = sequential ? 0 : int64_t(blockIdx.x) / p.slabs;
  const int64_t last_tile = sequential ? p.tiles : first_tile + 1;

  // Packed sequences with no rows: their final state is their initial state (backward: the
  // gradient of h0 is that of the final state). The first tile of each slab writes them.
  if (walk.packed() && p.state_out != nullptr && first_tile == 0) {
    for (int64_t n = tid / kRowLanes; n < p.segments; n += kRowGroups) {
      if (walk.offset(n + 1) > walk.offset(n) || !active) continue;
      const T* src = kBackward ? p.state_in2 : p.state_in;
      for (int v = 0; v < kVec; ++v) {
        const int64_t c = c0 + v;
        p.state_out[walk.state(n, c)] = src != nullptr ? src[walk.state(n, c)] : to_storage<T>(C(0));
      }
    }
  }

  for (int64_t tile = first_tile; tile < last_tile; ++tile) {
    const int64_t p0 = tile * kTileRows + int64_t(group) * kRows;  // first position of the thread
    const auto row_of = [&](int64_t pos) { return kDesc ? p.rows - 1 - pos : pos; };

    // ---- load: forward a, b at each position; backward g at each position, the gate one
    // position earlier (a[t+1] in the forward's order) and the state one later (x[t-1]).
    // arrays: 0 gates (backward: one position earlier), 1 tokens (backward: grad_out),
    // 2 (backward) states one position later
    Stage stage(row_shared);
    uint32_t first_mask = 0, last_mask = 0;
    RowSegment seg0{};  // the sequence of the thread's first position
    {
      constexpr int kFrom = kBackward ? -1 : 0, kTo = kBackward ? kRows + 1 : kRows;
      const int64_t from = p0 + kFrom < 0 ? 0 : p0 + kFrom;
      RowSegment seg{};
      if (from < p.rows) seg = walk.find(row_of(from));
#pragma unroll
      for (int i = kFrom; i < kTo; ++i) {
        const int64_t pos = p0 + i;
        if (pos < 0) continue;
        if (pos >= p.rows) break;
        const int64_t r = row_of(pos);
        walk.template step<kDesc>(seg, r);
        if (i >= 0 && i < kRows) {
          if (i == 0) seg0 = seg;
          const bool is_first = kDesc ? r == seg.end - 1 : r == seg.start;
          const bool is_last = kDesc ? r == seg.start : r == seg.end - 1;
          first_mask |= uint32_t(is_first) << i;
          last_mask |= uint32_t(is_last) << i;
        }
        if (!active) continue;
        if constexpr (kBackward) {
          // the gate of position i serves position i + 1, the state of position i serves i - 1
          if (i + 1 < kRows)
            stage.load(0, i + 1, p.in[0].ptr + walk.element(p.in[0], seg, r, c0),
                       p.in[0].channel_stride);
          if (i >= 0 && i < kRows)
            stage.load(1, i, p.in[2].ptr + walk.element(p.in[2], seg, r, c0),
                       p.in[2].channel_stride);
          if (i >= 1)
            stage.load(2, i - 1, p.in[1].ptr + walk.element(p.in[1], seg, r, c0),
                       p.in[1].channel_stride);
        } else {
          stage.load(0, i, p.in[0].ptr + walk.element(p.in[0], seg, r, c0), p.in[0].channel_stride);
          stage.load(1, i, p.in[1].ptr + walk.element(p.in[1], seg, r, c0), p.in[1].channel_stride);
        }
      }
    }
    stage.wait();
    const int valid = p0 >= p.rows ? 0 : (p.rows - p0 < kRows ? int(p.rows - p0) : kRows);

    // The value at a reset (the first position of a sequence in scan order): forward a*h0 + b,
    // backward g + gT.
    const auto reset_value = [&](int i, int64_t n, int v, C alpha, C beta) -> C {
      const T* h = kBackward ? p.state_in2 : p.state_in;
      const C h0 = h != nullptr ? to_compute<C>(h[walk.state(n, c0 + v)]) : C(0);
      return kBackward ? beta + h0 : fma(alpha, h0, beta);
    };
    // The element pair of position i: (alpha, beta).
    const auto element = [&](int i, C (&alpha)[kVec], C (&beta)[kVec]) {
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
      RowSegment s = seg0;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i >= valid) break;
        if (active) {
          C alpha[kVec], beta[kVec];
          element(i, alpha, beta);
          if (first_mask >> i & 1) {
            walk.template step<kDesc>(s, row_of(p0 + i));
#pragma unroll
            for (int v = 0; v < kVec; ++v) mine.b[v] = reset_value(i, s.n, v, alpha[v], beta[v]);
          } else {
#pragma unroll
            for (int v = 0; v < kVec; ++v) {
              mine.b[v] = fma(alpha[v], mine.b[v], beta[v]);
              mine.a[v] *= alpha[v];
            }
          }
        }
        if (first_mask >> i & 1) mine.cut = true;
      }
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
      Pairs t = warp_total[w][lane];
      compose_into(before, t);
      before = t;
    }
    compose_into(before, excl);  // excl := before then excl
    const bool need = need_shared;

    // ---- the state before the tile: looked back, or carried (sequential). Warp 0 publishes
    // and finds the nearest predecessor with an inclusive state; the whole block then loads
    // the aggregates after it, kFoldBatch tiles a round, and warp 0 folds them in order.
    const int64_t rec = slab * p.tiles + tile;
    const int64_t chan = int64_t(lane) * kVec;  // this lane's first channel within the slab
    const uint64_t tag = st.tag << 2;
    const bool fold = !sequential && tile > 0 && need;
    const bool folder = warp == 0 && group_in_warp == 0;
    Pairs total;
    C carry[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) carry[v] = C(0);
    if (warp == 0) {
      total = before;  // warp 0: before is the identity; fold every warp's total
      for (int w = 0; w < kRowWarps; ++w) {
        Pairs t = warp_total[w][lane];
        compose_into(total, t);
        total = t;
      }
      if (sequential) {
        if (tile > 0 && need) {
#pragma unroll
          for (int v = 0; v < kVec; ++v) carry[v] = carry_shared[chan + v];
        }
      } else {
        // publish the aggregate, or at once the inclusive state when the tile holds a reset
        if (group_in_warp == 0) {
          if (total.cut) {
#pragma unroll
            for (int v = 0; v < kVec; ++v) st.inclusive[rec * kWidth + chan + v] = total.b[v];
          } else {
#pragma unroll
            for (int v = 0; v < kVec; ++v)
              st.pairs[rec * kWidth + chan + v] = Affine<C>{total.a[v], total.b[v]};
          }
          __threadfence();
        }
        __syncwarp();
        if (tid == 0)
          store_release(st.flags + rec, tag | (total.cut ? kRowInclusive : kRowAggregate));
        if (fold) {
          // the nearest predecessor with an inclusive state, every tile after it with its
          // aggregate
          int64_t base = tile - 1;
          for (;;) {
            const int64_t j = base - tid;
            // before the chain's first tile: nothing (tile 0 always turns inclusive)
            const uint64_t f = j >= 0 ? load_acquire(st.flags + slab * p.tiles + j) : 0;
            const bool ours = (f & ~uint64_t(3)) == tag;
            const unsigned inc = __ballot_sync(0xffffffffu, ours && (f & 3) == kRowInclusive);
            const unsigned agg = __ballot_sync(0xffffffffu, ours && (f & 3) == kRowAggregate);
            if (inc != 0) {
              const int nearest = __ffs(inc) - 1;
              const unsigned below = nearest == 0 ? 0u : (0xffffffffu >> (32 - nearest));
              if ((agg & below) == below) {
                if (tid == 0) found_shared = base - nearest;
                break;
              }
            } else if (agg == 0xffffffffu) {
              base -= kWarpThreads;
              continue;
            }
            __nanosleep(32);
          }
        }
      }
    }
    if (fold) {
      __syncthreads();
      const int64_t found = found_shared;
      const int64_t srec = slab * p.tiles;
      if (folder) {
#pragma unroll
        for (int v = 0; v < kVec; ++v)
          carry[v] = __ldcg(st.inclusive + (srec + found) * kWidth + chan + v);
      }
      for (int64_t j0 = found + 1; j0 < tile; j0 += kFoldBatch) {
        const int64_t n = tile - j0 < kFoldBatch ? tile - j0 : kFoldBatch;
        if (group < n) {
          const C* q = reinterpret_cast<const C*>(st.pairs + (srec + j0 + group) * kWidth + chan);
#pragma unroll
          for (int v = 0; v < kVec; ++v)
            fold_shared[group][chan + v] = Affine<C>{__ldcg(q + 2 * v), __ldcg(q + 2 * v + 1)};
        }
        __syncthreads();
        if (folder) {
          for (int g = 0; g < n; ++g) {
#pragma unroll
            for (int v = 0; v < kVec; ++v) {
              const Affine<C> f = fold_shared[g][chan + v];
              carry[v] = fma(f.a, carry[v], f.b);
            }
          }
        }
        __syncthreads();
      }
    }
    if (warp == 0) {
      if (!sequential && !total.cut) {
        // publish the inclusive state
        if (group_in_warp == 0) {
#pragma unroll
          for (int v = 0; v < kVec; ++v)
            st.inclusive[rec * kWidth + chan + v] = fma(total.a[v], carry[v], total.b[v]);
          __threadfence();
        }
        __syncwarp();
        if (tid == 0) store_release(st.flags + rec, tag | kRowInclusive);
      }
      if (group_in_warp == 0) {
#pragma unroll
        for (int v = 0; v < kVec; ++v) carry_shared[chan + v] = carry[v];
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
      RowSegment s = seg0;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i >= valid) break;
        const int64_t r = row_of(p0 + i);
        walk.template step<kDesc>(s, r);
        C alpha[kVec], beta[kVec];
        element(i, alpha, beta);
        if (first_mask >> i & 1) {
#pragma unroll
          for (int v = 0; v < kVec; ++v) x[v] = reset_value(i, s.n, v, alpha[v], beta[v]);
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
              prev[v] = p.state_in != nullptr ? to_compute<C>(p.state_in[walk.state(s.n, c0 + v)])
                                              : C(0);
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
          store_row<kVec>(p.out[0].ptr, walk.element(p.out[0], s, r, c0), p.out[0].channel_stride,
                          gg);
          store_row<kVec>(p.out[1].ptr, walk.element(p.out[1], s, r, c0), p.out[1].channel_stride,
                          gt);
          if (is_last && p.state_out != nullptr) {
            // grad h0 = a[first] * d[first]: the gate of this position
            T g0[kVec];
            load_row<kVec>(p.in[0].ptr, walk.element(p.in[0], s, r, c0), p.in[0].channel_stride, g0);
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
          store_row<kVec>(p.out[0].ptr, walk.element(p.out[0], s, r, c0), p.out[0].channel_stride,
                          o);
          if (is_last && p.state_out != nullptr) {
#pragma unroll
            for (int v = 0; v < kVec; ++v) p.state_out[walk.state(s.n, c0 + v)] = o[v];
          }
        }
      }
    }
    if (sequential) {
      // the carry into the next tile: the state after this tile's last row, held by the last
      // row group's threads (x after their last valid row; a thread past the end holds its
      // carry unchanged, which is the state after the last row)
      __syncthreads();
      if (group == kRowGroups - 1) {
#pragma unroll
        for (int v = 0; v < kVec; ++v) carry_shared[lane * kVec + v] = x[v];
      }
      __syncthreads();
    }
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

/// Tiles of the row path for `p` with vectors of kVec channels: (slabs, tiles per slab).
template <class T, bool kBackward>
void row_grid(int64_t channels, int64_t rows, int kVec, int64_t& slabs, int64_t& tiles) {
  (void)kVec;
  const int64_t kTileRows = int64_t(kRowGroups) * kRowsPerThread<kBackward, 1>;
  slabs = ceil_div(channels, int64_t(kRowLanes) * kVec);
  tiles = ceil_div(rows, kTileRows);
}

/// Scratch bytes of a row-path call (the larger of the vector and the scalar grid, so that the
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

template <class T, bool kBackward, bool kDesc, int kVec>
cudaError_t launch_rows(RowParams<T> p, void* workspace, cudaStream_t stream) {
  using C = compute_t<T>;
  row_grid<T, kBackward>(p.channels, p.rows, kVec, p.slabs, p.tiles);
  RowStates<C> st{};
  const bool sequential = workspace == nullptr;
  if (!sequential) {
    st = RowStates<C>::carve(workspace, p.slabs * p.tiles, int64_t(kRowLanes) * kVec, call_tag());
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (const cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) return e;
    if (capture != cudaStreamCaptureStatusNone) {
      // a graph replays the call's tag: its flags start from zero on every replay
      const cudaError_t e =
          cudaMemsetAsync(st.flags, 0, RowStates<C>::flag_bytes(p.slabs * p.tiles), stream);
      if (e != cudaSuccess) return e;
    }
  }
  const int64_t blocks = sequential ? p.slabs : p.slabs * p.tiles;
  constexpr int kShared =
      RowStage<T, kVec, kRowsPerThread<kBackward, kVec>, kBackward ? 3 : 2>::shared_bytes();
  constexpr auto kKernel = &row_kernel<T, kBackward, kDesc, kVec>;
  if constexpr (kShared > 0) {
    // the default allowance is 48 KiB less the static shared memory, which the backward tile
    // (48 KiB staged) exceeds; set on every launch: a host call that does not synchronize
    const cudaError_t e =
        cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
    if (e != cudaSuccess) return e;
  }
  kKernel<<<static_cast<unsigned>(blocks), kRowThreads, kShared, stream>>>(p, st, sequential);
  return cudaGetLastError();
}

/// Runs a validated, non-empty call on the row path (`desc`: rows in descending order).
template <class T, bool kBackward>
Status run_rows(RowParams<T> p, bool desc, bool vector, const Scratch& scratch,
                cudaStream_t stream) {
  size_t bytes = 0;
  if (!row_scratch_bytes<T, kBackward>(p.channels, p.rows, bytes))
    return Status::not_supported("ascan: too many tiles for one grid");
  constexpr int kVec = 16 / sizeof(T);
  // no workspace (Scratch::kNone): one block walks each slab (launch_rows' sequential mode)
  return with_scratch(scratch, bytes, stream, [&](void* workspace) {
    if (desc)
      return vector ? launch_rows<T, kBackward, true, kVec>(p, workspace, stream)
                    : launch_rows<T, kBackward, true, 1>(p, workspace, stream);
    return vector ? launch_rows<T, kBackward, false, kVec>(p, workspace, stream)
                  : launch_rows<T, kBackward, false, 1>(p, workspace, stream);
  });
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
