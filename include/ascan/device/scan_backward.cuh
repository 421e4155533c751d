// ascan/device/scan_backward.cuh: the host entry point of the backward pass.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "dispatch/scan_kernels.cuh"
#include "dispatch/tuning.cuh"
#include "scan.cuh"
#include "scan_args.cuh"
#include "status.cuh"
#include "validate.cuh"

namespace ascan {
namespace detail {

/// The kernel parameters of a validated, non-empty backward call, and whether it can take the
/// vector path (all five sequence arrays equally misaligned).
template <class T>
BackwardParams<T> make_backward_params(const ScanBackwardArgs<T>& args, bool& vector) {
  const Shape& s = args.shape;
  const StateLayout st = resolve_state_layout(args.state_layout, s);
  const int64_t span = tile_span_bound<T>(
      s, {args.gates, args.states, args.grad_out, args.grad_gates, args.grad_tokens}, vector);
  return BackwardParams<T>{args.gates,
                           args.states,
                           args.grad_out,
                           args.grad_gates,
                           args.grad_tokens,
                           s.sequences(),
                           s.channels,
                           s.batch_stride,
                           s.channel_stride,
                           s.length,
                           span,
                           args.initial_state,
                           args.grad_final_state,
                           args.grad_initial_state,
                           st.batch_stride,
                           st.channel_stride};
}

}  // namespace detail

/// Backward pass of `scan` in one fused pass over memory: reads gates, the forward's outputs
/// (states) and the upstream gradient, writes the gradients of gates and tokens, and optionally
/// of the initial state (see ScanBackwardArgs for the formulas and the aliasing allowed). Same
/// dtypes, lengths, layouts and alignment rules as `scan`; 16-bit types are computed in float and
/// rounded once. Enqueued on `stream`; no synchronization, no allocation. Invalid arguments (see
/// can_implement) return the error and launch nothing; an empty shape succeeds and does nothing.
template <class T>
Status scan_backward(const ScanBackwardArgs<T>& args, cudaStream_t stream = 0) {
  static_assert(detail::kIsScanType<T>,
                "ascan::scan_backward takes float, double, __half or __nv_bfloat16");
  if (Status st = can_implement(args); !st.ok()) return st;
  if (args.shape.empty()) return Status::success();
  bool vector = false;
  const detail::BackwardParams<T> p = detail::make_backward_params(args, vector);
  using Table = detail::BackwardTuning<sizeof(T)>;
  const int row = detail::select_policy<sizeof(T), Table>(p.span_bound);
  const cudaError_t e = detail::launch_scan_row<detail::BackwardProblem, T, Table>(
      row, args.reverse, vector, p, stream);
  return e == cudaSuccess ? Status::success() : Status::cuda_error(e);
}

}  // namespace ascan
