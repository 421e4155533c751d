// ascan/device/agent/flat_tiles.cuh: flat tiles, many short sequences to a block.
//
// A dense time-contiguous tensor (every sequence's T elements right after the previous one's,
// in every array) is one flat array of S * T elements with a sequence boundary every T. The
// flat kernel (dispatch/flat_kernels.cuh) cuts that array into ranges of whole sequences, one
// range per block, and walks each range in full tiles whatever T is: where one tile per sequence
// pads a short sequence up to its tile (T = 300 in a tile of 512 leaves 41% of the lanes idle),
// flat tiles keep every lane busy, and a block moves as many bytes at T = 7 as at T = 2048.
//
// A sequence boundary is a reset: the pair of a sequence's first element in scan order holds a
// state (the Segment below with `cut` set), so nothing before it reaches it. The reset is a flag,
// not a zero gate: 0 * Inf is NaN, so a gate of 0 would let an overflowed or NaN state of the
// previous sequence into the next one. Within a sequence the arithmetic is the one-tile
// kernels': the same pairs, folded the same way.
//
// What a Problem (forward_problem.cuh, backward_problem.cuh) does at a boundary, it does through
// the wrappers below: the forward scan folds h0 into the first pair and writes the final state
// from the stored last output; the backward pass adds dL/d(final state) to the first pair, gives
// the forward's first step h0 as its shifted state, and writes dL/dh0.
#pragma once

#include <cstdint>

#include "../../affine.cuh"
#include "../../block/block_scan.cuh"
#include "backward_problem.cuh"
#include "forward_problem.cuh"

namespace ascan {
namespace detail {

/// An Affine pair that may hold a state: with `cut`, the map is the constant `b` (its `a` is not
/// used), whatever came before.
template <class C>
struct Segment {
  C a;
  C b;
  bool cut;
};

/// `earlier` then `later`: a later pair that is cut ignores the earlier one entirely.
/// Selects, not branches: a scan's lanes differ in which of their pairs are cut.
template <class C>
__device__ __forceinline__ Segment<C> compose(const Segment<C>& earlier, const Segment<C>& later) {
  const C a = earlier.a * later.a, b = later.a * earlier.b + later.b;
  return {later.cut ? later.a : a, later.cut ? later.b : b, later.cut || earlier.cut};
}
template <class C>
__device__ __forceinline__ C apply(const Segment<C>& f, C x) {
  return f.cut ? f.b : f.a * x + f.b;
}
template <class C>
__device__ __forceinline__ Segment<C> segment_identity() {
  return {C(1), C(0), false};
}

/// The lanes lo..hi of a warp as a bit mask (empty where lo > hi; lo and hi clipped to 0..31).
__device__ __forceinline__ uint32_t lane_span(int lo, int hi) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > kWarpThreads - 1 ? kWarpThreads - 1 : hi;
  return lo > hi ? 0u : ((2u << hi) - 1) & ~((1u << lo) - 1);  // 2u << 31 wraps to 0: all ones
}

/// Inclusive scan of one Segment per lane within groups of kLanes lanes (as
/// lane_group_inclusive_scan; `rank` the lane's place in its group). The pairs go by shuffle; the
/// cut marks are one ballot, and whether the stretch a lane holds so far contains a cut (then the
/// earlier stretch does not reach it) is a mask test, not a third shuffle.
template <int kLanes, bool kReverse, class C>
__device__ __forceinline__ Segment<C> lane_group_inclusive_segments(Segment<C> x, int rank) {
  const uint32_t cuts = __ballot_sync(0xffffffffu, x.cut);
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int base = lane - rank;  // the group's first lane
#pragma unroll
  for (int d = 1; d < kLanes; d *= 2) {
    C ya, yb;
    bool has_earlier;
    uint32_t held;  // the lanes whose pairs x holds so far
    if constexpr (kReverse) {
      ya = __shfl_down_sync(0xffffffffu, x.a, d, kLanes);
      yb = __shfl_down_sync(0xffffffffu, x.b, d, kLanes);
      has_earlier = rank + d < kLanes;
      held = lane_span(lane, min(lane + d - 1, base + kLanes - 1));
    } else {
      ya = __shfl_up_sync(0xffffffffu, x.a, d, kLanes);
      yb = __shfl_up_sync(0xffffffffu, x.b, d, kLanes);
      has_earlier = rank >= d;
      held = lane_span(max(lane - d + 1, base), lane);
    }
    const bool reach = has_earlier && (cuts & held) == 0;
    const C a = ya * x.a, b = x.a * yb + x.b;
    x.a = reach ? a : x.a;
    x.b = reach ? b : x.b;
  }
  x.cut = (cuts & (kReverse ? lane_span(lane, base + kLanes - 1) : lane_span(base, lane))) != 0;
  return x;
}

/// BlockScan's striped scan with a carry (block/block_scan.cuh), over Segments: kThreads threads,
/// kRuns runs; one barrier per call, the slots double buffered.
template <class C, int kThreads, bool kReverse, int kRuns>
class SegmentBlockScan {
 public:
  static_assert(kThreads % kWarpThreads == 0 && kThreads <= 1024, "whole warps");
  static constexpr int kWarps = kThreads / kWarpThreads;
  static constexpr int kAcross = BlockScan<C, kThreads, kReverse, kRuns>::kAcross;

  struct TempStorage {
    Segment<C> warp_aggregate[2][kRuns][kWarps];
  };

  __device__ __forceinline__ explicit SegmentBlockScan(TempStorage& storage) : storage_(storage) {}

  /// incoming[j]: the state entering this thread's pair of run j; `carry` the state before the
  /// tile's earliest pair on entry and after its latest on return.
  __device__ __forceinline__ void scan_state(const Segment<C> (&x)[kRuns], C (&incoming)[kRuns],
                                             C& carry) {
    Segment<C> running = {C(0), carry, true};  // the known state: a constant map
    scan_runs(x, [&](int, int j, const Segment<C>& in_run, const Segment<C>& run_total) {
      incoming[j] = apply(compose(running, in_run), C(0));
      running = compose(running, run_total);
    });
    carry = running.b;
  }

  /// exclusive[j]: the Segment of the tile's pairs before this thread's pair of run j, in scan
  /// order; `total` the Segment of the whole tile (every run), the same in every thread. One
  /// barrier: a block that learns the state before its tile only later (a look-back) scans once
  /// and applies the state to `exclusive` afterwards.
  __device__ __forceinline__ void exclusive_scan(const Segment<C> (&x)[kRuns],
                                                 Segment<C> (&exclusive)[kRuns],
                                                 Segment<C>& total) {
    Segment<C> running = segment_identity<C>();
    scan_runs(x, [&](int k, int j, const Segment<C>& in_run, const Segment<C>& run_total) {
      exclusive[j] = k == 0 ? in_run : compose(running, in_run);
      running = k == 0 ? run_total : compose(running, run_total);
    });
    total = running;
  }

