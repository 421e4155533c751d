// ascan/device/agent/tile_staging.cuh: a tile staged in shared memory by the bulk-copy engine.
//
// The multi-block path's look-back waits a few microseconds per tile (tile_lookback.cuh), and a
// multiprocessor keeps DRAM busy only if its resident tiles hold enough bytes meanwhile. Loads
// into registers cap that at the registers a block may have; a bulk asynchronous copy
// (`cp.async.bulk`, the Hopper copy engine behind TMA) writes shared memory directly, so a tile
// costs shared memory only and a multiprocessor can keep 200 KB of tiles resident. One lane per
// warp issues the copies of the warp's stretch of the tile and every lane of the warp waits on the
// warp's mbarrier; the results go back the same way (`cp.async.bulk` from shared to global).
//
// sm_90 and later. The functions compile to a trap on earlier architectures, where the dispatch
// never launches a kernel that uses them (stage_supported).
//
// The instructions are CCCL's wrappers (cuda::ptx::*). Against the same instructions written as
// inline PTX, the sm_90 SASS differs (other registers and scheduling) and the speed does not: the
// long rows forward and backward within 0.5%, two and three interleaved runs on the H200
// (bench/RESULTS.md, "Builds compared on one machine").
#pragma once

#include <cuda_runtime_api.h>

#if defined(__CUDACC__)
#include <cuda/ptx>
#endif

#include <cstdint>

namespace ascan {
namespace detail {

/// Whether `kernel` was compiled for sm_90 or later (from PTX of that version or newer), so it may
/// use the bulk-copy engine on the current device. A host-side query; no synchronisation.
template <class Kernel>
cudaError_t stage_supported(Kernel* kernel, bool& supported) {
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
  supported = e == cudaSuccess && attributes.ptxVersion >= 90 && attributes.binaryVersion >= 90;
  return e;
}

#if defined(__CUDACC__)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define ASCAN_BULK_COPY 1
#else
#define ASCAN_BULK_COPY 0
#endif

/// Arms `bar` for one phase: one arrival expected (the caller's), completing when `bytes` in all
/// have landed by stage(). One thread, before its stage() calls.
__device__ __forceinline__ void arm_staging(uint64_t* bar, uint32_t bytes) {
#if ASCAN_BULK_COPY
  cuda::ptx::mbarrier_init(bar, 1);
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
  (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, bar, bytes);
#else
  (void)bar, (void)bytes;
  __trap();
#endif
}

/// Copies `bytes` from global `src` to shared `dst` (both 16-byte aligned, bytes a multiple of
/// 16), counted on `bar` (armed by arm_staging). One thread.
__device__ __forceinline__ void stage(uint64_t* bar, void* dst, const void* src, uint32_t bytes) {
#if ASCAN_BULK_COPY
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, src, bytes, bar);
#else
  (void)bar, (void)dst, (void)src, (void)bytes;
  __trap();
#endif
}

/// Waits until phase 0 of `bar` has completed (the copies of stage() have landed).
__device__ __forceinline__ void wait_staged(uint64_t* bar) {
#if ASCAN_BULK_COPY
  while (!cuda::ptx::mbarrier_try_wait_parity(bar, 0)) {
  }
#else
  (void)bar;
  __trap();
#endif
}

/// Makes this thread's writes to shared memory visible to the bulk-copy engine (before another
/// thread of the block issues unstage).
__device__ __forceinline__ void fence_for_unstage() {
#if ASCAN_BULK_COPY
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
#endif
}

/// Copies `bytes` from shared `s` to global `dst` (16-byte aligned, a multiple of 16); one
/// thread, which must call wait_unstaged before the block exits.
__device__ __forceinline__ void unstage(void* dst, const void* s, uint32_t bytes) {
#if ASCAN_BULK_COPY
  cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, dst, s, bytes);
  cuda::ptx::cp_async_bulk_commit_group();
#else
  (void)dst, (void)s, (void)bytes;
  __trap();
#endif
}

/// Waits until the engine has read the shared memory of this thread's unstage() calls (so the
/// block may exit).
__device__ __forceinline__ void wait_unstaged() {
#if ASCAN_BULK_COPY
  cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<0>{});
#else
  __trap();
#endif
}

#undef ASCAN_BULK_COPY

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
