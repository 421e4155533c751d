// ascan/device/scan.cuh: the host entry point of the forward scan.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "dispatch/dispatch.cuh"
#include "dispatch/flat_packed.cuh"
#include "dispatch/row_dispatch.cuh"
#include "dispatch/scan_kernels.cuh"
#include "dispatch/tuning.cuh"
#include "scan_args.cuh"
#include "status.cuh"
#include "validate.cuh"

namespace ascan {
namespace detail {

template <class T>
constexpr bool kIsScanType = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                             std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// Whether arrays of one shape can take the 16-byte vector path (all equally misaligned, so one
/// tile grid aligns them all), and the span bound of every sequence on that grid: the length
/// plus the largest lead in front of a sequence's first element.
template <class T>
int64_t tile_span_bound(const Shape& s, std::initializer_list<const void*> arrays, bool& vector) {
  const auto misalignment = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16; };
  const uintptr_t first = misalignment(*arrays.begin());
  vector = true;
  for (const void* q : arrays) vector = vector && misalignment(q) == first;
  if (!vector) return s.length;
  constexpr int64_t kVec = 16 / sizeof(T);
  // Strides in whole vectors give every sequence the base pointer's lead; otherwise leads vary
  // and a sequence may need up to kVec - 1 more elements of span.
  const bool same_lead = (s.batch == 1 || s.batch_stride % kVec == 0) &&
                         (s.channels == 1 || s.channel_stride % kVec == 0);
  return s.length + (same_lead ? static_cast<int64_t>(first / sizeof(T)) : kVec - 1);
}

/// The kernel parameters of a validated, non-empty call, and whether it can take the vector path.
template <class T>
ScanParams<T> make_params(const ScanArgs<T>& args, bool& vector) {
  const Shape& s = args.shape;
  const StateLayout st = resolve_state_layout(args.state_layout, s);
  const int64_t span = tile_span_bound<T>(s, {args.gates, args.tokens, args.out}, vector);
  return ScanParams<T>{
      args.gates,       args.tokens,      args.out,         s.sequences(), s.channels,
      s.batch_stride,   s.channel_stride, s.length,         span,          args.initial_state,
      args.final_state, st.batch_stride,  st.channel_stride};
}

/// Whether a call takes the row path (row_dispatch.cuh): packed sequences, a time stride other
/// than 1, or an array with strides of its own that differ from the shape's.
inline bool takes_row_path(const Shape& s, const Packed& packed,
                           std::initializer_list<const std::optional<Strides>*> own) {
  if (packed.active() || s.time_stride != 1) return true;
  const Strides shape{s.batch_stride, s.channel_stride, s.time_stride};
  for (const std::optional<Strides>* o : own)
    if (*o && !same_strides(**o, shape)) return true;
  return false;
}

/// Whether a packed call takes the flat kernel (FlatPackedForward, FlatPackedBackward): every
/// array time-contiguous with the shape's strides, a (1, C, total) tensor, and a total under 2^30
/// (a block's range is counted in int32). Packed channel-last calls take the row path.
inline bool packed_takes_flat(const Shape& s, const Packed& packed,
                              std::initializer_list<const std::optional<Strides>*> own) {
  if (!packed.active() || s.time_stride != 1 || s.batch != 1 || s.length > (int64_t{1} << 30))
    return false;
  const Strides shape{s.batch_stride, s.channel_stride, s.time_stride};
  for (const std::optional<Strides>* o : own)
    if (*o && !same_strides(**o, shape)) return false;
  return true;
}

/// The flat kernel's parameters of a packed call: `params` with the offsets and the states at
/// (count, C).
template <class Base>
PackedFlatParams<Base> packed_flat_params(const Base& params, const Shape& s, const Packed& packed,
                                          const StateLayout& layout) {
  PackedFlatParams<Base> q{};
  static_cast<Base&>(q) = params;
  const StateLayout st = resolve_state_layout(layout, state_shape(s, packed));
  q.state_batch_stride = st.batch_stride;
  q.state_channel_stride = st.channel_stride;
  q.offsets32 = packed.offsets32;
  q.offsets64 = packed.offsets64;
  q.count = packed.count;
  return q;
}

/// The row path's view of one array of a validated call.
template <class P>
RowArray<P> row_array(P* ptr, const Shape& s, const std::optional<Strides>& own, bool packed) {
  const Strides st = strides_of(s, own);
  return RowArray<P>{ptr, packed ? 0 : st.batch_stride, st.channel_stride, st.time_stride};
}

/// The row path's parameters shared by both passes: sizes, packing and states.
template <class T>
void fill_row_shape(RowParams<T>& p, const Shape& s, const Packed& packed,
                    const StateLayout& layout) {
  p.channels = s.channels;
  p.length = s.length;
  p.rows = s.batch * s.length;
  p.segments = packed.active() ? packed.count : s.batch;
  p.offsets32 = packed.offsets32;
  p.offsets64 = packed.offsets64;
  const StateLayout st = resolve_state_layout(layout, state_shape(s, packed));
  p.state_batch_stride = st.batch_stride;
  p.state_channel_stride = st.channel_stride;
}

/// The row path's parameters of a validated forward call, and whether every array lies on the
/// 16-byte vector grid (`vector`).
template <class T>
RowParams<T> make_row_params(const ScanArgs<T>& args, bool& vector) {
  const Shape& s = args.shape;
  const bool packed = args.packed.active();
  RowParams<T> p{};
  p.in[0] = row_array(args.gates, s, args.gates_strides, packed);
  p.in[1] = row_array(args.tokens, s, args.tokens_strides, packed);
  p.in[2] = p.in[0];
  p.out[0] = row_array(args.out, s, args.out_strides, packed);
  p.out[1] = p.out[0];
  fill_row_shape(p, s, args.packed, args.state_layout);
  p.state_in = args.initial_state;
  p.state_out = args.final_state;
  vector = row_vector_ok<T>(p.in[0], s.channels) && row_vector_ok<T>(p.in[1], s.channels) &&
           row_vector_ok<T>(p.out[0], s.channels);
  return p;
}

/// The forward scan on the row path.
template <class T>
Status scan_rows(const ScanArgs<T>& args, const Scratch& scratch, cudaStream_t stream, Path path) {
  bool vector = false;
  const RowParams<T> p = make_row_params(args, vector);
  return run_rows<T, false>(p, args.reverse, vector, path, scratch, stream);
}

/// The forward scan with the scratch, path and tables given (the public overloads below, the
/// tests and the benchmark all come here).
template <class T, class Table = ScanTuning<sizeof(T)>,
          class Lookback = LookbackTuning<sizeof(T), false>,
          class Flat = FlatTuning<sizeof(T), false>>
Status scan_with(const ScanArgs<T>& args, const Scratch& scratch, cudaStream_t stream,
                 Path path = Path::kAuto) {
  static_assert(kIsScanType<T>, "ascan::scan takes float, double, __half or __nv_bfloat16");
  if (Status st = can_implement(args); !st.ok()) return st;
  if (args.shape.empty()) {
    if (scratch.mode == Scratch::kQuery) *scratch.bytes = 1;
    return Status::success();
  }
  if ((path == Path::kAuto || path == Path::kFlat) &&
      packed_takes_flat(args.shape, args.packed,
                        {&args.gates_strides, &args.tokens_strides, &args.out_strides})) {
    bool vector = false;
    const auto p =
        packed_flat_params(make_params(args, vector), args.shape, args.packed, args.state_layout);
    return run_flat_packed<FlatPackedForward, FlatWindowForward, T, Flat>(p, args.reverse, vector,
                                                                          path, scratch, stream);
  }
  if (takes_row_path(args.shape, args.packed,
                     {&args.gates_strides, &args.tokens_strides, &args.out_strides})) {
    if (path == Path::kFlat)
      return Status::not_supported(
          "the flat path is for time-contiguous sequences (packed: under 2^30 times)");
    return scan_rows(args, scratch, stream, path);
  }
  bool vector = false;
  const ScanParams<T> p = make_params(args, vector);
  return run<ForwardProblem, FlatForward, T, Table, Lookback, Flat>(p, args.reverse, vector, path,
                                                                    scratch, stream);
}

}  // namespace detail

