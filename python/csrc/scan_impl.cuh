// python/csrc/scan_impl.cuh: ascan's host entry points called from the flat structs of launch.h.
// Included by one small .cu file per (pass, dtype); sees no torch header.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <ascan/ascan.cuh>

#include "launch.h"

namespace ascan_py {

inline ascan::Strides strides_of(const Seq& s) {
  return ascan::Strides{s.batch_stride, s.channel_stride, s.time_stride};
}

/// The array's own strides when they differ from the shape's (equal ones are left unset, so that
/// the call keeps the kernels of a uniform layout).
inline std::optional<ascan::Strides> own_strides(const Seq& s, const ascan::Shape& shape) {
  if (s.batch_stride == shape.batch_stride && s.channel_stride == shape.channel_stride &&
      s.time_stride == shape.time_stride)
    return std::nullopt;
  return strides_of(s);
}

inline ascan::Shape shape_of(const Common& c, const Seq& layout) {
  ascan::Shape s;
  s.batch = c.batch;
  s.channels = c.channels;
  s.length = c.length;
  s.batch_stride = layout.batch_stride;
  s.channel_stride = layout.channel_stride;
  s.time_stride = layout.time_stride;
  return s;
}

inline ascan::Packed packed_of(const Common& c) {
  if (c.offsets == nullptr) return ascan::Packed{};
  if (c.offsets64) return ascan::packed(static_cast<const int64_t*>(c.offsets), c.count);
  return ascan::packed(static_cast<const int32_t*>(c.offsets), c.count);
}

inline Result result_of(const ascan::Status& st) {
  Result r;
  r.code = static_cast<int>(st.code);
  r.cuda = static_cast<int>(st.cuda);
  r.message = st.message;
  return r;
}

template <class T>
Result forward_impl(const ForwardCall& call, void* workspace, size_t* bytes, cudaStream_t stream) {
  ascan::ScanArgs<T> a;
  a.shape = shape_of(call.common, call.out);
  a.gates = static_cast<const T*>(call.gates.ptr);
  a.tokens = static_cast<const T*>(call.tokens.ptr);
  a.out = static_cast<T*>(call.out.ptr);
  a.gates_strides = own_strides(call.gates, a.shape);
  a.tokens_strides = own_strides(call.tokens, a.shape);
  a.reverse = call.common.reverse;
  a.initial_state = static_cast<const T*>(call.initial_state);
  a.final_state = static_cast<T*>(call.final_state);
  a.state_layout = ascan::StateLayout{call.common.state_batch_stride,
                                      call.common.state_channel_stride};
  a.packed = packed_of(call.common);
  return result_of(ascan::scan(a, workspace, *bytes, stream));
}

template <class T>
Result backward_impl(const BackwardCall& call, void* workspace, size_t* bytes,
                     cudaStream_t stream) {
  ascan::ScanBackwardArgs<T> a;
  a.shape = shape_of(call.common, call.grad_gates);
  a.gates = static_cast<const T*>(call.gates.ptr);
  a.states = static_cast<const T*>(call.states.ptr);
  a.grad_out = static_cast<const T*>(call.grad_out.ptr);
  a.grad_gates = static_cast<T*>(call.grad_gates.ptr);
  a.grad_tokens = static_cast<T*>(call.grad_tokens.ptr);
  a.gates_strides = own_strides(call.gates, a.shape);
  a.states_strides = own_strides(call.states, a.shape);
  a.grad_out_strides = own_strides(call.grad_out, a.shape);
  a.grad_tokens_strides = own_strides(call.grad_tokens, a.shape);
  a.reverse = call.common.reverse;
  a.initial_state = static_cast<const T*>(call.initial_state);
  a.grad_final_state = static_cast<const T*>(call.grad_final_state);
  a.grad_initial_state = static_cast<T*>(call.grad_initial_state);
  a.state_layout = ascan::StateLayout{call.common.state_batch_stride,
                                      call.common.state_channel_stride};
  a.packed = packed_of(call.common);
  return result_of(ascan::scan_backward(a, workspace, *bytes, stream));
}

}  // namespace ascan_py

/// Defines one pass for one dtype: ASCAN_PY_DEFINE(forward, f32, float).
#define ASCAN_PY_DEFINE(PASS, NAME, TYPE)                                                     \
  namespace ascan_py {                                                                        \
  Result PASS##_##NAME(const PASS##_call_t& call, void* workspace, size_t* bytes,             \
                       cudaStream_t stream) {                                                 \
    return PASS##_impl<TYPE>(call, workspace, bytes, stream);                                 \
  }                                                                                           \
  }
namespace ascan_py {
using forward_call_t = ForwardCall;
using backward_call_t = BackwardCall;
}  // namespace ascan_py
