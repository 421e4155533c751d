// ascan/device/dispatch/dispatch.cuh: which path a call takes, its scratch memory, its launch.
//
// Two paths:
//   one block per sequence   the warp, block and chunked kernels, a row of the length table
//                            (tuning.cuh); no scratch memory. Where the sequences lie back to
//                            back, are short and many (flat_pays: at most FlatPolicy::max_length
//                            elements, at least min_sequences_per_sm per multiprocessor), the
//                            flat kernel instead: whole sequences many to a block in full tiles
//                            (flat_kernels.cuh); no scratch. Packed (C, total) calls take the
//                            flat tiles too (flat_packed.cuh, from scan.cuh).
//   many blocks per sequence lookback_staged_kernel (lookback_kernel on the scalar path and
//                            where bulk copies are not available), when there are too few
//                            sequences to fill the GPU (LookbackPolicy::max_sequences_per_sm per
//                            multiprocessor) and a sequence spans more than one of its tiles;
//                            scratch memory for the tile states. Calls that make few tiles take the
//                            tuning's smaller tiles (LookbackTuning::kShortPolicy; for 16-bit
//                            types lookback_kernel's), and calls that make fewer still (0.4 to 3
//                            per multiprocessor, by dtype and pass) its smallest (kTinyPolicy).
//
// Scratch follows CUB's two-phase rule: a call with a null workspace reports the bytes needed
// (at least 1) and launches nothing; a call with a workspace too small is an error. The bytes
// depend on the shape, the dtype, the direction of the pass and the device's multiprocessor
// count, not on the pointers. The plain entry points pass no workspace and stay on the first
// path; the MallocAsync ones take the scratch from cudaMallocAsync on the caller's stream and
// give it back with cudaFreeAsync behind the kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>

#include "../agent/tile_lookback.cuh"
#include "../status.cuh"
#include "flat_kernels.cuh"
#include "scan_kernels.cuh"
#include "serial_kernels.cuh"
#include "tuning.cuh"

namespace ascan {
namespace detail {

/// Which path a call may take; kAuto is the library's choice, the others are for tests and the
/// benchmark.
enum class Path { kAuto, kOneBlock, kMultiBlock, kFlat, kSerial };

/// Where a call's scratch memory comes from.
struct Scratch {
  enum Mode {
    kNone,         ///< no scratch: the one-block path
    kQuery,        ///< report the bytes needed in *bytes, launch nothing
    kGiven,        ///< `ptr`, *bytes bytes long
    kMallocAsync,  ///< cudaMallocAsync / cudaFreeAsync on the stream
  } mode = kNone;
  void* ptr = nullptr;
  size_t* bytes = nullptr;

