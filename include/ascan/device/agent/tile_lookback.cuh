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
//     map P(i) in front of the tile is the same whichever tile computes it, whenever; the
//     group's aggregate G(m) is P(32);
//   - across groups, the state B(m) after group m is B(m) = G(m).a * B(m-1) + G(m).b (one fma),
//     B(-1) the initial carry. Folding the G's one by one from the nearest published B gives the
//     same chain of fmas wherever it starts.
// The state entering tile 32m+i is P(i) applied to B(m-1): a fixed function of the inputs, so
// results are bitwise identical run after run. (A plain look-back composes whatever
// predecessors happen to be done, which rounds differently from run to run; folding every
// tile's aggregate one by one is deterministic but serial, each tile waiting for the state after
// its predecessor through the whole sequence: bench/RESULTS.md, "What was tried and dropped, and
// why".)
//
// Latency. The tiles of a sequence run in step, so a tile's look-back waits for its predecessor's
// aggregate, published at about the same moment as its own: an L2 round trip or two at best.
// look_back therefore reads everything it needs in ONE round of loads (its group's earlier
// aggregates, the previous group's 32 aggregates, and a window of 32 earlier groups' records)
// and waits on no other tile's look-back, only on aggregates; and a float record's payload is
// one 16-byte word holding the value and its status, written and read with one vector access, so
// publishing needs no fence. Measured on the H200: about 2.6-3.7 us per look-back
// (bench/RESULTS.md, "Few long sequences"). Each record has an L2 line to itself
// (kRecordBytes): records that share a line, written by neighbouring tiles while their
// successors poll it, cost 5-7% on one long sequence. Each waiting lane keeps one read in
// flight: polling harder (more reads in flight per lane, or reads issued before the tile's own
// scan) loads the polled lines and slows every tile (bench/RESULTS.md, "What was tried and
// dropped, and why").
//
// Memory ordering: a float record's word is written with one 16-byte relaxed store and read with
// one 16-byte relaxed load (CUB's ScanTileState relies on the same single-access rule for values
// of up to 8 bytes). A double record's payload is written with plain stores and then its tag with
// a release store (st.release.gpu); readers load the tag with an acquire load first. Tile k of a
// sequence waits only on its tiles k' < k, which lower-numbered blocks scan (dispatch/
// scan_kernels.cuh) and the hardware starts first.
//
// Which records are this call's: each call has a 64-bit tag (call_tag, dispatch/dispatch.cuh:
// process-wide unique, from a randomly seeded counter), and a record counts as published only
// when it carries this call's tag, in the same 16-byte word as the payload (float) or as the
// word released after it (double). Nothing is zeroed before a launch: the records the last call
// left, or whatever the workspace held, carry other tags, so a call is one kernel launch
// (zeroing would put a kernel of its own in front of every call, about 2 us of each call's time
// on the H200; bench/RESULTS.md, "Few long sequences"). A call captured into a CUDA graph
// replays its tag, so there the records are zeroed first (reset_tile_states).
//
// Warm record lines: with nothing zeroed before a call, a record's line is cold (the last call
// left it in memory, not in L2), which slows the one-sequence look-back: it waits on each
// predecessor's fresh record. Each block therefore prefetches into L2 the lines it will publish
// (prefetch_own_records), first thing, some microseconds before it publishes them: on the H200,
// (1, 1, 2^28) f32 backward 1474 -> 1452 us and bf16 backward 750 -> 739 (bench/RESULTS.md,
// "Few long sequences").
#pragma once

#include <cstddef>
#include <cstdint>
#if defined(__CUDACC__)
#include <cuda/ptx>  // cuda::ptx::get_sreg_globaltimer
#endif
#if defined(ASCAN_DEBUG)
#include <cstdio>  // the look-back watch's message
#endif

#include "../../affine.cuh"

