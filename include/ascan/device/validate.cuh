// ascan/device/validate.cuh: argument checks, run on the host before anything is launched.
//
// As CUTLASS's can_implement: a separate, testable step that names what is wrong. Every check
// is arithmetic on sizes, strides and pointer values; none touches device memory or the CUDA
// runtime, so a rejected call leaves no trace on the device.
#pragma once

#include <cstdint>
#include <initializer_list>

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

/// A sequence array of a call and the message that names it when it is null.
struct NamedArray {
  const void* ptr;
  const char* null_message;
};

/// The checks every entry point makes on its (B, C, T) arrays: sizes, null pointers, strides,
/// alignment to the element type, 64-bit extent, sequences that overlap. `extent` gets the
/// elements from the first to one past the last element of the view. Call on non-empty shapes.
template <class T>
Status check_sequence_layout(const Shape& s, std::initializer_list<NamedArray> arrays,
                             int64_t& extent) {
  for (const NamedArray& a : arrays)
    if (a.ptr == nullptr) return Status::invalid(a.null_message);
  if (s.batch_stride < 0 || s.channel_stride < 0 || s.time_stride < 0)
    return Status::invalid("ascan: a stride in the shape is negative");
  if (s.time_stride != 1)
    return Status::not_supported(
        "ascan: time_stride must be 1 (this version scans time-contiguous sequences)");
  for (const NamedArray& a : arrays)
    if (reinterpret_cast<uintptr_t>(a.ptr) % alignof(T) != 0)
      return Status::invalid("ascan: a pointer is not aligned to its element type");
  Dim dims[3] = {{s.batch, s.batch_stride}, {s.channels, s.channel_stride}, {s.length, 1}};
  int64_t elements;
  if (!view_extent(dims, 3, extent) || !mul_ok(s.sequences(), s.length, elements))
    return Status::invalid("ascan: the shape's extent overflows 64-bit indexing");
  if (!view_is_injective(dims, 3))
    return Status::invalid(
        "ascan: the strides make sequences overlap (each of batch_stride and channel_stride must "
        "step over the sequences below it)");
  return Status::success();
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
/// valid call (an empty shape is valid whatever the pointers), kNotSupported for a valid layout
/// this version cannot scan (time_stride != 1), and kInvalidArgument with the reason otherwise:
/// negative sizes or strides, null pointers under a non-empty shape, pointers not aligned to the
/// element size, sequences that overlap, `out` overlapping `gates` or partly overlapping `tokens`
/// (exactly equal is the in-place scan), states overlapping each other or the sequences
/// (`final_state == initial_state` exactly is allowed: each state is read before it is written).
template <class T>
Status can_implement(const ScanArgs<T>& args) {
  const Shape& s = args.shape;
  if (s.batch < 0 || s.channels < 0 || s.length < 0)
    return Status::invalid("ascan::scan: a size in the shape is negative");
  if (s.empty()) return Status::success();
  int64_t extent;
  if (Status st = detail::check_sequence_layout<T>(s,
                                                   {{args.gates, "ascan::scan: gates is null"},
                                                    {args.tokens, "ascan::scan: tokens is null"},
                                                    {args.out, "ascan::scan: out is null"}},
                                                   extent);
      !st.ok())
    return st;
  const auto gates = detail::byte_range(args.gates, extent, sizeof(T));
  const auto tokens = detail::byte_range(args.tokens, extent, sizeof(T));
  const auto out = detail::byte_range(args.out, extent, sizeof(T));
  if (out.overlaps(gates)) return Status::invalid("ascan::scan: out overlaps gates");
  if (out.overlaps(tokens) && args.out != args.tokens)
    return Status::invalid(
        "ascan::scan: out partly overlaps tokens (an in-place scan needs out == tokens)");

  if (args.initial_state == nullptr && args.final_state == nullptr) return Status::success();
  const StateLayout layout = detail::resolve_state_layout(args.state_layout, s);
  int64_t sextent;
  if (Status st = detail::check_state_layout<T>(s, layout, {args.initial_state, args.final_state},
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
/// grad_tokens exactly grad_out; grad_initial_state exactly initial_state or grad_final_state;
/// any other overlap of an output with anything is kInvalidArgument.
template <class T>
Status can_implement(const ScanBackwardArgs<T>& args) {
  using detail::byte_range;
  const Shape& s = args.shape;
  if (s.batch < 0 || s.channels < 0 || s.length < 0)
    return Status::invalid("ascan::scan_backward: a size in the shape is negative");
  if (s.empty()) return Status::success();
  int64_t extent;
  if (Status st = detail::check_sequence_layout<T>(
          s,
          {{args.gates, "ascan::scan_backward: gates is null"},
           {args.states, "ascan::scan_backward: states is null"},
           {args.grad_out, "ascan::scan_backward: grad_out is null"},
           {args.grad_gates, "ascan::scan_backward: grad_gates is null"},
           {args.grad_tokens, "ascan::scan_backward: grad_tokens is null"}},
          extent);
      !st.ok())
    return st;
  const auto gates = byte_range(args.gates, extent, sizeof(T));
  const auto states = byte_range(args.states, extent, sizeof(T));
  const auto grad_out = byte_range(args.grad_out, extent, sizeof(T));
  const auto grad_gates = byte_range(args.grad_gates, extent, sizeof(T));
  const auto grad_tokens = byte_range(args.grad_tokens, extent, sizeof(T));
  if (grad_gates.overlaps(gates) || grad_tokens.overlaps(gates))
    return Status::invalid("ascan::scan_backward: a gradient output overlaps gates");
  if (grad_gates.overlaps(grad_tokens))
    return Status::invalid("ascan::scan_backward: grad_gates overlaps grad_tokens");
  if (grad_gates.overlaps(grad_out) && args.grad_gates != args.grad_out)
    return Status::invalid(
        "ascan::scan_backward: grad_gates partly overlaps grad_out (allowed only when equal)");
  if (grad_gates.overlaps(states) && static_cast<const T*>(args.grad_gates) != args.states)
    return Status::invalid(
        "ascan::scan_backward: grad_gates partly overlaps states (allowed only when equal)");
  if (grad_tokens.overlaps(grad_out) && args.grad_tokens != args.grad_out)
    return Status::invalid(
        "ascan::scan_backward: grad_tokens partly overlaps grad_out (allowed only when equal)");
  if (grad_tokens.overlaps(states))
    return Status::invalid("ascan::scan_backward: grad_tokens overlaps states");

  if (args.initial_state == nullptr && args.grad_final_state == nullptr &&
      args.grad_initial_state == nullptr)
    return Status::success();
  const StateLayout layout = detail::resolve_state_layout(args.state_layout, s);
  int64_t sextent;
  if (Status st = detail::check_state_layout<T>(
          s, layout, {args.initial_state, args.grad_final_state, args.grad_initial_state},
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