 private:
  /// The block-wide scan of the runs' pairs (one barrier): on_run(k, j, in_run, run_total) for
  /// the k-th run in scan order, j, with in_run the Segment of run j's pairs before this thread's
  /// and run_total the Segment of all of run j's pairs (the same in every thread).
  template <class OnRun>
  __device__ __forceinline__ void scan_runs(const Segment<C> (&x)[kRuns], OnRun&& on_run) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
    const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
    auto& slots = storage_.warp_aggregate[parity_];
    parity_ ^= 1;
    Segment<C> within[kRuns];  // the warp's pairs before this lane's
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      const uint32_t cuts = __ballot_sync(0xffffffffu, x[j].cut);
      const Segment<C> inclusive =
          lane_group_inclusive_segments<kWarpThreads, kReverse>(x[j], lane);
      const int from = kReverse ? lane + 1 : lane - 1;
      within[j].a = kReverse ? __shfl_down_sync(0xffffffffu, inclusive.a, 1)
                             : __shfl_up_sync(0xffffffffu, inclusive.a, 1);
      within[j].b = kReverse ? __shfl_down_sync(0xffffffffu, inclusive.b, 1)
                             : __shfl_up_sync(0xffffffffu, inclusive.b, 1);
      within[j].cut =
          (cuts & (kReverse ? lane_span(from, kWarpThreads - 1) : lane_span(0, from))) != 0;
      if (lane == (kReverse ? kWarpThreads - 1 : 0)) within[j] = segment_identity<C>();
      if (lane == (kReverse ? 0 : kWarpThreads - 1)) slots[j][warp] = inclusive;
    }
    __syncthreads();
    // Every warp composes the runs' warp aggregates itself, earliest first: lane w holds warp
    // w's, and its inclusive scan gives each lane the warps up to it.
    const bool first_warp = kReverse ? warp == kWarps - 1 : warp == 0;
    const int before = kReverse ? warp + 1 : warp - 1;
#pragma unroll
    for (int k = 0; k < kRuns; ++k) {
      const int j = kReverse ? kRuns - 1 - k : k;
      const Segment<C> mine = lane < kWarps ? slots[j][lane] : segment_identity<C>();
      const uint32_t cuts = __ballot_sync(0xffffffffu, mine.cut);
      const Segment<C> across =
          lane_group_inclusive_segments<kAcross, kReverse>(mine, lane % kAcross);
      // the run's total (all its warps) and the warps before this one, from lane 0's group
      const int last = kReverse ? 0 : kWarps - 1;
      const Segment<C> run_total = {__shfl_sync(0xffffffffu, across.a, last),
                                    __shfl_sync(0xffffffffu, across.b, last),
                                    (cuts & lane_span(0, kWarps - 1)) != 0};
      const int src = before < 0 ? 0 : before % kWarpThreads;
      const Segment<C> earlier_warps = {
          __shfl_sync(0xffffffffu, across.a, src), __shfl_sync(0xffffffffu, across.b, src),
          (cuts & (kReverse ? lane_span(before, kWarps - 1) : lane_span(0, before))) != 0};
      on_run(k, j, first_warp ? within[j] : compose(earlier_warps, within[j]), run_total);
    }
  }

  TempStorage& storage_;
  int parity_ = 0;
};

/// Where the sequence boundaries fall in one vector of a block's range: bit i of `first` (`last`)
/// marks element i, inside the range, as its sequence's first (last) element in scan order;
/// element i belongs to sequence seq0 + popc(heads & bits 0..i) of the range (`heads`: the
/// elements after the vector's first that start a sequence, in memory order).
struct FlatMarks {
  uint32_t first, last, heads;
  int32_t seq0;

  __device__ __forceinline__ int32_t sequence(int i) const {
    return seq0 + __popc(heads & ((2u << i) - 1));
  }
};

/// Division by a divisor fixed for a whole call, of dividends under 2^31: a multiply-high and a
/// shift (the method of CUTLASS's FastDivmod: m = ceil(2^p / d), p = 31 + ceil(log2 d)).
struct FastDivisor {
  uint32_t divisor, multiplier, shift;

  __host__ __device__ static FastDivisor of(uint32_t d) {
    if (d == 1) return {1, 0, 0};
    uint32_t log2 = 0;
    while ((uint64_t{1} << log2) < d) ++log2;  // ceil(log2 d)
    const uint32_t p = 31 + log2;
    return {d, static_cast<uint32_t>(((uint64_t{1} << p) + d - 1) / d), p - 32};
  }
  /// n / divisor (n < 2^31).
  __device__ __forceinline__ uint32_t divide(uint32_t n) const {
    return divisor == 1 ? n : __umulhi(n, multiplier) >> shift;
  }
};

/// The marks of the kVec elements from `rel` (elements from the range's start, at least
/// -(kVec - 1)) in a range of `n` elements, sequences of `length`; 32-bit arithmetic throughout
/// (the host keeps n + length * kVec under 2^31).
template <int kVec, bool kReverse>
__device__ __forceinline__ FlatMarks flat_marks(int32_t rel, int32_t n, const FastDivisor& length) {
  const uint32_t t = length.divisor;
  // rel + t * kVec >= 1: the quotient less kVec is the sequence of element 0, even for the
  // elements just before the range (masked below).
  const uint32_t u = static_cast<uint32_t>(rel) + t * kVec;
  const uint32_t q = length.divide(u);
  const uint32_t r = u - q * t;  // element 0's step in its sequence
  uint32_t head = 0, tail = 0;
  if (t >= uint32_t(kVec)) {  // at most one start and one end in the vector
    const uint32_t h = r == 0 ? 0 : t - r, e = t - 1 - r;
    head = h < uint32_t(kVec) ? 1u << h : 0u;
    tail = e < uint32_t(kVec) ? 1u << e : 0u;
  } else {
    uint32_t step = r;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      head |= (step == 0 ? 1u : 0u) << i;
      tail |= (step == t - 1 ? 1u : 0u) << i;
      step = step == t - 1 ? 0 : step + 1;
    }
  }
  uint32_t inside = (1u << kVec) - 1;
  if (rel < 0 || rel > n - kVec) {  // the range's edge vectors
    const int32_t from = rel < 0 ? -rel : 0, to = n - rel < kVec ? n - rel : kVec;
    inside = to <= from ? 0u : ((1u << to) - 1) & ~((1u << from) - 1);
  }
  FlatMarks m;
  m.first = (kReverse ? tail : head) & inside;
  m.last = (kReverse ? head : tail) & inside;
  m.heads = head & ~1u;
  m.seq0 = static_cast<int32_t>(q) - kVec;
  return m;
}

/// A vector's pairs folded into one Segment, in scan order (thread_reduce with resets).
template <bool kReverse, int kVec, class C>
__device__ __forceinline__ Segment<C> segment_reduce(const C (&a)[kVec], const C (&b)[kVec],
                                                     uint32_t first) {
  constexpr int i0 = kReverse ? kVec - 1 : 0;
  Segment<C> acc = {a[i0], b[i0], (first & (1u << i0)) != 0};
#pragma unroll
  for (int k = 1; k < kVec; ++k) {
    const int i = kReverse ? kVec - 1 - k : k;
    const bool cut = (first & (1u << i)) != 0;
    const C na = acc.a * a[i], nb = a[i] * acc.b + b[i];
    acc = {na, cut ? b[i] : nb, acc.cut || cut};
  }
  return acc;
}

/// Runs the recurrence over a vector in scan order from `state`, restarting at each first
/// element (thread_scan with resets); b[i] becomes x[i].
template <bool kReverse, int kVec, class C>
__device__ __forceinline__ void segment_scan(C state, const C (&a)[kVec], C (&b)[kVec],
                                             uint32_t first) {
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int i = kReverse ? kVec - 1 - k : k;
    const C next = a[i] * state + b[i];
    state = (first & (1u << i)) != 0 ? b[i] : next;
    b[i] = state;
  }
}

/// The range of a flat block: sequences [first, first + count), grid positions [lo, hi) of
/// arrays based on the 16-byte boundary at or before the tensor's first element; packed, the
/// channel and the time [t_lo, t_hi) of those positions in it.
struct FlatRange {
  int64_t first, count;
  int64_t lo, hi;
  int64_t channel, t_lo, t_hi;
  int64_t row_lo, row_hi;  ///< what the backward pass may read around it: its channel's row
  bool opens;   ///< its first element in scan order starts a sequence (whole sequences: always)
  bool closes;  ///< packed windows: a sequence ends at t_hi (one starts there, or the row ends)
};

