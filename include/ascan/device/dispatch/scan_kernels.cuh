// ascan/device/dispatch/scan_kernels.cuh: the kernels, for any Problem (the forward scan,
// device/agent/forward_problem.cuh; the backward pass, device/agent/backward_problem.cuh).
//
// One block (or lane group) per sequence, no scratch memory:
//   warp_kernel      kThreads / kLanes sequences per block, one lane group each; shuffles only.
//   block_kernel     one sequence per block, in one tile (warps meet in shared memory) or walked
//                    tile by tile with a carried state (the chunked kernel).
// Each walks its sequences with a grid-stride loop, so any number of sequences fits a 1-D grid.
//
// Many blocks per sequence, for few long sequences (scratch memory for the tile states):
//   lookback_kernel  every tile of every sequence scanned by one block, tiles of a sequence
//                    joined by decoupled look-back (device/agent/tile_lookback.cuh).
//   lookback_staged_kernel
//                    the same, forward and backward, the tile staged in shared memory by bulk
//                    copies (device/agent/tile_staging.cuh; sm_90, vector path) and, forward,
//                    partly held in registers.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "../../block/block_scan.cuh"
#include "../../warp/warp_scan.cuh"
#include "../agent/backward_problem.cuh"
#include "../agent/forward_problem.cuh"
#include "../agent/tile_lookback.cuh"
#include "../agent/tile_staging.cuh"
#include "tuning.cuh"

namespace ascan {
namespace detail {

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Launches `kernel` (`grid` blocks of `threads`, `shared` bytes of dynamic shared memory) on
/// `stream` and returns that launch's own error, cudaLaunchKernelEx's return. An error someone
/// else left pending in the runtime is neither returned as ours nor cleared (a launch followed by
/// cudaGetLastError would do both).
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), int64_t grid, int threads, int shared,
                          cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(shared);
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

/// Raises `kernel`'s dynamic shared memory allowance to `bytes`, leaving the runtime's last-error
/// slot alone: cudaFuncSetAttribute resets an error the caller left pending to cudaSuccess
/// (measured on the H200 with CUDA 13.0; bench/results/pending_error_probe.txt), so the driver's
/// cuFuncSetAttribute does it, reached through the runtime's entry-point query (no link against
/// libcuda). The query by version only from CUDA 13: a 12.x build may run against an older 12.x
/// runtime (PyTorch's), which lacks it. A failure of the driver call is returned as the runtime
/// error of the same number and sets nothing in the slot (clear_our_error). Where no query is
/// available, or it fails, the runtime's call.
template <class Kernel>
cudaError_t allow_dynamic_shared(Kernel* kernel, int bytes) {
#if CUDART_VERSION >= 12000
  using SetAttribute = CUresult (*)(CUfunction, CUfunction_attribute, int);
  static const SetAttribute set = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 13000
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuFuncSetAttribute", &fn, 12000,
                                                           cudaEnableDefault, &found);
#else
    const cudaError_t e =
        cudaGetDriverEntryPoint("cuFuncSetAttribute", &fn, cudaEnableDefault, &found);
#endif
    return e == cudaSuccess && found == cudaDriverEntryPointSuccess
               ? reinterpret_cast<SetAttribute>(fn)
               : nullptr;
  }();
  if (set != nullptr) {
    cudaFunction_t f = nullptr;
    if (const cudaError_t e = cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(kernel));
        e != cudaSuccess)
      return e;
    // the driver's and the runtime's error codes share their numbers
    return static_cast<cudaError_t>(set(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes));
  }
#endif
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

/// After a call failed with `e`: clears the runtime's last-error slot where it holds `e` (a failed
/// runtime call leaves its error there) and leaves it alone otherwise (a failure of
/// allow_dynamic_shared's driver call sets nothing there, and what the slot holds is the
/// caller's).
inline void clear_our_error(cudaError_t e) {
  if (cudaPeekAtLastError() == e) (void)cudaGetLastError();
}

