// ascan/device/validate.cuh: argument checks, run on the host before anything is launched.
//
// As CUTLASS's can_implement: a separate, testable step that names what is wrong. Every check
// is arithmetic on sizes, strides and pointer values; none touches device memory or the CUDA
// runtime, so a rejected call leaves no trace on the device. Every product and sum is checked
// (checked.cuh): no input, however hostile, makes this code overflow, and an accepted call's
// arrays each fit 64-bit indexing in bytes and end inside the address space, so the sizes the
// dispatch derives from them (element counts, spans, tiles) cannot overflow either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "checked.cuh"
#include "scan_args.cuh"
#include "status.cuh"

namespace ascan {
namespace detail {

/// One dimension of a strided view: `size` positions `stride` elements apart.
struct Dim {
  int64_t size;
  int64_t stride;
};

/// Elements from the first to one past the last position of a view whose dims all have
/// size >= 1 and stride >= 0; false on overflow.
inline bool view_extent(const Dim* dims, int n, int64_t& extent) {
  extent = 1;
  for (int i = 0; i < n; ++i) {
    int64_t reach = 0;
    if (!mul_ok(dims[i].size - 1, dims[i].stride, reach) || !add_ok(extent, reach, extent))
      return false;
  }
  return true;
}

/// The set of element offsets a view covers, independent of which logical dimension is which:
/// its dims of more than one position, by descending stride. `nested` when each of them steps
/// over the whole reach of the dims below it (stride > reach below); then no two positions share
/// an element, every offset has one decomposition, and `reach[k]` is the largest offset of the
/// dims after k. Of a view whose extent fits int64_t (so no sum here overflows).
struct Layout {
  Dim dims[3] = {};
  int64_t reach[3] = {};
  int n = 0;
  bool nested = false;
};

inline Layout layout_of(const Dim* in, int count) {
  Layout l;
  for (int i = 0; i < count && i < 3; ++i)
    if (in[i].size > 1) l.dims[l.n++] = in[i];
  for (int i = 1; i < l.n; ++i)  // insertion sort: descending stride, then descending size
    for (int j = i; j > 0; --j) {
      const Dim a = l.dims[j - 1], b = l.dims[j];
      if (a.stride > b.stride || (a.stride == b.stride && a.size >= b.size)) break;
      l.dims[j - 1] = b;
      l.dims[j] = a;
    }
  l.nested = true;
  int64_t below = 0;  // the largest offset of the dims after k
  for (int k = l.n - 1; k >= 0; --k) {
    l.reach[k] = below;
    int64_t step = 0;
    if (l.dims[k].stride <= below || !mul_ok(l.dims[k].size - 1, l.dims[k].stride, step) ||
        !add_ok(below, step, below)) {
      l.nested = false;
      return l;
    }
  }
  return l;
}

inline bool same_layout(const Layout& x, const Layout& y) {
  if (x.n != y.n) return false;
  for (int k = 0; k < x.n; ++k)
    if (x.dims[k].size != y.dims[k].size || x.dims[k].stride != y.dims[k].stride) return false;
  return true;
}

/// True when `delta` is the difference of two offsets of the nested layout `l`: delta =
/// sum of d_k * stride_k with |d_k| < size_k. Dim by dim from the largest stride: the rest of
/// delta must lie within the reach of the dims below, which is shorter than the stride, so at
/// most two d_k (floor(delta / stride) and one more) are candidates. At most 2^3 leaves: O(1).
template <int kDim = 0>
bool differs_by(const Layout& l, int64_t delta) {
  if constexpr (kDim == 3) {
    return delta == 0;
  } else {
    if (kDim >= l.n) return delta == 0;
    const int64_t s = l.dims[kDim].stride, m = l.dims[kDim].size - 1, below = l.reach[kDim];
    int64_t q = delta / s, r = delta % s;  // s >= 1: a dim of size > 1 in a nested layout
    if (r < 0) {
      r += s;
      --q;
    }
    // d = q leaves r in [0, s); d = q + 1 leaves r - s in [-s, 0); any other d leaves more
    if (q >= -m && q <= m && r <= below && differs_by<kDim + 1>(l, r)) return true;
    return q >= -m - 1 && q < m && s - r <= below && differs_by<kDim + 1>(l, r - s);
  }
}

/// The address of a pointer as an unsigned 64-bit integer.
inline uint64_t address_of(const void* p) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
}

/// The highest address a pointer holds.
constexpr uint64_t kMaxAddress = static_cast<uint64_t>(UINTPTR_MAX);

/// A strided view in memory: the bytes [lo, hi) from its first element to one past its last
/// (hi does not wrap the address space), and the set of offsets it covers.
struct View {
  uint64_t lo = 0, hi = 0;
  Layout layout;
};

/// The view of `n` dims (sizes >= 1, strides >= 0) at `p`, elements of `bytes` bytes; false
/// when its extent in elements or in bytes leaves int64_t, or its end leaves the address space.
inline bool make_view(const void* p, const Dim* dims, int n, int64_t bytes, View& v) {
  int64_t extent = 0, extent_bytes = 0;
  if (!view_extent(dims, n, extent) || !mul_ok(extent, bytes, extent_bytes)) return false;
  v.lo = address_of(p);
  if (!add_ok(v.lo, static_cast<uint64_t>(extent_bytes), v.hi) || v.hi > kMaxAddress) return false;
  v.layout = layout_of(dims, n);
  return true;
}

/// Byte intervals [x_lo, x_hi) and [y_lo, y_hi) share a byte.
constexpr bool intervals_meet(uint64_t x_lo, uint64_t x_hi, uint64_t y_lo, uint64_t y_hi) {
  return x_lo < y_hi && y_lo < x_hi;
}

/// True when views x and y (elements of `bytes` bytes) may share an element. Exact when both
/// cover the same nested set of offsets (the same sizes and strides, in any dimension order:
/// an interleaved view such as out in the odd batches of the buffer whose even batches hold
/// gates, or two channel halves of one buffer); otherwise the conservative test of their byte
/// intervals (it may refuse views that interleave without sharing an element).
inline bool views_overlap(const View& x, const View& y, int64_t bytes) {
  if (!intervals_meet(x.lo, x.hi, y.lo, y.hi)) return false;
  if (!x.layout.nested || !same_layout(x.layout, y.layout)) return true;
  // The intervals meet, so |y.lo - x.lo| is below the longer one's bytes: it fits int64_t.
  const int64_t apart = y.lo >= x.lo ? static_cast<int64_t>(y.lo - x.lo)
                                     : -static_cast<int64_t>(x.lo - y.lo);
  // The elements at offsets o of x and p of y share a byte when |bytes * (o - p) - apart| <
  // bytes: o - p = q, or q + 1 when apart is not a whole number of elements.
  int64_t q = apart / bytes, r = apart % bytes;
  if (r < 0) {
    r += bytes;
    --q;
  }
  return differs_by(x.layout, q) || (r != 0 && differs_by(x.layout, q + 1));
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

/// Two arrays of shape `s` are one exactly: the same pointer and the same strides (over the
/// dimensions of more than one position; the stride of a dimension of size 1 is never used), so
/// that every position of one is the same position of the other.
inline bool same_view(const Shape& s, const NamedArray& x, const NamedArray& y) {
  return x.ptr == y.ptr &&
         (s.batch <= 1 || x.strides.batch_stride == y.strides.batch_stride) &&
         (s.channels <= 1 || x.strides.channel_stride == y.strides.channel_stride) &&
         (s.length <= 1 || x.strides.time_stride == y.strides.time_stride);
}

/// The checks every entry point makes on its (B, C, T) arrays: null pointers, strides,
/// alignment to the element type, extents that fit int64_t in elements and in bytes and end
/// inside the address space, outputs whose elements overlap. `views` gets each array's view.
/// Inputs may repeat elements (a stride of 0 broadcasts); outputs may not. Call on non-empty
/// shapes.
template <class T, size_t kN>
Status check_sequence_layout(const Shape& s, const NamedArray (&arrays)[kN], View (&views)[kN]) {
  for (const NamedArray& a : arrays)
    if (a.ptr == nullptr) return Status::invalid(a.null_message);
  int64_t sequences = 0, elements = 0;
  if (!mul_ok(s.batch, s.channels, sequences) || !mul_ok(sequences, s.length, elements))
    return Status::invalid("ascan: the shape's element count overflows 64-bit indexing");
  for (size_t i = 0; i < kN; ++i) {
    const NamedArray& a = arrays[i];
    if (a.strides.batch_stride < 0 || a.strides.channel_stride < 0 || a.strides.time_stride < 0)
      return Status::invalid("ascan: a stride of a sequence array is negative");
    if (address_of(a.ptr) % alignof(T) != 0)
      return Status::invalid("ascan: a pointer is not aligned to its element type");
    const Dim dims[3] = {{s.batch, a.strides.batch_stride},
                         {s.channels, a.strides.channel_stride},
                         {s.length, a.strides.time_stride}};
    if (!make_view(a.ptr, dims, 3, static_cast<int64_t>(sizeof(T)), views[i]))
      return Status::invalid(
          "ascan: the shape's extent overflows 64-bit indexing (or an array would end past the "
          "top of the address space)");
    if (a.output && !views[i].layout.nested)
      return Status::invalid(
          "ascan: the strides of an output make its elements overlap (each stride must step "
          "over the positions below it, and no stride may be 0 over more than one position)");
  }
  return Status::success();
}

/// The checks on a Packed description that need no device read: batch 1, a count that is not
/// negative, one offsets pointer, aligned, its count + 1 offsets inside 64-bit indexing and the
/// address space. `offsets` gets the offsets' bytes (empty without offsets).
inline Status check_packed(const Shape& s, const Packed& p, View& offsets) {
  offsets = View{};
  if (s.batch != 1)
    return Status::invalid("ascan: packed sequences need a shape of batch 1 (B = 1, T = total)");
  if (p.count < 0) return Status::invalid("ascan: the packed sequence count is negative");
  if (p.offsets32 != nullptr && p.offsets64 != nullptr)
    return Status::invalid("ascan: packed sequences take int32 or int64 offsets, not both");
  if (p.count > 0 && p.offsets32 == nullptr && p.offsets64 == nullptr)
    return Status::invalid("ascan: the packed sequence offsets (cu_seqlens) are null");
  if (p.count == 0 && s.length > 0 && s.channels > 0)
    return Status::invalid("ascan: packed sequences: count is 0 but the shape has elements");
  if (address_of(p.offsets32) % alignof(int32_t) != 0 ||
      address_of(p.offsets64) % alignof(int64_t) != 0)
    return Status::invalid("ascan: the packed sequence offsets are not aligned");
  if (p.count > 0) {
    const bool wide = p.offsets64 != nullptr;
    const void* o = wide ? static_cast<const void*>(p.offsets64) : p.offsets32;
    Dim dims[1] = {{0, 1}};
    if (!add_ok(p.count, int64_t{1}, dims[0].size) ||  // count + 1 offsets
        !make_view(o, dims, 1, wide ? int64_t{8} : int64_t{4}, offsets))
      return Status::invalid(
          "ascan: the packed sequence offsets (count + 1 of them) overflow 64-bit indexing or "
          "the address space");
  }
  return Status::success();
}

/// The shape whose (batch, channels) index the states: with packed sequences, (count, C).
inline Shape state_shape(const Shape& s, const Packed& p) {
  Shape t = s;
  if (p.active()) t.batch = p.count;
  return t;
}

/// The checks on the per-sequence state arrays `states` (any of them may be null; `views` gets
/// the view of each that is not): alignment, strides, extents in elements, bytes and the
/// address space, and, when `written` (an output) is not null, that its states do not overlap.
template <class T, size_t kN>
Status check_state_layout(const Shape& s, const StateLayout& layout,
                          const void* const (&states)[kN], const void* written,
                          View (&views)[kN]) {
  for (const void* p : states)
    if (address_of(p) % alignof(T) != 0)
      return Status::invalid("ascan: a state pointer is not aligned to its element type");
  if (layout.batch_stride < 0 || layout.channel_stride < 0)
    return Status::invalid("ascan: a stride of the state layout is negative");
  const Dim dims[2] = {{s.batch, layout.batch_stride}, {s.channels, layout.channel_stride}};
  for (size_t i = 0; i < kN; ++i) {
    views[i] = View{};
    if (states[i] != nullptr &&
        !make_view(states[i], dims, 2, static_cast<int64_t>(sizeof(T)), views[i]))
      return Status::invalid(
          "ascan: the state layout's extent overflows 64-bit indexing (or a state array would "
          "end past the top of the address space)");
  }
  if (written != nullptr && !layout_of(dims, 2).nested)
    return Status::invalid("ascan: the state layout makes the written states overlap");
  return Status::success();
}

}  // namespace detail

/// Checks the arguments of a forward scan without touching the device. Returns success for a
/// valid call (an empty shape is valid whatever the pointers) and kInvalidArgument with the
/// reason otherwise: negative sizes or strides, null pointers under a non-empty shape, pointers
/// not aligned to the element size, sizes, strides or pointers whose extent leaves 64-bit
/// indexing or the address space, an output whose elements overlap (a stride of 0 is allowed on
/// inputs only), `out` sharing an element with `gates` or partly overlapping `tokens` (the same
/// pointer with the same strides is the in-place scan), states overlapping each other or the
/// sequences (`final_state == initial_state` exactly is allowed: each state is read before it
/// is written), packed sequences on a shape of batch other than 1 or without offsets, or
/// offsets that overlap an output.
///
/// Overlap is decided exactly, in O(1), for two arrays of the same sizes and strides (in any
/// order of the dimensions): interleaved arrays that share no element, such as out in the odd
/// batches of a buffer whose even batches hold gates, are accepted. Arrays whose strides differ
/// are compared by the byte intervals they span, which may refuse some that interleave without
/// sharing an element.
template <class T>
Status can_implement(const ScanArgs<T>& args) {
  using detail::NamedArray;
  using detail::strides_of;
  using detail::View;
  constexpr int64_t kBytes = static_cast<int64_t>(sizeof(T));
  const Shape& s = args.shape;
  if (s.batch < 0 || s.channels < 0 || s.length < 0)
    return Status::invalid("ascan::scan: a size in the shape is negative");
  View offsets;
  if (args.packed.active()) {
    if (Status st = detail::check_packed(s, args.packed, offsets); !st.ok()) return st;
  }
  if (s.empty()) return Status::success();
  const NamedArray arrays[3] = {
      {args.gates, strides_of(s, args.gates_strides), false, "ascan::scan: gates is null"},
      {args.tokens, strides_of(s, args.tokens_strides), false, "ascan::scan: tokens is null"},
      {args.out, strides_of(s, args.out_strides), true, "ascan::scan: out is null"}};
  View v[3];
  if (Status st = detail::check_sequence_layout<T>(s, arrays, v); !st.ok()) return st;
  const View &gates = v[0], &tokens = v[1], &out = v[2];
  if (detail::views_overlap(out, gates, kBytes))
    return Status::invalid("ascan::scan: out overlaps gates");
  if (!detail::same_view(s, arrays[2], arrays[1]) && detail::views_overlap(out, tokens, kBytes))
    return Status::invalid(
        "ascan::scan: out partly overlaps tokens (an in-place scan needs out == tokens with the "
        "same strides)");
  if (detail::intervals_meet(offsets.lo, offsets.hi, out.lo, out.hi))
    return Status::invalid("ascan::scan: the packed sequence offsets overlap out");

  if (args.initial_state == nullptr && args.final_state == nullptr) return Status::success();
  const Shape ss = detail::state_shape(s, args.packed);
  const StateLayout layout = detail::resolve_state_layout(args.state_layout, ss);
  const void* const state_ptrs[2] = {args.initial_state, args.final_state};
  View sv[2];
  if (Status st = detail::check_state_layout<T>(ss, layout, state_ptrs, args.final_state, sv);
      !st.ok())
    return st;
  const View &init = sv[0], &fin = sv[1];
  if (args.final_state != nullptr) {
    if (detail::views_overlap(fin, out, kBytes) || detail::views_overlap(fin, gates, kBytes) ||
        detail::views_overlap(fin, tokens, kBytes))
      return Status::invalid("ascan::scan: final_state overlaps gates, tokens or out");
    if (args.initial_state != nullptr && args.initial_state != args.final_state &&
        detail::views_overlap(fin, init, kBytes))
      return Status::invalid(
          "ascan::scan: final_state partly overlaps initial_state (allowed only when equal)");
    if (detail::intervals_meet(offsets.lo, offsets.hi, fin.lo, fin.hi))
      return Status::invalid("ascan::scan: the packed sequence offsets overlap final_state");
  }
  if (args.initial_state != nullptr && detail::views_overlap(init, out, kBytes))
    return Status::invalid("ascan::scan: initial_state overlaps out");
  return Status::success();
}

/// Checks the arguments of a backward pass without touching the device: the same rules as the
/// forward scan's can_implement for the shape, the pointers, the extents and the states, and the
/// aliasing that ScanBackwardArgs documents. grad_gates may be exactly grad_out or exactly
/// states; grad_tokens exactly grad_out (exactly: the same pointer and the same strides);
/// grad_initial_state exactly initial_state or grad_final_state; any other element an output
/// shares with anything is kInvalidArgument. Overlap is decided as the forward's can_implement
/// says: exactly for arrays of the same sizes and strides (grad_gates and grad_tokens may be the
/// two channel halves of one (B, 2C, T) buffer), by byte intervals otherwise.
template <class T>
Status can_implement(const ScanBackwardArgs<T>& args) {
  using detail::NamedArray;
  using detail::strides_of;
  using detail::View;
  using detail::views_overlap;
  constexpr int64_t kBytes = static_cast<int64_t>(sizeof(T));
  const Shape& s = args.shape;
  if (s.batch < 0 || s.channels < 0 || s.length < 0)
    return Status::invalid("ascan::scan_backward: a size in the shape is negative");
  View offsets;
  if (args.packed.active()) {
    if (Status st = detail::check_packed(s, args.packed, offsets); !st.ok()) return st;
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
  View v[5];
  if (Status st = detail::check_sequence_layout<T>(s, arrays, v); !st.ok()) return st;
  const View &gates = v[0], &states = v[1], &grad_out = v[2], &grad_gates = v[3],
             &grad_tokens = v[4];
  if (views_overlap(grad_gates, gates, kBytes) || views_overlap(grad_tokens, gates, kBytes))
    return Status::invalid("ascan::scan_backward: a gradient output overlaps gates");
  if (views_overlap(grad_gates, grad_tokens, kBytes))
    return Status::invalid("ascan::scan_backward: grad_gates overlaps grad_tokens");
  if (!detail::same_view(s, arrays[3], arrays[2]) && views_overlap(grad_gates, grad_out, kBytes))
    return Status::invalid(
        "ascan::scan_backward: grad_gates partly overlaps grad_out (allowed only when equal)");
  if (!detail::same_view(s, arrays[3], arrays[1]) && views_overlap(grad_gates, states, kBytes))
    return Status::invalid(
        "ascan::scan_backward: grad_gates partly overlaps states (allowed only when equal)");
  if (!detail::same_view(s, arrays[4], arrays[2]) && views_overlap(grad_tokens, grad_out, kBytes))
    return Status::invalid(
        "ascan::scan_backward: grad_tokens partly overlaps grad_out (allowed only when equal)");
  if (views_overlap(grad_tokens, states, kBytes))
    return Status::invalid("ascan::scan_backward: grad_tokens overlaps states");
  if (detail::intervals_meet(offsets.lo, offsets.hi, grad_gates.lo, grad_gates.hi) ||
      detail::intervals_meet(offsets.lo, offsets.hi, grad_tokens.lo, grad_tokens.hi))
    return Status::invalid("ascan::scan_backward: the packed sequence offsets overlap a gradient");

  if (args.initial_state == nullptr && args.grad_final_state == nullptr &&
      args.grad_initial_state == nullptr)
    return Status::success();
  const Shape ss = detail::state_shape(s, args.packed);
  const StateLayout layout = detail::resolve_state_layout(args.state_layout, ss);
  const void* const state_ptrs[3] = {args.initial_state, args.grad_final_state,
                                     args.grad_initial_state};
  View sv[3];
  if (Status st =
          detail::check_state_layout<T>(ss, layout, state_ptrs, args.grad_initial_state, sv);
      !st.ok())
    return st;
  for (int i = 0; i < 2; ++i)  // initial_state, grad_final_state
    if (state_ptrs[i] != nullptr &&
        (views_overlap(sv[i], grad_gates, kBytes) || views_overlap(sv[i], grad_tokens, kBytes)))
      return Status::invalid(
          "ascan::scan_backward: initial_state or grad_final_state overlaps a gradient output");
  if (args.grad_initial_state != nullptr) {
    const View& dh0 = sv[2];
    for (const View& r : v)
      if (views_overlap(dh0, r, kBytes))
        return Status::invalid(
            "ascan::scan_backward: grad_initial_state overlaps a sequence array");
    for (int i = 0; i < 2; ++i)
      if (state_ptrs[i] != nullptr && state_ptrs[i] != args.grad_initial_state &&
          views_overlap(dh0, sv[i], kBytes))
        return Status::invalid(
            "ascan::scan_backward: grad_initial_state partly overlaps initial_state or "
            "grad_final_state (allowed only when equal)");
    if (detail::intervals_meet(offsets.lo, offsets.hi, dh0.lo, dh0.hi))
      return Status::invalid(
          "ascan::scan_backward: the packed sequence offsets overlap grad_initial_state");
  }
  return Status::success();
}

}  // namespace ascan
