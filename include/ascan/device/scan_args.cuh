// ascan/device/scan_args.cuh: how a caller describes a batch of sequences to scan.
#pragma once

#include <cstdint>

namespace ascan {

/// A (batch, channels, length) view of memory, sizes and strides in elements. Element (b, c, t)
/// lives at offset b * batch_stride + c * channel_stride + t * time_stride. The same shape
/// describes gates, tokens and the output. This version scans time-contiguous sequences
/// (time_stride == 1) with any batch and channel strides under which sequences do not overlap.
struct Shape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t length = 0;
  int64_t batch_stride = 0;
  int64_t channel_stride = 0;
  int64_t time_stride = 1;

  /// Number of sequences, batch * channels.
  constexpr int64_t sequences() const { return batch * channels; }
  /// Number of elements, batch * channels * length.
  constexpr int64_t elements() const { return batch * channels * length; }
  /// True when some size is zero: a scan of it succeeds and does nothing.
  constexpr bool empty() const { return batch == 0 || channels == 0 || length == 0; }
};

/// The densely packed (B, C, T) layout, time fastest.
constexpr Shape time_contiguous(int64_t batch, int64_t channels, int64_t length) {
  return Shape{batch, channels, length, channels * length, length, 1};
}

/// Where the per-sequence states (initial state h0, final state) live: state (b, c) at
/// b * batch_stride + c * channel_stride elements. Default: dense (B, C), set by the scan from
/// the shape's channel count when both strides are left negative.
struct StateLayout {
  int64_t batch_stride = -1;
  int64_t channel_stride = -1;
};

/// Tag for the entry points that take their scratch memory from cudaMallocAsync on the call's
/// stream (and return it with cudaFreeAsync behind the kernel): `scan(args, ascan::malloc_async,
/// stream)`. Only calls whose path needs scratch (few long sequences) allocate.
struct MallocAsync {};
inline constexpr MallocAsync malloc_async{};

/// Arguments of a forward scan
///
///     x[t] = a[t] * x[t-1] + b[t],  x[-1] = h0      (forward)
///     x[t] = a[t] * x[t+1] + b[t],  x[T]  = h0      (reverse)
///
/// over every sequence of `shape`. `out` may alias `tokens` exactly (in place); it must not
/// overlap `gates`. `initial_state` (h0, 0 when null) and `final_state` (x[T-1], or x[0] when
/// reversed; not written when null) are laid out by `state_layout`.
template <class T>
struct ScanArgs {
  const T* gates = nullptr;
  const T* tokens = nullptr;
  T* out = nullptr;
  Shape shape{};
  bool reverse = false;
  const T* initial_state = nullptr;
  T* final_state = nullptr;
  StateLayout state_layout{};
};

/// Arguments of the backward pass of a forward scan (see ScanArgs) with the same shape and
/// direction. With g = grad_out = dL/dx and gT = grad_final_state = dL/d(final state):
///
///     d[t] = a[t+1] * d[t+1] + g[t],  d[T-1] = g[T-1] + gT        (forward; mirrored reversed)
///     grad_tokens[t] = d[t],  grad_gates[t] = d[t] * x[t-1] (x[-1] = h0),
///     grad_initial_state = a[0] * d[0]
///
/// `states` are the forward's outputs x and `initial_state` its h0 (0 when null). Aliasing:
/// grad_gates may be exactly grad_out or exactly states, grad_tokens exactly grad_out (not both
/// onto grad_out), grad_initial_state exactly initial_state or grad_final_state; nothing else
/// may overlap an output. gT and h0 default to 0; grad_initial_state is not written when null.
template <class T>
struct ScanBackwardArgs {
  const T* gates = nullptr;
  const T* states = nullptr;
  const T* grad_out = nullptr;
  T* grad_gates = nullptr;
  T* grad_tokens = nullptr;
  Shape shape{};
  bool reverse = false;
  const T* initial_state = nullptr;
  const T* grad_final_state = nullptr;
  T* grad_initial_state = nullptr;
  StateLayout state_layout{};
};

}  // namespace ascan