/// Warp-shuffle kernel: kThreads / kLanes sequences per block, one lane group each. `kOneTile`:
/// the dispatch guarantees that every sequence fits in one tile (no loop, no prefetch).
/// `kMinBlocks`: the blocks per multiprocessor the register budget must allow (the occupancy
/// target of the policy row).
template <class Problem, int kThreads, int kLanes, int kItems, bool kOneTile, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, launch_min_blocks(kThreads, kMinBlocks))
    warp_kernel(const typename Problem::Params p) {
  constexpr int kGroups = kThreads / kLanes;
  using Group = WarpScan<typename Problem::C, kLanes, Problem::kReverse>;
  Group group;
  const int rank = Group::rank();
  const int64_t units = ceil_div(p.sequences, kGroups);
  for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {  // groups stay in step
    const int64_t seq = unit * kGroups + threadIdx.x / kLanes;
    scan_sequence<Problem, kLanes, kItems, kOneTile>(p, seq, seq < p.sequences, rank, group);
  }
}

/// Block kernels: one sequence per block, in one tile (`kOneTile`, the shared-memory block
/// kernel) or tile by tile (the chunked kernel).
template <class Problem, int kThreads, int kItems, bool kOneTile, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, launch_min_blocks(kThreads, kMinBlocks))
    block_kernel(const typename Problem::Params p) {
  using Group = BlockScan<typename Problem::C, kThreads, Problem::kReverse, kItems / Problem::kVec>;
  __shared__ typename Group::TempStorage storage;
  Group group(storage);
  for (int64_t seq = blockIdx.x; seq < p.sequences; seq += gridDim.x)
    scan_sequence<Problem, kThreads, kItems, kOneTile>(p, seq, true, threadIdx.x, group);
}

/// The state entering tile k of sequence `seq` (block-wide, after the block has scanned its
/// tile into `tile_map`): warp 0 looks back (publishing the tile's aggregate), thread 0 hands the
/// state to every thread through `slot`, and the sequence's last tile gives the final carry to
/// Problem::finish (the forward pass takes its final state from the stored outputs instead).
template <class Problem, class C = typename Problem::C>
__device__ __forceinline__ C enter_tile(const Problem& problem, const typename Problem::Params& p,
                                        const TileStates<C>& tiles, int64_t seq, int64_t k,
                                        int64_t chunks, int64_t groups, const Affine<C>& tile_map,
                                        C& slot) {
  if (threadIdx.x < kWarpThreads) {
    // Only the first two groups of tiles start from the initial carry. The tile that holds the
    // sequence's last element may write the final state over it (they may alias): it does so only
    // after this call, when every earlier tile has published its aggregate, and the fence orders
    // this tile's read before its publication. A tile after it (the sequence's span can end a
    // tile early where the grid's span bound is its length plus another sequence's larger lead)
    // may read the new value; it holds no element of the sequence, and no tile reads what it
    // publishes.
    const bool starts = k < 2 * kTilesPerGroup;
    const C initial = starts ? problem.initial_carry(p) : C(0);
    if (starts && chunks > 1) __threadfence();
    const C entering =
        chunks == 1 ? initial : look_back(tiles, seq * chunks, seq * groups, k, tile_map, initial);
    if (threadIdx.x == 0) {
      slot = entering;
      if (k == chunks - 1) problem.finish(p, advance_state(tile_map, entering));
    }
  }
  __syncthreads();
  return slot;
}

