// ascan/device/dispatch/dense_rows.cuh: the row path's kernel for dense channel-contiguous
// batches, forward and backward.
//
// A dense (B, T, C) call whose arrays are all channel-contiguous on the 16-byte grid needs none
// of the general row kernel's machinery for packed sequences (segment cursors, per-row sequence
// lookups): here a tile never crosses a sequence. Tiles are kThreads / kLanes row groups
// of kRows consecutive positions of one sequence, times one slab of kLanes * kVec channels; the
// chains of the look-back are the (sequence, slab) pairs, each with its own tiles from the
// sequence's first position. A thread owns kVec channels of kRows positions,
// staged in shared memory by cp.async as in row_kernel; per position it does the recurrence's
// fma (and, for the tile's aggregate, one multiply) and rounds pairs of 16-bit results with one
// conversion. The look-back is row_kernel's (records, folds, bitwise results run to run); the
// final state is the stored value of the last position. Against row_kernel on the same calls
// this kernel executes about half the instructions per element; on the H200 it runs the
// channel-last forward rows at 0.74-0.96 of a same-traffic copy in f32 where row_kernel ran
// 0.66-0.89, and 0.56-0.92 in bf16 where row_kernel ran 0.50-0.68 (bench/RESULTS.md, "Channel-
// last rows").
//
// Its packed form (kPacked) takes packed channel-last calls without states the same way: the
// packed rows are one batch, tiles cut them whatever the lengths, and each tile reads where its
// sequences start from the offsets once, as one bit per position, so a position's only extra
// work is a select (the state before a start is 0).
#pragma once

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "row_kernels.cuh"  // the records, the look-back and the row-group constants