namespace ascan {
namespace detail {

/// What a tile or a group of tiles has published, as look_back reads it.
enum TileStatus : uint32_t {
  kTileEmpty = 0,      ///< nothing of this call
  kTileAggregate = 1,  ///< its aggregate
  kTileInclusive = 2,  ///< (groups) the state after it
};

/// Tiles per group: one per lane of the warp that looks back.
constexpr int kTilesPerGroup = 32;

/// Bytes each record occupies: an L2 line of its own. Neighbouring tiles publish at about the
/// same moment from different multiprocessors while their successors poll them; with records
/// packed eight to a line that sharing costs 5-7% on one sequence (f32 (1, 1, 2^28) forward
/// 847-854 us against 905, backward 1508 against 1620 on the H200; bench/RESULTS.md, "Few long
/// sequences").
constexpr int kRecordBytes = 128;

/// What a tile publishes: its aggregate and the call's tag. For float the two are one 16-byte
/// word, written and read with one vector access, so no fence orders them (CUB's ScanTileState
/// does the same for values of up to 8 bytes); for double the tag is written with release
/// semantics after the aggregate and read with acquire semantics before it.
template <class C>
struct alignas(kRecordBytes) TileRecord {
  Affine<C> aggregate;
  uint64_t tag;
};
/// What a group of tiles publishes: its aggregate with the tag, then the state after it with the
/// tag again (two words, same rules; the first group publishes only its state, at once). A group
/// whose state carries the call's tag is inclusive; readers of a state need nothing else of it.
template <class C>
struct alignas(kRecordBytes) GroupRecord {
  Affine<C> aggregate;
  uint64_t tag;
  C state;
  alignas(8) uint64_t state_tag;
};
static_assert(sizeof(Affine<float>) + sizeof(uint64_t) == 16 &&
                  offsetof(TileRecord<float>, tag) == 8 && offsetof(GroupRecord<float>, tag) == 8 &&
                  offsetof(TileRecord<double>, tag) == offsetof(GroupRecord<double>, tag) &&
                  offsetof(GroupRecord<float>, state) == 16 &&
                  offsetof(GroupRecord<float>, state_tag) == 24 &&
                  offsetof(GroupRecord<double>, state_tag) + 8 <= 48 &&
                  sizeof(TileRecord<float>) == kRecordBytes &&
                  sizeof(GroupRecord<float>) == kRecordBytes &&
                  sizeof(TileRecord<double>) == kRecordBytes &&
                  sizeof(GroupRecord<double>) == kRecordBytes &&
                  alignof(TileRecord<float>) == kRecordBytes,
              "a float record's words are 16 bytes each, every tag is in a record's first 48 "
              "bytes, every record is one line");

/// The scratch of the multi-block path, carved from the caller's workspace: one record per tile
/// and one per group of kTilesPerGroup tiles, and the call's tag (see "Which records are this
/// call's" above).
template <class C>
struct TileStates {
  TileRecord<C>* tiles;
  GroupRecord<C>* groups;
  uint64_t tag;