/// Multi-block kernel: block b scans tile k = b / S (in scan order) of sequence b % S, S the
/// number of sequences; its record in the workspace's tile states is seq * chunks + k, and the
/// sequence's `groups` groups of tiles start at group seq * groups. Per tile: load, scan the
/// block's pairs, look back for the state before the tile (warp 0; it publishes the tile's
/// aggregate and, at the end of a group, the group's), and store. In the last tile of a sequence
/// the thread that stored its last element writes the final state (Problem::finish_stored), and
/// thread 0 hands the final carry to Problem::finish (the backward pass's gradient of h0).
///
/// A block waits only on lower-numbered blocks, which the hardware starts first (blocks are
/// dispatched in index order; CUB's single-pass scan rests on the same fact), so the look-back
/// always makes progress. A block scans exactly one tile and publishes its aggregate before it
/// waits on any other tile, so no tile's aggregate waits on another tile's look-back (a block
/// that took its next tile before looking back for the current one would chain the aggregates
/// through the whole sequence; bench/RESULTS.md, "What was tried and dropped, and why").
///
/// The look-back takes longer than the tile's loads (the phase profile in bench/RESULTS.md, "What
/// the path's constants rest on"), so throughput comes from tiles resident per multiprocessor.
/// `kHold` says where the elements wait meanwhile: nowhere (reloaded from L2) or in shared memory,
/// which lets four or five blocks stay resident per multiprocessor.
template <class Problem, int kThreads, int kItems, int kMinBlocks, LookbackHold kHold>
__global__ void __launch_bounds__(kThreads, launch_min_blocks(kThreads, kMinBlocks))
    lookback_kernel(const typename Problem::Params p, const TileStates<typename Problem::C> tiles,
                    const int64_t chunks, const int64_t groups) {
  using C = typename Problem::C;
  constexpr bool kReverse = Problem::kReverse;
  constexpr int kVec = Problem::kVec;
  static_assert(kItems % kVec == 0, "items per thread are whole vectors");
  constexpr int kRuns = kItems / kVec;
  constexpr int64_t kRun = int64_t(kThreads) * kVec;
  constexpr int64_t kTile = kRun * kRuns;
  using Group = BlockScan<C, kThreads, kReverse, kRuns>;
  __shared__ typename Group::TempStorage storage;
  __shared__ C entering_slot;
  constexpr bool kShared = kHold == LookbackHold::kShared;
  __shared__ typename Problem::Loaded held[kShared ? kRuns : 1][kShared ? kThreads : 1];
  Group group(storage);
  const int rank = static_cast<int>(threadIdx.x);
  // Position-major: a tile's predecessor started S blocks earlier, so its aggregate is more
  // likely published by the time the look-back asks (+0.05-0.13 of the copy with 8-128
  // sequences; bench/RESULTS.md, "Few long sequences").
  const int64_t k = blockIdx.x / p.sequences;
  const int64_t seq = blockIdx.x - k * p.sequences;
  if (rank == 0 && chunks > 1) prefetch_own_records(tiles, seq * chunks, seq * groups, k);
  const Problem problem = Problem::template at<kThreads>(p, seq, true, rank);
  const int64_t origin = (kReverse ? chunks - 1 - k : k) * kTile + int64_t(rank) * kVec;
  const auto at = [&](int j) { return origin + j * kRun; };

  typename Problem::Loaded loaded[kRuns];
  load_runs(problem, loaded, at);
  typename Problem::Work work[kRuns];
  convert_runs(problem, loaded, at, work);
  Affine<C> aggregate[kRuns];
  reduce_runs<Problem>(work, aggregate);
  if constexpr (kShared) {
#pragma unroll
    for (int j = 0; j < kRuns; ++j) held[j][rank] = loaded[j];
  }
  Affine<C> exclusive[kRuns], tile_map;
  group.exclusive_scan(aggregate, exclusive, tile_map);

  const C entering = enter_tile(problem, p, tiles, seq, k, chunks, groups, tile_map, entering_slot);
  // Take the elements back and convert them again.
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    if constexpr (kShared)
      loaded[j] = held[j][rank];
    else
      problem.reload(loaded[j], origin + j * kRun);  // from L2 by now
  }
  convert_runs(problem, loaded, at, work);
  C incoming[kRuns];
#pragma unroll
  for (int j = 0; j < kRuns; ++j) incoming[j] = apply(exclusive[j], entering);
  scan_runs(problem, work, incoming, at);
  if (problem.holds_last((kReverse ? chunks - 1 - k : k) * kTile, kTile))
    problem.template finish_stored<kRun, kRuns>(p, origin);
}