/// Forward (or reverse) scan of every sequence of `args.shape`:
///
///     out[t] = gates[t] * out[t-1] + tokens[t],  out[-1] = h0      (forward)
///     out[t] = gates[t] * out[t+1] + tokens[t],  out[T]  = h0      (reverse)
///
/// with h0 = initial_state (0 when null), and final_state set to out[T-1] (out[0] reversed) when
/// not null. T is float, double, __half or __nv_bfloat16; 16-bit types are scanned in float and
/// rounded once. Works for any length and any number of sequences, in place (out == tokens), and
/// on pointers of any alignment (16-byte-aligned ones take the vector path). Enqueued on
/// `stream`; no synchronization, no allocation. On invalid arguments (see can_implement) returns
/// the error and launches nothing; an empty shape succeeds and does nothing; a failed launch
/// returns kCudaError with the CUDA error, taken off the runtime's last-error slot.
///
/// Scratch memory. With few sequences (fewer than a few per multiprocessor) and more than one
/// tile of elements each, the scan splits every sequence over many blocks, joined through a
/// workspace (one 128-byte record per tile of 1024-8192 elements, by dtype; README.md). Three
/// ways to call it:
///   - scan(args, workspace, workspace_bytes, stream): CUB's two-phase rule. With a null
///     workspace the call sets workspace_bytes to the bytes it needs (at least 1; the same for
///     any pointers of the same shape) and launches nothing; then call again with that much.
///     A workspace smaller than needed is an error (kInvalidArgument). Its contents on entry do
///     not matter; it must stay untouched until the scan has run.
///   - scan(args, ascan::malloc_async, stream): takes the workspace from cudaMallocAsync on
///     `stream` and gives it back with cudaFreeAsync behind the kernel, only when it needs one.
///   - scan(args, stream): needs no workspace and never allocates; it always runs one block
///     per sequence, which for a few long sequences leaves most of the GPU idle.
/// Results are bitwise identical run after run on every path.
template <class T>
Status scan(const ScanArgs<T>& args, void* workspace, size_t& workspace_bytes,
            cudaStream_t stream = 0) {
  return detail::scan_with(args, detail::Scratch::two_phase(workspace, workspace_bytes), stream);
}

/// The forward scan with its workspace from cudaMallocAsync on `stream` (see above).
template <class T>
Status scan(const ScanArgs<T>& args, MallocAsync, cudaStream_t stream = 0) {
  return detail::scan_with(args, detail::Scratch{detail::Scratch::kMallocAsync}, stream);
}

/// The forward scan without a workspace: one block per sequence (see above).
template <class T>
Status scan(const ScanArgs<T>& args, cudaStream_t stream = 0) {
  return detail::scan_with(args, detail::Scratch{}, stream);
}

}  // namespace ascan