  /// CUB's two-phase rule: a null workspace asks for its size in `bytes`, any other is used.
  static Scratch two_phase(void* workspace, size_t& bytes) {
    return {workspace == nullptr ? kQuery : kGiven, workspace, &bytes};
  }
};

/// Which of a multi-block tuning's policies a call takes: the main one, the short tiles (few of
/// the main tiles per multiprocessor) or the tiny ones (fewer still).
enum class TileSize { kMain, kShort, kTiny };

/// The path and scratch of a call.
struct Plan {
  bool multi_block = false;
  TileSize tiles = TileSize::kMain;  ///< multi-block: the tuning's policy
  size_t bytes = 0;                  ///< scratch bytes needed (0 on the one-block path)
};

/// The most tiles the multi-block path launches (one block each, a 1-D grid).
constexpr int64_t kMaxTiles = 2147483647;

/// A multi-block tuning's policies. `Lookback::kPolicy` is the main one; a tuning may also give
/// `kShortPolicy` with `kShortBelowTilesPerSm` (smaller tiles for calls that make few of the main
/// policy's tiles), `kTinyPolicy` with `kTinyBelowTilesPerSm` (the smallest, for calls that make
/// fewer still) and `Fallback` (the policy a staged one runs as where bulk copies are not
/// available). A tuning without them (tests, sweeps) runs its one policy everywhere, as loads
/// into registers where it cannot stage.
template <class L, class = void>
struct ShortTilesOf {
  static constexpr LookbackPolicy kPolicy = L::kPolicy;
  static constexpr double kBelowTilesPerSm = 0;
};
template <class L>
struct ShortTilesOf<L, std::void_t<decltype(L::kShortPolicy)>> {
  static constexpr LookbackPolicy kPolicy = L::kShortPolicy;
  static constexpr double kBelowTilesPerSm = L::kShortBelowTilesPerSm;
};
template <class L, class = void>
struct TinyTilesOf {
  static constexpr LookbackPolicy kPolicy = ShortTilesOf<L>::kPolicy;
  static constexpr double kBelowTilesPerSm = 0;
};
template <class L>
struct TinyTilesOf<L, std::void_t<decltype(L::kTinyPolicy)>> {
  static constexpr LookbackPolicy kPolicy = L::kTinyPolicy;
  static constexpr double kBelowTilesPerSm = L::kTinyBelowTilesPerSm;
};
template <class L, class = void>
struct FallbackOf {
  static constexpr LookbackPolicy kPolicy = L::kPolicy;
};
template <class L>
struct FallbackOf<L, std::void_t<typename L::Fallback>> {
  static constexpr LookbackPolicy kPolicy = L::Fallback::kPolicy;
};
/// The policy of tiles of `size` in tuning L (where L gives no tiny tiles its short ones, and no
/// short tiles its main ones): what plan_on sizes the scratch by and launch_lookback launches.
template <class L>
constexpr LookbackPolicy policy_of(TileSize size) {
  return size == TileSize::kTiny    ? TinyTilesOf<L>::kPolicy
         : size == TileSize::kShort ? ShortTilesOf<L>::kPolicy
                                    : L::kPolicy;
}
template <class L, TileSize kSize>
struct PolicyOf {
  static constexpr LookbackPolicy kPolicy = policy_of<L>(kSize);
};

/// The tiles of `sequences` sequences of at most `span` elements in tiles of `tile`: each
/// sequence runs `chunks` tiles in `groups_per_sequence` groups. The plan sizes the scratch from
/// it and the launch carves the scratch by it.
struct TileGrid {
  int64_t chunks, groups_per_sequence, tiles, groups;

