// ascan/device/scan.cuh: the host entry point of the forward scan.
#pragma once

#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <type_traits>
#include <utility>

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

/// Launches the kernel of row `kRow` of `Table` with the direction and access path fixed.
template <class T, class Table, int kRow, bool kReverse, bool kVector>
cudaError_t launch_row(const ScanParams<T>& p, cudaStream_t stream) {
  constexpr ScanPolicy P = Table::kPolicies[kRow];
  constexpr int64_t kMaxGrid = INT_MAX;
  if constexpr (P.kind == KernelKind::kWarp) {
    const int64_t blocks = ceil_div(p.sequences, P.threads / P.lanes);
    constexpr bool kOneTile = P.max_span <= P.tile();
    warp_scan_kernel<T, P.threads, P.lanes, P.items, kReverse, kVector, kOneTile>
        <<<static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid), P.threads, 0, stream>>>(p);
  } else if constexpr (P.kind == KernelKind::kBlock) {
    block_scan_kernel<T, P.threads, P.items, kReverse, kVector>
        <<<static_cast<unsigned>(p.sequences < kMaxGrid ? p.sequences : kMaxGrid), P.threads, 0,
           stream>>>(p);
  } else {
    chunked_scan_kernel<T, P.threads, P.items, kReverse, kVector>
        <<<static_cast<unsigned>(p.sequences < kMaxGrid ? p.sequences : kMaxGrid), P.threads, 0,
           stream>>>(p);
  }
  return cudaGetLastError();
}

template <class T, class Table, bool kReverse, bool kVector, int... kRows>
cudaError_t launch_selected(int row, const ScanParams<T>& p, cudaStream_t stream,
                            std::integer_sequence<int, kRows...>) {
  cudaError_t e = cudaErrorInvalidValue;
  ((row == kRows ? (e = launch_row<T, Table, kRows, kReverse, kVector>(p, stream), 0) : 0), ...);
  return e;
}

/// Launches row `row` (a run-time index) of a dispatch table: ScanTuning<sizeof(T)> in the
/// library, candidate tables in the tuning benchmark.
template <class T, class Table = ScanTuning<sizeof(T)>>
cudaError_t launch_scan_row(int row, bool reverse, bool vector, const ScanParams<T>& p,
                            cudaStream_t stream) {
  using Rows = std::make_integer_sequence<int, Table::kCount>;
  if (reverse)
    return vector ? launch_selected<T, Table, true, true>(row, p, stream, Rows{})
                  : launch_selected<T, Table, true, false>(row, p, stream, Rows{});
  return vector ? launch_selected<T, Table, false, true>(row, p, stream, Rows{})
                : launch_selected<T, Table, false, false>(row, p, stream, Rows{});
}

/// The kernel parameters of a validated, non-empty call, and whether it can take the vector path.
template <class T>
ScanParams<T> make_params(const ScanArgs<T>& args, bool& vector) {
  const Shape& s = args.shape;
  const StateLayout st = resolve_state_layout(args.state_layout, s);
  ScanParams<T> p{args.gates,    args.tokens,      args.out,           s.sequences(),
                  s.channels,    s.batch_stride,   s.channel_stride,   s.length,
                  s.length,      args.initial_state, args.final_state, st.batch_stride,
                  st.channel_stride};
  // 16-byte vectors need gates, tokens and out equally misaligned, so that one tile grid aligns
  // all three.
  const auto addr = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16; };
  vector = addr(args.gates) == addr(args.tokens) && addr(args.gates) == addr(args.out);
  if (vector) {
    constexpr int64_t kVec = 16 / sizeof(T);
    // Strides in whole vectors give every sequence the base pointer's lead; otherwise leads vary
    // and each sequence may need up to kVec - 1 more elements of span.
    const bool same_lead = (s.batch == 1 || s.batch_stride % kVec == 0) &&
                           (s.channels == 1 || s.channel_stride % kVec == 0);
    p.span_bound = s.length + (same_lead ? static_cast<int64_t>(addr(args.gates) / sizeof(T))
                                         : kVec - 1);
  }
  return p;
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
template <class T>
Status scan(const ScanArgs<T>& args, cudaStream_t stream = 0) {
  static_assert(detail::kIsScanType<T>,
                "ascan::scan takes float, double, __half or __nv_bfloat16");
  if (Status st = can_implement(args); !st.ok()) return st;
  if (args.shape.empty()) return Status::success();
  bool vector = false;
  const detail::ScanParams<T> p = detail::make_params(args, vector);
  const int row = detail::select_policy<sizeof(T)>(p.span_bound);
  const cudaError_t e = detail::launch_scan_row(row, args.reverse, vector, p, stream);
  return e == cudaSuccess ? Status::success() : Status::cuda_error(e);
}

}  // namespace ascan
