// python/csrc/launch.h: the plain C++ boundary between the PyTorch binding (ascan_ext.cpp, which
// sees torch's headers and no ascan kernel) and the per-dtype CUDA units (scan_<dtype>.cu, which
// see ascan's headers and no torch header). Keeping torch out of the .cu files keeps nvcc's work
// to the kernels and lets each dtype compile on its own (ASCAN_DTYPES).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ascan_py {

/// One (B, C, T) array: its pointer and its strides in elements, indexed (batch, channel, time)
/// whatever the tensor's own dimension order.
struct Seq {
  void* ptr = nullptr;
  int64_t batch_stride = 0;
  int64_t channel_stride = 0;
  int64_t time_stride = 0;
};

/// What the sequences are: sizes (B, C, T), direction, and the packed offsets (cu_seqlens) if any.
struct Common {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t length = 0;
  bool reverse = false;
  const void* offsets = nullptr;  // cu_seqlens on the device, count + 1 of them, or null
  bool offsets64 = false;         // int64 offsets (else int32)
  int64_t count = 0;              // packed sequences
  int64_t state_batch_stride = 0;  // every state array of the call (dense (N, C) from Python)
  int64_t state_channel_stride = 0;
};

struct ForwardCall {
  Common common;
  Seq gates, tokens, out;  // out's strides are the shape's; the others' are given when they differ
  const void* initial_state = nullptr;
  void* final_state = nullptr;
};

struct BackwardCall {
  Common common;
  Seq gates, states, grad_out, grad_gates, grad_tokens;  // grad_gates' strides are the shape's
  const void* initial_state = nullptr;
  const void* grad_final_state = nullptr;
  void* grad_initial_state = nullptr;
};

/// ascan::Status, flattened: code 0 is success, 1 invalid argument, 2 not supported, 3 CUDA error.
struct Result {
  int code = 0;
  int cuda = 0;
  const char* message = "success";
};

/// Two-phase, as ascan::scan: a null workspace sets *bytes and launches nothing.
#define ASCAN_PY_DECLARE(NAME)                                                                \
  Result forward_##NAME(const ForwardCall& call, void* workspace, size_t* bytes,              \
                        cudaStream_t stream);                                                 \
  Result backward_##NAME(const BackwardCall& call, void* workspace, size_t* bytes,            \
                         cudaStream_t stream);

ASCAN_PY_DECLARE(f32)
ASCAN_PY_DECLARE(f64)
ASCAN_PY_DECLARE(f16)
ASCAN_PY_DECLARE(bf16)

#undef ASCAN_PY_DECLARE

}  // namespace ascan_py
