// ascan/warp/warp_scan.cuh: shuffle scans of Affine pairs across lane groups of one warp.
//
// A warp is split into 32 / kLanes independent groups of kLanes consecutive lanes; each group
// scans its own sequence, so a warp can work on several short sequences at once. Within a group,
// rank 0 is earliest in a forward scan and rank kLanes-1 is earliest in a reverse scan; the
// earlier operand is always on the left of compose. Needs only ../affine.cuh.
#pragma once

// affine.cuh one folder up, as installed; or beside this file, where a user copied the two.
#if __has_include("affine.cuh")
#include "affine.cuh"
#else
#include "../affine.cuh"
#endif

namespace ascan {

/// Scans of one Affine pair per lane over groups of `kLanes` lanes (a power of two <= 32). Every
/// lane of the warp must make the same calls (the shuffles name all 32 lanes).
template <class C, int kLanes = kWarpThreads, bool kReverse = false>
struct WarpScan {
  static_assert(kLanes >= 1 && kLanes <= kWarpThreads && (kLanes & (kLanes - 1)) == 0,
                "lane groups are a power of two of at most 32 lanes");

  /// This lane's position within its group.
  static __device__ __forceinline__ int rank() { return static_cast<int>(threadIdx.x) % kLanes; }

  /// Inclusive scan: the composition of the group's pairs from its earliest lane through this one.
  static __device__ __forceinline__ Affine<C> inclusive_scan(const Affine<C>& x) {
    return lane_group_inclusive_scan<kLanes, kReverse>(x, rank());
  }

  /// Exclusive scan: `exclusive` gets the composition of the pairs of all earlier lanes (the
  /// identity for the earliest lane), `aggregate` the composition of the whole group.
  static __device__ __forceinline__ void exclusive_scan(const Affine<C>& x, Affine<C>& exclusive,
                                                        Affine<C>& aggregate) {
    const int r = rank();
    const Affine<C> inclusive = lane_group_inclusive_scan<kLanes, kReverse>(x, r);
    aggregate = lane_group_broadcast<kLanes>(inclusive, kReverse ? 0 : kLanes - 1);
    Affine<C> earlier;
    if constexpr (kReverse) {
      earlier.a = __shfl_down_sync(0xffffffffu, inclusive.a, 1, kLanes);
      earlier.b = __shfl_down_sync(0xffffffffu, inclusive.b, 1, kLanes);
    } else {
      earlier.a = __shfl_up_sync(0xffffffffu, inclusive.a, 1, kLanes);
      earlier.b = __shfl_up_sync(0xffffffffu, inclusive.b, 1, kLanes);
    }
    const bool earliest = kReverse ? r == kLanes - 1 : r == 0;
    exclusive = earliest ? affine_identity<C>() : earlier;
  }

  /// Scan with a carry across tiles: `carry` is the state before the group's earliest item on
  /// entry and after its latest item on return (the affine specialisation of CUB's prefix
  /// callback: a known state h is the constant map (0, h)). Returns the state entering this lane.
  static __device__ __forceinline__ C scan_state(const Affine<C>& x, C& carry) {
    Affine<C> exclusive, aggregate;
    exclusive_scan(x, exclusive, aggregate);
    const C incoming = apply(exclusive, carry);
    carry = apply(aggregate, carry);
    return incoming;
  }

  /// Scan with a carry over kRuns consecutive runs of the group, lane `rank` holding x[j] of run
  /// j (a striped tile: run j covers group positions j * kLanes ... j * kLanes + kLanes - 1; in
  /// a reverse scan run kRuns - 1 is earliest). The runs' shuffles are independent, so they
  /// overlap. incoming[j] gets the state entering this lane's pair of run j; `carry` advances
  /// past all runs.
  template <int kRuns>
  static __device__ __forceinline__ void scan_state(const Affine<C> (&x)[kRuns],
                                                    C (&incoming)[kRuns], C& carry) {
    Affine<C> exclusive[kRuns], aggregate[kRuns];
#pragma unroll
    for (int j = 0; j < kRuns; ++j) exclusive_scan(x[j], exclusive[j], aggregate[j]);
#pragma unroll
    for (int k = 0; k < kRuns; ++k) {
      const int j = kReverse ? kRuns - 1 - k : k;
      incoming[j] = apply(exclusive[j], carry);
      carry = apply(aggregate[j], carry);
    }
  }
};

}  // namespace ascan