namespace ascan {
namespace detail {

/// A dense channel-contiguous call: strides in elements, per array. Forward: in = {gates,
/// tokens}, out = {out}, state_in = h0, state_out = the final state. Backward: in = {gates,
/// grad_out, states}, out = {grad_gates, grad_tokens}, state_in = h0, state_in2 =
/// grad_final_state, state_out = grad_initial_state.
template <class T>
struct DenseRowParams {
  const T* in[3];
  int64_t in_batch[3], in_time[3];
  T* out[2];
  int64_t out_batch[2], out_time[2];
  int64_t batch, length, channels;
  const T* state_in;   ///< nullable
  const T* state_in2;  ///< nullable
  T* state_out;        ///< nullable
  int64_t state_batch_stride, state_channel_stride;
  int64_t slabs;  ///< channel slabs per sequence
  int64_t tiles;  ///< tiles per sequence
  /// Packed sequences (the kernel's kPacked): `count` sequences along the `length` rows of one
  /// batch, at the offsets in offsets32 or offsets64 (clamped as clamped_offset does).
  const int32_t* offsets32;
  const int64_t* offsets64;
  int64_t count;
  const uint32_t* marks;  ///< kPacked: each tile's start bits (dense_row_marks_kernel)
};

/// Rounds of the dense row kernel's look-back (row_look_back's kMaxRounds): where a channel has
/// 4 lanes (16-bit types), 6 rounds reach 24 tiles back where 4 reached 16. Measured on the H200
/// (bench/RESULTS.md, "Few chains"), on the dense (1, 2^20, 256) bf16 rows, whose 4 chains have
/// about 100 tiles each in flight, forward 0.56 -> 0.65 and backward 0.48 -> 0.56 of the copy,
/// and within 0.005 where chains are many; 8 rounds were no better than 6. f32 (8 lanes a channel)
/// and double (16) reach the 32 tiles of a warp in 4 rounds or fewer.
constexpr int kDenseLookBackRounds = 6;

/// Words of one tile's start bits (kPacked): kTileRows + 1 bits.
template <int kTileRows>
constexpr int kDenseMarkWords = kTileRows / 32 + 1;

/// Whether a packed call's start bits are found ahead of the scan, one warp per tile, into the
/// workspace (dense_row_marks_kernel), rather than by each block while its rows load. Measured on
/// the H200 (bench/RESULTS.md, "Packed channel-last rows"), ahead of the scan the backward rows
/// ran 0.06-0.07 of the copy faster and the forward rows 0.03-0.08 slower.
template <bool kBackward>
constexpr bool kDensePremark = kBackward;

#if defined(__CUDACC__)

/// Rows of a dense tile: kRows per thread, kThreads / kLanes row groups.
template <int kThreads, int kRows, int kLanes>
constexpr int kDenseTileRows = kThreads / kLanes* kRows;

/// Shared memory of a dense row block's staged rows (forward two arrays, backward three).
template <bool kBackward, int kThreads, int kRows>
constexpr int kDenseStageBytes = (kBackward ? 3 : 2) * kRows* kThreads * 16;

/// Blocks per multiprocessor a dense row kernel asks for: as many as its staged rows leave room
/// for in 227 KiB with about 5 KiB more each (kDenseFitBlocks), at most 768 threads' worth
/// (registers: three blocks of 256).
template <bool kBackward, int kThreads, int kRows>
constexpr int kDenseFitBlocks = 227 * 1024 /
                                (kDenseStageBytes<kBackward, kThreads, kRows> + 5 * 1024);
template <bool kBackward, int kThreads, int kRows>
constexpr int kDenseMinBlocks = kDenseFitBlocks<kBackward, kThreads, kRows> < 768 / kThreads
                                    ? kDenseFitBlocks<kBackward, kThreads, kRows>
                                    : 768 / kThreads;

/// Two floats rounded to a 16-bit pair, in one conversion.
__device__ __forceinline__ __nv_bfloat162 narrow_pair(__nv_bfloat16*, float lo, float hi) {
  return __floats2bfloat162_rn(lo, hi);
}
__device__ __forceinline__ __half2 narrow_pair(__half*, float lo, float hi) {
  return __floats2half2_rn(lo, hi);
}

/// kVec compute values rounded to storage, as one 16-byte vector (16-bit values in pairs, one
/// conversion each).
template <class T, int kVec, class C>
__device__ __forceinline__ uint4 narrow_vector(const C (&x)[kVec]) {
  uint4 w;
  if constexpr (sizeof(T) == 2) {
    uint32_t u[kVec / 2];
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) {
      const auto h = narrow_pair(static_cast<T*>(nullptr), x[2 * i], x[2 * i + 1]);
      memcpy(&u[i], &h, 4);
    }
    memcpy(&w, u, 16);
  } else {
    T y[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) y[i] = to_storage<T>(x[i]);
    memcpy(&w, y, 16);
  }
  return w;
}

template <class C, int kVec>
struct DensePairs {
  C a[kVec];
  C b[kVec];
};

/// `l` := `e` then `l` (earlier then later), per channel.
template <class C, int kVec>
__device__ __forceinline__ void dense_compose(const DensePairs<C, kVec>& e,
                                              DensePairs<C, kVec>& l) {
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    l.b[v] = fma(l.a[v], e.b[v], l.b[v]);
    l.a[v] = e.a[v] * l.a[v];
  }
}

/// `l` := `e` then `l` where either may hold a sequence start (`cut`: its value is a state, its
/// `a` unused, and nothing before it reaches it: no 0 * inf from a previous sequence).
template <class C, int kVec>
__device__ __forceinline__ void dense_compose(const DensePairs<C, kVec>& e, bool e_cut,
                                              DensePairs<C, kVec>& l, bool& l_cut) {
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const C b = fma(l.a[v], e.b[v], l.b[v]);
    const C a = e.a[v] * l.a[v];
    l.b[v] = l_cut ? l.b[v] : b;
    l.a[v] = l_cut ? l.a[v] : a;
  }
  l_cut = l_cut || e_cut;
}

template <class C, int kVec>
__device__ __forceinline__ DensePairs<C, kVec> dense_identity() {
  DensePairs<C, kVec> r;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    r.a[v] = C(1);
    r.b[v] = C(0);
  }
  return r;
}

