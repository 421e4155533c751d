// ascan/device/agent/forward_problem.cuh: what the forward scan loads, scans and stores.
//
//     x[t] = a[t] * x[t-1] + b[t],  x[-1] = h0      (x[t+1] and x[T] = h0 when reversed)
//
// Per element: the pair (a[t], b[t]); the recurrence's state is the output.
#pragma once

#include <cstdint>

#include "../../affine.cuh"
#include "scan_agent.cuh"

namespace ascan {
namespace detail {

/// The forward scan's arguments, flattened for the kernels: sizes in elements, offsets 64-bit.
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

template <class T, bool kReverseScan, bool kVector>
struct ForwardProblem {
  using Params = ScanParams<T>;
  using C = compute_t<T>;
  static constexpr bool kReverse = kReverseScan;
  static constexpr int kVec = kAccessItems<T, kVector>;

  struct Loaded {
    alignas(16) T a[kVec];
    alignas(16) T b[kVec];
  };
  struct Work {
    C a[kVec];
    C b[kVec];  ///< tokens in; states out
  };

  const T* a;  // grid position v lives at a[v]
  const T* b;
  T* x;
  int64_t lo, hi;  // the sequence's grid positions

  __device__ __forceinline__ void load(Loaded& r, int64_t v) const {
    load_vector<kVec>(a, v, lo, hi, r.a, to_storage<T>(C(1)));
    load_vector<kVec>(b, v, lo, hi, r.b, to_storage<T>(C(0)));
  }
  __device__ __forceinline__ void convert(const Loaded& r, int64_t, Work& w) const {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      w.a[i] = to_compute<C>(r.a[i]);
      w.b[i] = to_compute<C>(r.b[i]);
    }
  }
  __device__ __forceinline__ void store(const Work& w, int64_t v) const {
    alignas(16) T y[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) y[i] = to_storage<T>(w.b[i]);
    store_vector<kVec>(x, v, lo, hi, y);
  }

  /// Scans sequence `seq` with a group of kLanes threads (this one at `rank`); with `active`
  /// false the group takes part in every shuffle and barrier but reads and writes nothing.
  template <int kLanes, int kItems, bool kOneTile, class Group>
  static __device__ __forceinline__ void scan_sequence(const Params& p, int64_t seq, bool active,
                                                       int rank, Group& group) {
    const int64_t bi = active ? seq / p.channels : 0;
    const int64_t ci = active ? seq - bi * p.channels : 0;
    const int64_t offset = bi * p.batch_stride + ci * p.channel_stride;
    // gates, tokens and out share their misalignment on the vector path: one lead for all.
    const int64_t lead = kVector ? lead_of(p.gates + offset) : 0;
    ForwardProblem problem{p.gates + (offset - lead), p.tokens + (offset - lead),
                           p.out + (offset - lead), lead, active ? lead + p.length : lead};
    const int64_t state = bi * p.state_batch_stride + ci * p.state_channel_stride;
    C carry = active && p.initial_state != nullptr ? to_compute<C>(p.initial_state[state]) : C(0);
    scan_tiles<ForwardProblem, kLanes, kItems, kOneTile>(problem, p.span_bound, rank, group, carry);
    if (active && rank == 0 && p.final_state != nullptr)
      p.final_state[state] = to_storage<T>(carry);
  }
};

}  // namespace detail
}  // namespace ascan