  static constexpr TileGrid of(int64_t sequences, int64_t span, int64_t tile) {
    const int64_t chunks = ceil_div(span, tile), per_sequence = ceil_div(chunks, kTilesPerGroup);
    return {chunks, per_sequence, sequences * chunks, sequences * per_sequence};
  }
  template <class C>
  constexpr size_t state_bytes() const {
    return TileStates<C>::bytes(tiles, groups);
  }
};

/// Plans a call of `sequences` sequences of `length` elements (of a validated call) on a device
/// of `sms` multiprocessors: host arithmetic only (the tests run it without a GPU). The tiles are
/// bounded with the largest lead a sequence can have in front of it (a vector less one element),
/// so the plan does not depend on the pointers; the scratch covers the fallback policy's tiles
/// too.
template <class C, int kVec, class Lookback>
Status plan_on(int64_t sequences, int64_t length, Path path, int sms, Plan& plan) {
  constexpr LookbackPolicy P = Lookback::kPolicy;
  using Short = ShortTilesOf<Lookback>;
  using Tiny = TinyTilesOf<Lookback>;
  plan = Plan{};
  if (path == Path::kOneBlock) return Status::success();
  if (path == Path::kAuto && length <= P.tile()) return Status::success();
  if (path == Path::kAuto && double(sequences) >= P.max_sequences_per_sm * sms)
    return Status::success();
  const int64_t span = length + kVec - 1;
  // the policy, by how many of the main policy's tiles the call makes per multiprocessor
  const double main_tiles = double(sequences) * double(ceil_div(span, P.tile()));
  plan.tiles = main_tiles < Tiny::kBelowTilesPerSm * sms    ? TileSize::kTiny
               : main_tiles < Short::kBelowTilesPerSm * sms ? TileSize::kShort
                                                            : TileSize::kMain;
  const int64_t tile = policy_of<Lookback>(plan.tiles).tile();
  constexpr int64_t kFallbackTile = FallbackOf<Lookback>::kPolicy.tile();
  const int64_t smallest = tile < kFallbackTile ? tile : kFallbackTile;  // either may run
  if (double(sequences) * double(ceil_div(span, smallest)) > double(kMaxTiles)) {
    // over 2^31 tiles of >= 1024 elements: not in memory
    if (path == Path::kMultiBlock) return Status::not_supported("too many tiles for one grid");
    return Status::success();
  }
  plan.multi_block = true;
  plan.bytes = TileGrid::of(sequences, span, smallest).state_bytes<C>();
  return Status::success();
}

/// The current device's multiprocessor count, or the runtime's error (left in its last-error
/// slot).
inline cudaError_t multiprocessors(int& sms) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return e;
}
/// multiprocessors, the error taken off the runtime's last-error slot.
inline Status current_multiprocessors(int& sms) {
  if (const cudaError_t e = multiprocessors(sms); e != cudaSuccess) {
    clear_our_error(e);
    return Status::cuda_error(e);
  }
  return Status::success();
}

/// Plans a call on the current device (plan_on with its multiprocessor count, asked only when
/// the call may split its sequences over many blocks).
template <class C, int kVec, class Lookback>
Status make_plan(int64_t sequences, int64_t length, Path path, bool scratch_allowed, Plan& plan) {
  constexpr LookbackPolicy P = Lookback::kPolicy;
  plan = Plan{};
  if (!scratch_allowed || path == Path::kOneBlock) return Status::success();
  if (path == Path::kAuto && length <= P.tile()) return Status::success();
  int sms = 0;
  if (Status st = current_multiprocessors(sms); !st.ok()) return st;
  return plan_on<C, kVec, Lookback>(sequences, length, path, sms, plan);
}

/// An answer of the runtime about one kernel on one device (an int >= 0: blocks resident, or
/// whether it fits), asked by `ask(answer)` once per device and `Question`, then remembered:
/// each Question type (a local struct of the asking function template, so one per kernel and
/// shape) has its own memo. Devices beyond the first kDevices are asked on every call. An answer
/// that could not be had (`ask` failed) is not remembered.
template <class Question, class Ask>
cudaError_t remembered_per_device(int device, int& answer, Ask&& ask) {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0 not asked, else the answer + 1
  const bool kept = device >= 0 && device < kDevices;
  const int v = kept ? known[device].load(std::memory_order_acquire) : 0;
  if (v > 0) {
    answer = v - 1;
    return cudaSuccess;
  }
  answer = 0;
  const cudaError_t e = ask(answer);
  if (e == cudaSuccess && kept) known[device].store(answer + 1, std::memory_order_release);
  return e;
}

/// Whether the staged kernel `kKernel` runs on `device` (compiled for sm_90 or later; any kernel
/// where not `kStaged`) and how many of its blocks (`kThreads` threads, `kSharedBytes` of dynamic
/// shared memory) a multiprocessor holds: `resident`, 0 where it does not run. Asked of the runtime
/// once per kernel and device, then remembered. The dynamic shared memory allowance is raised to
/// `kSharedBytes` where that is over the default 48 KiB (set on every such launch, a host call that
/// does not synchronize: the setting does not survive cudaDeviceReset; of the library's own
/// policies, only double's forward tile needs it).
template <auto kKernel, int kThreads, int kSharedBytes, bool kStaged = true>
cudaError_t prepare_staged(int device, int& resident) {
  const auto allow_shared = [] {
    // a kernel with static shared memory (not kStaged) is allowed its dynamic bytes whatever
    // their size: the default allowance is 48 KiB less the static bytes
    return kSharedBytes > 48 * 1024 || (!kStaged && kSharedBytes > 0)
               ? allow_dynamic_shared(kKernel, kSharedBytes)
               : cudaSuccess;
  };
  struct Resident {};
  bool asked = false;  // this call asked the runtime, which allowed the shared memory
  cudaError_t e = remembered_per_device<Resident>(device, resident, [&](int& blocks) {
    asked = true;
    bool supported = !kStaged;
    cudaError_t err = kStaged ? stage_supported(kKernel, supported) : cudaSuccess;
    if (err != cudaSuccess || !supported) return err;  // does not run: 0 resident
    if ((err = allow_shared()) != cudaSuccess) return err;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, kSharedBytes);
  });
  if (e == cudaSuccess && !asked && resident > 0) e = allow_shared();
  return e;
}

