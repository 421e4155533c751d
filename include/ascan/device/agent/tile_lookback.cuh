// ascan/device/agent/tile_lookback.cuh: the tile states that join the blocks of one sequence.
//
// When a sequence is split over many blocks (the multi-block path, dispatch/scan_kernels.cuh),
// tile k of it needs the state after tiles 0 .. k-1 before it can write anything. Decoupled
// look-back (Merrill and Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back",
// 2016) gets it in one pass over memory: every tile publishes its aggregate (the Affine map of
// its elements) as soon as it has scanned its own elements, then its inclusive state (the state
// after it) as soon as it knows the state before it; a tile looks back over its predecessors,
// spinning only until each has published at least its aggregate, and stops at the nearest one
// with an inclusive state.
//
// Determinism. The state before tile k is computed as the fold
//
//     s = inclusive[j];  for i = j+1 .. k-1:  s = aggregate[i].a * s + aggregate[i].b   (one fma)
//
// from the nearest predecessor j with an inclusive state; tile j computed inclusive[j] by the
// same fma chain from its own nearest one, and the first tile of a sequence from the initial
// carry. By induction every tile's state is the one sequential chain of fmas over the tiles'
// aggregates, whichever j the timing of a run let it find: results are bitwise identical run
// after run. (Composing the predecessors' aggregates first, as a general look-back does, would
// round differently depending on j.)
//
// Cost: that fold is one shuffle and one fma per predecessor, in a chain, so the front of
// published states advances about one tile per 30 ns (measured on the H200). That bounds the
// multi-block path at about 0.35 of a copy's speed (bench/RESULTS.md, "Few long sequences");
// wip/two_level_lookback.patch folds once per group of 32 tiles instead.
//
// Memory ordering: a tile writes its aggregate or inclusive state with plain stores, then its
// status with a release store (st.release.gpu); readers load the status with an acquire load
// (ld.acquire.gpu) before reading what it announces. Tile t is scanned by block t, and a tile
// waits only on lower-numbered ones, which the hardware starts first.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../affine.cuh"

namespace ascan {
namespace detail {

/// What a tile has published.
enum TileStatus : uint32_t {
  kTileEmpty = 0,      ///< nothing yet (the workspace's status words are zeroed before a launch)
  kTileAggregate = 1,  ///< its aggregate
  kTileInclusive = 2,  ///< its inclusive state (and its aggregate, unless it starts a sequence)
};

/// The scratch of the multi-block path, carved from the caller's workspace: one status word per
/// tile, and per tile an aggregate and an inclusive state. Only the status words must be zero at
/// launch (see reset_bytes); the values are written before the status that announces them.
template <class C>
struct TileStates {
  uint32_t* status;
  Affine<C>* aggregate;
  C* inclusive;

  static constexpr size_t kAlign = 16;
  static constexpr size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  /// Bytes from the (aligned) start of the workspace to the end of the status words.
  static constexpr size_t reset_bytes(int64_t tiles) {
    return static_cast<size_t>(tiles) * sizeof(uint32_t);
  }
  /// Bytes of workspace for `tiles` tiles, with room to align a workspace of any alignment.
  static constexpr size_t bytes(int64_t tiles) {
    return kAlign - 1 + align_up(reset_bytes(tiles)) +
           align_up(static_cast<size_t>(tiles) * sizeof(Affine<C>)) +
           static_cast<size_t>(tiles) * sizeof(C);
  }
  /// The aligned start of a workspace.
  static void* align(void* workspace) {
    const auto p = reinterpret_cast<uintptr_t>(workspace);
    return reinterpret_cast<void*>((p + kAlign - 1) / kAlign * kAlign);
  }
  /// Carves the arrays for `tiles` tiles from a workspace of at least bytes(tiles) bytes.
  static TileStates carve(void* workspace, int64_t tiles) {
    char* p = static_cast<char*>(align(workspace));
    TileStates s;
    s.status = reinterpret_cast<uint32_t*>(p);
    p += align_up(reset_bytes(tiles));
    s.aggregate = reinterpret_cast<Affine<C>*>(p);
    p += align_up(static_cast<size_t>(tiles) * sizeof(Affine<C>));
    s.inclusive = reinterpret_cast<C*>(p);
    return s;
  }
};

#if defined(__CUDACC__)

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/// The state after one tile from the state before it: exactly one fused multiply-add, the same
/// instruction wherever a tile's state is derived (see "Determinism" above).
__device__ __forceinline__ float advance_state(const Affine<float>& f, float s) {
  return __fmaf_rn(f.a, s, f.b);
}
__device__ __forceinline__ double advance_state(const Affine<double>& f, double s) {
  return __fma_rn(f.a, s, f.b);
}

/// Publishes tile `tile`'s aggregate (one thread).
template <class C>
__device__ __forceinline__ void publish_aggregate(const TileStates<C>& s, int64_t tile,
                                                  const Affine<C>& aggregate) {
  s.aggregate[tile] = aggregate;
  store_release(s.status + tile, kTileAggregate);
}

/// Publishes tile `tile`'s inclusive state (one thread).
template <class C>
__device__ __forceinline__ void publish_inclusive(const TileStates<C>& s, int64_t tile, C state) {
  s.inclusive[tile] = state;
  store_release(s.status + tile, kTileInclusive);
}

/// The state before tile `tile`, whose sequence's first tile is `first` (< tile; the first tile
/// publishes its inclusive state without looking back). Called by all 32 lanes of one warp;
/// every lane returns the state. Lane l watches tile hi-1-l of a window of 32 predecessors.
template <class C>
__device__ __forceinline__ C look_back(const TileStates<C>& s, int64_t first, int64_t tile) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  // 1. Walk back window by window to the nearest predecessor with an inclusive state.
  int64_t hi = tile;
  Affine<C> mine = affine_identity<C>();  // lane's tile's aggregate, in the current window
  C state = C(0);
  int nearest = 0;
  for (;;) {
    const int64_t t = hi - 1 - lane;
    uint32_t status = kTileEmpty;
    C inclusive = C(0);
    if (t >= first) {
      while ((status = load_acquire(s.status + t)) == kTileEmpty) __nanosleep(20);
      if (status == kTileInclusive)
        inclusive = s.inclusive[t];
      else
        mine = s.aggregate[t];
    }
    const unsigned found = __ballot_sync(0xffffffffu, status == kTileInclusive);
    if (found != 0) {  // the first window that reaches `first` always finds it
      nearest = __ffs(found) - 1;
      state = __shfl_sync(0xffffffffu, inclusive, nearest);
      break;
    }
    hi -= kWarpThreads;
  }
  // 2. Fold, earliest first, the aggregates between it and this tile: those of the window where
  // it was found (lanes nearest-1 .. 0), then those of each later window, read again (each was
  // announced by a status this lane saw, or sees now, as non-empty).
  for (int l = nearest - 1; l >= 0; --l)
    state = advance_state(lane_group_broadcast<kWarpThreads>(mine, l), state);
  for (hi += kWarpThreads; hi <= tile; hi += kWarpThreads) {
    const int64_t t = hi - 1 - lane;
    while (load_acquire(s.status + t) == kTileEmpty) {
    }
    mine = s.aggregate[t];
    for (int l = kWarpThreads - 1; l >= 0; --l)
      state = advance_state(lane_group_broadcast<kWarpThreads>(mine, l), state);
  }
  return state;
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
