// ascan/device/dispatch/dispatch.cuh: which path a call takes, its scratch memory, its launch.
//
// Two paths:
//   one block per sequence   the warp, block and chunked kernels, a row of the length table
//                            (tuning.cuh); no scratch memory.
//   many blocks per sequence lookback_kernel, when there are too few sequences to fill the
//                            GPU (LookbackPolicy::max_sequences_per_sm per multiprocessor) and a
//                            sequence spans more than one of its tiles; scratch memory for the
//                            tile states.
//
// Scratch follows CUB's two-phase rule: a call with a null workspace reports the bytes needed
// (at least 1) and launches nothing; a call with a workspace too small is an error. The bytes
// depend on the shape, the dtype, the direction of the pass and the device's multiprocessor
// count, not on the pointers. The plain entry points pass no workspace and stay on the first
// path; the MallocAsync ones take the scratch from cudaMallocAsync on the caller's stream and
// give it back with cudaFreeAsync behind the kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "../agent/tile_lookback.cuh"
#include "../status.cuh"
#include "scan_kernels.cuh"
#include "tuning.cuh"

namespace ascan {
namespace detail {

/// Which path a call may take; kAuto is the library's choice, the others are for tests and the
/// benchmark.
enum class Path { kAuto, kOneBlock, kMultiBlock };

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

/// The path and scratch of a call.
struct Plan {
  bool multi_block = false;
  int64_t tiles = 0;   ///< multi-block: an upper bound on the tiles (sequences * chunks)
  int64_t groups = 0;  ///< multi-block: an upper bound on the groups of tiles
  size_t bytes = 0;    ///< scratch bytes needed (0 on the one-block path)
};

/// The most tiles the multi-block path launches (one block each, a 1-D grid).
constexpr int64_t kMaxTiles = 2147483647;

/// Plans a call of `sequences` sequences of `length` elements. The tiles are bounded with the
/// largest lead a sequence can have in front of it (a vector less one element), so the plan does
/// not depend on the pointers.
template <class C, int kVec, class Lookback>
Status make_plan(int64_t sequences, int64_t length, Path path, bool scratch_allowed, Plan& plan) {
  constexpr LookbackPolicy P = Lookback::kPolicy;
  plan = Plan{};
  if (!scratch_allowed || path == Path::kOneBlock) return Status::success();
  const int64_t chunks = ceil_div(length + kVec - 1, P.tile());
  if (path == Path::kAuto) {
    if (length <= P.tile()) return Status::success();
    if (double(sequences) >= P.max_sequences_per_sm * 16) {  // no device has fewer than 16 SMs
      int device = 0, sms = 0;
      cudaError_t e = cudaGetDevice(&device);
      if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return Status::cuda_error(e);
      }
      if (double(sequences) >= P.max_sequences_per_sm * sms) return Status::success();
    }
  }
  if (sequences * chunks > kMaxTiles) {  // over 2^31 tiles of >= 1024 elements: not in memory
    if (path == Path::kMultiBlock) return Status::not_supported("too many tiles for one grid");
    return Status::success();
  }
  plan.multi_block = true;
  plan.tiles = sequences * chunks;
  plan.groups = sequences * ceil_div(chunks, kTilesPerGroup);
  plan.bytes = TileStates<C>::bytes(plan.tiles, plan.groups);
  return Status::success();
}

/// Zeroes the tile states' status words and launches the multi-block kernel, one block per tile.
/// `tiles` and `groups` are the plan's bounds, which the workspace was carved for.
template <class Problem, class Lookback>
cudaError_t launch_lookback(const typename Problem::Params& p, void* workspace, int64_t tiles,
                            int64_t groups, cudaStream_t stream) {
  constexpr LookbackPolicy P = Lookback::kPolicy;
  using C = typename Problem::C;
  constexpr int kMinBlocks = Problem::kVec > 1 ? P.min_blocks : 1;
  const int64_t chunks = ceil_div(p.span_bound, P.tile());
  const auto grid = static_cast<unsigned>(p.sequences * chunks);
  const int64_t groups_per_sequence = ceil_div(chunks, kTilesPerGroup);
  const TileStates<C> states = TileStates<C>::carve(workspace, tiles, groups);
  const auto reset = [&] {
    return cudaMemsetAsync(TileStates<C>::align(workspace), 0,
                           TileStates<C>::reset_bytes(tiles, groups), stream);
  };
  cudaError_t e;
  if constexpr (P.hold == LookbackHold::kStaged && Problem::kStagedStreams > 0) {
    constexpr int kStreams = Problem::kStagedStreams;
    static_assert(kStreams == 2 || P.register_items == 0, "the backward pass stages everything");
    auto* kernel = staged_kernel<Problem, P.threads, P.items, P.register_items, kMinBlocks>();
    bool supported = false;
    if ((e = stage_supported(kernel, supported)) != cudaSuccess) return e;
    if (supported) {
      constexpr int kShared = int(kStreams * P.threads * (P.items - P.register_items) *
                                  sizeof(typename Problem::Storage));
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
      if (e != cudaSuccess || (e = reset()) != cudaSuccess) return e;
      kernel<<<grid, P.threads, kShared, stream>>>(p, states, chunks, groups_per_sequence);
      return cudaGetLastError();
    }
  }
  // The scalar path holds kVec times more runs, too many for shared memory: it reloads instead;
  // so does a staged policy where bulk copies are not available.
  constexpr LookbackHold kHold =
      P.hold == LookbackHold::kStaged || (Problem::kVec == 1 && P.hold == LookbackHold::kShared)
          ? LookbackHold::kReload
          : P.hold;
  if ((e = reset()) != cudaSuccess) return e;
  lookback_kernel<Problem, P.threads, P.items, kMinBlocks, kHold>
      <<<grid, P.threads, 0, stream>>>(p, states, chunks, groups_per_sequence);
  return cudaGetLastError();
}

/// launch_lookback for `Problem<T, reverse, vector>`.
template <template <class, bool, bool> class Problem, class T, class Lookback>
cudaError_t launch_lookback(bool reverse, bool vector,
                            const typename Problem<T, false, false>::Params& p, void* workspace,
                            const Plan& plan, cudaStream_t stream) {
  const int64_t t = plan.tiles, g = plan.groups;
  if (reverse)
    return vector ? launch_lookback<Problem<T, true, true>, Lookback>(p, workspace, t, g, stream)
                  : launch_lookback<Problem<T, true, false>, Lookback>(p, workspace, t, g, stream);
  return vector ? launch_lookback<Problem<T, false, true>, Lookback>(p, workspace, t, g, stream)
                : launch_lookback<Problem<T, false, false>, Lookback>(p, workspace, t, g, stream);
}

/// Runs a validated, non-empty call of `Problem<T, reverse, vector>`: plans it, handles its
/// scratch as `scratch` says, and launches the path. `Table` is the one-block path's length
/// table, `Lookback::kPolicy` the multi-block policy.
template <template <class, bool, bool> class Problem, class T, class Table, class Lookback>
Status run(const typename Problem<T, false, false>::Params& p, bool reverse, bool vector, Path path,
           const Scratch& scratch, cudaStream_t stream) {
  using C = compute_t<T>;
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  Plan plan;
  if (Status st = make_plan<C, kVec, Lookback>(p.sequences, p.length, path,
                                               scratch.mode != Scratch::kNone, plan);
      !st.ok())
    return st;
  if (scratch.mode == Scratch::kQuery) {
    *scratch.bytes = plan.bytes > 0 ? plan.bytes : 1;
    return Status::success();
  }
  void* workspace = scratch.ptr;
  if (plan.multi_block && scratch.mode == Scratch::kGiven && *scratch.bytes < plan.bytes)
    return Status::invalid(
        "workspace_bytes is smaller than this call needs; query the size with a null workspace "
        "and the same arguments");
  if (plan.multi_block && scratch.mode == Scratch::kMallocAsync) {
    const cudaError_t e = cudaMallocAsync(&workspace, plan.bytes, stream);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return Status::cuda_error(e);
    }
  }

  cudaError_t e;
  if (plan.multi_block) {
    e = launch_lookback<Problem, T, Lookback>(reverse, vector, p, workspace, plan, stream);
  } else {
    const int row = select_policy<sizeof(T), Table>(p.span_bound);
    e = launch_scan_row<Problem, T, Table>(row, reverse, vector, p, stream);
  }
  if (plan.multi_block && scratch.mode == Scratch::kMallocAsync) {
    const cudaError_t f = cudaFreeAsync(workspace, stream);
    if (e == cudaSuccess) e = f;
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::cuda_error(e);
  }
  return Status::success();
}

}  // namespace detail
}  // namespace ascan
