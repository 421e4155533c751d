// bench/bench_windows.cuh: the --ascan_tune_windows rows. Packed time-contiguous calls (the
// varlen/ cases' (C, total) layout) run flat_window_kernel: each channel's row in windows of
// FlatPolicy::window_items a thread, joined by a look-back (dispatch/flat_packed.cuh). These rows
// run that kernel with other window shapes on the same calls, forward order, vector path, without
// states (as the varlen/ rows are), each paired with its copy and checked as every row is:
//
//   varlen/tune/<dtype>/time_contiguous/<batch>[/bwd]/w<KiB>k_t<threads>_m<min blocks>
//
// beside the library's own row of the same call (varlen/scan/...), to choose the windows' bytes
// and blocks (FlatTuning::kWindowItems, window_min_blocks). Included by scan_bench.cu only (its
// anonymous namespace).
#pragma once

#include "bench_harness.cuh"
#include "bench_layouts.cuh"
#include "bench_rows.cuh"

#include <ascan/ascan.cuh>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

namespace {

/// A window shape of `kThreads` threads, `kWindowBytes` bytes of each staged stream, and
/// `kMinBlocks` blocks per multiprocessor the registers must allow; the flat kernel's other
/// fields as the library's (FlatTuning), which these rows do not run.
template <int kThreads, int kWindowBytes, int kMinBlocks>
struct WindowCandidate {
  template <int kBytes, bool kBackward>
  struct Flat {
    static constexpr ascan::detail::FlatPolicy with_window() {
      ascan::detail::FlatPolicy F = ascan::detail::FlatTuning<kBytes, kBackward>::kPolicy;
      F.threads = kThreads;
      F.window_items = kWindowBytes / (kThreads * kBytes);
      F.window_min_blocks = kMinBlocks;
      return F;
    }
    static constexpr ascan::detail::FlatPolicy kPolicy = with_window();
    static_assert(kWindowBytes % (kThreads * 16) == 0, "whole 16-byte vectors a thread");
  };
  static std::string name() {
    return "w" + std::to_string(kWindowBytes / 1024) + "k_t" + std::to_string(kThreads) + "_m" +
           std::to_string(kMinBlocks);
  }
};

// The candidates; the library's shape first (forward 16 KiB, backward 10 KiB, 128 threads, 6
// blocks). A window's staged streams (forward 2, backward 3, with a slot of padding after every
// eight vectors) must fit the default 40 KiB (launch_flat_windows): forward windows of up to
// 16 KiB, backward up to 10 KiB.
using ForwardWindows = std::tuple<WindowCandidate<128, 16384, 6>, WindowCandidate<128, 8192, 6>,
                                  WindowCandidate<128, 12288, 6>, WindowCandidate<256, 16384, 3>,
                                  WindowCandidate<128, 16384, 4>>;
using BackwardWindows = std::tuple<WindowCandidate<128, 10240, 6>, WindowCandidate<128, 4096, 8>,
                                   WindowCandidate<128, 8192, 6>, WindowCandidate<256, 8192, 3>,
                                   WindowCandidate<128, 8192, 4>>;

/// Candidate `Candidate`'s windows on packed case `c` (time-contiguous), launched directly as the
/// library launches its own (run_flat_packed: the workspace sized for the scalar path's windows).
template <class T, bool kBackward, class Candidate>
std::string measure_window(const LayoutCase& c, double* ms) {
  using Dir = Direction<T, kBackward>;
  using Flat = typename Candidate::template Flat<int(sizeof(T)), kBackward>;
  using C = ascan::compute_t<T>;
  namespace d = ascan::detail;
  typename Dir::Args args = Dir::args(c.extent, false, false);
  args.shape = c.shape();
  args.packed = ascan::packed(static_cast<const int32_t*>(g_ws.offsets), c.count());
  if (const ascan::Status st = ascan::can_implement(args); !st.ok()) return st.message;
  // the case's arrays share the shape's strides (no per-array strides)
  if (!d::packed_takes_flat(args.shape, args.packed, {}))
    return "not a packed time-contiguous call the windows take";
  bool vector = false;
  const auto p =
      d::packed_flat_params(Dir::params(args, vector), args.shape, args.packed, args.state_layout);
  if (!vector) return "not on the 16-byte vector grid: the candidates run the vector path";
  const double ranges =
      double(p.channels) *
      double(d::packed_windows(p.length, d::window_elements<T>(Flat::kPolicy, false), 1));
  if (ranges > double(d::kMaxTiles)) return "too many windows for one grid";
  if (std::string err = ensure_scratch(d::RowStates<C>::bytes(int64_t(ranges), 1)); !err.empty())
    return err;
  using Windows = std::conditional_t<kBackward, d::FlatWindowBackward<T, false, true>,
                                     d::FlatWindowForward<T, false, true>>;
  return time_median(
      [&] {
        return cuda_check(d::launch_flat_windows<Windows, Flat>(p, g_ws.scratch, g_gpu.stream),
                          "launch_flat_windows");
      },
      ms);
}

/// The copy row, the library's row and every candidate's row of packed time-contiguous case `c`.
template <class T>
void register_window_case(const LayoutCase& c, bool backward) {
  const std::string tail =
      std::string(DtypeInfo<T>::kName) + "/" + c.name + (backward ? "/bwd" : "");
  const std::string case_name = "varlen/" + tail;
  g_case_order.push_back(case_name);
  for (Op op : {Op::kCopy, backward ? Op::kBackward : Op::kScan})
    register_row(std::string("varlen") + (op == Op::kCopy ? "/copy/" : "/scan/") + tail,
                 [=](benchmark::State& st) { run_layout_row<T>(st, op, case_name, c, backward); });
  auto each = [&](auto candidates, auto direction) {
    constexpr bool kBackward = decltype(direction)::value;
    std::apply(
        [&](auto... candidate) {
          (register_row(
               "varlen/tune/" + tail + "/" + decltype(candidate)::name(),
               [=](benchmark::State& st) {
                 const std::string key = std::string(DtypeInfo<T>::kName) + "/" + c.buffers;
                 const RowCase row{key, c.extent, c.offsets.get(), false, kBackward, false};
                 run_measured<T>(
                     st, Op::kTune, case_name, row,
                     [&](double* ms) {
                       return measure_window<T, kBackward, decltype(candidate)>(c, ms);
                     },
                     [&] { return c.check_seqs(); });
               }),
           ...);
        },
        candidates);
  };
  if (backward)
    each(BackwardWindows{}, std::true_type{});
  else
    each(ForwardWindows{}, std::false_type{});
}

/// Every --ascan_tune_windows row of elements T: the packed time-contiguous cases, forward then
/// backward.
template <class T>
void register_windows() {
  for (const LayoutCase& c : varlen_cases(sizeof(T)))
    if (c.layout == Layout::kTimeContiguous)
      for (bool backward : {false, true}) register_window_case<T>(c, backward);
}

}  // namespace