/// Stages `kVectors` 16-byte vectors of a warp's stretch of the sequence at `src` (grid position
/// v at src[v], the stretch starting at `origin`) into shared `dst` with the warp's lanes, where
/// the stretch reaches outside the sequence [lo, hi): `fill` outside (nothing outside is read),
/// the elements inside of the vectors that straddle an edge; but not vectors [skip_lo, skip_hi),
/// the whole vectors inside, which bulk copies stage. One vector per lane at a time, in a loop
/// that is not unrolled: at most two vectors a stretch load anything, and this code runs only in
/// a sequence's edge tiles (load_vector_at_edge says why it is kept small).
template <int kVectors, class T, class C>
__device__ __forceinline__ void stage_by_lanes(uint4* dst, const T* src, int64_t origin, int64_t lo,
                                               int64_t hi, C fill, int lane, int skip_lo,
                                               int skip_hi) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
#pragma unroll 1
  for (int j = lane; j < kVectors; j += kWarpThreads) {
    if (j >= skip_lo && j < skip_hi) continue;
    alignas(16) T r[kVec];
    load_vector_at_edge<kVec>(src, origin + int64_t(j) * kVec, lo, hi, r, to_storage<T>(fill));
    dst[j] = *reinterpret_cast<const uint4*>(r);
  }
}
/// The way back: stores the elements of the staged stretch that lie inside [lo, hi).
template <int kVectors, class T>
__device__ __forceinline__ void unstage_by_lanes(T* dst, const uint4* src, int64_t origin,
                                                 int64_t lo, int64_t hi, int lane) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
#pragma unroll 1
  for (int j = lane; j < kVectors; j += kWarpThreads) {
    alignas(16) T r[kVec];
    *reinterpret_cast<uint4*>(r) = src[j];
    store_vector_at_edge<kVec>(dst, origin + int64_t(j) * kVec, lo, hi, r);
  }
}

/// Multi-block kernel with the tile staged in shared memory by bulk copies
/// (LookbackHold::kStaged, device/agent/tile_staging.cuh; sm_90 and later, vector path), for the
/// forward scan and the backward pass. Same tiles, look-back and order as lookback_kernel; what
/// differs is where the elements are. A tile is two parts, in scan order:
///   1. the staged part, kItems - kRegisterItems per thread: thread r owns consecutive 16-byte
///      vectors (blocked, not striped: the bulk copies fill shared memory contiguously, and an
///      odd count of vectors per thread makes the threads' 16-byte reads conflict-free). Lane 0 of
///      each warp copies the warp's stretch of every stream the Problem stages (forward: gates and
///      tokens; backward: gates, states and upstream gradients) into shared memory and the warp
///      waits on its own barrier; a stretch that reaches outside the sequence is staged by the
///      warp's lanes instead, element by element, with the Problem's fills outside. The
///      Problem's StagedView reads a thread's vectors and writes its results back over staged
///      streams, which go out by one bulk copy per warp and stream.
///   2. the held part, kRegisterItems per thread in striped runs, loaded into registers (as
///      lookback_kernel does) and held there across the look-back (forward only).
/// The look-back takes as long as a tile's loads, so throughput is the bytes resident per
/// multiprocessor: shared memory gives about 200 KB of them, and the registers the few threads
/// of a staged block do not need give the rest. The blocks of the first wave are paced (`pace`,
/// tile_lookback.cuh).
template <class Problem, int kThreads, int kItems, int kRegisterItems, int kMinBlocks, int kUnroll>
__global__ void __launch_bounds__(kThreads, launch_min_blocks(kThreads, kMinBlocks))
    lookback_staged_kernel(const typename Problem::Params p,
                           const TileStates<typename Problem::C> tiles, const int64_t chunks,
                           const int64_t groups, const WavePace pace) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // no bulk copies below sm_90: never launched there (prepare_staged), so no body is compiled
  __trap();