/// Equal-length sequences back to back (a dense (B, C, T) tensor): a block's range is
/// `per_block` whole sequences, sequence s at positions [s * length, (s + 1) * length) after the
/// lead, its states at s * state_channel_stride (the dispatch sets that to the one stride of a
/// sequence's states).
struct EvenSequences {
  template <class Base>
  using Params = Base;
  using Marks = FlatMarks;

  int64_t first, state_stride;

  template <bool kReverse, class P>
  static __device__ __forceinline__ FlatRange range(const P& p, int64_t index, int64_t per_block,
                                                    int64_t lead) {
    FlatRange r{};
    r.first = index * per_block;
    r.count = per_block < p.sequences - r.first ? per_block : p.sequences - r.first;
    r.lo = lead + r.first * p.length;
    r.hi = r.lo + r.count * p.length;
    r.row_lo = r.lo;
    r.row_hi = r.hi;
    r.opens = true;
    return r;
  }
  template <class P>
  static __device__ __forceinline__ EvenSequences at(const P& p, const FlatRange& r) {
    return {r.first, p.state_channel_stride};
  }
  template <int kVec, bool kReverse>
  __device__ __forceinline__ Marks marks(int32_t rel, int32_t n, const FastDivisor& length) const {
    return flat_marks<kVec, kReverse>(rel, n, length);
  }
  /// Offset of the states of the sequence of element i of a marked vector.
  __device__ __forceinline__ int64_t state(const Marks& m, int i) const {
    return (first + m.sequence(i)) * state_stride;
  }
  /// Calls f(state offset) for each empty sequence of the range: none.
  template <int kThreads, class P, class F>
  __device__ __forceinline__ void empties(const P&, int, F&&) const {}
};

/// Offset k of `count` packed sequences over `length` times, as the device holds them in
/// offsets32 or offsets64 (the other null): the first is 0 and the last `length` whatever the
/// device holds, and the others are clamped into [0, length] (every packed path's reading).
__device__ __forceinline__ int64_t clamped_offset(const int32_t* offsets32,
                                                  const int64_t* offsets64, int64_t count,
                                                  int64_t length, int64_t k) {
  if (k <= 0) return 0;
  if (k >= count) return length;
  const int64_t v = offsets32 != nullptr ? int64_t(__ldg(offsets32 + k)) : __ldg(offsets64 + k);
  return v < 0 ? 0 : (v > length ? length : v);
}

/// What first_offset_at_least found: k, and with kCompare whether offset(k) is x (1 or 0) where
/// its last round read offset(k), -1 where no round did (k is `count`, or the end of a stretch
/// whose offsets were read in an earlier round) or kCompare is off.
struct OffsetFound {
  int64_t k;
  int at;
};
/// The first k in [0, count] with offset(k) at least x (count where none is), found by the 32
/// lanes of one warp together: a round reads 32 offsets evenly spread over what is left and keeps
/// the stretch between the last below x and the next, so a round costs one load's latency and
/// narrows the search 32 times. With kCompare the offset the answer holds is compared with x on
/// the way, where the last round read it (a caller's test of a boundary at x then needs no load
/// of its own), at one more ballot a round; without it the search is only the first ballot.
/// Offsets that do not ascend give some k in [0, count], never a read outside [0, count).
template <bool kCompare = false, class Offset>
__device__ __forceinline__ OffsetFound first_offset_at_least(const Offset& offset, int64_t count,
                                                             int64_t x, int lane) {
  int64_t lo = 0, hi = count;
  int at = -1;
  while (lo < hi) {
    const int64_t step = (hi - lo + kWarpThreads - 1) / kWarpThreads;
    const int64_t k = lo + int64_t(lane) * step;
    uint32_t below, equal = 0u;
    if constexpr (kCompare) {
      const bool read = k < hi;
      const int64_t v = read ? offset(k) : 0;
      below = __ballot_sync(0xffffffffu, read && v < x);
      equal = __ballot_sync(0xffffffffu, read && v == x);
    } else {
      below = __ballot_sync(0xffffffffu, k < hi && offset(k) < x);
    }
    const int n = __popc(below);
    // the answer's lane where this round ends the search: lane 0 where none is below, lane n
    // where the stretch left is one offset wide (step 1) and that lane read one
    const int64_t start = lo, end = hi;
    if (n == 0) {
      hi = lo;
    } else {
      const int64_t last_below = lo + int64_t(n - 1) * step;
      lo = last_below + 1;
      hi = last_below + step < hi ? last_below + step : hi;
    }
    if (kCompare && lo >= hi) {
      const int j = n == 0 ? 0 : step == 1 ? n : kWarpThreads;
      at = j < kWarpThreads && start + int64_t(j) * step == lo && lo < end ? int((equal >> j) & 1u)
                                                                           : -1;
    }
  }
  return {lo, at};
}

/// Offsets of packed sequences: `count` sequences, sequence k at times [offset(k),
/// offset(k + 1)) of each channel's `length`. As clamped_offset reads them, the first
/// offset is 0 and the last `length` whatever the device holds, and the others are clamped into
/// [0, length]: no position leaves the channel's row.
template <class Base>
struct PackedFlatParams : Base {
  const int32_t* offsets32;
  const int64_t* offsets64;
  int64_t count;
  int64_t window;   ///< times per window: a block takes the sequences that start in one
  int64_t windows;  ///< windows per channel: length / window + 1

  __device__ __forceinline__ int64_t offset(int64_t k) const {
    return clamped_offset(offsets32, offsets64, count, this->length, k);
  }
  /// The first sequence k in [0, count] whose offset is at least x (count where none is), found
  /// by the 32 lanes of one warp together (first_offset_at_least).
  __device__ __forceinline__ int64_t first_at_least(int64_t x, int lane) const {
    return first_offset_at_least([&](int64_t k) { return offset(k); }, count, x, lane).k;
  }
  /// first_at_least, and whether the offset found is x where the search read it (OffsetFound).
  __device__ __forceinline__ OffsetFound find_at_least(int64_t x, int lane) const {
    return first_offset_at_least<true>([&](int64_t k) { return offset(k); }, count, x, lane);
  }
};

/// Where the sequence boundaries fall in one vector of a packed range: bit i of `first` (`last`)
/// marks element i as its sequence's first (last) element in scan order, and seq[i] is the
/// sequence of a marked element (from the range's first).
template <int kVec>
struct PackedMarks {
  uint32_t first, last;
  int32_t seq[kVec];
};

