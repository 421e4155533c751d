// bench/scan_bench.cu: ascan's forward scan and backward pass beside the physical limit and
// beside CUB.
//
// For every forward case of the grid (dtype, shape (B, C, T), direction) three rows:
//
//   copy/<dtype>/<B>x<C>x<T>   cudaMemcpyAsync of bytes / 2, bytes = 3 * N * sizeof(T): a copy that
//                              reads and writes what a forward scan must (gates, tokens in; out).
//   scan/<dtype>/<B>x<C>x<T>   ascan::scan.
//   cub/<dtype>/<B>x<C>x<T>    cub::DeviceScan::InclusiveScan over the flattened batch with the
//                              affine-pair operator: what a user gets from CUB alone.
//
// Forward cases with suffix /states pass an initial and a final state per sequence. For every
// backward case (suffix /bwd) a copy row of 5 * N * sizeof(T) / 2 bytes (read
// gates, states, grad_out; write grad_gates, grad_tokens) and a scan row (ascan::scan_backward).
// Scan rows call the two-phase entry points (size query, workspace allocated before timing), so
// the library's full dispatch runs: the few-long-sequence rows ((1, 1, 2^28), (1, 16, 2^22),
// (2, 4, 2^24), (1, 128, 2^20)) take the multi-block path where the dispatch picks it (its tile
// states need no zeroing outside a graph capture; device/agent/tile_lookback.cuh).
//
// Layout and packed-sequence rows (registered with the standard grid, f32 and bf16, forward and
// backward, each a copy row and a scan row as above, grouped so that --benchmark_filter='^layout/'
// or '^varlen/' selects them):
//
//   layout/{copy,scan}/<dtype>/channel_last/B<B>_T<T>_C<C>[/bwd]
//       the channel-last (B, T, C) layout, ascan::channel_last(B, T, C): (8, T, 1536) for T = 128,
//       1024, 8192, 65536; (4, 4096, 4096); (1, 2^20, 256); (16, 2048, 2048).
//   varlen/{copy,scan}/<dtype>/<layout>/<batch>_n<count>/T<total>_C<C>[/bwd]
//       packed variable-length sequences (args.packed, int32 cu_seqlens copied to the device once
//       when the row's buffers are set up) in the layouts channel_last, (total, C) =
//       ascan::channel_last(1, total, C), and time_contiguous, (C, total) =
//       ascan::time_contiguous(1, C, total). Two batches (varlen_cases):
//       loguniform: 2^22 tokens, lengths log-uniform in 1..16384 (std::mt19937_64, seed
//         kVarlenSeed), the last sequence trimmed so the total is exactly 2^22; 1024 channels
//         where the row's buffers fit in kVarlenBudget (bf16), else the largest power of two that
//         does (f32: 512).
//       skewed: one sequence of 2^22 tokens, then 1000 of length 1 (2^22 + 1000 tokens); 1024
//         channels if the row's buffers fit in kSkewedBudget, else 256 (f32 and bf16 alike: 256).
//     The channel count is in the row name. Bytes count as for every row: 3 N (forward) or 5 N
//     (backward) elements, N = total tokens * channels; no states.
//   These rows check the first and last sequence as every row does (for packed batches also the
//   longest sequence and the one after it), reading strided sequences through a device gather.
//
// --ascan_shapes=BxCxT[,BxCxT...] registers the forward and backward rows of those shapes (f32
// and bf16) in place of the standard grid: any shape, measured the same way.
//
// Sweeps: --ascan_tune registers the one-block candidate table (CandidateTable) on the
// standard grid (or on the --ascan_shapes given), and on sequences of more than 4096 elements the
// tile walk's candidates (LongCandidateTable, long_t<threads>_i<items>_m<min blocks>);
// --ascan_tune_multi registers the multi-block sweeps instead: path/... rows with
// each path forced on S sequences of 2^16 and 2^20 elements (the crossover recorded in
// LookbackTuning), on the short-tile shapes (short_grid) and on the sweep's cells of few long
// sequences (few_long_grid), and tune/... rows with each candidate tile shape of the multi-block
// kernel on the long rows and on those shapes.
//
// --ascan_sweep registers, in place of the standard grid (and of the layout and varlen rows),
// the efficiency map of issue 20: f32 and bf16, forward then backward, S sequences in {1, 4, 16,
// 64, 256, 1024, 4096, 16384, 65536} by T in {1, 7, 33, 100, 300, 700, 1500, 3000, 5000, 12000,
// 40000, 100000}, the cells of at most 2^28 elements (101 per dtype and pass), each the
// time-contiguous shape (1, S, T) with a copy row and a scan row as the grid's (sweep_cells):
//
//   sweep/{copy,scan}/<dtype>/S<S>_T<T>[/bwd]
//
// and, in the cells of at most 256 sequences of at least 3000 elements, where the dispatch
// chooses between one block per sequence and many, each path forced (sweep_both_paths):
//
//   sweep/path/<dtype>/S<S>_T<T>[/bwd]/{one_block,multi_block}
//
// f16 is left out: the library's tables are keyed on the element size, so f16 runs bf16's
// kernels (the grid keeps f16 on its seed rows only, for accelerated-scan's published figures).
// `python3 bench/report.py --heatmaps FILE... --out DIR` draws one heatmap per dtype and pass.
//
// --ascan_tune_windows registers, in place of the standard grid (and of --ascan_tune's and
// --ascan_shapes' rows), the packed time-contiguous varlen/ cases (f32 and bf16, forward and
// backward) with the window kernel in other shapes beside the library's (bench_windows.cuh):
// varlen/tune/<dtype>/time_contiguous/<batch>[/bwd]/w<KiB>k_t<threads>_m<min blocks>.
//
// --ascan_tune_rows registers, the same way, the channel-last layout/ cases and the packed
// channel-last varlen/ cases with the dense row kernel in other block shapes beside the library's
// (bench_dense.cuh): {layout,varlen}/tune/<dtype>/channel_last/<case>[/bwd]/t<threads>_r<rows>.
//
// Each scan and cub row (and each sweep row) times its own same-traffic copy paired with the
// operation: one copy sample beside each sample of the operation, each after its own L2 flush,
// so both see the same conditions, the copy first in even samples and second in odd ones
// (time_median, Pairing). No row uses another row's copy; the copy rows time the copy alone, as
// the device's rate for those bytes. A row reports
//
//   scan_us            time of the operation (CUB's, on a cub row), microseconds: the median of
//                      all samples, or on a paired row the mean of its two orders' medians
//   copy_us            time of the paired copy, the same way (a copy row: the copy alone's median)
//   efficiency         copy_us / scan_us: 1.0 is the limit
//   ratio_p10, _p90    10th and 90th percentile of the per-pair ratios copy / operation
//   copy_vs_alone      the paired copy's median over the case's copy row's (when that row ran)
//   copy_outlier       1 where copy_vs_alone is more than 10% off: the row's copy ran unlike the
//                      device's copy of those bytes, so its efficiency is suspect
//   bytes_per_second   bytes / median time
//
// Timing, and why it is not Google Benchmark's own loop. Version 1.7.1 reports per run the MEAN
// over its iterations; a median exists only across --benchmark_repetitions of such means, and every
// repetition would repeat the setup (gigabytes of allocation and fill). We want the median of
// single L2-cold launches, so each benchmark measures itself: kWarmup untimed launches, then `reps`
// launches, each preceded by a cudaMemsetAsync over a 256 MB buffer (the H200's L2 is 60 MB)
// outside the events that bracket it, all queued on one stream before a single synchronize (the
// flush also hides the host-side cost of queueing the next launch). The median is handed to
// SetIterationTime in exactly one iteration (Iterations(1), UseManualTime()), so the time column IS
// the row's time (the median; on a paired row the mean of its two orders' medians).
// --benchmark_min_time therefore has no effect on these rows; --ascan_reps=N sets the number of
// timed launches (default kDefaultReps, odd so an unpaired row's median is one sample). Google
// Benchmark appends "/iterations:1/manual_time" to every name; filters match the prefix as usual.
//
// After timing, the first and last sequence of the output are compared with a double loop over
// the same (rounded) inputs, so a broken kernel cannot show a fast number.
//
// Without a GPU every benchmark registers (--benchmark_list_tests lists the whole grid) and
// skips with "no CUDA device: ...". At the end, one summary line per case goes to stdout (to
// stderr when --benchmark_format asks stdout for json or csv).
//
// The source, one translation unit (this file includes the others):
//   bench_harness.cuh   element types, GPU state, L2 flush, time_median and Pairing, Workspace
//   bench_check.cuh     the check of the output against a double loop
//   bench_rows.cuh      the steps every row shares (run_measured), counters, summary
//   bench_cub.cuh       the CUB baseline
//   bench_grid.cuh      the standard grid and its copy/, scan/ and cub/ rows
//   bench_tuning.cuh    the --ascan_tune and --ascan_tune_multi sweeps
//   bench_windows.cuh   the --ascan_tune_windows rows
//   bench_dense.cuh     the --ascan_tune_rows rows
//   bench_layouts.cuh   the layout/ and varlen/ rows
//   bench_sweep.cuh     the --ascan_sweep rows (S x T)