/// A fresh tag for one call's look-back records (TileStates, tile_lookback.cuh): never 0 (zeroed
/// memory) nor all ones (the tests' poison), and unique within the process: a counter, seeded
/// once from std::random_device, the clock and its own address, so that two copies of the library
/// in one process (two shared objects sharing a caching allocator's blocks) do not count from the
/// same start. Host-only; an atomic add per call.
inline uint64_t call_tag() {
  static std::atomic<uint64_t> next{[] {
    uint64_t seed =
        static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
    seed ^= static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&next)) << 17;
    try {
      std::random_device device;
      seed ^= (uint64_t(device()) << 32) ^ device();
    } catch (...) {  // no entropy source: the clock and the address alone
    }
    // splitmix64's finalizer spreads the bits
    seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
    seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
    return seed ^ (seed >> 31);
  }()};
  for (;;) {
    const uint64_t tag = next.fetch_add(1, std::memory_order_relaxed);
    if (tag != 0 && tag != ~uint64_t{0}) return tag;
  }
}

/// Carves the tile states of `p` in tiles of `kTile` from `workspace`, with a fresh tag, and
/// launches `kernel` (one block per tile, `shared` bytes of dynamic shared memory; `more`: the
/// kernel's arguments after the tile states). Nothing is zeroed first: records count only with
/// the call's tag. Only a call captured into a graph, which replays its tag, zeroes the records
/// first (reset_tile_states); there `kDependent` says that the kernel waits for the reset itself,
/// before its look-back (wait_for_prior_grid), so it goes out as a programmatic dependent launch
/// (sm_90): its blocks start and load their tiles while the reset runs.
template <class Problem, int64_t kTile, bool kDependent, class Kernel, class... More>
cudaError_t launch_tiles(Kernel* kernel, int threads, int shared, const typename Problem::Params& p,
                         void* workspace, cudaStream_t stream, const More&... more) {
  using C = typename Problem::C;
  const TileGrid grid = TileGrid::of(p.sequences, p.span_bound, kTile);
  const TileStates<C> states = TileStates<C>::carve(workspace, grid.tiles, grid.groups, call_tag());
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (const cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) return e;
  const bool replayed = capture != cudaStreamCaptureStatusNone;
  if (replayed) {
    const int64_t records = grid.tiles + grid.groups;
    constexpr int kResetThreads = 256;
    const int64_t reset_blocks = ceil_div(records, int64_t{kResetThreads});
    if (const cudaError_t e =
            launch_kernel(&reset_tile_states<C>, reset_blocks < 4096 ? reset_blocks : 4096,
                          kResetThreads, 0, stream, states.tiles, records);
        e != cudaSuccess)
      return e;
  }
  if (kDependent && replayed) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(grid.tiles));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = static_cast<size_t>(shared);
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, p, states, grid.chunks, grid.groups_per_sequence,
                              more...);
  }
  return launch_kernel(kernel, grid.tiles, threads, shared, stream, p, states, grid.chunks,
                       grid.groups_per_sequence, more...);
}