/// The last of sequences [lo, hi] whose offset (offset(k)) is at most t, lo where none is, by
/// bisection. Offsets that do not ascend give some k of [lo, hi].
template <class Offset>
__device__ __forceinline__ int64_t last_start_at_most(const Offset& offset, int64_t lo, int64_t hi,
                                                      int64_t t) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (offset(mid) <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/// Packed sequences along the time axis of a (1, C, total) tensor, each channel's row at
/// channel * channel_stride after the lead: a block takes the sequences of one channel that start
/// in one window of `window` times (a sequence longer than the window keeps its block busy past
/// it, and the windows it covers hold none), so no state crosses from one block to another. The
/// states of sequence k of channel c are at k * state_batch_stride + c * state_channel_stride.
template <int kVec>
struct PackedSequences {
  template <class Base>
  using Params = PackedFlatParams<Base>;
  using Marks = PackedMarks<kVec>;

  const int32_t* offsets32;
  const int64_t* offsets64;
  int64_t count, length;
  int64_t s0, s1, t_lo, t_hi;
  int64_t state_batch_stride, channel_state;

  /// The range of block `index`: sequences [s0, s1) of its channel (s0 the first to start at or
  /// after its window's start, s1 the first at or after its end), found by warps 0 and 1 (the
  /// block has at least two) and shared through shared memory. Every thread of the block calls
  /// it (it holds a barrier).
  template <bool kReverse, class P>
  static __device__ __forceinline__ FlatRange range(const P& p, int64_t index, int64_t,
                                                    int64_t lead) {
    __shared__ int64_t bounds[2];
    const int64_t channel = index / p.windows, window = index % p.windows;
    const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
    const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
    __syncthreads();  // the previous range's bounds are read
    if (warp < 2) {
      const int64_t k = p.first_at_least((window + warp) * p.window, lane);
      if (lane == 0) bounds[warp] = k;
    }
    __syncthreads();
    FlatRange r{};
    r.first = bounds[0];
    r.count = bounds[1] > bounds[0] ? bounds[1] - bounds[0] : 0;
    r.channel = channel;
    r.t_lo = p.offset(r.first);
    r.t_hi = p.offset(r.first + r.count);
    if (r.t_hi < r.t_lo) r.t_hi = r.t_lo;  // offsets that do not ascend
    r.lo = lead + channel * p.channel_stride + r.t_lo;
    r.hi = r.lo + (r.t_hi - r.t_lo);
    r.row_lo = r.lo;
    r.row_hi = r.hi;
    r.opens = true;
    return r;
  }
  template <class P>
  static __device__ __forceinline__ PackedSequences at(const P& p, const FlatRange& r) {
    return {p.offsets32,
            p.offsets64,
            p.count,
            p.length,
            r.first,
            r.first + r.count,
            r.t_lo,
            r.t_hi,
            p.state_batch_stride,
            r.channel * p.state_channel_stride};
  }
  __device__ __forceinline__ int64_t offset(int64_t k) const {
    return clamped_offset(offsets32, offsets64, count, length, k);
  }
  /// The end of sequence k.
  __device__ __forceinline__ int64_t end_of(int64_t k) const { return offset(k + 1); }
  /// The marks of the kVec elements from `rel` (elements from the range's start) in a range of
  /// `n` elements: the sequence of the first is found by bisection over the range's sequences,
  /// the rest by stepping on from it (over any empty ones).
  template <int kV, bool kReverse>
  __device__ __forceinline__ Marks marks(int32_t rel, int32_t n, const FastDivisor&) const {
    static_assert(kV == kVec, "one vector width");
    const int64_t t = t_lo + rel;
    int64_t k = last_start_at_most([&](int64_t j) { return offset(j); }, s0, s1 - 1, t);
    int64_t start = offset(k), end = end_of(k);
    Marks m{};
    uint32_t head = 0, tail = 0;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int64_t ti = t + i;
      while (end <= ti && k + 1 < s1) {
        ++k;
        start = end;  // where the offsets ascend, sequence k starts where k - 1 ends
        end = end_of(k);
      }
      const bool inside = rel + i >= 0 && rel + i < n;
      head |= (inside && start == ti ? 1u : 0u) << i;
      tail |= (inside && end == ti + 1 ? 1u : 0u) << i;
      m.seq[i] = static_cast<int32_t>(k - s0);
    }
    m.first = kReverse ? tail : head;
    m.last = kReverse ? head : tail;
    return m;
  }
  __device__ __forceinline__ int64_t state(const Marks& m, int i) const {
    return (s0 + m.seq[i]) * state_batch_stride + channel_state;
  }
  /// Calls f(state offset) for each empty sequence of the range, spread over the block's threads.
  template <int kThreads, class P, class F>
  __device__ __forceinline__ void empties(const P&, int rank, F&& f) const {
    for (int64_t k = s0 + rank; k < s1; k += kThreads)
      if (end_of(k) <= offset(k)) f(k * state_batch_stride + channel_state);
  }
};

/// The last sequence of [s0, s1) that starts at or before time t (s0 where none does), as
/// PackedSequences::marks finds it. Out of line: a window calls it only for the few elements that
/// start or end a sequence, and inline it would lengthen every vector's code.
__device__ __noinline__ inline int64_t sequence_at(const int32_t* offsets32,
                                                   const int64_t* offsets64, int64_t count,
                                                   int64_t length, int64_t s0, int64_t s1,
                                                   int64_t t) {
  return last_start_at_most(
      [&](int64_t k) { return clamped_offset(offsets32, offsets64, count, length, k); }, s0, s1 - 1,
      t);
}

/// Packed sequences along time as PackedSequences, cut into windows of `window` elements on the
/// vector grid whatever the sequences are: block `index` takes window q = index / channels of
/// channel index % channels in scan order (window q from the start, or from the end for a
/// reverse scan), its times [t_lo, t_hi) and the sequences [s0, s1) that meet them; a window's
/// first element need not start a sequence, so the state before it comes from the windows before
/// (the look-back of flat_window_kernel). An empty sequence belongs to the window that holds its
/// offset (the last window also the offset `length`).
template <int kVec>
struct PackedWindows : PackedSequences<kVec> {
  using Base = PackedSequences<kVec>;
  /// Bit i of `first` (`last`): element i is its sequence's first (last) element in scan order;
  /// `t` the time of element 0.
  struct Marks {
    uint32_t first, last;
    int64_t t;
  };
  const uint32_t* bits;  ///< mark_starts's bits, in shared memory
  int64_t t_origin;

