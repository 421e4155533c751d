// ascan/device/scan_args.cuh: how a caller describes a batch of sequences to scan.
#pragma once

#include <cstdint>
#include <optional>

#include "checked.cuh"

namespace ascan {

/// A (batch, channels, length) view of memory, sizes and strides in elements. Element (b, c, t)
/// lives at offset b * batch_stride + c * channel_stride + t * time_stride. The same shape
/// describes every sequence array of a call unless an array is given strides of its own
/// (ScanArgs::gates_strides, ...). Any non-negative strides under which an output's elements do
/// not overlap are accepted; two layouts are fast: time-contiguous (time_stride == 1) and
/// channel-contiguous (channel_stride == 1, e.g. channel_last(B, T, C), or rows padded wider).
struct Shape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t length = 0;
  int64_t batch_stride = 0;
  int64_t channel_stride = 0;
  int64_t time_stride = 1;

  /// Number of sequences, batch * channels. Exact for a shape that can_implement accepted (it
  /// refuses shapes whose counts leave int64_t); never overflows: a product out of range comes
  /// back as INT64_MAX (INT64_MIN for a negative one).
  constexpr int64_t sequences() const { return detail::saturating_mul(batch, channels); }
  /// Number of elements, batch * channels * length; exact for an accepted shape, saturated (as
  /// sequences()) otherwise.
  constexpr int64_t elements() const {
    return detail::saturating_mul(detail::saturating_mul(batch, channels), length);
  }
  /// True when some size is zero: a scan of it succeeds and does nothing.
  constexpr bool empty() const { return batch == 0 || channels == 0 || length == 0; }
};

/// The densely packed (B, C, T) layout, time fastest. A batch stride C * T out of int64_t range
/// saturates (can_implement then refuses the shape unless B is 1) instead of overflowing.
constexpr Shape time_contiguous(int64_t batch, int64_t channels, int64_t length) {
  return Shape{batch, channels, length, detail::saturating_mul(channels, length), length, 1};
}

/// The channel-last (B, T, C) layout, channels fastest: element (b, c, t) at b*T*C + t*C + c.
/// The shape is still indexed (batch, channels, length). The batch stride saturates as in
/// time_contiguous.
constexpr Shape channel_last(int64_t batch, int64_t length, int64_t channels) {
  return Shape{batch, channels, length, detail::saturating_mul(length, channels), 1, channels};
}

/// Strides of one array that differ from the shape's (sizes always come from the shape): a view
/// of a fused projection (gates and tokens the two halves of a (B, T, 2C) tensor), or a
/// broadcast input (stride 0: a gate constant over time or over batch). Outputs may not have a
/// stride of 0 over a dimension of more than one position.
struct Strides {
  int64_t batch_stride = 0;
  int64_t channel_stride = 0;
  int64_t time_stride = 0;
};

/// Packed variable-length sequences: `count` sequences laid end to end along the time axis of a
/// shape of batch 1, sequence n at times [offsets[n], offsets[n+1]) (FlashAttention's and
/// flash-linear-attention's `cu_seqlens`: count + 1 ascending offsets from 0 to the shape's
/// length, in device memory, int32 or int64). Each sequence starts from its own initial state
/// and yields its own final state, both (count, C) under the call's StateLayout; nothing crosses
/// a boundary. Empty sequences (equal offsets) are allowed: their final state is their initial
/// state. The offsets are read on the device only: an offset outside [0, length] is clamped
/// into it and an offset below its predecessor is raised to it (non-monotonic offsets give
/// empty sequences, never an access outside the arrays).
struct Packed {
  const int32_t* offsets32 = nullptr;
  const int64_t* offsets64 = nullptr;
  int64_t count = 0;

  /// True when the call scans packed sequences.
  constexpr bool active() const {
    return offsets32 != nullptr || offsets64 != nullptr || count != 0;
  }
};

/// `count` sequences packed by `cu_seqlens` (count + 1 int32 offsets on the device).
constexpr Packed packed(const int32_t* cu_seqlens, int64_t count) {
  return Packed{cu_seqlens, nullptr, count};
}
/// `count` sequences packed by `cu_seqlens` (count + 1 int64 offsets on the device).
constexpr Packed packed(const int64_t* cu_seqlens, int64_t count) {
  return Packed{nullptr, cu_seqlens, count};
}

/// Where the per-sequence states (initial state h0, final state) live: state (b, c) at
/// b * batch_stride + c * channel_stride elements (b is the packed sequence's index with
/// Packed). Default: dense (B, C), set by the scan from the shape's channel count when both
/// strides are left negative.
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
/// over every sequence of `shape`. `out` may alias `tokens` exactly (in place: the same pointer and
/// the same strides, a dimension of size 1 aside); it must share no element with `gates` (it may
/// interleave with it: see can_implement). `initial_state` (h0, 0 when null) and `final_state`
/// (x[T-1], or x[0] when reversed; not written when null) are laid out by `state_layout`. An
/// array's own strides, when given, replace the shape's for that array; `packed` scans packed
/// sequences (see Packed).
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
  std::optional<Strides> gates_strides{};
  std::optional<Strides> tokens_strides{};
  std::optional<Strides> out_strides{};
  Packed packed{};
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
/// may share an element with an output (an alias is exact: the same pointer and the same
/// strides, a dimension of size 1 aside). gT and h0
/// default to 0; grad_initial_state is not written when null. Per-array strides and packed
/// sequences as in ScanArgs.
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
  std::optional<Strides> gates_strides{};
  std::optional<Strides> states_strides{};
  std::optional<Strides> grad_out_strides{};
  std::optional<Strides> grad_gates_strides{};
  std::optional<Strides> grad_tokens_strides{};
  Packed packed{};
};

}  // namespace ascan