/// A packed call's sequence starts in the tile of positions [q0, q0 + kTileRows] (kPacked): the
/// times whose starts mark it, [t_lo, t_hi]: ascending, position q begins a sequence where one
/// that is not empty starts at time q; descending, where one starts at time total - q (the time
/// after the last of the one before).
template <bool kDesc, int kTileRows>
struct TileStarts {
  int64_t total, q0, t_lo, t_hi;

  __device__ __forceinline__ TileStarts(int64_t total_rows, int64_t first)
      : total(total_rows),
        q0(first),
        t_lo(kDesc ? total_rows - first - kTileRows : first),
        t_hi(kDesc ? total_rows - first : first + kTileRows) {}
  /// Calls set(e) for each position q0 + e that begins a sequence, from the offsets of
  /// sequences [k0, k1) (those that meet [t_lo, t_hi], as first_offset_at_least finds them)
  /// taken from `rank` on by `threads`; positions 0 and total always begin one (rank 0 marks
  /// them). Offsets that do not ascend mark whatever they say, always inside the tile.
  template <class Offset, class Set>
  __device__ __forceinline__ void mark(const Offset& offset, int64_t k0, int64_t k1, int rank,
                                       int threads, Set&& set) const {
#pragma unroll 1
    for (int64_t k = k0 + rank; k < k1; k += threads) {
      const int64_t s = offset(k);
      // a start inside the rows (not 0 or total: marked below), in the tile's times, of a
      // sequence that is not empty
      if (s <= 0 || s >= total || s < t_lo || s > t_hi || offset(k + 1) <= s) continue;
      set(kDesc ? total - s - q0 : s - q0);
    }
    if (rank == 0) {
      if (q0 == 0) set(0);
      if (total - q0 <= kTileRows) set(total - q0);
    }
  }
};