  /// The window of block `index`, its place only (no offset is read): its channel, its grid
  /// positions [lo, hi) and times [t_lo, t_hi), its channel's row.
  template <bool kReverse, class P>
  static __device__ __forceinline__ FlatRange window(const P& p, int64_t index, int64_t lead) {
    // channels fastest: the blocks resident at once hold a few windows of every channel, so a
    // row's look-back chain is a few windows deep, not a whole wave of them
    const int64_t channel = index % p.channels, q = index / p.channels;
    const int64_t window = kReverse ? p.windows - 1 - q : q;
    FlatRange r{};
    r.channel = channel;
    // windows on the vector grid, so that each is one tile: from the 16-byte boundary at or
    // before the row's first element; the row's last window may be empty
    r.row_lo = lead + channel * p.channel_stride;
    r.row_hi = r.row_lo + p.length;
    const int64_t origin = r.row_lo - r.row_lo % kVec + window * p.window;
    r.lo = origin > r.row_lo ? origin : r.row_lo;
    r.hi = origin + p.window < r.row_hi ? origin + p.window : r.row_hi;
    if (r.hi < r.lo) r.hi = r.lo;
    r.t_lo = r.lo - r.row_lo;
    r.t_hi = r.hi - r.row_lo;
    return r;
  }
  /// The sequences that meet window `r` ([first, first + count)) and whether its first element in
  /// scan order starts one (`opens`), found by warps 0 and 1 (the block has at least two) and
  /// shared through shared memory. Every thread of the block calls it (it holds two barriers).
  template <bool kReverse, class P>
  static __device__ __forceinline__ void find(const P& p, FlatRange& r) {
    __shared__ int64_t bounds[2];
    __shared__ bool edges[2];  // a sequence starts at t_lo; one ends at t_hi
    const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
    const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
    __syncthreads();  // the previous window's bounds are read
    if (warp < 2) {
      int64_t k;
      bool at_boundary;  // a sequence starts at t_lo (warp 0), or ends at t_hi (warp 1)
      // whether offset(k) is the time searched for, from the search's last round where it read
      // it (most often), or one load more
      const auto at = [&](const OffsetFound& f, int64_t x) {
        return f.at >= 0 ? f.at == 1 : f.k < p.count && p.offset(f.k) == x;
      };
      if (warp == 0) {  // the sequence that holds t_lo, or an empty one at it
        const OffsetFound f = p.find_at_least(r.t_lo, lane);
        k = f.k;
        at_boundary = at(f, r.t_lo);
        if (!at_boundary) --k;
      } else if (r.t_hi == p.length) {  // at the row's end: every sequence
        k = p.count;
        at_boundary = true;
      } else {  // past the last that starts before t_hi
        const OffsetFound f = p.find_at_least(r.t_hi, lane);
        k = f.k;
        at_boundary = at(f, r.t_hi);
      }
      if (lane == 0) {
        bounds[warp] = k;
        edges[warp] = at_boundary;
      }
    }
    __syncthreads();
    r.opens = edges[kReverse ? 1 : 0];
    r.closes = edges[1];
    r.first = bounds[0] > 0 ? bounds[0] : 0;
    r.count = bounds[1] > r.first ? bounds[1] - r.first : 0;
  }
  /// Where the window's sequences start, for marks(): bit e of `bits` (span + 1 bits, zeroed
  /// before find's barriers) set where a non-empty sequence starts at time t_origin + e, and bit
  /// t_hi - t_origin where a sequence ends at t_hi (r.closes); `t_origin` the time of the window's
  /// first grid position (span of them). Spread over the block's threads; the caller holds a
  /// barrier before marks() reads the bits.
  template <int kThreads>
  __device__ __forceinline__ void mark_starts(uint32_t* bits, int64_t origin, int64_t span,
                                              bool closes, int rank) {
    const auto set = [&](int64_t e) { atomicOr(bits + (e >> 5), 1u << (e & 31)); };
#pragma unroll 1
    for (int64_t k = this->s0 + rank; k < this->s1; k += kThreads) {
      const int64_t q = this->offset(k);
      // a sequence that starts before the window (the first), an empty one, or (offsets that do
      // not ascend) one outside it: no bit
      if (q < this->t_lo || q >= this->t_hi || this->end_of(k) <= q) continue;
      set(q - origin);
    }
    if (rank == 0 && closes && this->t_hi - origin <= span) set(this->t_hi - origin);
    this->bits = bits;
    t_origin = origin;
  }
  template <class P>
  static __device__ __forceinline__ PackedWindows at(const P& p, const FlatRange& r) {
    return {Base::at(p, r), nullptr, 0};
  }
  /// The marks of the kVec elements from `rel` (elements from the window's first) in a window of
  /// `n` elements, from the start bits (mark_starts): element i is its sequence's first in memory
  /// order where a sequence starts at its time, its last where one starts at the next time.
  template <int kV, bool kReverse>
  __device__ __forceinline__ Marks marks(int32_t rel, int32_t n, const FastDivisor&) const {
    static_assert(kV == kVec && kVec <= 8, "one vector width");
    const int64_t t = this->t_lo + rel;
    const int64_t e = t - t_origin;  // a multiple of kVec, at most span - kVec
    const uint64_t pair =
        (uint64_t{bits[(e >> 5) + 1]} << 32) | bits[e >> 5];  // bits e .. e + kVec lie in it
    const uint32_t near = static_cast<uint32_t>(pair >> (e & 31));
    uint32_t inside = (1u << kVec) - 1;
    if (rel < 0 || rel > n - kVec) {  // the window's edge vectors
      const int32_t from = rel < 0 ? -rel : 0, to = n - rel < kVec ? n - rel : kVec;
      inside = to <= from ? 0u : ((1u << to) - 1) & ~((1u << from) - 1);
    }
    const uint32_t head = near & inside, tail = (near >> 1) & inside;
    return {kReverse ? tail : head, kReverse ? head : tail, t};
  }
  /// Offset of the states of the sequence of element i of a marked vector: the last of the
  /// window's sequences that starts at or before its time (out of line: only marked elements ask).
  __device__ __forceinline__ int64_t state(const Marks& m, int i) const {
    return sequence_at(this->offsets32, this->offsets64, this->count, this->length, this->s0,
                       this->s1, m.t + i) *
               this->state_batch_stride +
           this->channel_state;
  }
  /// Calls f(state offset) for each empty sequence whose offset lies in the window (at the row's
  /// end: in its last window that is not empty).
  template <int kThreads, class P, class F>
  __device__ __forceinline__ void empties(const P&, int rank, F&& f) const {
    if (this->t_hi <= this->t_lo) return;
    for (int64_t k = this->s0 + rank; k < this->s1; k += kThreads) {
      const int64_t start = this->offset(k);
      if (start >= this->t_lo && this->end_of(k) <= start)
        f(k * this->state_batch_stride + this->channel_state);
    }
  }
};

/// The sequence marks of one thread's kItems consecutive elements of a window (the blocked
/// arrangement of flat_window_kernel), read once from mark_starts's bits: bit i of `head`
/// (`tail`) marks element i, inside the window, as its sequence's first (last) element in memory
/// order. `e0` is the thread's first element and [lo, hi) the window's, both counted from the
/// bits' first position; the bits hold at least e0 / 32 + 3 words.
template <int kItems>
struct ThreadMarks {
  static_assert(kItems >= 1 && kItems <= 64, "a thread's marks fit 64 bits");
  uint64_t head, tail;

  __device__ __forceinline__ ThreadMarks(const uint32_t* bits, int32_t e0, int32_t lo, int32_t hi) {
    const uint32_t* w = bits + (e0 >> 5);
    const uint32_t shift = static_cast<uint32_t>(e0) & 31u;
    const uint32_t w0 = w[0], w1 = w[1], w2 = w[2];
    // bits e0 .. e0 + 63, and e0 + kItems (a start just after the thread's last element)
    const uint64_t x =
        (uint64_t{__funnelshift_r(w1, w2, shift)} << 32) | __funnelshift_r(w0, w1, shift);
    uint64_t beyond;
    if constexpr (kItems == 64)
      beyond = (w2 >> shift) & 1u;
    else
      beyond = (x >> kItems) & 1u;
    const auto below = [](int32_t n) {  // the thread's elements under n
      return n <= 0 ? uint64_t{0} : n >= kItems ? kAll : (uint64_t{1} << n) - 1;
    };
    const uint64_t inside = below(hi - e0) & ~below(lo - e0);
    head = x & inside;
    tail = ((x >> 1) | (beyond << (kItems - 1))) & inside;
  }

 private:
  static constexpr uint64_t kAll = kItems == 64 ? ~uint64_t{0} : (uint64_t{1} << kItems) - 1;
};

