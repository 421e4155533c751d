// ascan/device/status.cuh: what a host entry point returns.
#pragma once

#include <cuda_runtime_api.h>

namespace ascan {

/// Why a call failed, coarsely; `Status::message` says exactly.
enum class StatusCode {
  kSuccess = 0,
  kInvalidArgument,  ///< the arguments describe no valid scan (null, negative, overlapping, ...)
  kNotSupported,     ///< valid, but a layout this version does not implement
  kCudaError,        ///< a CUDA call failed; `Status::cuda` holds its error
};

/// The result of a host entry point. On any error nothing was launched and nothing was written,
/// except for kCudaError raised by the launch itself. `message` is a static, human-readable
/// sentence naming the argument at fault; it is never null. [[nodiscard]]: a call whose Status
/// is dropped may have failed unseen (cast to void to drop it on purpose).
struct [[nodiscard]] Status {
  StatusCode code = StatusCode::kSuccess;
  cudaError_t cuda = cudaSuccess;
  const char* message = "success";

  constexpr bool ok() const { return code == StatusCode::kSuccess; }
  constexpr explicit operator bool() const { return ok(); }

  static constexpr Status success() { return {}; }
  static constexpr Status invalid(const char* why) {
    return {StatusCode::kInvalidArgument, cudaSuccess, why};
  }
  static constexpr Status not_supported(const char* why) {
    return {StatusCode::kNotSupported, cudaSuccess, why};
  }
  static Status cuda_error(cudaError_t e) {
    return {StatusCode::kCudaError, e, cudaGetErrorString(e)};
  }
};

}  // namespace ascan