#else
  using C = typename Problem::C;
  using T = typename Problem::Storage;
  constexpr bool kReverse = Problem::kReverse;
  constexpr int kVec = Problem::kVec;
  constexpr int kStreams = Problem::kStagedStreams;
  static_assert(kStreams > 0 && kVec * sizeof(T) == 16, "staged tiles are 16-byte vectors");
  static_assert(kItems % kVec == 0 && kRegisterItems % kVec == 0 && kRegisterItems < kItems,
                "items per thread are whole vectors, some of them staged");
  constexpr int kVectors = (kItems - kRegisterItems) / kVec;  // staged, per thread, consecutive
  constexpr int kHeld = kRegisterItems / kVec;                // held runs
  constexpr int kWarps = kThreads / kWarpThreads;
  constexpr int kWarpVectors = kWarpThreads * kVectors;
  constexpr int kWarpSpan = kWarpVectors * kVec;  // staged elements per warp
  constexpr int64_t kStagedSpan = int64_t(kWarpSpan) * kWarps;
  constexpr int64_t kRun = int64_t(kThreads) * kVec;
  constexpr int64_t kTile = kStagedSpan + kRun * kHeld;
  static_assert(kThreads % kWarpThreads == 0, "whole warps");

  extern __shared__ uint4 staged[];  // stream s at staged + s * kStagedSpan / kVec
  __shared__ uint64_t landed[kWarps];
  using Group = BlockScan<C, kThreads, kReverse, 1 + kHeld>;
  __shared__ typename Group::TempStorage storage;
  __shared__ C entering_slot;

  const int rank = static_cast<int>(threadIdx.x);
  const int warp = rank / kWarpThreads, lane = rank % kWarpThreads;
  const int64_t k = blockIdx.x / p.sequences;
  const int64_t seq = blockIdx.x - k * p.sequences;
  if (rank == 0 && chunks > 1) prefetch_own_records(tiles, seq * chunks, seq * groups, k);
  pace_first_wave(pace);
  const Problem problem = Problem::template at<kThreads>(p, seq, true, rank);
  // Where the tiles of a sequence leave their slack (the chunks * kTile - length positions they
  // cover outside it). A tile with an edge in its staged part runs code that no other tile keeps
  // in the instruction cache, and under full memory load each miss waits as long as a load: last
  // in the grid, such a tile lives 4-5 us longer than the others and the kernel waits for it;
  // first, it holds up the first wave by 1-2. An edge in the held runs (registers, the tile's
  // end) costs nothing measurable there. So a forward scan's tiles leave up to a held span of
  // slack, less a vector (so that a last vector that is not whole lies in the held runs too),
  // behind the sequence's end and the rest in front of its start, rounded up to 512 bytes: tiles
  // off that grid make the whole kernel 9% slower. A reverse scan's first tile is its last in
  // memory, so its tiles start at the sequence's start. bf16 forward (1, 16, 2^22), whose last
  // tile holds 1536 elements of it: 111 µs with the slack placed so, 116 with the tiles from the
  // sequence's start (bench/RESULTS.md, "Few long sequences").
  const int64_t slack = chunks * kTile - (problem.hi + kVec - 1) / kVec * kVec;  // >= 0
  constexpr int64_t kBehind = kHeld > 0 ? kRun * kHeld - kVec : 0;
  constexpr int64_t kAlign = 512 / sizeof(T);
  // (<= slack but where the held span is under 512 bytes: there the tiles end at the end.)
  const int64_t front = (slack - kBehind + kAlign - 1) / kAlign * kAlign;
  const int64_t shift = kReverse || slack <= kBehind ? 0 : -(front < slack ? front : slack);
  const int64_t tile_origin = (kReverse ? chunks - 1 - k : k) * kTile + shift;
  const int64_t origin = tile_origin + warp * kWarpSpan;
  // Grid position of this thread's vector in held run j.
  const auto held_at = [&](int j) {
    return tile_origin + kStagedSpan + j * kRun + int64_t(rank) * kVec;
  };
  const bool whole = origin >= problem.lo && origin + kWarpSpan <= problem.hi;
  uint4* slots[kStreams];  // this warp's stretch of each stream