#include "bench_dense.cuh"
#include "bench_grid.cuh"
#include "bench_harness.cuh"
#include "bench_layouts.cuh"
#include "bench_rows.cuh"
#include "bench_sweep.cuh"
#include "bench_tuning.cuh"
#include "bench_windows.cuh"

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// Adds the command line, the GPU, driver and runtime to the context block of the console and
// JSON output.
void add_context(const std::string& command) {
  benchmark::AddCustomContext("command", command);
  benchmark::AddCustomContext("timed_reps", std::to_string(g_gpu.reps));
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    benchmark::AddCustomContext("gpu", "none");
    return;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    benchmark::AddCustomContext("gpu", prop.name);
    benchmark::AddCustomContext("gpu_sms", std::to_string(prop.multiProcessorCount));
    benchmark::AddCustomContext("gpu_l2_mb", std::to_string(prop.l2CacheSize >> 20));
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  benchmark::AddCustomContext("cuda_driver", std::to_string(driver));
  benchmark::AddCustomContext("cuda_runtime", std::to_string(runtime));
}

}  // namespace

int main(int argc, char** argv) {
  // Our flags first (--ascan_reps=N), then Google Benchmark's; anything else is an error.
  bool summary_to_stderr = false;
  bool tune = false;
  bool tune_multi = false;      // the multi-block sweeps: path crossover and lookback tile shapes
  bool sweep = false;           // --ascan_sweep: the S x T rows in place of the standard grid
  bool tune_windows = false;    // --ascan_tune_windows: packed windows' shapes (bench_windows.cuh)
  bool tune_rows = false;       // --ascan_tune_rows: dense row blocks' shapes (bench_dense.cuh)
  std::vector<GridRow> shapes;  // --ascan_shapes: these rows in place of the standard grid
  // The command line as given, for the context block.
  std::string command = argv[0];
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strncmp(arg, "--ascan_reps=", 13) == 0) {
      const int reps = std::atoi(arg + 13);
      if (reps < 1) {
        std::fprintf(stderr, "--ascan_reps needs a positive count\n");
        return 2;
      }
      g_gpu.reps = reps;
      continue;
    }
    if (std::strncmp(arg, "--ascan_shapes=", 15) == 0) {
      for (const char* c = arg + 15; *c != '\0';) {
        long long b = 0, ch = 0, t = 0;
        int used = 0;
        if (std::sscanf(c, "%lldx%lldx%lld%n", &b, &ch, &t, &used) != 3 || b < 1 || ch < 1 ||
            t < 1) {
          std::fprintf(stderr, "--ascan_shapes takes BxCxT[,BxCxT...], positive sizes\n");
          return 2;
        }
        for (bool backward : {false, true})
          shapes.push_back({{b, ch, t}, {Dtype::kF32, Dtype::kBF16}, false, backward});
        c += used;
        if (*c == ',') ++c;
      }
      continue;
    }
    // the switches, each setting its flag
    const std::pair<const char*, bool*> switches[] = {{"--ascan_tune", &tune},
                                                      {"--ascan_tune_multi", &tune_multi},
                                                      {"--ascan_sweep", &sweep},
                                                      {"--ascan_tune_windows", &tune_windows},
                                                      {"--ascan_tune_rows", &tune_rows}};
    bool switched = false;
    for (const auto& [name, flag] : switches) {
      if (std::strcmp(arg, name) != 0) continue;
      *flag = true;
      switched = true;
    }
    if (switched) continue;
    if (std::strcmp(arg, "--benchmark_format=json") == 0 ||
        std::strcmp(arg, "--benchmark_format=csv") == 0)
      summary_to_stderr = true;
    argv[kept++] = argv[i];
  }
  argc = kept;

  // in place of the standard grid
  const bool sweep_only = tune_multi || sweep || tune_windows || tune_rows;
  for (Dtype d : {Dtype::kF32, Dtype::kBF16}) {
    if (!tune_windows && !tune_rows) break;
    with_dtype(d, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      if (tune_windows) register_windows<T>();
      if (tune_rows) register_dense_tuning<T>();
    });
  }
  for (Dtype d : {Dtype::kF32, Dtype::kBF16}) {
    if (!tune_multi) break;
    // the crossover, the short-tile shapes, the long rows, the tiny-tile shapes
    for (int sweep : {0, 1, 2, 3})
      for (const GridRow& row : sweep == 0   ? crossover_grid()
                                : sweep == 1 ? short_grid()
                                : sweep == 2 ? standard_grid()
                                             : few_long_grid()) {
        if (std::find(row.dtypes.begin(), row.dtypes.end(), d) == row.dtypes.end()) continue;
        if (sweep == 2 && row.shape.sequences() > 128) continue;  // the long rows only
        with_dtype(d, [&](auto* tag) {
          using T = std::remove_pointer_t<decltype(tag)>;
          register_multi_tuning<T>(row, sweep != 2, sweep != 0, sweep == 1 || sweep == 3);
        });
      }
  }
  // The sweep: dtype, pass, S, T in that order; a cell's copy and scan rows are adjacent (they
  // share its buffers).
  for (Dtype d : {Dtype::kF32, Dtype::kBF16}) {
    if (!sweep) break;
    with_dtype(d, [&](auto* tag) { register_sweep<std::remove_pointer_t<decltype(tag)>>(); });
  }
  for (Dtype d : {Dtype::kF32, Dtype::kBF16, Dtype::kF16}) {
    if (sweep_only) break;
    for (const GridRow& row : shapes.empty() ? standard_grid() : shapes) {
      if (std::find(row.dtypes.begin(), row.dtypes.end(), d) == row.dtypes.end()) continue;
      with_dtype(d, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        if (tune && row.states) return;
        if (tune)
          register_tuning<T>(row);
        else
          register_case<T>(row);
      });
    }
  }

  // The layout and varlen rows go with the standard grid; a case's forward and backward rows
  // are adjacent, so that they share its buffers.
  for (Dtype d : {Dtype::kF32, Dtype::kBF16}) {
    if (sweep_only || tune || !shapes.empty()) break;
    with_dtype(d, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      for (const auto& [group, cases] :
           {std::pair<const char*, std::vector<LayoutCase>>{"layout", layout_cases()},
            {"varlen", varlen_cases(sizeof(T))}})
        for (const LayoutCase& c : cases)
          for (bool backward : {false, true}) register_layout_case<T>(group, c, backward);
    });
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  add_context(command);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary(summary_to_stderr ? stderr : stdout);
  g_ws.release();
  gpu_teardown();
  return 0;
}
