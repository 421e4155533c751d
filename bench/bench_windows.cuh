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
/// fields as the library's (FlatTuning), which these rows do not run. A thread's marks are one
/// 64-bit word (ThreadMarks), so a shape takes elements of kBytes only where a thread holds at
/// most 64 of them (`fits`); the rows of the others are not registered.
template <int kThreads, int kWindowBytes, int kMinBlocks>
struct WindowCandidate {
  template <int kBytes>
  static constexpr bool fits = kWindowBytes / (kThreads * kBytes) <= 64;
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

// The candidates: first forward 16 KiB and backward 10 KiB at 128 threads and 6 blocks (the
// library's shapes before the runs of 6f3021d, and its f32 backward shape again since 255f763; its
// own are its `library` rows, FlatTuning), then
// other sizes, each with the blocks a multiprocessor's 228 KiB hold (1 KiB of them
// reserved per block). A stream's slots are its bytes, plus one slot of padding after every eight
// vectors where a thread's vectors read with fewer bank conflicts so (window_padded: 8, 12 or 16
// vectors a thread, not 5, 6 or 10); launch_flat_windows raises the shared memory allowance past
// 40 KiB of slots. Backward: 10 KiB at 7 blocks (30 KiB of slots; 72 registers, where f32 spills
// 24 bytes and bf16 56 on sm_90), 12 KiB (36 KiB, registers for 6 blocks; spills 12 and 20
// bytes), 16 KiB (54 KiB, 4) and 20 KiB (60 KiB, 3; f32 only); forward 16 KiB at 4 blocks (the
// best on f32 of 0aa4b95's runs), 24 KiB (54 KiB, 4) and 32 KiB (72 KiB, 3), both f32 only. (bf16's
// 16 KiB backward window, 64 elements a thread, reaches the 128 registers of 4 blocks and spills 16
// bytes on sm_90.) In 0aa4b95's runs smaller windows lost on every backward row and 256-thread
// blocks on every backward and bf16 row (bench/RESULTS.md, "Packed windows' sizes"). Last, 36 KiB
// of slots at 5 blocks both ways (16 KiB forward, 12 KiB backward): the 16-bit forward window's
// shared memory holds five blocks, not the six its launch bounds give up registers for (the
// backward window's holds six; layout_test's WindowResidency); at five ptxas gives the lean
// kernels 96 registers a thread where six give 80 (sm_90: no stack forward either way; backward a
// stack of 24-32 bytes either way). On an H100 they were no faster than the library's six: forward
// the same, backward slower, where 96 registers leave room for five blocks of the six its shared
// memory holds (bench/RESULTS.md, "Packed windows' sizes").
using ForwardWindows = std::tuple<WindowCandidate<128, 16384, 6>, WindowCandidate<128, 16384, 4>,
                                  WindowCandidate<128, 24576, 4>, WindowCandidate<128, 32768, 3>,
                                  WindowCandidate<128, 16384, 5>>;
using BackwardWindows = std::tuple<WindowCandidate<128, 10240, 6>, WindowCandidate<128, 10240, 7>,
                                   WindowCandidate<128, 12288, 6>, WindowCandidate<128, 16384, 4>,
                                   WindowCandidate<128, 20480, 3>, WindowCandidate<128, 12288, 5>>;

/// Candidate `Candidate`'s windows on packed case `c` (time-contiguous), launched directly as the
/// library launches its own (run_flat_packed: the workspace sized for the scalar path's windows).
template <class T, bool kBackward, class Candidate>
std::string measure_window(const LayoutCase& c, double* ms) {
  using Dir = Direction<T, kBackward>;
  using Flat = typename Candidate::template Flat<int(sizeof(T)), kBackward>;
  using C = ascan::compute_t<T>;
  namespace d = ascan::detail;
  const typename Dir::Args args = case_args<Dir>(c);
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

/// Every --ascan_tune_windows row of elements T: the packed time-contiguous cases, forward then
/// backward, each with its copy row, the library's row and every candidate's row.
template <class T>
void register_windows() {
  for (const LayoutCase& c : varlen_cases(sizeof(T)))
    if (c.layout == Layout::kTimeContiguous)
      for (bool backward : {false, true})
        register_candidates<T, ForwardWindows, BackwardWindows>(
            "varlen", c, backward, [c](auto candidate, auto direction, double* ms) {
              return measure_window<T, decltype(direction)::value, decltype(candidate)>(c, ms);
            });
}

}  // namespace