#pragma unroll
  for (int s = 0; s < kStreams; ++s)
    slots[s] = staged + s * (kStagedSpan / kVec) + warp * kWarpVectors;
  constexpr uint32_t kBytes = uint32_t(kWarpSpan * sizeof(T));
  int inside_lo = 0, inside_hi = 0;  // an edge stretch's vectors staged by bulk copies
  if (whole) {
    if (lane == 0) {
      arm_staging(&landed[warp], kStreams * kBytes);
#pragma unroll
      for (int s = 0; s < kStreams; ++s)
        stage(&landed[warp], slots[s], problem.staged_input(s) + origin, kBytes);
    }
  } else {
    // A stretch that reaches outside the sequence (a sequence's edge tiles): its whole vectors
    // inside, [inside_lo, inside_hi), by bulk copies all the same, the rest by the lanes. Staged
    // by the lanes alone, an edge tile whose inside ends in a warp's stretch lives 4-5 us longer
    // than the others, and, as a sequence's last tile is the last in the grid, so does the kernel
    // (bench/RESULTS.md, "Few long sequences").
    const int64_t first = problem.lo - origin, last = problem.hi - origin;
    const int64_t up = first <= 0 ? 0 : ceil_div(first, kVec), down = last <= 0 ? 0 : last / kVec;
    inside_lo = static_cast<int>(up < kWarpVectors ? up : kWarpVectors);
    inside_hi = static_cast<int>(down < kWarpVectors ? down : kWarpVectors);
    if (inside_hi < inside_lo) inside_hi = inside_lo;
    if (lane == 0 && inside_hi > inside_lo) {
      const uint32_t bytes = uint32_t(inside_hi - inside_lo) * 16u;
      arm_staging(&landed[warp], kStreams * bytes);
#pragma unroll
      for (int s = 0; s < kStreams; ++s)
        stage(&landed[warp], slots[s] + inside_lo,
              problem.staged_input(s) + (origin + int64_t(inside_lo) * kVec), bytes);
    }
    // Before the held runs' loads, while few registers are live.
#pragma unroll
    for (int s = 0; s < kStreams; ++s)
      stage_by_lanes<kWarpVectors>(slots[s], problem.staged_input(s), origin, problem.lo,
                                   problem.hi, problem.staged_fill(s), lane, inside_lo, inside_hi);
  }
  typename Problem::Loaded held[kHeld > 0 ? kHeld : 1];
  // Whether all of this thread's held vectors lie inside the sequence: in every tile but a
  // sequence's edge tiles. Those threads take a path of plain 16-byte loads and stores with
  // no per-vector test; the others the guarded one. Kept apart, the hot path is a compact
  // stretch of code: interleaved with the guarded one, instruction fetch stalls are a fifth of
  // the bf16 forward kernel's samples (Nsight Compute). This and folding the held runs first
  // (below) make the long rows 1-9% faster (bench/RESULTS.md, "What the path's constants
  // rest on": held_inside).
  const bool held_inside =
      kHeld > 0 && held_at(0) >= problem.lo && held_at(kHeld - 1) + kVec <= problem.hi;
  if constexpr (kHeld > 0) {
    if (held_inside) {
#pragma unroll
      for (int j = 0; j < kHeld; ++j) problem.template load<true>(held[j], held_at(j));
    } else {
#pragma unroll
      for (int j = 0; j < kHeld; ++j) problem.load_at_edge(held[j], held_at(j));
    }
  }
  const auto edges = problem.template staged_edges<kVectors, kWarpSpan>(origin, lane);
  // The held runs are folded first, while the bulk copies are still landing (measured against
  // folding them after the staged part: f32 (1, 16, 2^22) and (1, 128, 2^20) 7-8% faster, the
  // other long rows and bf16 within 1% but for bf16 (1, 16, 2^22), 4% faster;
  // bench/RESULTS.md, "Few long sequences").
  Affine<C> aggregate[1 + kHeld];
