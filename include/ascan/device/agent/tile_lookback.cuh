// ascan/device/agent/tile_lookback.cuh: the tile states that join the blocks of one sequence.
//
// When a sequence is split over many blocks (the multi-block path, dispatch/scan_kernels.cuh),
// tile k of it needs the state after tiles 0 .. k-1 before it can write anything. Decoupled
// look-back (Merrill and Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back",
// 2016) gets it in one pass over memory: every tile publishes its aggregate (the Affine map of
// its elements) as soon as it has scanned its own elements, and later tiles combine the
// published values instead of waiting for each other in a chain.
//
// Determinism, on two levels. Tiles are grouped by 32 (a warp's width), group m of a sequence
// holding its tiles 32m .. 32m+31:
//   - within a group, tile 32m+i combines the aggregates of tiles 32m .. 32m+i-1 with a
//     Kogge-Stone scan over the warp's lanes, lane l holding tile 32m+l: a fixed tree, so the
//     map P(i) in front of the tile is the same whichever tile computes it, whenever;
//   - across groups, the state B(m) after group m is B(m) = G(m).a * B(m-1) + G(m).b (one fma),
//     G(m) = P(32), B(-1) the initial carry. The last tile of a group publishes G(m) as soon as
//     its group's aggregates are in, then B(m) once it knows B(m-1). A tile looks back over
//     groups (a window of 32 groups per load) to the nearest one with B published and folds the
//     G's after it, earliest first, one fma each: the same chain of fmas wherever it starts.
// The state entering tile 32m+i is P(i) applied to B(m-1): a fixed function of the inputs, so
// results are bitwise identical run after run. (A plain look-back composes whatever
// predecessors happen to be done, which rounds differently from run to run; a look-back that
// folds every tile's aggregate one by one is deterministic but serial, one shuffle-and-fma
// chain per tile: measured at 30 ns per tile, a third of the copy's speed.)
//
// Memory ordering: values are written with plain stores, then the status word that announces
// them with a release store (st.release.gpu); readers load the status with an acquire load
// (ld.acquire.gpu) before the values. Tile t is scanned by block t and waits only on
// lower-numbered tiles, which the hardware starts first.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../affine.cuh"

namespace ascan {
namespace detail {

/// What a tile or a group of tiles has published.
enum TileStatus : uint32_t {
  kTileEmpty = 0,      ///< nothing yet (status words are zeroed before a launch)
  kTileAggregate = 1,  ///< its aggregate
  kTileInclusive = 2,  ///< (groups) also the state after it
};

/// Tiles per group: one per lane of the warp that looks back.
constexpr int kTilesPerGroup = 32;

/// The scratch of the multi-block path, carved from the caller's workspace: per tile a status
/// word and an aggregate; per group of kTilesPerGroup tiles a status word, an aggregate and the
/// state after it. Only the status words must be zero at launch (they come first, reset_bytes);
/// the values are written before the status that announces them.
template <class C>
struct TileStates {
  uint32_t* status;
  uint32_t* group_status;
  Affine<C>* aggregate;
  Affine<C>* group_aggregate;
  C* group_inclusive;

