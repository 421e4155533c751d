// ascan/block/block_scan.cuh: scans of Affine pairs across a thread block.
//
// Each warp scans its lanes with shuffles; the warps' aggregates meet in shared memory; after one
// barrier every warp scans those aggregates itself with shuffles, so each thread learns the
// composition of all earlier warps without a second barrier. The shared slots are double
// buffered, so back-to-back calls (one per tile) need one barrier each. Earlier threads are
// lower-numbered in a forward scan and higher-numbered in a reverse scan. Needs only
// ../affine.cuh.
#pragma once

// affine.cuh one folder up, as installed; or beside this file, where a user copied the two.
#if __has_include("affine.cuh")
#include "affine.cuh"
#else
#include "../affine.cuh"
#endif

namespace ascan {

/// Block-wide scans of Affine pairs, `kThreads` threads (a multiple of 32, at most 1024), one
/// pair per thread in each of `kRuns` runs (a striped tile of kRuns * kThreads pairs). Construct
/// it over a TempStorage in shared memory; every thread of the block must make the same calls.
template <class C, int kThreads, bool kReverse = false, int kRuns = 1>
class BlockScan {
 public:
  static_assert(kThreads % kWarpThreads == 0 && kThreads <= 1024,
                "a block is a whole number of warps, at most 1024 threads");
  static constexpr int kWarps = kThreads / kWarpThreads;
  /// Lanes that scan the warps' aggregates: kWarps rounded up to a power of two.
  static constexpr int kAcross = kWarps <= 1    ? 1
                                 : kWarps <= 2  ? 2
                                 : kWarps <= 4  ? 4
                                 : kWarps <= 8  ? 8
                                 : kWarps <= 16 ? 16
                                                : 32;

  /// Shared memory for the warps' aggregates: per call parity, per run, per warp.
  struct TempStorage {
    Affine<C> warp_aggregate[2][kRuns][kWarps];
  };

  __device__ __forceinline__ explicit BlockScan(TempStorage& storage) : storage_(storage) {}

  /// Exclusive scan over kRuns consecutive runs of the block, thread i holding x[j], the pair at
  /// block position j * kThreads + i (a striped tile; in a reverse scan the last position is
  /// earliest). exclusive[j] gets the composition of every earlier pair, `aggregate` that of all
  /// kRuns * kThreads pairs. One barrier.
  __device__ __forceinline__ void exclusive_scan(const Affine<C> (&x)[kRuns],
                                                 Affine<C> (&exclusive)[kRuns],
                                                 Affine<C>& aggregate) {
    const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
    const int warp = static_cast<int>(threadIdx.x) / kWarpThreads;
    auto& slots = storage_.warp_aggregate[parity_];
    parity_ ^= 1;

    Affine<C> within[kRuns];  // exclusive prefix within the warp, from the lane one step earlier
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      const Affine<C> inclusive = lane_group_inclusive_scan<kWarpThreads, kReverse>(x[j], lane);
      if constexpr (kReverse) {
        within[j].a = __shfl_down_sync(0xffffffffu, inclusive.a, 1);
        within[j].b = __shfl_down_sync(0xffffffffu, inclusive.b, 1);
        if (lane == kWarpThreads - 1) within[j] = affine_identity<C>();
      } else {
        within[j].a = __shfl_up_sync(0xffffffffu, inclusive.a, 1);
        within[j].b = __shfl_up_sync(0xffffffffu, inclusive.b, 1);
        if (lane == 0) within[j] = affine_identity<C>();
      }
      if (lane == (kReverse ? 0 : kWarpThreads - 1)) slots[j][warp] = inclusive;
    }
    __syncthreads();

    // Every warp scans each run's kWarps aggregates itself; lane w holds warp w's.
    const bool first_warp = kReverse ? warp == kWarps - 1 : warp == 0;
    const int before = kReverse ? warp + 1 : warp - 1;  // the warp just earlier than this one
    Affine<C> running = affine_identity<C>();
#pragma unroll
    for (int k = 0; k < kRuns; ++k) {
      const int j = kReverse ? kRuns - 1 - k : k;
      const Affine<C> mine = lane < kWarps ? slots[j][lane] : affine_identity<C>();
      const Affine<C> across = lane_group_inclusive_scan<kAcross, kReverse>(mine, lane % kAcross);
      const Affine<C> run_total =
          lane_group_broadcast<kWarpThreads>(across, kReverse ? 0 : kWarps - 1);
      const Affine<C> earlier_warps =
          lane_group_broadcast<kWarpThreads>(across, before < 0 ? 0 : before % kWarpThreads);
      const Affine<C> in_run = first_warp ? within[j] : compose(earlier_warps, within[j]);
      exclusive[j] = compose(running, in_run);
      running = compose(running, run_total);
    }
    aggregate = running;
  }

  /// Exclusive scan of one pair per thread (kRuns == 1): `exclusive` gets the composition of all
  /// earlier threads' pairs (the identity for the earliest thread), `aggregate` that of the whole
  /// block.
  __device__ __forceinline__ void exclusive_scan(const Affine<C>& x, Affine<C>& exclusive,
                                                 Affine<C>& aggregate) {
    static_assert(kRuns == 1, "one pair per thread is the kRuns == 1 scan");
    const Affine<C> xs[1] = {x};
    Affine<C> es[1];
    exclusive_scan(xs, es, aggregate);
    exclusive = es[0];
  }

  /// Scan with a carry across tiles over kRuns runs (see the striped exclusive_scan): `carry` is
  /// the state before the earliest pair on entry and after the latest on return (the affine
  /// specialisation of CUB's prefix callback: a known state h is the constant map (0, h));
  /// incoming[j] gets the state entering this thread's pair of run j. One barrier.
  __device__ __forceinline__ void scan_state(const Affine<C> (&x)[kRuns], C (&incoming)[kRuns],
                                             C& carry) {
    Affine<C> exclusive[kRuns], aggregate;
    exclusive_scan(x, exclusive, aggregate);
#pragma unroll
    for (int j = 0; j < kRuns; ++j) incoming[j] = apply(exclusive[j], carry);
    carry = apply(aggregate, carry);
  }

  /// Scan with a carry of one pair per thread (kRuns == 1); returns the state entering this
  /// thread.
  __device__ __forceinline__ C scan_state(const Affine<C>& x, C& carry) {
    static_assert(kRuns == 1, "one pair per thread is the kRuns == 1 scan");
    const Affine<C> xs[1] = {x};
    C in[1];
    scan_state(xs, in, carry);
    return in[0];
  }

 private:
  TempStorage& storage_;
  int parity_ = 0;
};

}  // namespace ascan