/// The device's peak memory bandwidth in bytes per nanosecond, from its memory clock and bus
/// width (0 where the runtime gives neither). Asked once per device and remembered: the clock's
/// query takes 0.35-0.7 ms on the H200 (a call that waited on it measured 672 µs, not 115).
inline cudaError_t peak_memory_bandwidth(int device, double& bytes_per_ns) {
  struct PeakBandwidth {};
  int mb_per_s = 0;  // MB/s, 0 where unknown
  const cudaError_t e = remembered_per_device<PeakBandwidth>(device, mb_per_s, [device](int& mb) {
    int khz = 0, bits = 0;
    cudaError_t err = cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device);
    if (err == cudaSuccess)
      err = cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device);
    const double rate = 2.0 * double(khz) * 1e-3 * (bits / 8);  // double data rate
    if (err == cudaSuccess) mb = rate > 0 && rate < 2e9 ? static_cast<int>(rate) : 0;
    return err;
  });
  bytes_per_ns = e == cudaSuccess ? mb_per_s * 1e-3 : 0.0;
  return e;
}

/// The first wave's pace (WavePace, tile_lookback.cuh) on `device` for the staged tiles of policy
/// P = Policy::kPolicy, which load P.tile() elements of each of Problem::kStagedStreams streams:
/// the blocks resident at launch (`resident_per_sm` per multiprocessor) issue their loads at
/// P.wave_pace of the device's peak memory bandwidth (not paced where it is not known).
template <class Problem, class Policy>
cudaError_t first_wave_pace(int device, int resident_per_sm, WavePace& pace) {
  constexpr LookbackPolicy P = Policy::kPolicy;
  pace = WavePace{};
  if constexpr (P.wave_pace > 0) {
    int sms = 0;
    double peak = 0;
    cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess) e = peak_memory_bandwidth(device, peak);
    if (e != cudaSuccess) return e;
    if (peak <= 0) return cudaSuccess;
    const double tile_bytes =
        double(P.tile()) * Problem::kStagedStreams * double(sizeof(typename Problem::Storage));
    const double ps = 1e3 * tile_bytes / (P.wave_pace * peak);
    const int64_t blocks = int64_t(resident_per_sm) * sms;
    // A pace that would hold the wave back over 100 µs (8-11 µs on the H200) means a
    // figure the runtime gave is off: not paced.
    if (ps * double(blocks) > 1e8) return cudaSuccess;
    pace.blocks = blocks;
    pace.ps_per_block = static_cast<uint32_t>(ps);
  }
  return cudaSuccess;
}

/// Launches the multi-block path of `p` with policy `Policy::kPolicy` (`Fallback::kPolicy` where
/// a staged policy cannot stage: the scalar path, or a device without the bulk-copy engine).
template <class Problem, class Policy, class Fallback>
cudaError_t launch_lookback(const typename Problem::Params& p, void* workspace,
                            cudaStream_t stream) {
  constexpr LookbackPolicy P = Policy::kPolicy;
  constexpr int kMinBlocks = Problem::kVec > 1 ? P.min_blocks : 1;
  constexpr bool kStaged = P.hold == LookbackHold::kStaged;
  if constexpr (kStaged && Problem::kStagedStreams > 0) {
    constexpr int kShared = int(Problem::kStagedStreams * P.threads * (P.items - P.register_items) *
                                sizeof(typename Problem::Storage));
    constexpr auto kKernel =
        staged_kernel<Problem, P.threads, P.items, P.register_items, kMinBlocks, P.unroll>();
    int device = 0, resident = 0;
    WavePace pace;
    cudaError_t e = cudaGetDevice(&device);
    if (e == cudaSuccess) e = prepare_staged<kKernel, P.threads, kShared>(device, resident);
    if (e == cudaSuccess && resident > 0)
      e = first_wave_pace<Problem, Policy>(device, resident, pace);
    if (e != cudaSuccess) return e;
    if (resident > 0)
      return launch_tiles<Problem, P.tile(), true>(kKernel, P.threads, kShared, p, workspace,
                                                   stream, pace);
  }
  // Loads into registers: the policy itself, or where a staged one cannot stage, its fallback.
  // The scalar path holds kVec times more runs, too many for shared memory: it reloads.
  constexpr LookbackPolicy F = kStaged ? Fallback::kPolicy : P;
  constexpr int kFallbackMinBlocks = Problem::kVec > 1 ? F.min_blocks : 1;
  constexpr LookbackHold kHold = F.hold == LookbackHold::kShared && Problem::kVec > 1
                                     ? LookbackHold::kShared
                                     : LookbackHold::kReload;
  return launch_tiles<Problem, F.tile(), false>(
      &lookback_kernel<Problem, F.threads, F.items, kFallbackMinBlocks, kHold>, F.threads, 0, p,
      workspace, stream);
}