/// The dense row kernel: one block per (tile, chain), tile-major, a chain being (sequence, slab),
/// the tiles of a chain joined by the look-back. Positions run in
/// scan order q = 0 .. length-1 (time q, or length-1-q where kDesc).
///
/// Forward, position q: x = a[q] * x + b[q] from the carry h0 (or 0).
/// Backward (the forward's adjoint, in its scan order): d = a[q-1] * d + g[q] from the carry
/// gT (grad_final_state, or 0) with a[-1] taken as 1; grad_tokens = d, grad_gates = d * x[q+1]
/// (h0 past the last position), grad_h0 = a[last] * d[last]. Row i of a thread's stage holds
/// the gate of position q-1 (array 0), g of q (1) and the state of q+1 (2).
///
/// kPacked: the rows are packed sequences (p.offsets32/64, p.count) of one batch, with no states
/// (no h0, final state or their gradients): one chain per slab over every row, tiles regardless
/// of the lengths. A block marks the positions of its tile that begin a sequence in scan order
/// (one bit each, from the offsets that fall in the tile, found by two warps' searches). A
/// position so marked starts from the state 0 in place of the one before it (forward x = a * 0 +
/// b, as the loop from h0 = 0; backward d = 1 * 0 + g), so nothing of another sequence reaches it,
/// not even as 0 * inf; backward, the position that ends a sequence in scan order takes 0 for the
/// state after it (grad_gates = d * 0). Pairs that hold a start are `cut`: their value is a state
/// and their `a` unused. A tile whose first position begins a sequence looks nothing back, and
/// one that holds a start publishes its state before it looks back: a look-back stops at the
/// first start.
template <class T, bool kBackward, bool kDesc, int kThreads, int kRows, int kLanes, bool kPacked>
__global__ void __launch_bounds__(kThreads,
                                  launch_min_blocks(kThreads,
                                                    kDenseMinBlocks<kBackward, kThreads, kRows>))
    dense_row_kernel(const DenseRowParams<T> p, const RowStates<compute_t<T>> st) {
  using C = compute_t<T>;
  constexpr int kVec = 16 / int(sizeof(T));
  constexpr int kWidth = kLanes * kVec;
  constexpr int kTileRows = kDenseTileRows<kThreads, kRows, kLanes>;
  constexpr int kGroupsPerWarp = kWarpThreads / kLanes;
  constexpr int kWarps = kThreads / kWarpThreads;
  constexpr int kG = kThreads / kWidth;  // look-back lanes per channel
  constexpr int kIn = kBackward ? 3 : 2;
  constexpr int kStartWords = kPacked ? kTileRows / 32 + 2 : 1;
  static_assert(kG >= 1 && kG <= kWarpThreads, "look-back lanes per channel");
  static_assert(!kPacked || (kTileRows % 32 == 0 && kRows <= 64), "a tile's start bits");
  using Pairs = DensePairs<C, kVec>;
  extern __shared__ uint4 dense_shared[];
  __shared__ Pairs warp_total[kWarps][kLanes];
  __shared__ bool warp_cut[kWarps];
  __shared__ C carry_shared[kWidth];
  __shared__ uint32_t starts[kStartWords];  // kPacked: bit e, position q0 + e begins a sequence
  __shared__ int64_t bounds[2];             // kPacked: the sequences whose offsets meet the tile

  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int group = tid / kLanes;
  const int warp = tid / kWarpThreads;
  const int group_in_warp = (tid % kWarpThreads) / kLanes;
  const int lb_ch = tid / kG, lb_slot = tid % kG;

  const int64_t chains = p.batch * p.slabs;
  const int64_t chain = int64_t(blockIdx.x) % chains;
  const int64_t seq = chain / p.slabs, slab = chain % p.slabs;
  const int64_t c0 = slab * kWidth + int64_t(lane) * kVec;
  const bool active = c0 < p.channels;
  const int64_t state_at = seq * p.state_batch_stride + c0 * p.state_channel_stride;
  const int64_t last = p.length - 1;

  // each array's element of the thread's channels at position 0, and one position's step
  const int64_t t_origin = kDesc ? last : 0;
  const T* in0[kIn];
  int64_t in_step[kIn];
#pragma unroll
  for (int k = 0; k < kIn; ++k) {
    in0[k] = p.in[k] + seq * p.in_batch[k] + t_origin * p.in_time[k] + c0;
    in_step[k] = kDesc ? -p.in_time[k] : p.in_time[k];
  }
  constexpr int kOut = kBackward ? 2 : 1;
  T* out0[kOut];
  int64_t out_step[kOut];
#pragma unroll
  for (int k = 0; k < kOut; ++k) {
    out0[k] = p.out[k] + seq * p.out_batch[k] + t_origin * p.out_time[k] + c0;
    out_step[k] = kDesc ? -p.out_time[k] : p.out_time[k];
  }

  // Stage row i of array k holds position p0 + i + shift(k): backward, the gate one position
  // earlier and the state one later.
  const auto shift = [](int k) { return kBackward ? (k == 0 ? -1 : (k == 2 ? 1 : 0)) : 0; };
  const auto slot = [&](int array, int row) {
    return dense_shared + (array * kRows + row) * kThreads + tid;
  };
  const auto get = [&](int array, int row, C(&out)[kVec]) {
    const uint4 w = *slot(array, row);
    T v[kVec];
    memcpy(v, &w, 16);
    widen<kVec>(v, out);
  };
  // The element pair of row i (position p0 + i): forward (a, b); backward (a of the position
  // before, g), with a = 1 at position 0 and (kPacked) where the position begins a sequence
  // (`opens`): the gate before it is another sequence's.
  const auto element = [&](int64_t p0, int i, bool opens, C(&alpha)[kVec], C(&beta)[kVec]) {
    get(0, i, alpha);
    get(1, i, beta);
    if constexpr (kBackward) {
      if ((i == 0 && p0 == 0) || opens) {
#pragma unroll
        for (int v = 0; v < kVec; ++v) alpha[v] = C(1);
      }
    }
  };

  // kPacked: bit e of `starts` set where position q0 + e (e in [0, kTileRows]) begins a
  // sequence in scan order (TileStarts), the sequences found by two warps' searches. Spread over
  // the block; the caller holds a barrier before the bits are read.
  const auto mark_starts = [&](int64_t q0) {
    const auto offset = [&](int64_t k) {
      return clamped_offset(p.offsets32, p.offsets64, p.count, p.length, k);
    };
    const TileStarts<kDesc, kTileRows> tile_starts(p.length, q0);
    if (tid < kStartWords) starts[tid] = 0u;
    if (warp < 2) {
      const int64_t x = warp == 0 ? tile_starts.t_lo : tile_starts.t_hi + 1;
      const int64_t k = first_offset_at_least(offset, p.count, x, tid % kWarpThreads).k;
      if (tid % kWarpThreads == 0) bounds[warp] = k;
    }
    __syncthreads();
    tile_starts.mark(offset, bounds[0], bounds[1], tid, kThreads,
                     [&](int64_t e) { atomicOr(starts + (e >> 5), 1u << (e & 31)); });
  };

  const auto scan_tile = [&](int64_t tile) {
    // the lines of the records the tile publishes, into L2 now: the last call left them in
    // memory, and its successors poll them before it publishes (bench/RESULTS.md, "Few chains")
    {
      constexpr int kLines = int(kWidth * sizeof(RowRecord<C>) / 128);
      const char* const mine =
          reinterpret_cast<const char*>(st.records + (chain * p.tiles + tile) * kWidth);
      if (tid < kLines) prefetch_record(mine + tid * 128);
    }
    const int64_t p0 = tile * kTileRows + int64_t(group) * kRows;  // the thread's first position
    const int valid = p0 >= p.length ? 0 : (p.length - p0 < kRows ? int(p.length - p0) : kRows);
    // ---- load: array k's row i is position p0 + i + shift(k), where it exists
    if (active) {
      const T* at[kIn];
#pragma unroll
      for (int k = 0; k < kIn; ++k) at[k] = in0[k] + (p0 + shift(k)) * in_step[k];
      if (valid == kRows && (!kBackward || (p0 > 0 && p0 + kRows <= last))) {
#pragma unroll
        for (int i = 0; i < kRows; ++i)
#pragma unroll
          for (int k = 0; k < kIn; ++k)
            __pipeline_memcpy_async(slot(k, i), at[k] + i * in_step[k], 16);
      } else {
        for (int i = 0; i < valid; ++i) {
#pragma unroll
          for (int k = 0; k < kIn; ++k) {
            const int64_t q = p0 + i + shift(k);
            if (q >= 0 && q <= last)
              __pipeline_memcpy_async(slot(k, i), at[k] + i * in_step[k], 16);
          }
        }
      }
    }
    __pipeline_commit();
    // ---- kPacked: the tile's sequence starts, while the rows load; the thread's own as bits
    // (head: its position begins a sequence, tail: the next one does)
    uint64_t head = 0, tail = 0;
    if constexpr (kPacked) {
      if constexpr (kDensePremark<kBackward>) {  // found ahead (dense_row_marks_kernel)
        constexpr int kWords = kDenseMarkWords<kTileRows>;
        if (tid < kStartWords) starts[tid] = tid < kWords ? p.marks[tile * kWords + tid] : 0u;
      } else {
        mark_starts(tile * kTileRows);
      }
      __syncthreads();
      const int64_t rows = p.length - tile * kTileRows;
      const ThreadMarks<kRows> m(starts, group * kRows, 0,
                                 rows < kTileRows ? int32_t(rows) : kTileRows);
      head = m.head;
      tail = m.tail;
    }
    __pipeline_wait_prior(0);

    // ---- the thread's aggregate (cut: it holds a start)
    Pairs mine = dense_identity<C, kVec>();
    if (active) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i < valid) {
          C alpha[kVec], beta[kVec];
          const bool opens = (head >> i) & 1u;
          element(p0, i, opens, alpha, beta);
#pragma unroll
          for (int v = 0; v < kVec; ++v) {
            mine.b[v] = fma(alpha[v], opens ? C(0) : mine.b[v], beta[v]);
            mine.a[v] *= alpha[v];
          }
        }
      }
    }
    const bool mine_cut = kPacked && head != 0;  // whether active or not
    // ---- across the warp's row groups (Kogge-Stone), then the warps' totals in order
    Pairs incl = mine;
    bool incl_cut = mine_cut;