#pragma unroll
  for (int j = 0; j < kHeld; ++j) {
    typename Problem::Work w;
    problem.convert(held[j], held_at(j), w);
    aggregate[1 + j] = thread_reduce<kReverse>(w.a, w.b);
  }
  __syncwarp();
  if (whole || inside_hi > inside_lo) wait_staged(&landed[warp]);
  const auto view = problem.template staged_view<kVectors, kWarpSpan>(slots, origin, lane, edges);
  // The staged loops below, for a Problem whose view tests elements against the sequence
  // (Problem::kStagedReadTests): on a path of their own where the warp's stretch lies inside
  // it, with no test (each its own code, as the held runs' paths).
  const auto on_staged_path = [&](const auto& loops) {
    if constexpr (Problem::kStagedReadTests) {
      if (whole)
        loops(std::true_type{});
      else
        loops(std::false_type{});
    } else {
      loops(std::true_type{});
    }
  };

  // The loops over a thread's staged vectors take kUnroll of them per iteration (all: fully
  // unrolled), which keeps the bf16 forward kernel's hot code small (see held_inside above).
  constexpr int kU = kUnroll > 0 ? kUnroll : kVectors;
  on_staged_path([&](auto inside) {
    constexpr bool kInside = decltype(inside)::value;
    {
      typename Problem::Work w;
      view.template read<kInside>(kReverse ? kVectors - 1 : 0, w);
      aggregate[0] = thread_reduce<kReverse>(w.a, w.b);
    }
#pragma unroll kU
    for (int s = 1; s < kVectors; ++s) {
      const int j = kReverse ? kVectors - 1 - s : s;
      typename Problem::Work w;
      view.template read<kInside>(j, w);
      aggregate[0] = compose(aggregate[0], thread_reduce<kReverse>(w.a, w.b));
    }
  });
  Group group(storage);
  Affine<C> exclusive[1 + kHeld], tile_map;
  group.exclusive_scan(aggregate, exclusive, tile_map);
  // In a call captured into a graph, this grid may start while the kernel that zeroes the tile
  // states still runs (launch_tiles, dispatch.cuh): everything above reads only the inputs, which
  // were complete before that kernel began; the look-back waits for it (a no-op otherwise).
  wait_for_prior_grid();
  const C entering = enter_tile(problem, p, tiles, seq, k, chunks, groups, tile_map, entering_slot);
  // Whether this tile holds the sequence's last element (the final state is that output).
  const bool last_tile = problem.holds_last(tile_origin, kTile);

  if constexpr (kHeld > 0) {
    // The held runs' scan, on the unguarded path or the guarded one (each its own code).
    const auto scan_held = [&](auto inside) {
#pragma unroll
      for (int j = 0; j < kHeld; ++j) {
        typename Problem::Work w;
        problem.convert(held[j], held_at(j), w);
        thread_scan<kReverse>(apply(exclusive[1 + j], entering), w.a, w.b);
        if constexpr (decltype(inside)::value)
          problem.template store<true>(w, held_at(j));
        else
          problem.store_at_edge(w, held_at(j));
      }
    };
    // The same two-path dispatch as the held loads' and on_staged_path, written out at each
    // site: one helper for all three compiles every forward kernel differently (cuobjdump; its
    // speed is not measured), and this kernel's speed follows its code's layout
    // (bench/RESULTS.md, "What the path's constants rest on": held_inside, unroll).
    if (held_inside)
      scan_held(std::true_type{});
    else
      scan_held(std::false_type{});
  }
  on_staged_path([&](auto inside) {
    C state = apply(exclusive[0], entering);
#pragma unroll kU
    for (int s = 0; s < kVectors; ++s) {
      const int j = kReverse ? kVectors - 1 - s : s;
      typename Problem::Work w;
      view.template read<decltype(inside)::value>(j, w);
      state = thread_scan<kReverse>(state, w.a, w.b);
      view.write(j, w);
    }
  });
  if (last_tile) {
    if constexpr (kHeld > 0) problem.template finish_stored<kRun, kHeld>(p, held_at(0));
    view.finish(p);
  }
  if (whole) {
    fence_for_unstage();
    __syncwarp();
    if (lane == 0) {
#pragma unroll
      for (int o = 0; o < Problem::kStagedOutputs; ++o)
        unstage(problem.staged_output(o) + origin, slots[Problem::staged_output_slot(o)], kBytes);
      wait_unstaged();
    }
  } else {
    __syncwarp();
#pragma unroll
    for (int o = 0; o < Problem::kStagedOutputs; ++o)
      unstage_by_lanes<kWarpVectors>(problem.staged_output(o),
                                     slots[Problem::staged_output_slot(o)], origin, problem.lo,
                                     problem.hi, lane);
  }