/// launch_lookback for `Problem<T, reverse, vector>` with the policy `plan` chose of `Lookback`.
template <template <class, bool, bool> class Problem, class T, class Lookback>
cudaError_t launch_lookback(bool reverse, bool vector,
                            const typename Problem<T, false, false>::Params& p, void* workspace,
                            const Plan& plan, cudaStream_t stream) {
  using Fallback = FallbackOf<Lookback>;
  const auto with = [&](auto size) {
    using Policy = PolicyOf<Lookback, decltype(size)::value>;
    if (reverse)
      return vector
                 ? launch_lookback<Problem<T, true, true>, Policy, Fallback>(p, workspace, stream)
                 : launch_lookback<Problem<T, true, false>, Policy, Fallback>(p, workspace, stream);
    return vector
               ? launch_lookback<Problem<T, false, true>, Policy, Fallback>(p, workspace, stream)
               : launch_lookback<Problem<T, false, false>, Policy, Fallback>(p, workspace, stream);
  };
  if constexpr (TinyTilesOf<Lookback>::kBelowTilesPerSm > 0) {
    if (plan.tiles == TileSize::kTiny)
      return with(std::integral_constant<TileSize, TileSize::kTiny>{});
  }
  if constexpr (ShortTilesOf<Lookback>::kBelowTilesPerSm > 0) {
    if (plan.tiles == TileSize::kShort)
      return with(std::integral_constant<TileSize, TileSize::kShort>{});
  }
  return with(std::integral_constant<TileSize, TileSize::kMain>{});
}

/// Handles a call's scratch as `scratch` says, for a path that needs `bytes` of it (0: none):
/// reports the size (at least 1) to a query, refuses a given workspace that is too small, takes
/// it from cudaMallocAsync on `stream` and gives it back behind the launch; runs
/// `launch(workspace)` (null: no scratch) and turns its CUDA error into a Status, taken off the
/// runtime's last-error slot.
template <class Launch>
Status with_scratch(const Scratch& scratch, size_t bytes, cudaStream_t stream, Launch&& launch) {
  if (scratch.mode == Scratch::kQuery) {
    *scratch.bytes = bytes > 0 ? bytes : 1;
    return Status::success();
  }
  void* workspace = scratch.mode == Scratch::kGiven ? scratch.ptr : nullptr;
  if (bytes > 0 && scratch.mode == Scratch::kGiven && *scratch.bytes < bytes)
    return Status::invalid(
        "workspace_bytes is smaller than this call needs; query the size with a null workspace "
        "and the same arguments");
  const bool allocate = bytes > 0 && scratch.mode == Scratch::kMallocAsync;
  if (allocate) {
    if (const cudaError_t e = cudaMallocAsync(&workspace, bytes, stream); e != cudaSuccess) {
      clear_our_error(e);
      return Status::cuda_error(e);
    }
  }
  cudaError_t e = launch(workspace);
  if (allocate) {
    const cudaError_t f = cudaFreeAsync(workspace, stream);
    if (e == cudaSuccess) e = f;
  }
  if (e != cudaSuccess) {
    clear_our_error(e);
    return Status::cuda_error(e);
  }
  return Status::success();
}

