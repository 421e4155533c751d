// ascan/device/validate.cuh: argument checks, run on the host before anything is launched.
//
// As CUTLASS's can_implement: a separate, testable step that names what is wrong. Every check
// is arithmetic on sizes, strides and pointer values; none touches device memory or the CUDA
// runtime, so a rejected call leaves no trace on the device.
#pragma once

#include <cstdint>

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
inline bool mul_ok(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
inline bool add_ok(int64_t a, int64_t b, int64_t& out) { return !__builtin_add_overflow(a, b, &out); }

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
  using detail::Dim;
  const Shape& s = args.shape;
  if (s.batch < 0 || s.channels < 0 || s.length < 0)
    return Status::invalid("ascan::scan: a size in the shape is negative");
  if (s.empty()) return Status::success();
  if (args.gates == nullptr) return Status::invalid("ascan::scan: gates is null");
  if (args.tokens == nullptr) return Status::invalid("ascan::scan: tokens is null");
  if (args.out == nullptr) return Status::invalid("ascan::scan: out is null");
  if (s.batch_stride < 0 || s.channel_stride < 0 || s.time_stride < 0)
    return Status::invalid("ascan::scan: a stride in the shape is negative");
  if (s.time_stride != 1)
    return Status::not_supported(
        "ascan::scan: time_stride must be 1 (this version scans time-contiguous sequences)");
  for (const void* p : {static_cast<const void*>(args.gates), static_cast<const void*>(args.tokens),
                        static_cast<const void*>(args.out),
                        static_cast<const void*>(args.initial_state),
                        static_cast<const void*>(args.final_state)})
    if (reinterpret_cast<uintptr_t>(p) % alignof(T) != 0)
      return Status::invalid("ascan::scan: a pointer is not aligned to its element type");

  Dim dims[3] = {{s.batch, s.batch_stride}, {s.channels, s.channel_stride}, {s.length, 1}};
  int64_t extent, elements;
  if (!detail::view_extent(dims, 3, extent) || !detail::mul_ok(s.sequences(), s.length, elements))
    return Status::invalid("ascan::scan: the shape's extent overflows 64-bit indexing");
  if (!detail::view_is_injective(dims, 3))
    return Status::invalid(
        "ascan::scan: the strides make sequences overlap (each of batch_stride and "
        "channel_stride must step over the sequences below it)");

  const auto gates = detail::byte_range(args.gates, extent, sizeof(T));
  const auto tokens = detail::byte_range(args.tokens, extent, sizeof(T));
  const auto out = detail::byte_range(args.out, extent, sizeof(T));
  if (out.overlaps(gates)) return Status::invalid("ascan::scan: out overlaps gates");
  if (out.overlaps(tokens) && args.out != args.tokens)
    return Status::invalid(
        "ascan::scan: out partly overlaps tokens (an in-place scan needs out == tokens)");

  if (args.initial_state == nullptr && args.final_state == nullptr) return Status::success();
  const StateLayout st = detail::resolve_state_layout(args.state_layout, s);
  if (st.batch_stride < 0 || st.channel_stride < 0)
    return Status::invalid("ascan::scan: a stride of the state layout is negative");
  Dim sdims[2] = {{s.batch, st.batch_stride}, {s.channels, st.channel_stride}};
  int64_t sextent;
  if (!detail::view_extent(sdims, 2, sextent))
    return Status::invalid("ascan::scan: the state layout's extent overflows 64-bit indexing");
  if (args.final_state != nullptr) {
    if (!detail::view_is_injective(sdims, 2))
      return Status::invalid("ascan::scan: the state layout makes final states overlap");
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

}  // namespace ascan
