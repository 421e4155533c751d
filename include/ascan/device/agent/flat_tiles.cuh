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
    Segment<C> running = {C(0), carry, true};  // the known state: a constant map
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
      const Segment<C> in_run = first_warp ? within[j] : compose(earlier_warps, within[j]);
      incoming[j] = apply(compose(running, in_run), C(0));
      running = compose(running, run_total);
    }
    carry = running.b;
  }

 private:
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
/// arrays based on the 16-byte boundary at or before the tensor's first element.
struct FlatRange {
  int64_t first, count;
  int64_t lo, hi;
};

/// The forward scan over a flat range: ForwardProblem's loads and stores over the whole range,
/// h0 folded into each sequence's first pair, the final state taken from the stored last output.
template <class T, bool kReverseScan, bool kVector>
struct FlatForward {
  using Inner = ForwardProblem<T, kReverseScan, kVector>;
  using Params = typename Inner::Params;
  using Loaded = typename Inner::Loaded;
  using Work = typename Inner::Work;
  using C = typename Inner::C;
  static constexpr bool kReverse = kReverseScan;
  static constexpr int kVec = Inner::kVec;

  Inner inner;
  int64_t first;  // the range's first sequence

  static __device__ __forceinline__ FlatForward at(const Params& p, const FlatRange& r) {
    const int64_t lead = kVector ? lead_of(p.gates) : 0;
    return {Inner{p.gates - lead, p.tokens - lead, p.out - lead, r.lo, r.hi, 0, true}, r.first};
  }
  static __device__ __forceinline__ int64_t lead(const Params& p) {
    return kVector ? lead_of(p.gates) : 0;
  }
  __device__ __forceinline__ void load(Loaded& r, int64_t v) const { inner.load(r, v); }
  __device__ __forceinline__ void convert(const Loaded& r, int64_t v, const FlatMarks& m,
                                          const Params& p, Work& w) const {
    inner.convert(r, v, w);
    if (p.initial_state == nullptr || m.first == 0) return;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (m.first & (1u << i)) {
        const C h0 =
            to_compute<C>(p.initial_state[(first + m.sequence(i)) * p.state_channel_stride]);
        w.b[i] = w.a[i] * h0 + w.b[i];
      }
  }
  __device__ __forceinline__ void store(const Work& w, int64_t v, const FlatMarks& m,
                                        const Params& p) const {
    alignas(16) T y[kVec];
    inner.narrow(w, y);
    store_vector<kVec>(inner.x, v, inner.lo, inner.hi, y);
    if (p.final_state == nullptr || m.last == 0) return;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (m.last & (1u << i))
        p.final_state[(first + m.sequence(i)) * p.state_channel_stride] = y[i];
  }
};

/// The backward pass over a flat range: BackwardProblem's loads (its neighbours by shuffle across
/// each warp) and stores over the whole range; at each boundary dL/d(final state) joins the first
/// pair, the forward's first step takes h0 (or 0) as its shifted state instead of the previous
/// sequence's, and dL/dh0 = a d is written there.
template <class T, bool kForwardReverse, bool kVector>
struct FlatBackward {
  using Inner = BackwardProblem<T, kForwardReverse, kVector>;
  using Params = typename Inner::Params;
  using Loaded = typename Inner::Loaded;
  using Work = typename Inner::Work;
  using C = typename Inner::C;
  static constexpr bool kReverse = Inner::kReverse;
  static constexpr int kVec = Inner::kVec;

  Inner inner;
  int64_t first;

  static __device__ __forceinline__ FlatBackward at(const Params& p, const FlatRange& r) {
    const int64_t lead = kVector ? lead_of(p.gates) : 0;
    const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
    return {Inner{p.gates - lead, p.states - lead, p.grad_out - lead, p.grad_gates - lead,
                  p.grad_tokens - lead, r.lo, r.hi, C(0), kWarpThreads, lane == kWarpThreads - 1,
                  lane == 0, 0, 0, true},
            r.first};
  }
  static __device__ __forceinline__ int64_t lead(const Params& p) {
    return kVector ? lead_of(p.gates) : 0;
  }
  __device__ __forceinline__ void load(Loaded& r, int64_t v) const { inner.load(r, v); }
  __device__ __forceinline__ void convert(const Loaded& r, int64_t v, const FlatMarks& m,
                                          const Params& p, Work& w) const {
    inner.convert(r, v, w);
    if ((m.first | m.last) == 0) return;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if ((m.first & (1u << i)) && p.grad_final_state != nullptr)
        w.b[i] +=
            to_compute<C>(p.grad_final_state[(first + m.sequence(i)) * p.state_channel_stride]);
      if (m.last & (1u << i))
        w.x[i] =
            p.initial_state != nullptr
                ? to_compute<C>(p.initial_state[(first + m.sequence(i)) * p.state_channel_stride])
                : C(0);
    }
  }
  __device__ __forceinline__ void store(const Work& w, int64_t v, const FlatMarks& m,
                                        const Params& p) const {
    inner.store(w, v);
    if (p.grad_initial_state == nullptr || m.last == 0) return;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (m.last & (1u << i))
        p.grad_initial_state[(first + m.sequence(i)) * p.state_channel_stride] =
            to_storage<T>(to_compute<C>(inner.a[v + i]) * w.b[i]);
  }
};

}  // namespace detail
}  // namespace ascan