/// Runs a validated, non-empty call of `Problem<T, reverse, vector>`: plans it, handles its
/// scratch as `scratch` says, and launches the path. `Table` is the one-block path's length
/// table, `Lookback::kPolicy` the multi-block policy, `Flat::kPolicy` the flat kernel's
/// (`FlatProblem` its problem), which replaces one block per sequence where flat_pays, and
/// `Flat::kSerial` the serial kernel's rule (serial_pays), which goes ahead of both.
template <template <class, bool, bool> class Problem,
          template <class, bool, bool> class FlatProblem, class T, class Table, class Lookback,
          class Flat>
Status run(const typename Problem<T, false, false>::Params& p, bool reverse, bool vector, Path path,
           const Scratch& scratch, cudaStream_t stream) {
  using C = compute_t<T>;
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  int64_t state_stride = 0;
  const bool flat_fits = (path == Path::kFlat || path == Path::kSerial || path == Path::kAuto) &&
                         flat_layout(p, state_stride);
  if (path == Path::kFlat && !flat_fits)
    return Status::not_supported(
        "the flat path takes sequences that lie back to back in every array, states at one "
        "stride per sequence, and at most 2^24 elements long");
  if (path == Path::kSerial && !(flat_fits && serial_fits(p.sequences, p.length, int(sizeof(T)))))
    return Status::not_supported(
        "the serial path takes sequences that lie back to back in every array, states at one "
        "stride per sequence, and at most 496 bytes long (and at most 2^31 - 1 blocks of 32)");
  Plan plan;
  if (path != Path::kFlat && path != Path::kSerial) {
    if (Status st = make_plan<C, kVec, Lookback>(p.sequences, p.length, path,
                                                 scratch.mode != Scratch::kNone, plan);
        !st.ok())
      return st;
  }
  // The flat and serial kernels' rules need the multiprocessor count; asked only where the rest
  // allows them.
  int sms = 0;
  if (flat_fits && !plan.multi_block && path != Path::kSerial &&
      (path == Path::kFlat || p.length <= Flat::kPolicy.max_length)) {
    if (Status st = current_multiprocessors(sms); !st.ok()) return st;
  }
  const bool serial =
      path == Path::kSerial ||
      (path == Path::kAuto && sms > 0 && serial_fits(p.sequences, p.length, int(sizeof(T))) &&
       serial_pays(p.sequences, p.length, int(sizeof(T)), sms, Flat::kSerial));
  // The one-block row (select_policy; select_row below), whose tiles the flat rule's band weighs.
  int row = select_policy<sizeof(T), Table>(p.span_bound);
  const bool flat =
      !serial && (path == Path::kFlat ||
                  (sms > 0 && flat_pays(p.sequences, p.length, sms, Flat::kPolicy,
                                        covered_span(Table::kPolicies[row], p.span_bound))));
  // select_row's row; the multiprocessor count asked only where the rule's candidate differs from
  // the table's row.
  if (!plan.multi_block && !flat && !serial && select_row<sizeof(T), Table>(p.span_bound) != row) {
    if (sms == 0) {
      if (Status st = current_multiprocessors(sms); !st.ok()) return st;
    }
    row = select_row<sizeof(T), Table>(p.sequences, p.span_bound, sms);
  }
  return with_scratch(scratch, plan.bytes, stream, [&](void* workspace) {
    if (plan.multi_block)
      return launch_lookback<Problem, T, Lookback>(reverse, vector, p, workspace, plan, stream);
    if (serial) {
      auto q = p;  // the kernel finds a sequence's states at one stride
      q.state_channel_stride = state_stride;
      return launch_serial<T>(reverse, q, stream);
    }
    if (flat) {
      auto q = p;  // the kernel finds a sequence's states at one stride
      q.state_channel_stride = state_stride;
      return launch_flat<FlatProblem, T, Flat>(reverse, vector, q, sms, stream);
    }
    return launch_scan_row<Problem, T, Table>(row, reverse, vector, p, stream);
  });
}

}  // namespace detail
}  // namespace ascan