/// The bank conflicts of a warp reading a blocked window (each thread the j-th of its `per`
/// consecutive vectors of `bytes` bytes, for every j): the most distinct 4-byte words one of the
/// 32 banks serves in one request of 128 bytes (a quarter warp of 16-byte reads, a whole warp of
/// 4 bytes or less; 1: conflict-free), with vector V at slot V + V / 8 where `padded`, at slot V
/// otherwise. Eight threads reading slots `per` apart meet eight bank groups where `per` is odd
/// unpadded, and where it is 2, 4 or 8 padded (the padding turns 4- and 8-way conflicts into
/// none, but a stride of 5 into a 2-way one).
constexpr int blocked_window_conflicts(int per, int bytes, bool padded) {
  const int words = bytes < 4 ? 1 : bytes / 4;  // 4-byte words a vector spans
  const int threads = bytes >= 16 ? 8 : 128 / (bytes < 4 ? 4 : bytes);  // one request
  int worst = 1;
  for (int j = 0; j < per; ++j) {
    for (int first = 0; first < kWarpThreads; first += threads) {
      int64_t word[32 * 4] = {};  // the request's words, each once
      int n = 0;
      for (int t = first; t < first + threads; ++t) {
        const int64_t V = int64_t(t) * per + j, slot = padded ? V + V / 8 : V;
        for (int w = 0; w < words; ++w) {
          const int64_t x = slot * bytes / 4 + w;
          bool seen = false;
          for (int k = 0; k < n; ++k) seen = seen || word[k] == x;
          if (!seen) word[n++] = x;
        }
      }
      for (int bank = 0; bank < 32; ++bank) {
        int count = 0;
        for (int k = 0; k < n; ++k) count += word[k] % 32 == bank;
        worst = count > worst ? count : worst;
      }
    }
  }
  return worst;
}
/// Whether a window read blocked, `per` vectors of `bytes` a thread, pads its slots: where that
/// has fewer conflicts (blocked_window_conflicts). A striped window is never padded: threads
/// reading consecutive vectors meet no conflict unpadded.
constexpr bool window_padded(bool blocked, int per, int bytes) {
  return blocked &&
         blocked_window_conflicts(per, bytes, true) < blocked_window_conflicts(per, bytes, false);
}

/// A packed window staged in shared memory (flat_window_kernel, dispatch/flat_packed.cuh): the
/// kSpan elements of each stream from grid position `origin`, vector V (kVec elements) of stream s
/// at slot V + V / 8 of the stream's kSlots where kPadded (one slot of padding after every eight:
/// window_padded), at slot V otherwise; where the Problem reads neighbours, the element just
/// before the span at halo[2 s] and the one just after it at halo[2 s + 1]. Positions outside the
/// channel's row hold the stream's fill.
template <class T, int kVec, int64_t kSpan, bool kPadded>
struct StagedWindow {
  static constexpr int kVectors = static_cast<int>(kSpan / kVec);
  static constexpr int kSlots = kPadded ? kVectors + kVectors / 8 : kVectors;
  static constexpr int64_t kStreamElements = int64_t(kSlots) * kVec;
  T* slots;
  T* halo;
  int64_t origin;

  /// The first element of vector V (from the span's first) of stream s.
  __device__ __forceinline__ T* slot(int s, uint32_t V) const {
    return slots + s * kStreamElements + (kPadded ? V + V / 8 : V) * kVec;
  }
  /// Vector j of the kPer consecutive vectors of thread `rank` (the blocked arrangement) of
  /// stream s: slot(s, rank * kPer + j), with the arithmetic done at compile time where it can.
  template <int kPer>
  __device__ __forceinline__ T* blocked(int s, int rank, int j) const {
    if constexpr (kPadded && kPer % 8 == 0) {
      return slots + s * kStreamElements + (rank * (kPer + kPer / 8) + j + j / 8) * kVec;
    } else if constexpr (kPadded && 8 % kPer == 0) {  // a thread's vectors in one group of 8
      const int first = rank * kPer;
      return slots + s * kStreamElements + (first + first / 8 + j) * kVec;
    } else {
      return slot(s, static_cast<uint32_t>(rank * kPer + j));
    }
  }
  /// read and write vector j of thread `rank`'s kPer (blocked).
  template <int kPer>
  __device__ __forceinline__ void get(int s, int rank, int j, T (&r)[kVec]) const {
    copy_vector(blocked<kPer>(s, rank, j), r);
  }
  template <int kPer>
  __device__ __forceinline__ void set(int s, int rank, int j, const T (&y)[kVec]) const {
    copy_vector(y, blocked<kPer>(s, rank, j));
  }

 private:
  static __device__ __forceinline__ void copy_vector(const T* from, T (&to)[kVec]) {
    if constexpr (kVec * sizeof(T) == 16) {
      *reinterpret_cast<uint4*>(to) = *reinterpret_cast<const uint4*>(from);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) to[i] = from[i];
    }
  }
  static __device__ __forceinline__ void copy_vector(const T (&from)[kVec], T* to) {
    if constexpr (kVec * sizeof(T) == 16) {
      *reinterpret_cast<uint4*>(to) = *reinterpret_cast<const uint4*>(from);
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) to[i] = from[i];
    }
  }

 public:
  /// Element v of stream s, v from origin - 1 to origin + kSpan.
  __device__ __forceinline__ T at(int s, int64_t v) const {
    const int64_t e = v - origin;
    if (e < 0) return halo[2 * s];
    if (e >= kSpan) return halo[2 * s + 1];
    const uint32_t u = static_cast<uint32_t>(e);
    return slot(s, u / kVec)[u % kVec];
  }
  /// The vector of stream s at grid position v (a vector of the span), and the way back.
  __device__ __forceinline__ void vector(int s, int64_t v, T (&r)[kVec]) const {
    copy_vector(slot(s, static_cast<uint32_t>(v - origin) / kVec), r);
  }
  __device__ __forceinline__ void put(int s, int64_t v, const T (&y)[kVec]) const {
    copy_vector(y, slot(s, static_cast<uint32_t>(v - origin) / kVec));
  }
};

/// Where the ranges of the flat problems below lie (`Seqs`, scanned in direction kReverse): the
/// common lead of their arrays on the vector grid, a flat block's range, and a packed window's
/// place, then its sequences (PackedWindows).
template <class Seqs, bool kReverse, bool kVector>
struct FlatPlacement {
  template <class P>
  static __device__ __forceinline__ int64_t lead(const P& p) {
    return kVector ? lead_of(p.gates) : 0;
  }
  template <class P>
  static __device__ __forceinline__ FlatRange range(const P& p, int64_t index, int64_t per_block) {
    return Seqs::template range<kReverse>(p, index, per_block, lead(p));
  }
  template <class P>
  static __device__ __forceinline__ FlatRange window(const P& p, int64_t index) {
    return Seqs::template window<kReverse>(p, index, lead(p));
  }
  template <class P>
  static __device__ __forceinline__ void find(const P& p, FlatRange& r) {
    Seqs::template find<kReverse>(p, r);
  }
};

/// The forward scan over a flat range: ForwardProblem's loads and stores over the whole range,
/// h0 folded into each sequence's first pair, the final state taken from the stored last output,
/// an empty sequence's final state its h0 (or 0). `Seqs` says where the sequences lie
/// (EvenSequences, PackedSequences).
template <class T, bool kReverseScan, bool kVector, class Seqs>
struct FlatForwardOf : FlatPlacement<Seqs, kReverseScan, kVector> {
  using Placement = FlatPlacement<Seqs, kReverseScan, kVector>;
  using Placement::lead;
  using Inner = ForwardProblem<T, kReverseScan, kVector>;
  using Storage = T;
  using Params = typename Seqs::template Params<typename Inner::Params>;
  using Loaded = typename Inner::Loaded;
  using Work = typename Inner::Work;
  using C = typename Inner::C;
  using Marks = typename Seqs::Marks;
  static constexpr bool kReverse = kReverseScan;
  static constexpr int kVec = Inner::kVec;

  Inner inner;
  Seqs seqs;

