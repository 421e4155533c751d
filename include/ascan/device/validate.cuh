// ascan/device/validate.cuh: argument checks, run on the host before anything is launched.
//
// As CUTLASS's can_implement: a separate, testable step that names what is wrong. Every check
// is arithmetic on sizes, strides and pointer values; none touches device memory or the CUDA
// runtime, so a rejected call leaves no trace on the device.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "scan_args.cuh"
#include "status.cuh"

namespace ascan {
namespace detail {

/// One dimension of a strided view: `size` positions `stride` elements apart.
struct Dim {
  int64_t size;
  int64_t stride;
};

/// a * b, or false when it leaves int64_t.
inline bool mul_ok(int64_t a, int64_t b, int64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}
inline bool add_ok(int64_t a, int64_t b, int64_t& out) {
  return !__builtin_add_overflow(a, b, &out);
}

/// Elements from the first to one past the last position of a view whose dims all have
/// size >= 1 and stride >= 0; false on overflow.
inline bool view_extent(const Dim* dims, int n, int64_t& extent) {
  extent = 1;
  for (int i = 0; i < n; ++i) {
    int64_t reach;
    if (!mul_ok(dims[i].size - 1, dims[i].stride, reach) || !add_ok(extent, reach, extent))
      return false;
  }
  return true;
}

/// True when no two positions of the view share an element. Sufficient test (the one for nested
/// layouts, in any order of the dims): sorted by stride, each dim of size > 1 steps over the whole
/// extent of the dims below it. It admits every packed or padded layout, in any dim order.
inline bool view_is_injective(Dim* dims, int n) {
  for (int i = 1; i < n; ++i)  // insertion sort by stride; n <= 3
    for (int j = i; j > 0 && dims[j].stride < dims[j - 1].stride; --j) {
      const Dim t = dims[j];
      dims[j] = dims[j - 1];
      dims[j - 1] = t;
    }
  int64_t extent = 1;
  for (int i = 0; i < n; ++i) {
    if (dims[i].size <= 1) continue;
    if (dims[i].stride < extent) return false;
    int64_t reach;
    if (!mul_ok(dims[i].size - 1, dims[i].stride, reach) || !add_ok(extent, reach, extent))
      return false;
  }
  return true;
}

/// Byte interval [lo, hi) that a view of `extent` elements of `bytes` each starting at `p` spans.
struct ByteRange {
  uintptr_t lo, hi;
  bool overlaps(const ByteRange& o) const { return lo < o.hi && o.lo < hi; }
};
inline ByteRange byte_range(const void* p, int64_t extent, int64_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  return {lo, lo + static_cast<uintptr_t>(extent) * static_cast<uintptr_t>(bytes)};
}

/// The state layout with defaults filled in: dense (B, C) when both strides are left negative.
inline StateLayout resolve_state_layout(const StateLayout& s, const Shape& shape) {
  if (s.batch_stride < 0 && s.channel_stride < 0) return {shape.channels, 1};
  return s;
}

/// A sequence array of a call: its pointer, its strides (the shape's unless it has its own),
/// whether the call writes it, and the message that names it when it is null.
struct NamedArray {
  const void* ptr;
  Strides strides;
  bool output;
  const char* null_message;
};

/// The strides an array of shape `s` has: its own when given, else the shape's.
inline Strides strides_of(const Shape& s, const std::optional<Strides>& own) {
  return own ? *own : Strides{s.batch_stride, s.channel_stride, s.time_stride};
}

inline bool same_strides(const Strides& x, const Strides& y) {
  return x.batch_stride == y.batch_stride && x.channel_stride == y.channel_stride &&
         x.time_stride == y.time_stride;
}

/// Two arrays are one exactly: the same pointer and the same strides.
inline bool same_view(const NamedArray& x, const NamedArray& y) {
  return x.ptr == y.ptr && same_strides(x.strides, y.strides);
}

/// The checks every entry point makes on its (B, C, T) arrays: null pointers, strides,
/// alignment to the element type, 64-bit extents, outputs whose elements overlap. `extents`
/// gets each array's elements from its first to one past its last element. Inputs may repeat
/// elements (a stride of 0 broadcasts); outputs may not. Call on non-empty shapes.
template <class T, size_t kN>
Status check_sequence_layout(const Shape& s, const NamedArray (&arrays)[kN], int64_t (&extents)[kN]) {
  for (const NamedArray& a : arrays)
    if (a.ptr == nullptr) return Status::invalid(a.null_message);
  int64_t sequences, elements;
  if (!mul_ok(s.batch, s.channels, sequences) || !mul_ok(sequences, s.length, elements))
    return Status::invalid("ascan: the shape's element count overflows 64-bit indexing");
  for (size_t i = 0; i < kN; ++i) {
    const NamedArray& a = arrays[i];
    if (a.strides.batch_stride < 0 || a.strides.channel_stride < 0 || a.strides.time_stride < 0)
      return Status::invalid("ascan: a stride of a sequence array is negative");
    if (reinterpret_cast<uintptr_t>(a.ptr) % alignof(T) != 0)
      return Status::invalid("ascan: a pointer is not aligned to its element type");
    Dim dims[3] = {{s.batch, a.strides.batch_stride},
                   {s.channels, a.strides.channel_stride},
                   {s.length, a.strides.time_stride}};
    int64_t bytes;
    if (!view_extent(dims, 3, extents[i]) ||
        !mul_ok(extents[i], static_cast<int64_t>(sizeof(T)), bytes) ||
        reinterpret_cast<uintptr_t>(a.ptr) > UINTPTR_MAX - static_cast<uintptr_t>(bytes))
      return Status::invalid("ascan: the shape's extent overflows 64-bit indexing");
    if (a.output && !view_is_injective(dims, 3))
      return Status::invalid(
          "ascan: the strides of an output make its elements overlap (each stride must step "
          "over the positions below it, and no stride may be 0 over more than one position)");
  }
  return Status::success();
}

/// The checks on a Packed description that need no device read: batch 1, a count that is not
/// negative, one offsets pointer, aligned. Success with `empty` set when the call has nothing to
/// scan (no sequences).
inline Status check_packed(const Shape& s, const Packed& p, const char* who) {
  (void)who;
  if (s.batch != 1)
    return Status::invalid("ascan: packed sequences need a shape of batch 1 (B = 1, T = total)");
  if (p.count < 0) return Status::invalid("ascan: the packed sequence count is negative");
  if (p.offsets32 != nullptr && p.offsets64 != nullptr)
    return Status::invalid("ascan: packed sequences take int32 or int64 offsets, not both");
  if (p.count > 0 && p.offsets32 == nullptr && p.offsets64 == nullptr)
    return Status::invalid("ascan: the packed sequence offsets (cu_seqlens) are null");
  if (p.count == 0 && s.length > 0 && s.channels > 0)
    return Status::invalid("ascan: packed sequences: count is 0 but the shape has elements");
  if (reinterpret_cast<uintptr_t>(p.offsets32) % alignof(int32_t) != 0 ||
      reinterpret_cast<uintptr_t>(p.offsets64) % alignof(int64_t) != 0)
    return Status::invalid("ascan: the packed sequence offsets are not aligned");
  return Status::success();
}

/// The shape whose (batch, channels) index the states: with packed sequences, (count, C).
inline Shape state_shape(const Shape& s, const Packed& p) {
  Shape t = s;
  if (p.active()) t.batch = p.count;
  return t;
}

/// The checks on the per-sequence state arrays (any of them may be null): alignment, strides,
/// 64-bit extent, and, when `written` (an output) is not null, that its states do not overlap.
template <class T>
Status check_state_layout(const Shape& s, const StateLayout& layout,
                          std::initializer_list<const void*> states, const void* written,
                          int64_t& extent) {
  for (const void* p : states)
    if (reinterpret_cast<uintptr_t>(p) % alignof(T) != 0)
      return Status::invalid("ascan: a state pointer is not aligned to its element type");
  if (layout.batch_stride < 0 || layout.channel_stride < 0)
    return Status::invalid("ascan: a stride of the state layout is negative");
  Dim dims[2] = {{s.batch, layout.batch_stride}, {s.channels, layout.channel_stride}};
  if (!view_extent(dims, 2, extent))
    return Status::invalid("ascan: the state layout's extent overflows 64-bit indexing");
  if (written != nullptr && !view_is_injective(dims, 2))
    return Status::invalid("ascan: the state layout makes the written states overlap");
  return Status::success();
}

}  // namespace detail

/// Checks the arguments of a forward scan without touching the device. Returns success for a
/// valid call (an empty shape is valid whatever the pointers) and kInvalidArgument with the
/// reason otherwise: negative sizes or strides, null pointers under a non-empty shape, pointers
/// not aligned to the element size, an output whose elements overlap (a stride of 0 is allowed
/// on inputs only), `out` overlapping `gates` or partly overlapping `tokens` (the same pointer
/// with the same strides is the in-place scan), states overlapping each other or the sequences
/// (`final_state == initial_state` exactly is allowed: each state is read before it is
/// written), packed sequences on a shape of batch other than 1 or without offsets.
template <class T>
Status can_implement(const ScanArgs<T>& args) {
  using detail::NamedArray;
  using detail::strides_of;
  const Shape& s = args.shape;
  if (s.batch < 0 || s.channels < 0 || s.length < 0)
    return Status::invalid("ascan::scan: a size in the shape is negative");
  if (args.packed.active()) {
    if (Status st = detail::check_packed(s, args.packed, "ascan::scan"); !st.ok()) return st;
  }
  if (s.empty()) return Status::success();
  const NamedArray arrays[3] = {
      {args.gates, strides_of(s, args.gates_strides), false, "ascan::scan: gates is null"},
      {args.tokens, strides_of(s, args.tokens_strides), false, "ascan::scan: tokens is null"},
      {args.out, strides_of(s, args.out_strides), true, "ascan::scan: out is null"}};
  int64_t extents[3];
  if (Status st = detail::check_sequence_layout<T>(s, arrays, extents); !st.ok()) return st;
  const auto gates = detail::byte_range(args.gates, extents[0], sizeof(T));
  const auto tokens = detail::byte_range(args.tokens, extents[1], sizeof(T));
  const auto out = detail::byte_range(args.out, extents[2], sizeof(T));
  if (out.overlaps(gates)) return Status::invalid("ascan::scan: out overlaps gates");
  if (out.overlaps(tokens) && !detail::same_view(arrays[2], arrays[1]))
    return Status::invalid(
        "ascan::scan: out partly overlaps tokens (an in-place scan needs out == tokens with the "
        "same strides)");

  if (args.initial_state == nullptr && args.final_state == nullptr) return Status::success();
  const Shape ss = detail::state_shape(s, args.packed);
  const StateLayout layout = detail::resolve_state_layout(args.state_layout, ss);
  int64_t sextent;
  if (Status st = detail::check_state_layout<T>(ss, layout, {args.initial_state, args.final_state},
                                                args.final_state, sextent);
      !st.ok())
    return st;
  if (args.final_state != nullptr) {
    const auto fin = detail::byte_range(args.final_state, sextent, sizeof(T));
    if (fin.overlaps(out) || fin.overlaps(gates) || fin.overlaps(tokens))
      return Status::invalid("ascan::scan: final_state overlaps gates, tokens or out");
    if (args.initial_state != nullptr && args.initial_state != args.final_state &&
        fin.overlaps(detail::byte_range(args.initial_state, sextent, sizeof(T))))
      return Status::invalid(
          "ascan::scan: final_state partly overlaps initial_state (allowed only when equal)");
  }
  if (args.initial_state != nullptr &&
      detail::byte_range(args.initial_state, sextent, sizeof(T)).overlaps(out))
    return Status::invalid("ascan::scan: initial_state overlaps out");
  return Status::success();
}

/// Checks the arguments of a backward pass without touching the device: the same rules as the
/// forward scan's can_implement for the shape, the pointers and the states, and the aliasing
/// that ScanBackwardArgs documents. grad_gates may be exactly grad_out or exactly states;
/// grad_tokens exactly grad_out (exactly: the same pointer and the same strides);
/// grad_initial_state exactly initial_state or grad_final_state; any other overlap of an output
/// with anything is kInvalidArgument.
template <class T>
Status can_implement(const ScanBackwardArgs<T>& args) {
  using detail::byte_range;
  using detail::NamedArray;
  using detail::strides_of;
  const Shape& s = args.shape;
  if (s.batch < 0 || s.channels < 0 || s.length < 0)
    return Status::invalid("ascan::scan_backward: a size in the shape is negative");
  if (args.packed.active()) {
    if (Status st = detail::check_packed(s, args.packed, "ascan::scan_backward"); !st.ok())
      return st;
  }
  if (s.empty()) return Status::success();
  const NamedArray arrays[5] = {
      {args.gates, strides_of(s, args.gates_strides), false, "ascan::scan_backward: gates is null"},
      {args.states, strides_of(s, args.states_strides), false,
       "ascan::scan_backward: states is null"},
      {args.grad_out, strides_of(s, args.grad_out_strides), false,
       "ascan::scan_backward: grad_out is null"},
      {args.grad_gates, strides_of(s, args.grad_gates_strides), true,
       "ascan::scan_backward: grad_gates is null"},
      {args.grad_tokens, strides_of(s, args.grad_tokens_strides), true,
       "ascan::scan_backward: grad_tokens is null"}};
  int64_t extents[5];
  if (Status st = detail::check_sequence_layout<T>(s, arrays, extents); !st.ok()) return st;
  const auto gates = byte_range(args.gates, extents[0], sizeof(T));
  const auto states = byte_range(args.states, extents[1], sizeof(T));
  const auto grad_out = byte_range(args.grad_out, extents[2], sizeof(T));
  const auto grad_gates = byte_range(args.grad_gates, extents[3], sizeof(T));
  const auto grad_tokens = byte_range(args.grad_tokens, extents[4], sizeof(T));
  if (grad_gates.overlaps(gates) || grad_tokens.overlaps(gates))
    return Status::invalid("ascan::scan_backward: a gradient output overlaps gates");
  if (grad_gates.overlaps(grad_tokens))
    return Status::invalid("ascan::scan_backward: grad_gates overlaps grad_tokens");
  if (grad_gates.overlaps(grad_out) && !detail::same_view(arrays[3], arrays[2]))
    return Status::invalid(
        "ascan::scan_backward: grad_gates partly overlaps grad_out (allowed only when equal)");
  if (grad_gates.overlaps(states) && !detail::same_view(arrays[3], arrays[1]))
    return Status::invalid(
        "ascan::scan_backward: grad_gates partly overlaps states (allowed only when equal)");
  if (grad_tokens.overlaps(grad_out) && !detail::same_view(arrays[4], arrays[2]))
    return Status::invalid(
        "ascan::scan_backward: grad_tokens partly overlaps grad_out (allowed only when equal)");
  if (grad_tokens.overlaps(states))
    return Status::invalid("ascan::scan_backward: grad_tokens overlaps states");

  if (args.initial_state == nullptr && args.grad_final_state == nullptr &&
      args.grad_initial_state == nullptr)
    return Status::success();
  const Shape ss = detail::state_shape(s, args.packed);
  const StateLayout layout = detail::resolve_state_layout(args.state_layout, ss);
  int64_t sextent;
  if (Status st = detail::check_state_layout<T>(
          ss, layout, {args.initial_state, args.grad_final_state, args.grad_initial_state},
          args.grad_initial_state, sextent);
      !st.ok())
    return st;
  for (const T* in : std::initializer_list<const T*>{args.initial_state, args.grad_final_state})
    if (in != nullptr) {
      const auto r = byte_range(in, sextent, sizeof(T));
      if (r.overlaps(grad_gates) || r.overlaps(grad_tokens))
        return Status::invalid(
            "ascan::scan_backward: initial_state or grad_final_state overlaps a gradient output");
    }
  if (args.grad_initial_state != nullptr) {
    const auto dh0 = byte_range(args.grad_initial_state, sextent, sizeof(T));
    for (const detail::ByteRange& r :
         std::initializer_list<detail::ByteRange>{gates, states, grad_out, grad_gates, grad_tokens})
      if (dh0.overlaps(r))
        return Status::invalid(
            "ascan::scan_backward: grad_initial_state overlaps a sequence array");
    for (const T* in : std::initializer_list<const T*>{args.initial_state, args.grad_final_state})
      if (in != nullptr && in != args.grad_initial_state &&
          dh0.overlaps(byte_range(in, sextent, sizeof(T))))
        return Status::invalid(
            "ascan::scan_backward: grad_initial_state partly overlaps initial_state or "
            "grad_final_state (allowed only when equal)");
  }
  return Status::success();
}

}  // namespace ascan