  static constexpr size_t kAlign = 16;
  static constexpr size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  /// Bytes of status words at the (aligned) start of the workspace.
  static constexpr size_t reset_bytes(int64_t tiles, int64_t groups) {
    return static_cast<size_t>(tiles + groups) * sizeof(uint32_t);
  }
  /// Bytes of workspace, with room to align a workspace of any alignment.
  static constexpr size_t bytes(int64_t tiles, int64_t groups) {
    return kAlign - 1 + align_up(reset_bytes(tiles, groups)) +
           align_up(static_cast<size_t>(tiles + groups) * sizeof(Affine<C>)) +
           static_cast<size_t>(groups) * sizeof(C);
  }
  /// The aligned start of a workspace.
  static void* align(void* workspace) {
    const auto p = reinterpret_cast<uintptr_t>(workspace);
    return reinterpret_cast<void*>((p + kAlign - 1) / kAlign * kAlign);
  }
  /// Carves the arrays from a workspace of at least bytes(tiles, groups) bytes.
  static TileStates carve(void* workspace, int64_t tiles, int64_t groups) {
    char* p = static_cast<char*>(align(workspace));
    TileStates s;
    s.status = reinterpret_cast<uint32_t*>(p);
    s.group_status = s.status + tiles;
    p += align_up(reset_bytes(tiles, groups));
    s.aggregate = reinterpret_cast<Affine<C>*>(p);
    s.group_aggregate = s.aggregate + tiles;
    p += align_up(static_cast<size_t>(tiles + groups) * sizeof(Affine<C>));
    s.group_inclusive = reinterpret_cast<C*>(p);
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

/// Publishes an aggregate (one thread).
template <class C>
__device__ __forceinline__ void publish_aggregate(uint32_t* status, Affine<C>* slot,
                                                  const Affine<C>& aggregate) {
  *slot = aggregate;
  store_release(status, kTileAggregate);
}

/// Publishes the state after a group (one thread).
template <class C>
__device__ __forceinline__ void publish_inclusive(uint32_t* status, C* slot, C state) {
  *slot = state;
  store_release(status, kTileInclusive);
}

/// An aggregate, once published.
template <class C>
__device__ __forceinline__ Affine<C> wait_aggregate(const uint32_t* status,
                                                    const Affine<C>* slot) {
  while (load_acquire(status) == kTileEmpty) __nanosleep(20);
  return *slot;
}

/// The state before group `group`, whose sequence's first group is `first` (< group). Called by
/// all 32 lanes of one warp; every lane returns the state. Lane l watches group hi-1-l of a
/// window of 32 predecessors, spinning until it has published at least its aggregate.
template <class C>
__device__ __forceinline__ C look_back_groups(const TileStates<C>& s, int64_t first,
                                              int64_t group) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  // 1. Walk back window by window to the nearest group with its state published.
  int64_t hi = group;
  Affine<C> mine = affine_identity<C>();
  C state = C(0);
  int nearest = 0;
  for (;;) {
    const int64_t g = hi - 1 - lane;
    uint32_t status = kTileEmpty;
    C inclusive = C(0);
    if (g >= first) {
      while ((status = load_acquire(s.group_status + g)) == kTileEmpty) __nanosleep(20);
      mine = s.group_aggregate[g];
      if (status == kTileInclusive) inclusive = s.group_inclusive[g];
    }
    const unsigned found = __ballot_sync(0xffffffffu, status == kTileInclusive);
    if (found != 0) {
      nearest = __ffs(found) - 1;
      state = __shfl_sync(0xffffffffu, inclusive, nearest);
      break;
    }
    // The first group publishes its state at once (never an aggregate alone), so the window that
    // reaches it finds a state; poll that window again rather than walk past the sequence's start.
    if (hi - kWarpThreads > first) hi -= kWarpThreads;
  }
  // 2. Fold, earliest first, the aggregates of the groups after it: lanes nearest-1 .. 0 of its
  // window, then every lane of each later window, read again.
  for (int l = nearest - 1; l >= 0; --l)
    state = advance_state(lane_group_broadcast<kWarpThreads>(mine, l), state);
  for (hi += kWarpThreads; hi <= group; hi += kWarpThreads) {
    mine = wait_aggregate(s.group_status + (hi - 1 - lane), s.group_aggregate + (hi - 1 - lane));
    for (int l = kWarpThreads - 1; l >= 0; --l)
      state = advance_state(lane_group_broadcast<kWarpThreads>(mine, l), state);
  }
  return state;
}

/// The state entering tile k (in scan order) of a sequence whose tile 0 is `first_tile` and
/// group 0 `first_group`, given the tile's own aggregate and the sequence's initial carry; the
/// tile's aggregate is published, and, when it closes a group, the group's aggregate and state.
/// Called by all 32 lanes of one warp; every lane returns the state.
template <class C>
__device__ __forceinline__ C look_back(const TileStates<C>& s, int64_t first_tile,
                                       int64_t first_group, int64_t k, const Affine<C>& own,
                                       C initial) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int64_t tile = first_tile + k;
  const int64_t m = k / kTilesPerGroup;
  const int i = static_cast<int>(k % kTilesPerGroup);
  if (lane == 0) publish_aggregate(s.status + tile, s.aggregate + tile, own);
  // The map in front of the tile within its group: a scan over the group's aggregates, lane l
  // holding tile 32m+l (this tile's own at lane i, identities above it).
  Affine<C> x = affine_identity<C>();
  if (lane < i)
    x = wait_aggregate(s.status + (tile - i + lane), s.aggregate + (tile - i + lane));
  else if (lane == i)
    x = own;
  const Affine<C> inclusive = lane_group_inclusive_scan<kWarpThreads, false>(x, lane);
  const Affine<C> in_front = i > 0 ? lane_group_broadcast<kWarpThreads>(inclusive, i - 1)
                                   : affine_identity<C>();
  const bool closes = i == kTilesPerGroup - 1;
  const int64_t group = first_group + m;
  const Affine<C> group_map = lane_group_broadcast<kWarpThreads>(inclusive, kWarpThreads - 1);
  // A closing tile publishes its group's aggregate before it looks back (later groups must never
  // wait on a look-back), except the first group, whose state it knows at once: that one goes out
  // with its state in one release (readers rely on the first group never showing an aggregate
  // alone; see look_back_groups).
  if (closes && lane == 0 && m > 0)
    publish_aggregate(s.group_status + group, s.group_aggregate + group, group_map);
  const C before_group = m == 0 ? initial : look_back_groups(s, first_group, group);
  if (closes && lane == 0) {
    if (m == 0) s.group_aggregate[group] = group_map;
    publish_inclusive(s.group_status + group, s.group_inclusive + group,
                      advance_state(group_map, before_group));
  }
  return i > 0 ? advance_state(in_front, before_group) : before_group;
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