  static __device__ __forceinline__ FlatForwardOf at(const Params& p, const FlatRange& r,
                                                     bool /*blocked*/ = false) {
    const int64_t l = lead(p);
    return {{}, Inner{p.gates - l, p.tokens - l, p.out - l, r.lo, r.hi, 0, true}, Seqs::at(p, r)};
  }
  /// What a staged window holds (StagedWindow): gates and tokens, from these bases (grid position
  /// v at stream(p, s)[v]), (1, 0) outside the row; no neighbours.
  static constexpr int kStagedStreams = 2;
  static constexpr bool kStagedHalo = false;
  /// A thread's elements of a window are consecutive (flat_window_kernel says why).
  static constexpr bool kBlockedWindow = true;
  static __device__ __forceinline__ const T* stream(const Params& p, int s) {
    return (s == 0 ? p.gates : p.tokens) - lead(p);
  }
  static __device__ __forceinline__ T fill(int s) { return to_storage<T>(s == 0 ? C(1) : C(0)); }
  /// load, from a staged window.
  template <class View>
  __device__ __forceinline__ void load_staged(Loaded& r, int64_t v, const View& s) const {
    s.vector(0, v, r.a);
    s.vector(1, v, r.b);
  }
  /// The lean window (flat_window_kernel without states; a thread's kPer vectors consecutive):
  /// vector j's pairs from the window (outside the window the fills, the identity), and its
  /// outputs put over its gates, which the block then stores (kLeanOutputs of them, output o
  /// from stream window_output_slot(o) to window_output(p, o), as the staged outputs of the
  /// window with states). No neighbours: no edges to read.
  struct LeanEdges {};
  template <int kPer, class View>
  __device__ __forceinline__ LeanEdges lean_edges(const View&, int) const {
    return {};
  }
  template <int kPer, class View>
  __device__ __forceinline__ void lean_read(const View& view, int rank, int j, const LeanEdges&,
                                            uint32_t /*head*/, uint32_t /*tail*/, Work& w) const {
    alignas(16) T a[kVec], b[kVec];
    view.template get<kPer>(0, rank, j, a);
    view.template get<kPer>(1, rank, j, b);
    widen(a, w.a);
    widen(b, w.b);
  }
  template <int kPer, class View>
  __device__ __forceinline__ void lean_write(const View& view, int rank, int j,
                                             const Work& w) const {
    alignas(16) T y[kVec];
    inner.narrow(w, y);
    view.template set<kPer>(0, rank, j, y);
  }
  static constexpr int kLeanOutputs = 1;
  static __device__ __forceinline__ int window_output_slot(int) { return 0; }
  static __device__ __forceinline__ T* window_output(const Params& p, int) {
    return p.out - lead(p);
  }
  template <int kThreads>
  __device__ __forceinline__ void empties(const Params& p, int rank) const {
    if (p.final_state == nullptr) return;
    seqs.template empties<kThreads>(p, rank, [&](int64_t s) {
      p.final_state[s] = p.initial_state != nullptr ? p.initial_state[s] : to_storage<T>(C(0));
    });
  }
  __device__ __forceinline__ Marks marks(int32_t rel, int32_t n, const FastDivisor& d) const {
    return seqs.template marks<kVec, kReverse>(rel, n, d);
  }
  __device__ __forceinline__ void load(Loaded& r, int64_t v) const { inner.load(r, v); }
  /// Whether the call reads or writes any state (h0, final state): a window kernel without them
  /// (kStates false) has no per-element state code at all.
  static __host__ __device__ bool has_states(const Params& p) {
    return p.initial_state != nullptr || p.final_state != nullptr;
  }
  __device__ __forceinline__ void convert(const Loaded& r, int64_t v, const Marks& m,
                                          const Params& p, Work& w) const {
    inner.convert(r, v, w);
    if (p.initial_state == nullptr || m.first == 0) return;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (m.first & (1u << i)) {
        const C h0 = to_compute<C>(p.initial_state[seqs.state(m, i)]);
        w.b[i] = w.a[i] * h0 + w.b[i];
      }
  }
  /// A scanned vector's outputs, rounded (its states), and the final states it holds: a staged
  /// window puts them in its gates' slots and stores them from there.
  static constexpr int kStagedOutputs = 1;
  __device__ __forceinline__ void outputs(const Work& w, int64_t, const Marks& m, const Params& p,
                                          T (&y)[1][kVec]) const {
    inner.narrow(w, y[0]);
    if (p.final_state == nullptr || m.last == 0) return;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (m.last & (1u << i)) p.final_state[seqs.state(m, i)] = y[0][i];
  }
  __device__ __forceinline__ void store(const Work& w, int64_t v, const Marks& m,
                                        const Params& p) const {
    alignas(16) T y[1][kVec];
    outputs(w, v, m, p, y);
    store_vector<kVec>(inner.x, v, inner.lo, inner.hi, y[0]);
  }
};

/// The backward pass over a flat range: BackwardProblem's loads (its neighbours by shuffle across
/// each warp) and stores over the whole range; at each boundary dL/d(final state) joins the first
/// pair, the forward's first step takes h0 (or 0) as its shifted state instead of the previous
/// sequence's, and dL/dh0 = a d is written there; an empty sequence's dL/dh0 is its dL/d(final
/// state) (or 0).
template <class T, bool kForwardReverse, bool kVector, class Seqs>
struct FlatBackwardOf : FlatPlacement<Seqs, !kForwardReverse, kVector> {
  using Placement = FlatPlacement<Seqs, !kForwardReverse, kVector>;
  using Placement::lead;
  using Inner = BackwardProblem<T, kForwardReverse, kVector>;
  using Storage = T;
  using Params = typename Seqs::template Params<typename Inner::Params>;
  using Loaded = typename Inner::Loaded;
  using Work = typename Inner::Work;
  using C = typename Inner::C;
  using Marks = typename Seqs::Marks;
  static constexpr bool kReverse = Inner::kReverse;
  static constexpr int kVec = Inner::kVec;

  Inner inner;  // reads the range's row (a window's neighbours lie outside it)
  Seqs seqs;
  int64_t lo, hi;  // the range: what it writes

