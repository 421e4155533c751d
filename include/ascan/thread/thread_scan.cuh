// ascan/thread/thread_scan.cuh: the serial recurrence over the items one thread holds.
//
// A thread holds kItems consecutive steps (a[i], b[i]) in registers. Scanning a tile takes two
// passes over them: thread_reduce folds them into one Affine pair (the thread's aggregate, which
// the warp and block layers scan), and thread_scan runs x = a[i] * x + b[i] from the incoming state
// those layers hand back. In a reverse scan the items are taken from the last to the first.
#pragma once

// affine.cuh one folder up, as installed; or beside this file, where a user copied the two.
#if __has_include("affine.cuh")
#include "affine.cuh"
#else
#include "../affine.cuh"
#endif

namespace ascan {

/// Folds items 0..kItems-1 (kItems-1..0 when kReverse) into one pair, earlier items on the left:
/// the map that takes the state before the first item to the state after the last.
template <bool kReverse, int kItems, class C>
__device__ __forceinline__ Affine<C> thread_reduce(const C (&a)[kItems], const C (&b)[kItems]) {
  constexpr int first = kReverse ? kItems - 1 : 0;
  Affine<C> acc{a[first], b[first]};
#pragma unroll
  for (int k = 1; k < kItems; ++k) {
    const int i = kReverse ? kItems - 1 - k : k;
    acc = compose(acc, Affine<C>{a[i], b[i]});
  }
  return acc;
}

/// Runs x = a[i] * x + b[i] over the items in scan order from the incoming `state`, overwriting
/// b[i] with x[i]. Returns the state after the last item.
template <bool kReverse, int kItems, class C>
__device__ __forceinline__ C thread_scan(C state, const C (&a)[kItems], C (&b)[kItems]) {
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int i = kReverse ? kItems - 1 - k : k;
    state = a[i] * state + b[i];
    b[i] = state;
  }
  return state;
}

}  // namespace ascan