  static constexpr size_t kAlign = kRecordBytes;
  /// Bytes of records at the (aligned) start of the workspace.
  static constexpr size_t reset_bytes(int64_t tiles, int64_t groups) {
    return static_cast<size_t>(tiles) * sizeof(TileRecord<C>) +
           static_cast<size_t>(groups) * sizeof(GroupRecord<C>);
  }
  /// Bytes of workspace, with room to align a workspace of any alignment.
  static constexpr size_t bytes(int64_t tiles, int64_t groups) {
    return kAlign - 1 + reset_bytes(tiles, groups);
  }
  /// The aligned start of a workspace.
  static void* align(void* workspace) {
    const auto p = reinterpret_cast<uintptr_t>(workspace);
    return reinterpret_cast<void*>((p + kAlign - 1) / kAlign * kAlign);
  }
  /// Carves the records from a workspace of at least bytes(tiles, groups) bytes, for the call
  /// tagged `tag`.
  static TileStates carve(void* workspace, int64_t tiles, int64_t groups, uint64_t tag) {
    (void)groups;  // the group records follow the tiles' records; `groups` sized the workspace
    TileStates s;
    s.tiles = static_cast<TileRecord<C>*>(align(workspace));
    s.groups = reinterpret_cast<GroupRecord<C>*>(s.tiles + tiles);
    s.tag = tag;
    return s;
  }
};

/// The first wave's pace. The blocks resident at launch (the first wave) start together; loading
/// together, they all finish loading together, then all look back and scan while memory idles,
/// and the wave stays in step for a while after. Instead, block b of the first wave waits
/// b * ps_per_block picoseconds after it starts before it loads: the wave's loads go out at
/// about the rate memory serves them, the first tiles are stored while later ones still load, and
/// the blocks leave the first wave one by one. On the H200 this makes the long rows up to 10%
/// faster (bf16 forward (1, 16, 2^22) 124 -> 112 us; dispatch/tuning.cuh, bench/RESULTS.md, "Few
/// long sequences").
struct WavePace {
  int64_t blocks = 0;         ///< the first wave: blocks 0 .. blocks-1 (0: not paced)
  uint32_t ps_per_block = 0;  ///< the delay between consecutive blocks' loads, picoseconds
};

#if defined(__CUDACC__)

// The records' words, read and written with a memory order at device scope, in the global space.
// These stay PTX: CCCL has no wrapper for 16-byte accesses with a memory order, and
// cuda::atomic_ref's 8-byte acquire and release compile to generic-space LD/ST where these give
// LDG/STG (sm_90 SASS of the double kernels compared).
__device__ __forceinline__ uint64_t load_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void store_relaxed_16(void* p, uint32_t x, uint32_t y, uint32_t z,
                                                 uint32_t w) {
  asm volatile("st.relaxed.gpu.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x), "r"(y),
               "r"(z), "r"(w)
               : "memory");
}
__device__ __forceinline__ uint4 load_relaxed_16(const void* p) {
  uint4 v;
  asm volatile("ld.relaxed.gpu.global.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ uint32_t low_word(uint64_t v) { return static_cast<uint32_t>(v); }
__device__ __forceinline__ uint32_t high_word(uint64_t v) { return static_cast<uint32_t>(v >> 32); }
/// Whether the last two 32-bit words of a float record's word are `tag`.
__device__ __forceinline__ bool tagged(const uint4& v, uint64_t tag) {
  return v.z == low_word(tag) && v.w == high_word(tag);
}

/// Zeroes the tags of `records` look-back records from `first` (tile records, then group
/// records: both kRecordBytes apart), the first 48 bytes of each, which hold every tag. Only
/// for calls captured into a graph, whose tag repeats from replay to replay (see "Which records
/// are this call's" above). The scan kernel launched after it may start at once (a programmatic
/// dependent launch) and waits for it before its look-back.
template <class C>
__global__ void __launch_bounds__(256) reset_tile_states(TileRecord<C>* first, int64_t records) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  auto* words = reinterpret_cast<uint4*>(first);
  constexpr int64_t kWords = kRecordBytes / 16;
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < records;
       r += int64_t(gridDim.x) * blockDim.x) {
    words[r * kWords] = make_uint4(0, 0, 0, 0);
    words[r * kWords + 1] = make_uint4(0, 0, 0, 0);
    words[r * kWords + 2] = make_uint4(0, 0, 0, 0);
  }
}
/// Waits until the grid launched before this one in the stream has completed and its writes are
/// visible (a no-op unless this grid went out as a programmatic dependent launch).
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

__device__ __forceinline__ uint64_t global_nanoseconds() {
  return cuda::ptx::get_sreg_globaltimer();
}
/// A look-back waits only on tiles that are running or done, so it always ends, unless the
/// records it reads are overwritten under it: two calls running at once on one workspace (two
/// streams, or two instances of one captured graph launched concurrently) wait on each other
/// forever. That misuse cannot be checked on the host. Built with ASCAN_DEBUG defined, a wait
/// longer than ASCAN_DEBUG_WAIT_NS (default 5 s) prints what happened and traps instead of
/// hanging (a sticky cudaErrorLaunchFailure the caller sees).
#if defined(ASCAN_DEBUG)
#ifndef ASCAN_DEBUG_WAIT_NS
#define ASCAN_DEBUG_WAIT_NS 5000000000ull
#endif
struct LookbackWatch {
  uint64_t since = global_nanoseconds();
  __device__ __forceinline__ void check() const {
    if (global_nanoseconds() - since > uint64_t(ASCAN_DEBUG_WAIT_NS)) {
      printf("ascan (ASCAN_DEBUG): block %u waited more than %llu ns for its look-back; is one "
             "workspace used by two calls at once?\n",
             blockIdx.x, static_cast<unsigned long long>(ASCAN_DEBUG_WAIT_NS));
      __trap();
    }
  }
};
#else
struct LookbackWatch {
  __device__ __forceinline__ void check() const {}
};
#endif

/// Called by every thread of a block first thing: holds the block back as `pace` says.
__device__ __forceinline__ void pace_first_wave(const WavePace& pace) {
  if (blockIdx.x >= pace.blocks) return;  // the same for all the block's threads
  if (threadIdx.x == 0) {
    const uint64_t until = global_nanoseconds() + blockIdx.x * uint64_t(pace.ps_per_block) / 1000;
    while (global_nanoseconds() < until) __nanosleep(64);
  }
  __syncthreads();
}

/// Brings the lines of the records that tile k of a sequence will publish (its own, and its
/// group's where it closes one) into L2 ahead of time, so that its successors' reads of them find
/// them there (see "Warm record lines" above; one thread, first thing in the block).
__device__ __forceinline__ void prefetch_record(const void* p) {
  // CCCL has no wrapper for a plain L2 prefetch (cuda::apply_access_property sets a policy)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
template <class C>
__device__ __forceinline__ void prefetch_own_records(const TileStates<C>& s, int64_t first_tile,
                                                     int64_t first_group, int64_t k) {
  prefetch_record(s.tiles + first_tile + k);
  if (k % kTilesPerGroup == kTilesPerGroup - 1)
    prefetch_record(s.groups + first_group + k / kTilesPerGroup);
}

/// The state after one tile (or group) from the state before it: exactly one fused multiply-add,
/// the same instruction wherever a state is derived (see "Determinism" above).
__device__ __forceinline__ float advance_state(const Affine<float>& f, float s) {
  return __fmaf_rn(f.a, s, f.b);
}
__device__ __forceinline__ double advance_state(const Affine<double>& f, double s) {
  return __fma_rn(f.a, s, f.b);
}

/// Publishes the aggregate of a tile or a group (`Record`: TileRecord or GroupRecord, both led by
/// the aggregate and its tag; one thread).
template <template <class> class Record>
__device__ __forceinline__ void publish(Record<float>* r, const Affine<float>& f, uint64_t tag) {
  store_relaxed_16(r, __float_as_uint(f.a), __float_as_uint(f.b), low_word(tag), high_word(tag));
}
template <template <class> class Record>
__device__ __forceinline__ void publish(Record<double>* r, const Affine<double>& f, uint64_t tag) {
  r->aggregate = f;
  store_release(&r->tag, tag);
}
/// Publishes the state after a group whose aggregate this thread has published (one thread).
__device__ __forceinline__ void publish_state(GroupRecord<float>* r, float state, uint64_t tag) {
  store_relaxed_16(&r->state, __float_as_uint(state), 0u, low_word(tag), high_word(tag));
}
__device__ __forceinline__ void publish_state(GroupRecord<double>* r, double state, uint64_t tag) {
  r->state = state;
  store_release(&r->state_tag, tag);
}

/// Reads the aggregate of a tile's or a group's record (`Record`: TileRecord or GroupRecord, both
/// led by the aggregate and its tag) into `f` if this call's is published; returns whether it was.
template <template <class> class Record>
__device__ __forceinline__ bool try_read(const Record<float>* r, uint64_t tag, Affine<float>& f) {
  const uint4 v = load_relaxed_16(r);
  if (!tagged(v, tag)) return false;
  f = {__uint_as_float(v.x), __uint_as_float(v.y)};
  return true;
}
template <template <class> class Record>
__device__ __forceinline__ bool try_read(const Record<double>* r, uint64_t tag, Affine<double>& f) {
  if (load_acquire(&r->tag) != tag) return false;
  f = r->aggregate;
  return true;
}
/// Reads the state after a group into `state` if this call's is published; returns whether it was.
__device__ __forceinline__ bool try_read_state(const GroupRecord<float>* r, uint64_t tag,
                                               float& state) {
  const uint4 u = load_relaxed_16(&r->state);
  if (!tagged(u, tag)) return false;
  state = __uint_as_float(u.x);
  return true;
}
__device__ __forceinline__ bool try_read_state(const GroupRecord<double>* r, uint64_t tag,
                                               double& state) {
  if (load_acquire(&r->state_tag) != tag) return false;
  state = r->state;
  return true;
}
/// Reads a group's record as far as this call has published it; returns its status: inclusive
/// where its state is published (into `state`; its aggregate, published before, may not be
/// visible yet, and whoever finds a state needs only the state), else aggregate where that is
/// (into `f`). A float record's two words are loaded at once: loading the aggregate only after
/// finding no state would put a second round trip into every look-back whose nearest group is
/// not inclusive yet (about 1% on f32 backward (1, 1, 2^28) on the H200; bench/RESULTS.md, "Few
/// long sequences"). A double record is read in that order, the state's tag first and the
/// aggregate's only where no state is there (each an acquire load ahead of its payload; not
/// measured: no long row is double).
__device__ __forceinline__ uint32_t try_read(const GroupRecord<float>* r, uint64_t tag,
                                             Affine<float>& f, float& state) {
  const uint4 v = load_relaxed_16(r);
  const uint4 u = load_relaxed_16(&r->state);
  if (tagged(u, tag)) {
    state = __uint_as_float(u.x);
    return kTileInclusive;
  }
  if (!tagged(v, tag)) return kTileEmpty;
  f = {__uint_as_float(v.x), __uint_as_float(v.y)};
  return kTileAggregate;
}
__device__ __forceinline__ uint32_t try_read(const GroupRecord<double>* r, uint64_t tag,
                                             Affine<double>& f, double& state) {
  if (try_read_state(r, tag, state)) return kTileInclusive;
  return try_read(r, tag, f) ? kTileAggregate : kTileEmpty;
}

/// Called by all lanes of a warp: spins until every lane's `ready` is true, calling `poll()` on
/// the lanes whose is not (poll issues its loads and updates `ready`).
template <class Poll>
__device__ __forceinline__ void poll_all(bool& ready, const Poll& poll) {
  const LookbackWatch watch;
  for (;;) {
    if (!ready) poll();
    if (__all_sync(0xffffffffu, ready)) return;
    watch.check();
    __nanosleep(32);
  }
}

/// The state after group `last` of a sequence whose first group is `first` (first <= last),
/// from a window of 32 groups already read: lane l holds group last-l (`status` 0 where nothing
/// was published or the group precedes `first`). Walks back to the nearest group with its state
/// published and folds the aggregates of the groups after it, earliest first, one fma each.
/// All 32 lanes call it; every lane returns the state.
template <class C>
__device__ __forceinline__ C state_after_groups(const TileStates<C>& s, int64_t first, int64_t last,
                                                Affine<C> map, C state, uint32_t status) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  int64_t top = last;  // the window holds groups top-31 .. top
  unsigned found = __ballot_sync(0xffffffffu, status == kTileInclusive);
  // Rare: no state in the first window. The first group publishes its state at once (never an
  // aggregate alone), so a window that reaches it finds one; walk back until one does.
  while (found == 0 && top - kWarpThreads >= first) {
    top -= kWarpThreads;
    const int64_t g = top - lane;
    bool ready = g < first;
    status = kTileEmpty;
    poll_all(ready,
             [&] { ready = (status = try_read(s.groups + g, s.tag, map, state)) != kTileEmpty; });
    found = __ballot_sync(0xffffffffu, status == kTileInclusive);
  }
  const int nearest = __ffs(found) - 1;
  C result = __shfl_sync(0xffffffffu, state, nearest);
  for (int l = nearest - 1; l >= 0; --l)
    result = advance_state(lane_group_broadcast<kWarpThreads>(map, l), result);
  // Fold the later windows, read again (every group in them has published at least its
  // aggregate: this lane, or its neighbours, saw it above).
  for (top += kWarpThreads; top <= last; top += kWarpThreads) {
    const int64_t g = top - lane;
    bool ready = false;
    poll_all(ready, [&] { ready = try_read(s.groups + g, s.tag, map); });
    for (int l = kWarpThreads - 1; l >= 0; --l)
      result = advance_state(lane_group_broadcast<kWarpThreads>(map, l), result);
  }
  return result;
}

/// The state entering tile k (in scan order) of a sequence whose tile 0 is `first_tile`, group 0
/// `first_group` and initial carry `initial`, given the tile's own aggregate `own`. Publishes the
/// tile's aggregate and, when the tile closes a group, the group's aggregate and state. Called
/// by all 32 lanes of one warp; every lane returns the state.
///
/// Tile 32m+i reads, in one round of loads: the aggregates of tiles 32m .. 32m+i-1 (the map in
/// front of it within its group), those of all 32 tiles of group m-1 (G(m-1), by the same
/// fixed-shape scan as the tile that closes group m-1 uses, so bitwise the same map), and the
/// records of groups m-33 .. m-2 (for the state B(m-2) before group m-1). It then waits on no
/// look-back of another tile, only on aggregates, which every tile publishes as soon as it has
/// scanned its elements. A closing tile publishes its group's aggregate before it reads earlier
/// groups, so that no group's aggregate waits on a look-back either.
/// Test hook, never set in a build that users run: with ASCAN_TEST_WITHHOLD_GROUP_STATES
/// defined to 1, the groups after a sequence's first publish their aggregate but never their
/// state, as if every closing tile's look-back were slow. Every look-back past the first window
/// then finds no state in its window, walks back to the first group and folds the later windows
/// (state_after_groups' rare branches, which otherwise run only by timing), so that a test
/// (tests/lookback_hook_test.cu) runs them on purpose. Results stay bitwise the same.
#ifndef ASCAN_TEST_WITHHOLD_GROUP_STATES
#define ASCAN_TEST_WITHHOLD_GROUP_STATES 0
#endif

template <class C>
__device__ __forceinline__ C look_back(const TileStates<C>& s, int64_t first_tile,
                                       int64_t first_group, int64_t k, const Affine<C>& own,
                                       C initial) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const int64_t m = k / kTilesPerGroup;
  const int i = static_cast<int>(k % kTilesPerGroup);
  const bool closes = i == kTilesPerGroup - 1;
  const TileRecord<C>* group_tiles = s.tiles + first_tile + m * kTilesPerGroup;
  if (lane == 0) publish(s.tiles + first_tile + k, own, s.tag);