#pragma unroll
    for (int d = 1; d < kGroupsPerWarp; d *= 2) {
      Pairs e;
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        e.a[v] = __shfl_up_sync(0xffffffffu, incl.a[v], d * kLanes);
        e.b[v] = __shfl_up_sync(0xffffffffu, incl.b[v], d * kLanes);
      }
      if constexpr (kPacked) {
        const bool e_cut = __shfl_up_sync(0xffffffffu, int(incl_cut), d * kLanes) != 0;
        if (group_in_warp >= d) dense_compose(e, e_cut, incl, incl_cut);
      } else {
        if (group_in_warp >= d) dense_compose(e, incl);
      }
    }
    Pairs excl;
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      excl.a[v] = __shfl_up_sync(0xffffffffu, incl.a[v], kLanes);
      excl.b[v] = __shfl_up_sync(0xffffffffu, incl.b[v], kLanes);
    }
    bool excl_cut = false;
    if constexpr (kPacked) excl_cut = __shfl_up_sync(0xffffffffu, int(incl_cut), kLanes) != 0;
    if (group_in_warp == 0) {
      excl = dense_identity<C, kVec>();
      excl_cut = false;
    }
    if (group_in_warp == kGroupsPerWarp - 1) {
      warp_total[warp][lane] = incl;
      if (lane == 0) warp_cut[warp] = incl_cut;
    }
    __syncthreads();
    Pairs before = dense_identity<C, kVec>();
    bool before_cut = false;
    for (int w = 0; w < warp; ++w) {
      Pairs tw = warp_total[w][lane];
      if constexpr (kPacked) {
        bool tw_cut = warp_cut[w];
        dense_compose(before, before_cut, tw, tw_cut);
        before_cut = tw_cut;
      } else {
        dense_compose(before, tw);
      }
      before = tw;
    }
    // excl := every group of the tile before this thread's
    if constexpr (kPacked)
      dense_compose(before, before_cut, excl, excl_cut);
    else
      dense_compose(before, excl);

    // the tile's total for channel lb_ch: the warps' totals in order
    C ta = C(1), tb = C(0);
    bool t_cut = false;
    for (int w = 0; lb_slot == 0 && w < kWarps; ++w) {
      const Pairs& tw = warp_total[w][lb_ch / kVec];
      const C b = fma(tw.a[lb_ch % kVec], tb, tw.b[lb_ch % kVec]);
      const bool cut = kPacked && warp_cut[w];
      tb = cut ? tw.b[lb_ch % kVec] : b;
      ta = tw.a[lb_ch % kVec] * ta;
      t_cut = t_cut || cut;
    }
    const uint64_t tag = st.tag << 2;
    RowRecord<C>* const chain_records = st.records + chain * p.tiles * kWidth;
    RowRecord<C>* const own = chain_records + tile * kWidth + lb_ch;
    if constexpr (kPacked) {
      // ---- the state before the tile: none where its first position begins a sequence (tile 0
      // among them); else looked back, after publishing the tile's state where it holds a start
      if (starts[0] & 1u) {
        if (lb_slot == 0) {
          carry_shared[lb_ch] = C(0);
          row_publish_state(own, tb, tag);
        }
      } else {
        if (lb_slot == 0) {
          if (t_cut)
            row_publish_state(own, tb, tag);
          else
            row_publish_aggregate(own, ta, tb, tag);
        }
        const C x = row_look_back<C, kG, kWidth, kWarpThreads, false, kDenseLookBackRounds>(
            chain_records, tile, lb_ch, lb_slot, tag);
        if (lb_slot == 0) {
          carry_shared[lb_ch] = x;
          if (!t_cut) row_publish_state(own, fma(ta, x, tb), tag);
        }
      }
    } else {
      // ---- the state before the tile, per channel: h0 (backward gT, or 0) before tile 0; else
      // looked back (kG lanes per channel)
      if (tile == 0) {
        if (lb_slot == 0) {
          const int64_t c = slab * kWidth + lb_ch;
          const T* const seed = kBackward ? p.state_in2 : p.state_in;
          carry_shared[lb_ch] =
              seed != nullptr && c < p.channels
                  ? to_compute<C>(seed[seq * p.state_batch_stride + c * p.state_channel_stride])
                  : C(0);
          row_publish_state(own, fma(ta, carry_shared[lb_ch], tb), tag);
        }
      } else {
        if (lb_slot == 0) row_publish_aggregate(own, ta, tb, tag);
        const C x = row_look_back<C, kG, kWidth, kWarpThreads, false, kDenseLookBackRounds>(
            chain_records, tile, lb_ch, lb_slot, tag);
        if (lb_slot == 0) {
          carry_shared[lb_ch] = x;
          row_publish_state(own, fma(ta, x, tb), tag);
        }
      }
    }
    __syncthreads();

    // ---- the thread's positions from its carry, stored
    C x[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const C from_carry = fma(excl.a[v], carry_shared[lane * kVec + v], excl.b[v]);
      x[v] = excl_cut ? excl.b[v] : from_carry;
    }
    if (active) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i < valid) {
          C alpha[kVec], beta[kVec];
          const bool opens = (head >> i) & 1u;
          element(p0, i, opens, alpha, beta);
#pragma unroll
          for (int v = 0; v < kVec; ++v) x[v] = fma(alpha[v], opens ? C(0) : x[v], beta[v]);
          if constexpr (kBackward) {
            // x is d: grad_tokens = d, grad_gates = d * (the state of the next position, or
            // h0 past the last; packed: 0 past a sequence's last)
            C prev[kVec];
            if (kPacked ? ((tail >> i) & 1u) != 0 : p0 + i == last) {
#pragma unroll
              for (int v = 0; v < kVec; ++v)
                prev[v] = !kPacked && p.state_in != nullptr
                              ? to_compute<C>(p.state_in[state_at + v * p.state_channel_stride])
                              : C(0);
            } else {
              get(2, i, prev);
            }
            C gg[kVec];
#pragma unroll
            for (int v = 0; v < kVec; ++v) gg[v] = x[v] * prev[v];
            store_vector_16(out0[0] + (p0 + i) * out_step[0], narrow_vector<T, kVec>(gg));
            store_vector_16(out0[1] + (p0 + i) * out_step[1], narrow_vector<T, kVec>(x));
          } else {
            store_vector_16(out0[0] + (p0 + i) * out_step[0], narrow_vector<T, kVec>(x));
          }
        }
      }
      if (!kPacked && p.state_out != nullptr && valid > 0 && p0 + valid == p.length) {
        T y[kVec];
        if constexpr (kBackward) {
          // grad h0 = a[last] * d[last]: the gate of the last position
          T g0[kVec];
          const uint4 gw = *reinterpret_cast<const uint4*>(in0[0] + last * in_step[0]);
          memcpy(g0, &gw, 16);
          C a0[kVec], gh[kVec];
          widen<kVec>(g0, a0);
#pragma unroll
          for (int v = 0; v < kVec; ++v) gh[v] = a0[v] * x[v];
          const uint4 w = narrow_vector<T, kVec>(gh);
          memcpy(y, &w, 16);
        } else {
          // the final state: the stored value of the last position (the same bits)
          const uint4 w = narrow_vector<T, kVec>(x);
          memcpy(y, &w, 16);
        }
#pragma unroll
        for (int v = 0; v < kVec; ++v) p.state_out[state_at + v * p.state_channel_stride] = y[v];
      }
    }
  };

  scan_tile(int64_t(blockIdx.x) / chains);
}