  /// `blocked`: a thread holds consecutive vectors (flat_window_kernel), so no lane exchanges
  /// neighbours by shuffle: every vector takes them from load_staged.
  static __device__ __forceinline__ FlatBackwardOf at(const Params& p, const FlatRange& r,
                                                      bool blocked = false) {
    const int64_t l = lead(p);
    const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
    return {{},
            Inner{p.gates - l, p.states - l, p.grad_out - l, p.grad_gates - l, p.grad_tokens - l,
                  r.row_lo, r.row_hi, C(0), blocked ? 1 : kWarpThreads,
                  blocked || lane == kWarpThreads - 1, blocked || lane == 0, 0, 0, true},
            Seqs::at(p, r),
            r.lo,
            r.hi};
  }
  /// What a staged window holds (StagedWindow): gates, states and upstream gradients, from these
  /// bases, (1, 0, 0) outside the row (the fills of BackwardProblem::load with h0 = 0), and the
  /// neighbours just outside the span, which the vectors at its edges pair with.
  static constexpr int kStagedStreams = 3;
  static constexpr bool kStagedHalo = true;
  /// A thread's elements of a window are striped (flat_window_kernel says why).
  static constexpr bool kBlockedWindow = false;
  static __device__ __forceinline__ const T* stream(const Params& p, int s) {
    return (s == 0 ? p.gates : s == 1 ? p.states : p.grad_out) - lead(p);
  }
  static __device__ __forceinline__ T fill(int s) { return to_storage<T>(s == 0 ? C(1) : C(0)); }
  /// load (BackwardProblem::load), from a staged window: the lanes at a warp's edge take their
  /// neighbour's gate and state from the window or its halo.
  template <class View>
  __device__ __forceinline__ void load_staged(Loaded& r, int64_t v, const View& s) const {
    s.vector(0, v, r.a);
    s.vector(1, v, r.x);
    s.vector(2, v, r.g);
    const int64_t ae = kForwardReverse ? v - 1 : v + kVec;
    const int64_t xe = kForwardReverse ? v + kVec : v - 1;
    if (kForwardReverse ? inner.low_edge : inner.high_edge) r.a_edge = to_compute<C>(s.at(0, ae));
    if (kForwardReverse ? inner.high_edge : inner.low_edge) r.x_edge = to_compute<C>(s.at(1, xe));
  }
  /// The lean window (flat_window_kernel without states; a thread's kPer vectors consecutive):
  /// vector j's pairs from the window, its neighbours from the thread's other vectors or, at the
  /// thread's edges, from `edges` (read by lean_edges before any thread writes); the shifted
  /// state of a sequence's first step is 0 (`head`, `tail`: the vector's ThreadMarks). Outside the
  /// row the fills make the pairs that a stored output depends on the identity. The gradients go
  /// over the thread's states and upstream gradients, which the block then stores.
  struct LeanEdges {
    C gate, state;  // the neighbours past the thread's first or last element
  };
  template <int kPer, class View>
  __device__ __forceinline__ LeanEdges lean_edges(const View& view, int rank) const {
    const int64_t first = view.origin + int64_t(rank) * kPer * kVec;
    const int64_t last = first + kPer * kVec - 1;
    constexpr int kGateShift = Inner::kGateShift;
    return {to_compute<C>(view.at(0, kGateShift > 0 ? last + 1 : first - 1)),
            to_compute<C>(view.at(1, kGateShift > 0 ? first - 1 : last + 1))};
  }
  template <int kPer, class View>
  __device__ __forceinline__ void lean_read(const View& view, int rank, int j,
                                            const LeanEdges& edges, uint32_t head, uint32_t tail,
                                            Work& w) const {
    constexpr int kGateShift = Inner::kGateShift;
    alignas(16) T a[kVec], x[kVec], g[kVec];
    view.template get<kPer>(0, rank, j, a);
    view.template get<kPer>(1, rank, j, x);
    view.template get<kPer>(2, rank, j, g);
    // the neighbours: the next vector's first (or the previous one's last) gate and state
    const C a_edge =
        kGateShift > 0
            ? (j + 1 < kPer ? to_compute<C>(view.template blocked<kPer>(0, rank, j + 1)[0])
                            : edges.gate)
            : (j > 0 ? to_compute<C>(view.template blocked<kPer>(0, rank, j - 1)[kVec - 1])
                     : edges.gate);
    const C x_edge =
        kGateShift > 0
            ? (j > 0 ? to_compute<C>(view.template blocked<kPer>(1, rank, j - 1)[kVec - 1])
                     : edges.state)
            : (j + 1 < kPer ? to_compute<C>(view.template blocked<kPer>(1, rank, j + 1)[0])
                            : edges.state);
    C af[kVec], xf[kVec];
    widen(a, af);
    widen(x, xf);
    widen(g, w.b);
    Inner::shift(af, xf, a_edge, x_edge, w);
    // a sequence's first step in the forward's order, its first element in memory (`head`:
    // forward scan) or its last (`tail`: reverse)
    const uint32_t steps = kForwardReverse ? tail : head;
#pragma unroll
    for (int i = 0; i < kVec; ++i) w.x[i] = (steps & (1u << i)) != 0 ? C(0) : w.x[i];
  }
  template <int kPer, class View>
  __device__ __forceinline__ void lean_write(const View& view, int rank, int j,
                                             const Work& w) const {
    alignas(16) T ya[kVec], yb[kVec];
    inner.gradients(w, ya, yb);
    view.template set<kPer>(1, rank, j, ya);
    view.template set<kPer>(2, rank, j, yb);
  }
  static constexpr int kLeanOutputs = 2;
  static __device__ __forceinline__ int window_output_slot(int o) { return 1 + o; }
  static __device__ __forceinline__ T* window_output(const Params& p, int o) {
    return (o == 0 ? p.grad_gates : p.grad_tokens) - lead(p);
  }
  template <int kThreads>
  __device__ __forceinline__ void empties(const Params& p, int rank) const {
    if (p.grad_initial_state == nullptr) return;
    seqs.template empties<kThreads>(p, rank, [&](int64_t s) {
      p.grad_initial_state[s] =
          p.grad_final_state != nullptr ? p.grad_final_state[s] : to_storage<T>(C(0));
    });
  }
  __device__ __forceinline__ Marks marks(int32_t rel, int32_t n, const FastDivisor& d) const {
    return seqs.template marks<kVec, kReverse>(rel, n, d);
  }
  __device__ __forceinline__ void load(Loaded& r, int64_t v) const { inner.load(r, v); }
  /// Whether the call reads or writes any state (h0, dL/d(final state), dL/dh0): without them
  /// (kStates false) a sequence's first step takes 0 as its shifted state, and that is all.
  static __host__ __device__ bool has_states(const Params& p) {
    return p.initial_state != nullptr || p.grad_final_state != nullptr ||
           p.grad_initial_state != nullptr;
  }
  __device__ __forceinline__ void convert(const Loaded& r, int64_t v, const Marks& m,
                                          const Params& p, Work& w) const {
    inner.convert(r, v, w);
    if ((m.first | m.last) == 0) return;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if ((m.first & (1u << i)) && p.grad_final_state != nullptr)
        w.b[i] += to_compute<C>(p.grad_final_state[seqs.state(m, i)]);
      if (m.last & (1u << i))
        w.x[i] =
            p.initial_state != nullptr ? to_compute<C>(p.initial_state[seqs.state(m, i)]) : C(0);
    }
  }
  /// A staged window's gradients go to memory from registers (store).
  static constexpr int kStagedOutputs = 0;
  __device__ __forceinline__ void store(const Work& w, int64_t v, const Marks& m,
                                        const Params& p) const {
    Inner clipped = inner;
    clipped.lo = lo;
    clipped.hi = hi;
    clipped.store(w, v);
    if (p.grad_initial_state == nullptr || m.last == 0) return;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (m.last & (1u << i))
        p.grad_initial_state[seqs.state(m, i)] =
            to_storage<T>(to_compute<C>(inner.a[v + i]) * w.b[i]);
  }
};

/// The flat problems of dense tensors (EvenSequences) and of packed sequences along time, by
/// whole sequences (PackedSequences) or by windows joined by a look-back (PackedWindows).
template <class T, bool kReverseScan, bool kVector>
using FlatForward = FlatForwardOf<T, kReverseScan, kVector, EvenSequences>;
template <class T, bool kForwardReverse, bool kVector>
using FlatBackward = FlatBackwardOf<T, kForwardReverse, kVector, EvenSequences>;
template <class T, bool kReverseScan, bool kVector>
using FlatPackedForward =
    FlatForwardOf<T, kReverseScan, kVector, PackedSequences<kAccessItems<T, kVector>>>;
template <class T, bool kForwardReverse, bool kVector>
using FlatPackedBackward =
    FlatBackwardOf<T, kForwardReverse, kVector, PackedSequences<kAccessItems<T, kVector>>>;

template <class T, bool kReverseScan, bool kVector>
using FlatWindowForward =
    FlatForwardOf<T, kReverseScan, kVector, PackedWindows<kAccessItems<T, kVector>>>;
template <class T, bool kForwardReverse, bool kVector>
using FlatWindowBackward =
    FlatBackwardOf<T, kForwardReverse, kVector, PackedWindows<kAccessItems<T, kVector>>>;

}  // namespace detail
}  // namespace ascan