  // Lane l: x = tile 32m+l of this group (lanes < i; this tile's own at lane i; identity above),
  // y = tile 32(m-1)+l, and group m-2-l's record.
  Affine<C> x = lane == i ? own : affine_identity<C>();
  Affine<C> y = affine_identity<C>(), map = affine_identity<C>();
  C state = C(0);
  uint32_t status = kTileEmpty;
  const int64_t g = first_group + m - 2 - lane;
  bool have_x = lane >= i, have_y = m < 1, have_g = m < 2 || g < first_group;
  Affine<C> group_map = affine_identity<C>();
  if (closes) {
    poll_all(have_x, [&] { have_x = try_read(group_tiles + lane, s.tag, x); });
    group_map = lane_group_broadcast<kWarpThreads>(
        lane_group_inclusive_scan<kWarpThreads, false>(x, lane), kWarpThreads - 1);
    if (lane == 0) {
      // The first group goes out with its state at once, and only with it: never an aggregate
      // alone (see state_after_groups; no one reads its aggregate).
      if (m == 0)
        publish_state(s.groups + first_group, advance_state(group_map, initial), s.tag);
      else
        publish(s.groups + first_group + m, group_map, s.tag);
    }
  }
  bool ready = have_x && have_y && have_g;
  poll_all(ready, [&] {
    if (!have_x) have_x = try_read(group_tiles + lane, s.tag, x);
    if (!have_y) have_y = try_read(group_tiles - kTilesPerGroup + lane, s.tag, y);
    if (!have_g) have_g = (status = try_read(s.groups + g, s.tag, map, state)) != kTileEmpty;
    ready = have_x && have_y && have_g;
  });

  const Affine<C> in_group = lane_group_inclusive_scan<kWarpThreads, false>(x, lane);
  C before = initial;  // the state before group m: B(m-1)
  if (m >= 1) {
    const C before_previous =
        m == 1 ? initial
               : state_after_groups(s, first_group, first_group + m - 2, map, state, status);
    const Affine<C> previous_map = lane_group_broadcast<kWarpThreads>(
        lane_group_inclusive_scan<kWarpThreads, false>(y, lane), kWarpThreads - 1);
    before = advance_state(previous_map, before_previous);
  }
  if (closes && lane == 0 && m >= 1 && !ASCAN_TEST_WITHHOLD_GROUP_STATES)
    publish_state(s.groups + first_group + m, advance_state(group_map, before), s.tag);
  return i > 0 ? advance_state(lane_group_broadcast<kWarpThreads>(in_group, i - 1), before)
               : before;
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
