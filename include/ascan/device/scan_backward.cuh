// ascan/device/scan_backward.cuh: the host entry point of the backward pass.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "dispatch/dispatch.cuh"
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

/// The row path's parameters of a validated backward call (row_dispatch.cuh), and whether every
/// array lies on the 16-byte vector grid (`vector`).
template <class T>
RowParams<T> make_row_params(const ScanBackwardArgs<T>& args, bool& vector) {
  const Shape& s = args.shape;
  const bool packed = args.packed.active();
  RowParams<T> p{};
  p.in[0] = row_array(args.gates, s, args.gates_strides, packed);
  p.in[1] = row_array(args.states, s, args.states_strides, packed);
  p.in[2] = row_array(args.grad_out, s, args.grad_out_strides, packed);
  p.out[0] = row_array(args.grad_gates, s, args.grad_gates_strides, packed);
  p.out[1] = row_array(args.grad_tokens, s, args.grad_tokens_strides, packed);
  fill_row_shape(p, s, args.packed, args.state_layout);
  p.state_in = args.initial_state;
  p.state_in2 = args.grad_final_state;
  p.state_out = args.grad_initial_state;
  vector = true;
  for (const auto& a : p.in) vector = vector && row_vector_ok<T>(a, s.channels);
  for (const auto& a : p.out) vector = vector && row_vector_ok<T>(a, s.channels);
  return p;
}

/// The backward pass on the row path (row_dispatch.cuh).
template <class T>
Status scan_backward_rows(const ScanBackwardArgs<T>& args, const Scratch& scratch,
                          cudaStream_t stream, Path path) {
  bool vector = false;
  const RowParams<T> p = make_row_params(args, vector);
  // the backward pass runs against the forward's order
  return run_rows<T, true>(p, !args.reverse, vector, path, scratch, stream);
}

/// The backward pass with the scratch, path and tables given (see scan_with).
template <class T, class Table = BackwardTuning<sizeof(T)>,
          class Lookback = LookbackTuning<sizeof(T), true>,
          class Flat = FlatTuning<sizeof(T), true>>
Status scan_backward_with(const ScanBackwardArgs<T>& args, const Scratch& scratch,
                          cudaStream_t stream, Path path = Path::kAuto) {
  static_assert(kIsScanType<T>,
                "ascan::scan_backward takes float, double, __half or __nv_bfloat16");
  if (Status st = can_implement(args); !st.ok()) return st;
  if (args.shape.empty()) {
    if (scratch.mode == Scratch::kQuery) *scratch.bytes = 1;
    return Status::success();
  }
  if ((path == Path::kAuto || path == Path::kFlat) &&
      packed_takes_flat(args.shape, args.packed,
                        {&args.gates_strides, &args.states_strides, &args.grad_out_strides,
                         &args.grad_gates_strides, &args.grad_tokens_strides})) {
    bool vector = false;
    const auto p = packed_flat_params(make_backward_params(args, vector), args.shape, args.packed,
                                      args.state_layout);
    return run_flat_packed<FlatPackedBackward, FlatWindowBackward, T, Flat>(p, args.reverse, vector,
                                                                            path, scratch, stream);
  }
  if (takes_row_path(args.shape, args.packed,
                     {&args.gates_strides, &args.states_strides, &args.grad_out_strides,
                      &args.grad_gates_strides, &args.grad_tokens_strides})) {
    if (path == Path::kFlat)
      return Status::not_supported(
          "the flat path is for time-contiguous sequences (packed: under 2^30 times)");
    return scan_backward_rows(args, scratch, stream, path);
  }
  bool vector = false;
  const BackwardParams<T> p = make_backward_params(args, vector);
  return run<BackwardProblem, FlatBackward, T, Table, Lookback, Flat>(p, args.reverse, vector, path,
                                                                      scratch, stream);
}

}  // namespace detail

/// Backward pass of `scan` in one fused pass over memory: reads gates, the forward's outputs
/// (states) and the upstream gradient, writes the gradients of gates and tokens, and optionally
/// of the initial state (see ScanBackwardArgs for the formulas and the aliasing allowed). Same
/// dtypes, lengths, layouts and alignment rules as `scan`; 16-bit types are computed in float and
/// rounded once. Enqueued on `stream`; no synchronization. Invalid arguments (see can_implement)
/// return the error and launch nothing; an empty shape succeeds and does nothing. Scratch memory
/// as for `scan`: this overload follows the two-phase rule (a null workspace reports the bytes
/// needed in workspace_bytes and launches nothing), so that few long sequences are split over
/// many blocks; results are bitwise identical run after run.
template <class T>
Status scan_backward(const ScanBackwardArgs<T>& args, void* workspace, size_t& workspace_bytes,
                     cudaStream_t stream = 0) {
  return detail::scan_backward_with(args, detail::Scratch::two_phase(workspace, workspace_bytes),
                                    stream);
}

/// The backward pass with its workspace from cudaMallocAsync on `stream` (see `scan`).
template <class T>
Status scan_backward(const ScanBackwardArgs<T>& args, MallocAsync, cudaStream_t stream = 0) {
  return detail::scan_backward_with(args, detail::Scratch{detail::Scratch::kMallocAsync}, stream);
}

/// The backward pass without a workspace and without allocation: one block per sequence.
template <class T>
Status scan_backward(const ScanBackwardArgs<T>& args, cudaStream_t stream = 0) {
  return detail::scan_backward_with(args, detail::Scratch{}, stream);
}

}  // namespace ascan
