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
// The instructions are PTX here although CCCL wraps each of them (cuda::ptx::mbarrier_init,
// fence_mbarrier_init, mbarrier_arrive_expect_tx, cp_async_bulk, mbarrier_try_wait_parity,
// fence_proxy_async, cp_async_bulk_commit_group, cp_async_bulk_wait_group_read): with the
// wrappers the sm_90 SASS of the 22 staged kernels changes (other registers and scheduling,
// 50-80 fewer instructions each), which stays PTX until the H200 has measured it.
#pragma once

#include <cuda_runtime_api.h>

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

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Arms `bar` for one phase: one arrival expected (the caller's), completing when `bytes` in all
/// have landed by stage(). One thread, before its stage() calls.
__device__ __forceinline__ void arm_staging(uint64_t* bar, uint32_t bytes) {
#if ASCAN_BULK_COPY
  const uint32_t mbar = shared_address(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(mbar) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mbar), "r"(bytes)
               : "memory");
#else
  (void)bar, (void)bytes;
  __trap();
#endif
}

/// Copies `bytes` from global `src` to shared `dst` (both 16-byte aligned, bytes a multiple of
/// 16), counted on `bar` (armed by arm_staging). One thread.
__device__ __forceinline__ void stage(uint64_t* bar, void* dst, const void* src, uint32_t bytes) {
#if ASCAN_BULK_COPY
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(shared_address(dst)),
      "l"(src), "r"(bytes), "r"(shared_address(bar))
      : "memory");
#else
  (void)bar, (void)dst, (void)src, (void)bytes;
  __trap();
#endif
}

/// Waits until phase 0 of `bar` has completed (the copies of stage() have landed).
__device__ __forceinline__ void wait_staged(uint64_t* bar) {
#if ASCAN_BULK_COPY
  const uint32_t mbar = shared_address(bar);
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(mbar)
        : "memory");
  } while (!done);
#else
  (void)bar;
  __trap();
#endif
}

/// Makes this thread's writes to shared memory visible to the bulk-copy engine (before another
/// thread of the block issues unstage).
__device__ __forceinline__ void fence_for_unstage() {
#if ASCAN_BULK_COPY
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/// Copies `bytes` from shared `s` to global `dst` (16-byte aligned, a multiple of 16); one
/// thread, which must call wait_unstaged before the block exits.
__device__ __forceinline__ void unstage(void* dst, const void* s, uint32_t bytes) {
#if ASCAN_BULK_COPY
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"(shared_address(s)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#else
  (void)dst, (void)s, (void)bytes;
  __trap();
#endif
}

/// Waits until the engine has read the shared memory of this thread's unstage() calls (so the
/// block may exit).
__device__ __forceinline__ void wait_unstaged() {
#if ASCAN_BULK_COPY
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#else
  __trap();
#endif
}

#undef ASCAN_BULK_COPY

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