#endif
}

/// The staged multi-block kernel of `Problem`. The backward pass stages its whole tile: held
/// registers beside it measure slower on most of the long rows (bench/RESULTS.md, "What was tried
/// and dropped, and why").
template <class Problem, int kThreads, int kItems, int kRegisterItems, int kMinBlocks, int kUnroll>
constexpr auto staged_kernel() {
  static_assert(Problem::kStagedStreams == 2 || kRegisterItems == 0,
                "the backward pass stages its whole tile");
  return &lookback_staged_kernel<Problem, kThreads, kItems, kRegisterItems, kMinBlocks, kUnroll>;
}

/// Launches row `kRow` of `Table` for `Problem`: grid, block and template arguments from the row.
template <class Problem, class Table, int kRow>
cudaError_t launch_row(const typename Problem::Params& p, cudaStream_t stream) {
  constexpr ScanPolicy P = Table::kPolicies[kRow];
  // a block row scans its sequence in one tile, with no tile loop: a longer span would leave
  // the rest of the sequence unscanned
  static_assert(P.kind != KernelKind::kBlock || P.max_span <= P.tile(),
                "ascan: a one-tile block row's max_span exceeds its tile (threads * items)");
  constexpr int64_t kMaxGrid = 2147483647;  // a grid-stride loop covers the rest
  // The occupancy target is measured on the vector path; the scalar path holds kVec times more
  // runs and keeps its registers rather than spill.
  constexpr int kMinBlocks = Problem::kVec > 1 ? P.min_blocks : 1;
  if constexpr (P.kind == KernelKind::kWarp) {
    const int64_t blocks = ceil_div(p.sequences, P.threads / P.lanes);
    return launch_kernel(
        &warp_kernel<Problem, P.threads, P.lanes, P.items, (P.max_span <= P.tile()), kMinBlocks>,
        blocks < kMaxGrid ? blocks : kMaxGrid, P.threads, 0, stream, p);
  } else {
    return launch_kernel(
        &block_kernel<Problem, P.threads, P.items, P.kind == KernelKind::kBlock, kMinBlocks>,
        p.sequences < kMaxGrid ? p.sequences : kMaxGrid, P.threads, 0, stream, p);
  }
}

template <class Problem, class Table, int... kRows>
cudaError_t launch_selected(int row, const typename Problem::Params& p, cudaStream_t stream,
                            std::integer_sequence<int, kRows...>) {
  cudaError_t e = cudaErrorInvalidValue;
  ((row == kRows ? (e = launch_row<Problem, Table, kRows>(p, stream), 0) : 0), ...);
  return e;
}

/// Launches row `row` (a run-time index) of a dispatch table for the problem
/// `Problem<T, reverse, vector>`: ScanTuning<sizeof(T)> in the library, candidate tables in the
/// tuning benchmark.
template <template <class, bool, bool> class Problem, class T, class Table = ScanTuning<sizeof(T)>>
cudaError_t launch_scan_row(int row, bool reverse, bool vector,
                            const typename Problem<T, false, false>::Params& p,
                            cudaStream_t stream) {
  using Rows = std::make_integer_sequence<int, Table::kCount>;
  if (reverse)
    return vector ? launch_selected<Problem<T, true, true>, Table>(row, p, stream, Rows{})
                  : launch_selected<Problem<T, true, false>, Table>(row, p, stream, Rows{});
  return vector ? launch_selected<Problem<T, false, true>, Table>(row, p, stream, Rows{})
                : launch_selected<Problem<T, false, false>, Table>(row, p, stream, Rows{});
}

}  // namespace detail
}  // namespace ascan