/// The start bits of every tile of a packed call (dense_row_kernel's kPacked, where
/// kDensePremark), ahead of it: one warp per tile writes its kDenseMarkWords words to `marks`,
/// bit e set where position q0 + e begins a sequence in scan order (TileStarts); kDenseMarkWarps
/// tiles a block.
constexpr int kDenseMarkWarps = 8;
template <bool kDesc, int kTileRows>
__global__ void __launch_bounds__(kDenseMarkWarps* kWarpThreads)
    dense_row_marks_kernel(const int32_t* offsets32, const int64_t* offsets64, int64_t count,
                           int64_t total, int64_t tiles, uint32_t* marks) {
  constexpr int kWords = kDenseMarkWords<kTileRows>;
  constexpr int kWarps = kDenseMarkWarps;
  __shared__ uint32_t bits[kWarps][kWords];
  const int warp = int(threadIdx.x) / kWarpThreads, lane = int(threadIdx.x) % kWarpThreads;
  const int64_t tile = int64_t(blockIdx.x) * kWarps + warp;
  if (tile >= tiles) return;  // the whole warp
  const auto offset = [&](int64_t k) {
    return clamped_offset(offsets32, offsets64, count, total, k);
  };
  for (int w = lane; w < kWords; w += kWarpThreads) bits[warp][w] = 0u;
  __syncwarp();
  const TileStarts<kDesc, kTileRows> tile_starts(total, tile * kTileRows);
  const int64_t k0 = first_offset_at_least(offset, count, tile_starts.t_lo, lane).k;
  const int64_t k1 = first_offset_at_least(offset, count, tile_starts.t_hi + 1, lane).k;
  tile_starts.mark(offset, k0, k1, lane, kWarpThreads,
                   [&](int64_t e) { atomicOr(&bits[warp][e >> 5], 1u << (e & 31)); });
  __syncwarp();
  for (int w = lane; w < kWords; w += kWarpThreads) marks[tile * kWords + w] = bits[warp][w];
}

