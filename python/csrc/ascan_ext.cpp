// python/csrc/ascan_ext.cpp: the torch-facing half of ascan._C. Turns tensors into the flat call
// structs of launch.h, runs on the tensors' device and its current stream, and takes the
// workspace from PyTorch's caching allocator (two-phase: ask for the size, then allocate a byte
// tensor). Outputs are allocated by the caller (ascan/_ops.py), so their layout is decided in one
// place for the real and the fake (meta) implementations.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <optional>
#include <string>
#include <vector>

#include "launch.h"

namespace ascan_py {
namespace {

using at::Tensor;

/// A (B, C, T) view of a 3-D tensor: layout "bct" (dims B, C, T) or "btc" (dims B, T, C).
Seq seq_of(const Tensor& t, bool channel_last) {
  Seq s;
  s.ptr = t.data_ptr();
  s.batch_stride = t.stride(0);
  s.channel_stride = channel_last ? t.stride(2) : t.stride(1);
  s.time_stride = channel_last ? t.stride(1) : t.stride(2);
  return s;
}

/// A stride over a dimension of size 1 never moves: give it the reference array's, so that an
/// array whose only difference is there keeps the uniform-layout kernels.
Seq normalized(Seq s, const Seq& ref, const Common& c) {
  if (c.batch == 1) s.batch_stride = ref.batch_stride;
  if (c.channels == 1) s.channel_stride = ref.channel_stride;
  if (c.length == 1) s.time_stride = ref.time_stride;
  return s;
}

Common common_of(const Tensor& ref, bool channel_last, bool reverse,
                 const std::optional<Tensor>& cu_seqlens) {
  Common c;
  c.batch = ref.size(0);
  c.channels = channel_last ? ref.size(2) : ref.size(1);
  c.length = channel_last ? ref.size(1) : ref.size(2);
  c.reverse = reverse;
  if (cu_seqlens) {
    c.offsets = cu_seqlens->data_ptr();
    c.offsets64 = cu_seqlens->scalar_type() == at::kLong;
    c.count = cu_seqlens->numel() - 1;
  }
  c.state_batch_stride = c.channels;  // states are dense (N, C), made so by the caller
  c.state_channel_stride = 1;
  return c;
}

void check_common(const Tensor& ref, const std::vector<std::pair<const char*, const Tensor*>>& arrays,
                  const std::optional<Tensor>& cu_seqlens) {
  TORCH_CHECK_VALUE(ref.is_cuda(), "ascan: tensors must be CUDA tensors");
  TORCH_CHECK_VALUE(ref.dim() == 3, "ascan: sequence tensors must be 3-D");
  for (const auto& [name, t] : arrays) {
    TORCH_CHECK_VALUE(t->device() == ref.device(), "ascan: ", name, " is on ", t->device(),
                      ", expected ", ref.device());
    TORCH_CHECK_TYPE(t->scalar_type() == ref.scalar_type(), "ascan: ", name, " has dtype ",
                     t->scalar_type(), ", expected ", ref.scalar_type());
  }
  if (cu_seqlens) {
    TORCH_CHECK_VALUE(cu_seqlens->device() == ref.device(), "ascan: cu_seqlens is on ",
                      cu_seqlens->device(), ", expected ", ref.device());
    TORCH_CHECK_TYPE(cu_seqlens->scalar_type() == at::kInt || cu_seqlens->scalar_type() == at::kLong,
                     "ascan: cu_seqlens must be int32 or int64");
    TORCH_CHECK_VALUE(cu_seqlens->dim() == 1 && cu_seqlens->numel() >= 1 &&
                          cu_seqlens->is_contiguous(),
                      "ascan: cu_seqlens must be a contiguous 1-D tensor of N + 1 offsets");
  }
}

void check_state(const char* name, const std::optional<Tensor>& t, const Tensor& ref,
                 int64_t rows, int64_t channels) {
  if (!t) return;
  TORCH_CHECK_VALUE(t->device() == ref.device(), "ascan: ", name, " is on ", t->device(),
                    ", expected ", ref.device());
  TORCH_CHECK_TYPE(t->scalar_type() == ref.scalar_type(), "ascan: ", name, " has dtype ",
                   t->scalar_type(), ", expected ", ref.scalar_type());
  TORCH_CHECK_VALUE(t->dim() == 2 && t->size(0) == rows && t->size(1) == channels &&
                        t->is_contiguous(),
                    "ascan: ", name, " must be a contiguous (", rows, ", ", channels, ") tensor");
}

const void* ptr_or_null(const std::optional<Tensor>& t) { return t ? t->data_ptr() : nullptr; }

void raise(const Result& r) {
  if (r.code == 0) return;
  if (r.code == 3) TORCH_CHECK(false, r.message, " (CUDA error ", r.cuda, ")");
  TORCH_CHECK_VALUE(false, r.message);
}

std::string dtype_missing(at::ScalarType t) {
  return std::string("ascan: this build of ascan._C has no kernels for ") + c10::toString(t) +
         " (rebuild with it in ASCAN_DTYPES)";
}

template <class Call>
using Launch = Result (*)(const Call&, void*, size_t*, cudaStream_t);

template <class Call>
Launch<Call> pick(at::ScalarType t);

template <>
Launch<ForwardCall> pick<ForwardCall>(at::ScalarType t) {
  switch (t) {
#ifdef ASCAN_PY_F32
    case at::kFloat: return forward_f32;
#endif
#ifdef ASCAN_PY_F64
    case at::kDouble: return forward_f64;
#endif
#ifdef ASCAN_PY_F16
    case at::kHalf: return forward_f16;
#endif
#ifdef ASCAN_PY_BF16
    case at::kBFloat16: return forward_bf16;
#endif
    default: break;
  }
  TORCH_CHECK_TYPE(false, dtype_missing(t));
}

template <>
Launch<BackwardCall> pick<BackwardCall>(at::ScalarType t) {
  switch (t) {
#ifdef ASCAN_PY_F32
    case at::kFloat: return backward_f32;
#endif
#ifdef ASCAN_PY_F64
    case at::kDouble: return backward_f64;
#endif
#ifdef ASCAN_PY_F16
    case at::kHalf: return backward_f16;
#endif
#ifdef ASCAN_PY_BF16
    case at::kBFloat16: return backward_bf16;
#endif
    default: break;
  }
  TORCH_CHECK_TYPE(false, dtype_missing(t));
}

/// Query, allocate from the caching allocator, launch: all on `stream`.
template <class Call>
void launch(Launch<Call> fn, const Call& call, const Tensor& like, cudaStream_t stream) {
  size_t bytes = 0;
  raise(fn(call, nullptr, &bytes, stream));
  Tensor workspace = at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
  raise(fn(call, workspace.data_ptr(), &bytes, stream));
}

/// Forward: writes out (B, C, T) under its own strides and, when given, final_state (N, C), dense.
void forward(const Tensor& gates, const Tensor& tokens, const Tensor& out,
             const std::optional<Tensor>& final_state,
             const std::optional<Tensor>& initial_state, const std::optional<Tensor>& cu_seqlens,
             bool reverse, bool channel_last) {
  check_common(out, {{"gates", &gates}, {"tokens", &tokens}}, cu_seqlens);
  TORCH_CHECK_VALUE(gates.sizes() == out.sizes() && tokens.sizes() == out.sizes(),
                    "ascan: gates, tokens and out must have one shape");
  const c10::cuda::CUDAGuard guard(out.device());
  const Common c = common_of(out, channel_last, reverse, cu_seqlens);
  const int64_t rows = cu_seqlens ? c.count : c.batch;
  check_state("initial_state", initial_state, out, rows, c.channels);
  check_state("final_state", final_state, out, rows, c.channels);
  const Launch<ForwardCall> fn = pick<ForwardCall>(out.scalar_type());
  if (out.numel() == 0) {  // nothing to scan: each final state is its initial state
    if (final_state && initial_state) final_state->copy_(*initial_state);
    else if (final_state) final_state->zero_();
    return;
  }
  ForwardCall call;
  call.common = c;
  call.out = seq_of(out, channel_last);
  call.gates = normalized(seq_of(gates, channel_last), call.out, c);
  call.tokens = normalized(seq_of(tokens, channel_last), call.out, c);
  call.initial_state = ptr_or_null(initial_state);
  call.final_state = final_state && final_state->numel() ? final_state->data_ptr() : nullptr;
  launch(fn, call, out, at::cuda::getCurrentCUDAStream(out.device().index()).stream());
}

/// Backward: writes grad_gates and grad_tokens (B, C, T) and, when given, grad_initial_state.
void backward(const Tensor& gates, const Tensor& states, const Tensor& grad_out,
              const Tensor& grad_gates, const Tensor& grad_tokens,
              const std::optional<Tensor>& initial_state,
              const std::optional<Tensor>& grad_final_state,
              const std::optional<Tensor>& grad_initial_state,
              const std::optional<Tensor>& cu_seqlens, bool reverse, bool channel_last) {
  check_common(grad_gates,
               {{"gates", &gates}, {"states", &states}, {"grad_out", &grad_out},
                {"grad_tokens", &grad_tokens}},
               cu_seqlens);
  for (const Tensor* t : {&gates, &states, &grad_out, &grad_tokens})
    TORCH_CHECK_VALUE(t->sizes() == grad_gates.sizes(),
                      "ascan: the backward's sequence tensors must have one shape");
  const c10::cuda::CUDAGuard guard(grad_gates.device());
  const Common c = common_of(grad_gates, channel_last, reverse, cu_seqlens);
  const int64_t rows = cu_seqlens ? c.count : c.batch;
  check_state("initial_state", initial_state, grad_gates, rows, c.channels);
  check_state("grad_final_state", grad_final_state, grad_gates, rows, c.channels);
  check_state("grad_initial_state", grad_initial_state, grad_gates, rows, c.channels);
  const Launch<BackwardCall> fn = pick<BackwardCall>(grad_gates.scalar_type());
  if (grad_gates.numel() == 0) {  // dL/dh0 = dL/d(final state), which is h0
    if (grad_initial_state) {
      if (grad_final_state) grad_initial_state->copy_(*grad_final_state);
      else grad_initial_state->zero_();
    }
    return;
  }
  BackwardCall call;
  call.common = c;
  call.grad_gates = seq_of(grad_gates, channel_last);
  call.gates = normalized(seq_of(gates, channel_last), call.grad_gates, c);
  call.states = normalized(seq_of(states, channel_last), call.grad_gates, c);
  call.grad_out = normalized(seq_of(grad_out, channel_last), call.grad_gates, c);
  call.grad_tokens = normalized(seq_of(grad_tokens, channel_last), call.grad_gates, c);
  call.initial_state = ptr_or_null(initial_state);
  call.grad_final_state = ptr_or_null(grad_final_state);
  call.grad_initial_state =
      grad_initial_state && grad_initial_state->numel() ? grad_initial_state->data_ptr() : nullptr;
  launch(fn, call, grad_gates,
         at::cuda::getCurrentCUDAStream(grad_gates.device().index()).stream());
}

std::vector<std::string> compiled_dtypes() {
  std::vector<std::string> d;
#ifdef ASCAN_PY_F32
  d.emplace_back("float32");
#endif
#ifdef ASCAN_PY_F64
  d.emplace_back("float64");
#endif
#ifdef ASCAN_PY_F16
  d.emplace_back("float16");
#endif
#ifdef ASCAN_PY_BF16
  d.emplace_back("bfloat16");
#endif
  return d;
}

}  // namespace
}  // namespace ascan_py

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "ascan's CUDA kernels for PyTorch (use the ascan package, not this module)";
  m.def("forward", &ascan_py::forward, "forward scan into preallocated out and final_state",
        py::arg("gates"), py::arg("tokens"), py::arg("out"), py::arg("final_state"),
        py::arg("initial_state"), py::arg("cu_seqlens"), py::arg("reverse"),
        py::arg("channel_last"));
  m.def("backward", &ascan_py::backward, "fused backward into preallocated gradients",
        py::arg("gates"), py::arg("states"), py::arg("grad_out"), py::arg("grad_gates"),
        py::arg("grad_tokens"), py::arg("initial_state"), py::arg("grad_final_state"),
        py::arg("grad_initial_state"), py::arg("cu_seqlens"), py::arg("reverse"),
        py::arg("channel_last"));
  m.def("compiled_dtypes", &ascan_py::compiled_dtypes, "the dtypes this build has kernels for");
}
