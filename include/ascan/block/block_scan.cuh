// ascan/block/block_scan.cuh: scans of Affine pairs across a thread block.
//
// Each warp scans its lanes with shuffles; the warps' aggregates meet in shared memory; after one
// barrier every warp scans those aggregates itself with shuffles, so each thread learns the
// composition of all earlier warps without a second barrier. The shared slots are double
// buffered, so back-to-back calls (one per tile) need one barrier each. Earlier threads are
// lower-numbered in a forward scan and higher-numbered in a reverse scan. Needs only
// ../affine.cuh.
#pragma once

#include "../affine.cuh"

namespace ascan {

/// Block-wide scans of one Affine pair per thread, `kThreads` threads (a multiple of 32, at most
/// 1024). Construct it over a TempStorage in shared memory; every thread of the block must make
/// the same calls.
template <class C, int kThreads, bool kReverse = false>
class BlockScan {
 public:
  static_assert(kThreads % kWarpThreads == 0 && kThreads <= 1024,
                "a block is a whole number of warps, at most 1024 threads");
  static constexpr int kWarps = kThreads / kWarpThreads;
  /// Lanes that scan the warps' aggregates: kWarps rounded up to a power of two.
  static constexpr int kAcross = kWarps <= 1 ? 1 : kWarps <= 2 ? 2 : kWarps <= 4 ? 4
                               : kWarps <= 8 ? 8 : kWarps <= 16 ? 16 : 32;

  /// Shared memory for the warps' aggregates, two slots per warp (one per call parity).
  struct TempStorage {
    Affine<C> warp_aggregate[2][kWarps];
  };

  __device__ __forceinline__ explicit BlockScan(TempStorage& storage) : storage_(storage) {}

  /// Exclusive scan: `exclusive` gets the composition of all earlier threads' pairs (the identity
  /// for the earliest thread), `aggregate` the composition of the whole block. One barrier.
  __device__ __forceinline__ void exclusive_scan(const Affine<C>& x, Affine<C>& exclusive,
                                                 Affine<C>& aggregate) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
    const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
    const Affine<C> inclusive = lane_group_inclusive_scan<kWarpThreads, kReverse>(x, lane);

    // The exclusive prefix within the warp, from the lane one step earlier.
    Affine<C> within;
    if constexpr (kReverse) {
      within.a = __shfl_down_sync(0xffffffffu, inclusive.a, 1);
      within.b = __shfl_down_sync(0xffffffffu, inclusive.b, 1);
      if (lane == kWarpThreads - 1) within = affine_identity<C>();
    } else {
      within.a = __shfl_up_sync(0xffffffffu, inclusive.a, 1);
      within.b = __shfl_up_sync(0xffffffffu, inclusive.b, 1);
      if (lane == 0) within = affine_identity<C>();
    }

    Affine<C>* slots = storage_.warp_aggregate[parity_];
    parity_ ^= 1;
    if (lane == (kReverse ? 0 : kWarpThreads - 1)) slots[warp] = inclusive;
    __syncthreads();

    // Every warp scans the kWarps aggregates; lane w holds warp w's.
    const Affine<C> mine = lane < kWarps ? slots[lane] : affine_identity<C>();
    const Affine<C> across = lane_group_inclusive_scan<kAcross, kReverse>(mine, lane % kAcross);
    aggregate = lane_group_broadcast<kWarpThreads>(across, kReverse ? 0 : kWarps - 1);
    // Warps earlier than this one: warp-1 (forward) or warp+1 (reverse), identity at the end.
    const int before = kReverse ? warp + 1 : warp - 1;
    const Affine<C> earlier_warps =
        lane_group_broadcast<kWarpThreads>(across, before < 0 ? 0 : before % kWarpThreads);
    const bool first_warp = kReverse ? warp == kWarps - 1 : warp == 0;
    exclusive = first_warp ? within : compose(earlier_warps, within);
  }

  /// Scan with a carry across tiles: `carry` is the state before the block's earliest item on
  /// entry and after its latest item on return (the affine specialisation of CUB's prefix
  /// callback). Returns the state entering this thread. One barrier.
  __device__ __forceinline__ C scan_state(const Affine<C>& x, C& carry) {
    Affine<C> exclusive, aggregate;
    exclusive_scan(x, exclusive, aggregate);
    const C incoming = apply(exclusive, carry);
    carry = apply(aggregate, carry);
    return incoming;
  }

 private:
  TempStorage& storage_;
  int parity_ = 0;
};

}  // namespace ascan