template <class T, bool kBackward, bool kDesc, int kThreads, int kRows, int kLanes,
          bool kPacked = false>
cudaError_t launch_dense_rows(DenseRowParams<T> p, void* workspace, cudaStream_t stream) {
  using C = compute_t<T>;
  constexpr int kVec = 16 / int(sizeof(T));
  constexpr int kTileRows = kDenseTileRows<kThreads, kRows, kLanes>;
  p.slabs = ceil_div(p.channels, int64_t(kLanes) * kVec);
  p.tiles = ceil_div(p.length, int64_t(kTileRows));
  const int64_t chains = p.batch * p.slabs;
  const int64_t blocks = chains * p.tiles;
  const RowStates<C> st = RowStates<C>::carve(workspace, call_tag());
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (const cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) return e;
  if (capture != cudaStreamCaptureStatusNone) {
    // a graph replays the call's tag: its records start from zero on every replay
    const cudaError_t e = cudaMemsetAsync(
        st.records, 0, RowStates<C>::record_bytes(blocks, int64_t(kLanes) * kVec), stream);
    if (e != cudaSuccess) return e;
  }
  if constexpr (kPacked && kDensePremark<kBackward>) {
    // the start bits after the records (dense_scratch_bytes counts them)
    uint32_t* const marks =
        reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(st.records) +
                                    RowStates<C>::record_bytes(blocks, int64_t(kLanes) * kVec));
    p.marks = marks;
    const cudaError_t e =
        launch_kernel(&dense_row_marks_kernel<kDesc, kTileRows>,
                      ceil_div(p.tiles, int64_t(kDenseMarkWarps)), kDenseMarkWarps * kWarpThreads,
                      0, stream, p.offsets32, p.offsets64, p.count, p.length, p.tiles, marks);
    if (e != cudaSuccess) return e;
  }
  constexpr int kShared = kDenseStageBytes<kBackward, kThreads, kRows>;
  constexpr auto kKernel = &dense_row_kernel<T, kBackward, kDesc, kThreads, kRows, kLanes, kPacked>;
  const cudaError_t e = allow_dynamic_shared(kKernel, kShared);
  if (e != cudaSuccess) return e;
  return launch_kernel(kKernel, blocks, kThreads, kShared, stream, p, st);
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
