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
//       ascan::time_contiguous(1, C, total). Two batches (varlen_cases below):
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
// Sweeps: --ascan_tune registers the one-block candidate table (CandidateTable below) on the
// standard grid; --ascan_tune_multi registers the multi-block sweeps instead: path/... rows with
// each path forced on S sequences of 2^16 and 2^20 elements (the crossover recorded in
// LookbackTuning) and on the short-tile shapes (short_grid), and tune/... rows with each
// candidate tile shape of the multi-block kernel on the long rows and on the short-tile shapes.
//
// Each scan and cub row (and each sweep row) times its own same-traffic copy paired with the
// operation: one copy sample before each sample of the operation, each after its own L2 flush,
// so both see the same conditions (time_median, Pairing). No row uses another row's copy; the
// copy rows time the copy alone, as the device's rate for those bytes. A row reports
//
//   scan_us            median time of the operation (CUB's, on a cub row), microseconds
//   copy_us            median time of the paired copy (a copy row: of the copy alone)
//   efficiency         copy_us / scan_us, the ratio of the two medians: 1.0 is the limit
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
// the median. --benchmark_min_time therefore has no effect on these rows; --ascan_reps=N sets the
// number of timed launches (default kDefaultReps, odd so the median is one sample). Google
// Benchmark appends "/iterations:1/manual_time" to every name; filters match the prefix as usual.
//
// After timing, the first and last sequence of the output are compared with a double loop over
// the same (rounded) inputs, so a broken kernel cannot show a fast number.
//
// Without a GPU every benchmark registers (--benchmark_list_tests lists the whole grid) and
// skips with "no CUDA device: ...". At the end, one summary line per case goes to stdout (to
// stderr when --benchmark_format asks stdout for json or csv).

#include <ascan/ascan.cuh>

#include <benchmark/benchmark.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// The grid. One row is a shape, the dtypes it runs in, and a direction; every (row, dtype) pair
// becomes one case (copy, scan and cub rows).

enum class Dtype { kF32, kBF16, kF16 };

struct Extent {
  int64_t batch;
  int64_t channels;
  int64_t length;
  int64_t elements() const { return batch * channels * length; }
  int64_t sequences() const { return batch * channels; }
};

struct GridRow {
  Extent shape;
  std::vector<Dtype> dtypes;
  bool reverse = false;
  bool backward = false;  ///< the backward pass (5 streams) instead of the forward scan
  bool states = false;    ///< forward with initial_state and final_state (2 more (B, C) arrays)
};

std::vector<GridRow> standard_grid() {
  const std::vector<Dtype> all = {Dtype::kF32, Dtype::kBF16, Dtype::kF16};
  const std::vector<Dtype> f32_bf16 = {Dtype::kF32, Dtype::kBF16};
  std::vector<GridRow> grid;
  // Seed grid: accelerated-scan's published benchmark, so results compare directly.
  for (int k = 7; k <= 16; ++k) grid.push_back({{8, 1536, int64_t{1} << k}, all});
  // Odd lengths: no power-of-two tiling to lean on.
  grid.push_back({{8, 1536, 1000}, f32_bf16});
  grid.push_back({{8, 1536, 50000}, f32_bf16});
  // Reverse direction, one length.
  grid.push_back({{8, 1536, 4096}, f32_bf16, /*reverse=*/true});
  // The forward scan with an initial and a final state per sequence.
  for (int k : {7, 12, 16})
    grid.push_back({{8, 1536, int64_t{1} << k}, f32_bf16, false, false, true});
  // The backward pass over the same shapes (not the states rows).
  const size_t forward_rows = grid.size() - 3;
  for (size_t i = 0; i < forward_rows; ++i) {
    GridRow row = grid[i];
    row.backward = true;
    grid.push_back(row);
  }
  // Few long sequences (the multi-block path), forward and backward.
  for (bool backward : {false, true})
    for (Extent e : {Extent{1, 1, int64_t{1} << 28}, Extent{1, 16, int64_t{1} << 22},
                     Extent{2, 4, int64_t{1} << 24}, Extent{1, 128, int64_t{1} << 20}})
      grid.push_back({e, f32_bf16, false, backward});
  return grid;
}

/// The shapes of the short-tile sweep (--ascan_tune_multi): few sequences that make few of the
/// multi-block path's tiles (LookbackTuning::kShortPolicy), forward and backward.
std::vector<GridRow> short_grid() {
  const std::vector<Dtype> f32_bf16 = {Dtype::kF32, Dtype::kBF16};
  std::vector<GridRow> grid;
  for (bool backward : {false, true})
    for (Extent e : {Extent{1, 8, int64_t{1} << 16}, Extent{1, 32, int64_t{1} << 16},
                     Extent{1, 128, int64_t{1} << 16}, Extent{1, 8, int64_t{1} << 18},
                     Extent{1, 32, int64_t{1} << 18}, Extent{1, 4, int64_t{1} << 20}})
      grid.push_back({e, f32_bf16, false, backward});
  return grid;
}

/// The shapes of the path crossover sweep (--ascan_tune): S sequences of 2^16 elements around
/// the one-block path's fill of the GPU (132 SMs), both paths forced.
std::vector<GridRow> crossover_grid() {
  const std::vector<Dtype> f32_bf16 = {Dtype::kF32, Dtype::kBF16};
  std::vector<GridRow> grid;
  for (bool backward : {false, true})
    for (int64_t s : {132, 264, 396, 528, 792, 1056, 2112})
      grid.push_back({{1, s, int64_t{1} << 16}, f32_bf16, false, backward});
  for (bool backward : {false, true})
    for (int64_t s : {16, 128, 528})
      grid.push_back({{1, s, int64_t{1} << 20}, f32_bf16, false, backward});
  return grid;
}

constexpr int kWarmup = 3;
constexpr int kDefaultReps = 51;
constexpr size_t kFlushBytes = size_t{256} << 20;

// ---------------------------------------------------------------------------------------------
// Element types.

template <class T>
struct DtypeInfo;
template <>
struct DtypeInfo<float> {
  static constexpr const char* kName = "f32";
  static constexpr double kTolerance = 1e-3;
};
template <>
struct DtypeInfo<__nv_bfloat16> {
  static constexpr const char* kName = "bf16";
  static constexpr double kTolerance = 1e-2;
};
template <>
struct DtypeInfo<__half> {
  static constexpr const char* kName = "f16";
  static constexpr double kTolerance = 1e-2;
};

// Calls f with a value of type T* (null) for the runtime dtype, so one generic lambda covers all.
template <class F>
void with_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::kF32:
      f(static_cast<float*>(nullptr));
      break;
    case Dtype::kBF16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      break;
    case Dtype::kF16:
      f(static_cast<__half*>(nullptr));
      break;
  }
}

template <class T>
__host__ __device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else {
    return static_cast<T>(x);
  }
}

template <class T>
__host__ __device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else {
    return static_cast<float>(x);
  }
}

// ---------------------------------------------------------------------------------------------
// Device-side fill: a counter-based hash, so any element's value is a function of (seed, index)
// and the fill runs at memory speed.

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Fills p[0, n) with lo + (hi - lo) * u, u uniform in [0, 1) on a 2^-24 grid, clamped below hi in
// float. 16-bit storage rounds to nearest afterwards: bf16 gates in [0.999, 1) become 1.0 (its
// spacing below 1 is 2^-8), f16 gates one of {0.99902, 0.99951, 1.0}. The reference check reads the
// rounded values back, so it compares like with like.
template <class T>
__global__ void fill_uniform(T* p, int64_t n, float lo, float hi, uint64_t seed) {
  const float below_hi = nextafterf(hi, lo);
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t h = splitmix64(seed * 0xD1B54A32D192ED03ull + static_cast<uint64_t>(i));
    const float u = static_cast<float>(h >> 40) * 0x1.0p-24f;
    p[i] = from_float<T>(fminf(lo + (hi - lo) * u, below_hi));
  }
}

// dst[i] = src[i * stride] for i in [0, n): one strided sequence gathered for the checks.
template <class T>
__global__ void gather_strided(T* dst, const T* src, int64_t stride, int64_t n) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i] = src[i * stride];
}

// ---------------------------------------------------------------------------------------------
// CUB baseline pieces. Element i is the pair (a_i, b_i) in float, with a_i = 0 where i starts a
// sequence so that no state crosses from one sequence into the next. compose(earlier, later) =
// (a1 * a2, a2 * b1 + b2); CUB's InclusiveScan calls op(accumulated_prefix, next), earlier on the
// left. The index is 32-bit: a careful user's choice (a 64-bit modulo per element costs more), and
// ample for every shape here; larger N skips with a message.

struct CubPair {
  float a;
  float b;
};

template <class T>
struct CubLoad {
  const T* gates;
  const T* tokens;
  uint32_t length;
  __host__ __device__ CubPair operator()(uint32_t i) const {
    return {i % length == 0 ? 0.0f : to_float(gates[i]), to_float(tokens[i])};
  }
};

struct CubCompose {
  __host__ __device__ CubPair operator()(const CubPair& earlier, const CubPair& later) const {
    return {earlier.a * later.a, later.a * earlier.b + later.b};
  }
};

template <class T>
struct CubStore {
  __host__ __device__ T operator()(const CubPair& p) const { return from_float<T>(p.b); }
};

template <class T>
auto cub_input(const T* gates, const T* tokens, uint32_t length) {
  return thrust::make_transform_iterator(thrust::counting_iterator<uint32_t>(0),
                                         CubLoad<T>{gates, tokens, length});
}

template <class T>
auto cub_output(T* out) {
  return thrust::make_transform_output_iterator(out, CubStore<T>{});
}

// ---------------------------------------------------------------------------------------------
// Process-wide GPU state, set up on the first benchmark that runs (so --benchmark_list_tests
// never touches the GPU), and an error string for CUDA calls: empty means success.

std::string cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return std::string(what) + ": " + cudaGetErrorString(e);
}

struct Gpu {
  bool initialized = false;
  std::string error;  // why no benchmark can run; non-empty once set
  cudaStream_t stream = nullptr;
  void* flush = nullptr;
  std::vector<cudaEvent_t> start, stop;
  std::vector<cudaEvent_t> copy_start, copy_stop;  // the paired copy's samples
  int reps = kDefaultReps;
};
Gpu g_gpu;

// Sets up the stream, the events and the flush buffer once. Returns the reason for failure.
const std::string& gpu_setup() {
  if (g_gpu.initialized) return g_gpu.error;
  g_gpu.initialized = true;
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    g_gpu.error = std::string("no CUDA device: ") +
                  (e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    cudaGetLastError();
    return g_gpu.error;
  }
  std::string err = cuda_check(cudaSetDevice(0), "cudaSetDevice");
  if (err.empty())
    err = cuda_check(cudaStreamCreateWithFlags(&g_gpu.stream, cudaStreamNonBlocking),
                     "cudaStreamCreate");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_gpu.flush, kFlushBytes), "cudaMalloc(flush)");
  for (auto* events : {&g_gpu.start, &g_gpu.stop, &g_gpu.copy_start, &g_gpu.copy_stop}) {
    events->resize(g_gpu.reps);
    for (int i = 0; err.empty() && i < g_gpu.reps; ++i)
      err = cuda_check(cudaEventCreate(&(*events)[i]), "cudaEventCreate");
  }
  if (!err.empty()) g_gpu.error = "CUDA setup failed: " + err;
  return g_gpu.error;
}

void gpu_teardown() {
  if (!g_gpu.initialized || !g_gpu.error.empty()) return;
  for (cudaEvent_t e : g_gpu.start) cudaEventDestroy(e);
  for (cudaEvent_t e : g_gpu.stop) cudaEventDestroy(e);
  cudaFree(g_gpu.flush);
  cudaStreamDestroy(g_gpu.stream);
}

/// The same-traffic copy paired with the operation a row times: while `copy_bytes` is set,
/// time_median takes one sample of that copy before each sample of the operation, each after its
/// own L2 flush, so both see the same conditions; it leaves the copy's median and the 10th and
/// 90th percentiles of the per-pair ratios (copy / operation) here.
struct Pairing {
  size_t copy_bytes = 0;  ///< 0: not paired
  void* copy_dst = nullptr;
  const void* copy_src = nullptr;
  double copy_ms = NAN;
  double ratio_p10 = NAN, ratio_p90 = NAN;
};
Pairing g_pair;

double median_of(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : 0.5 * (double(v[mid - 1]) + double(v[mid]));
}

// Times `launch` (a callable returning an error string) as described at the top of the file and
// writes the median in milliseconds; paired with a copy where g_pair says so.
template <class Launch>
std::string time_median(const Launch& launch, double* median_ms) {
  cudaStream_t s = g_gpu.stream;
  const size_t copy_bytes = g_pair.copy_bytes;
  const auto copy = [&] {
    return cuda_check(cudaMemcpyAsync(g_pair.copy_dst, g_pair.copy_src, copy_bytes,
                                      cudaMemcpyDeviceToDevice, s),
                      "cudaMemcpyAsync(paired copy)");
  };
  const auto flush = [&](int i) {
    return cuda_check(cudaMemsetAsync(g_gpu.flush, i & 0xFF, kFlushBytes, s), "flush");
  };
  std::string err;
  for (int i = 0; err.empty() && i < kWarmup; ++i) {
    err = flush(i);
    if (err.empty()) err = launch();
  }
  for (int i = 0; err.empty() && i < g_gpu.reps; ++i) {
    if (copy_bytes > 0) {
      err = flush(i);
      if (err.empty()) err = cuda_check(cudaEventRecord(g_gpu.copy_start[i], s), "cudaEventRecord");
      if (err.empty()) err = copy();
      if (err.empty()) err = cuda_check(cudaEventRecord(g_gpu.copy_stop[i], s), "cudaEventRecord");
    }
    if (err.empty()) err = flush(i);
    if (err.empty()) err = cuda_check(cudaEventRecord(g_gpu.start[i], s), "cudaEventRecord");
    if (err.empty()) err = launch();
    if (err.empty()) err = cuda_check(cudaEventRecord(g_gpu.stop[i], s), "cudaEventRecord");
  }
  // Synchronize even after a failed launch, so no work of this case outlives its buffers.
  std::string sync_err = cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (!err.empty()) return err;
  if (!sync_err.empty()) return sync_err;
  std::vector<float> ms(g_gpu.reps), copy_ms(copy_bytes > 0 ? g_gpu.reps : 0);
  for (int i = 0; i < g_gpu.reps; ++i) {
    err = cuda_check(cudaEventElapsedTime(&ms[i], g_gpu.start[i], g_gpu.stop[i]),
                     "cudaEventElapsedTime");
    if (err.empty() && copy_bytes > 0)
      err = cuda_check(cudaEventElapsedTime(&copy_ms[i], g_gpu.copy_start[i], g_gpu.copy_stop[i]),
                       "cudaEventElapsedTime");
    if (!err.empty()) return err;
  }
  *median_ms = median_of(ms);
  if (copy_bytes > 0) {
    std::vector<float> ratio(g_gpu.reps);
    for (int i = 0; i < g_gpu.reps; ++i) ratio[i] = copy_ms[i] / ms[i];
    std::sort(ratio.begin(), ratio.end());
    const size_t last = ratio.size() - 1;
    g_pair.copy_ms = median_of(copy_ms);
    g_pair.ratio_p10 = ratio[last / 10];
    g_pair.ratio_p90 = ratio[last - last / 10];
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// The buffers of one case, kept while consecutive benchmarks share (dtype, shape), freed when the
// case changes: at most one case's memory is held at a time.

struct Workspace {
  std::string key;
  int64_t n = 0;
  void* gates = nullptr;
  void* tokens = nullptr;
  void* out = nullptr;
  void* grad = nullptr;   // backward: upstream gradient g
  void* grad2 = nullptr;  // backward: grad_tokens (out holds grad_gates)
  void* h0 = nullptr;     // states rows: initial state per sequence
  void* final = nullptr;  // states rows: final state per sequence
  void* copy_src = nullptr;
  void* copy_dst = nullptr;
  size_t copy_bytes = 0;
  void* cub_temp = nullptr;
  size_t cub_temp_bytes = 0;
  void* scratch = nullptr;  // ascan's workspace (multi-block tile states)
  size_t scratch_bytes = 0;
  int32_t* offsets = nullptr;  // varlen rows: the packed batch's cu_seqlens (count + 1)

  void release() {
    for (void* p : {gates, tokens, out, grad, grad2, h0, final, copy_src, copy_dst, cub_temp,
                    scratch, static_cast<void*>(offsets)})
      cudaFree(p);
    *this = Workspace{};
  }
};
Workspace g_ws;

// Buffers of a case of `shape`; `offsets`, when given, are copied to g_ws.offsets (varlen rows).
// Keep workspace_bytes below in step with what this allocates.
template <class T>
std::string workspace_for(const std::string& key, const Extent& shape,
                          const std::vector<int32_t>* offsets = nullptr) {
  if (g_ws.key == key) return {};
  g_ws.release();
  const int64_t n = shape.elements();
  const size_t bytes = size_t(n) * sizeof(T);
  // The copy buffers fit the larger of the two same-traffic copies: the backward pass moves
  // 5 * N * sizeof(T) (read a, x, g; write da, db), so 5 * bytes / 2 copied.
  const size_t copy_bytes = 5 * bytes / 2;
  std::string err = cuda_check(cudaMalloc(&g_ws.gates, bytes), "cudaMalloc(gates)");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.tokens, bytes), "cudaMalloc(tokens)");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.out, bytes), "cudaMalloc(out)");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.grad, bytes), "cudaMalloc(grad)");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.grad2, bytes), "cudaMalloc(grad2)");
  const size_t state_bytes = size_t(shape.sequences()) * sizeof(T);
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.h0, state_bytes), "cudaMalloc(h0)");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.final, state_bytes), "cudaMalloc(final)");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.copy_src, copy_bytes), "cudaMalloc(copy)");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.copy_dst, copy_bytes), "cudaMalloc(copy)");
  if (err.empty() && offsets != nullptr) {
    const size_t offset_bytes = offsets->size() * sizeof(int32_t);
    err = cuda_check(cudaMalloc(&g_ws.offsets, offset_bytes), "cudaMalloc(offsets)");
    if (err.empty())
      err = cuda_check(
          cudaMemcpy(g_ws.offsets, offsets->data(), offset_bytes, cudaMemcpyHostToDevice),
          "cudaMemcpy(offsets)");
  }
  if (err.empty()) {
    cudaStream_t s = g_gpu.stream;
    fill_uniform<<<4096, 256, 0, s>>>(static_cast<T*>(g_ws.gates), n, 0.999f, 1.0f, 1);
    fill_uniform<<<4096, 256, 0, s>>>(static_cast<T*>(g_ws.tokens), n, 0.0f, 1.0f, 2);
    fill_uniform<<<4096, 256, 0, s>>>(static_cast<T*>(g_ws.grad), n, 0.0f, 1.0f, 3);
    fill_uniform<<<4096, 256, 0, s>>>(static_cast<T*>(g_ws.h0), shape.sequences(), 0.0f, 1.0f, 4);
    err = cuda_check(cudaGetLastError(), "fill_uniform");
    if (err.empty())
      err = cuda_check(cudaMemsetAsync(g_ws.copy_src, 0x3C, copy_bytes, s), "memset");
    if (err.empty()) err = cuda_check(cudaStreamSynchronize(s), "fill");
  }
  if (!err.empty()) {
    g_ws.release();
    cudaGetLastError();  // an out-of-memory here must not fail the next case
    return err;
  }
  g_ws.key = key;
  g_ws.n = n;
  g_ws.copy_bytes = copy_bytes;
  return {};
}

/// The device memory workspace_for allocates for a case of `elements` elements in `sequences`
/// sequences with `offset_count` cu_seqlens, plus the flush buffer held for the whole run; ascan's
/// own workspace (multi-block tile states, if the path needs them) comes on top.
constexpr size_t workspace_bytes(int64_t elements, int64_t sequences, size_t elem_bytes,
                                 int64_t offset_count = 0) {
  const size_t bytes = size_t(elements) * elem_bytes;
  return 5 * bytes + 2 * (5 * bytes / 2) + 2 * size_t(sequences) * elem_bytes +
         size_t(offset_count) * sizeof(int32_t) + kFlushBytes;
}

/// One sequence as the checks read it: `length` steps from element `base`, `stride` elements
/// apart. `id` names it in messages and indexes the states rows' initial and final state.
struct SeqRef {
  int64_t id;
  int64_t base;
  int64_t stride;
  int64_t length;
};

/// The first and last sequence of a time-contiguous (B, C, T) case.
std::vector<SeqRef> contiguous_ends(const Extent& shape) {
  const int64_t last = shape.sequences() - 1;
  return {{0, 0, 1, shape.length}, {last, last * shape.length, 1, shape.length}};
}

/// Device staging for the strided sequences of a check (none when all are contiguous).
struct Staging {
  void* p = nullptr;
  Staging() = default;
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging() { cudaFree(p); }
  template <class T>
  std::string reserve(const std::vector<SeqRef>& seqs) {
    int64_t longest = 0;
    for (const SeqRef& s : seqs)
      if (s.stride != 1) longest = std::max(longest, s.length);
    if (longest == 0) return {};
    return cuda_check(cudaMalloc(&p, size_t(longest) * sizeof(T)), "cudaMalloc(check staging)");
  }
};

// Copies sequence `s` of `array` to `host`: directly when its steps are contiguous, through a
// gather into `staging` when strided.
template <class T>
std::string read_sequence(const void* array, const SeqRef& s, const Staging& staging,
                          std::vector<T>& host) {
  host.resize(size_t(s.length));
  const T* src = static_cast<const T*>(array) + s.base;
  const size_t bytes = size_t(s.length) * sizeof(T);
  if (s.stride == 1)
    return cuda_check(cudaMemcpy(host.data(), src, bytes, cudaMemcpyDeviceToHost),
                      "cudaMemcpy(check)");
  gather_strided<<<1024, 256, 0, g_gpu.stream>>>(static_cast<T*>(staging.p), src, s.stride,
                                                 s.length);
  std::string err = cuda_check(cudaGetLastError(), "gather_strided");
  // g_gpu.stream does not synchronize with the legacy stream cudaMemcpy uses.
  if (err.empty()) err = cuda_check(cudaStreamSynchronize(g_gpu.stream), "gather_strided");
  if (err.empty())
    err = cuda_check(cudaMemcpy(host.data(), staging.p, bytes, cudaMemcpyDeviceToHost),
                     "cudaMemcpy(check)");
  return err;
}

// Compares the sequences `seqs` of `out` with a double loop over the same stored inputs.
template <class T>
std::string check_output_seqs(const std::vector<SeqRef>& seqs, bool reverse, bool states) {
  Staging staging;
  std::string err = staging.reserve<T>(seqs);
  if (!err.empty()) return err;
  std::vector<T> a, b, x;
  for (const SeqRef& s : seqs) {
    const int64_t seq = s.id;
    const int64_t len = s.length;
    for (auto [array, host] :
         {std::pair<void*, std::vector<T>*>{g_ws.gates, &a}, {g_ws.tokens, &b}, {g_ws.out, &x}})
      if (err.empty()) err = read_sequence(array, s, staging, *host);
    if (!err.empty()) return err;
    double state = 0.0;
    T h0{}, fin{};
    if (states) {
      err = cuda_check(
          cudaMemcpy(&h0, static_cast<T*>(g_ws.h0) + seq, sizeof(T), cudaMemcpyDeviceToHost),
          "cudaMemcpy(check)");
      if (err.empty())
        err = cuda_check(
            cudaMemcpy(&fin, static_cast<T*>(g_ws.final) + seq, sizeof(T), cudaMemcpyDeviceToHost),
            "cudaMemcpy(check)");
      if (!err.empty()) return err;
      state = to_float(h0);
    }
    for (int64_t k = 0; k < len; ++k) {
      const int64_t t = reverse ? len - 1 - k : k;
      state = double(to_float(a[t])) * state + double(to_float(b[t]));
      const double got = to_float(x[t]);
      // Loose on purpose: this catches a broken kernel; the tests measure precision.
      if (!(std::abs(got - state) <= DtypeInfo<T>::kTolerance * (std::abs(state) + 1.0))) {
        char msg[160];
        std::snprintf(msg, sizeof msg, "wrong result: sequence %lld, t = %lld: got %.7g, want %.7g",
                      static_cast<long long>(seq), static_cast<long long>(t), got, state);
        return msg;
      }
    }
    if (states && !(std::abs(double(to_float(fin)) - state) <=
                    DtypeInfo<T>::kTolerance * (std::abs(state) + 1.0)))
      return "wrong final state: sequence " + std::to_string(seq);
  }
  return {};
}

// Compares the first and last sequence of `out` with a double loop over the same stored inputs.
template <class T>
std::string check_output(const Extent& shape, bool reverse, bool states) {
  return check_output_seqs<T>(contiguous_ends(shape), reverse, states);
}

// Compares the sequences `seqs` of the backward pass's outputs with the double loop
//   d[t] = a[t+1] d[t+1] + g[t] (mirrored when reversed), da[t] = d[t] x[t-1], db[t] = d[t].
template <class T>
std::string check_backward_seqs(const std::vector<SeqRef>& seqs, bool reverse) {
  Staging staging;
  std::string err = staging.reserve<T>(seqs);
  if (!err.empty()) return err;
  std::vector<T> a, x, g, da, db;
  for (const SeqRef& s : seqs) {
    const int64_t seq = s.id;
    const int64_t len = s.length;
    for (auto [array, host] : {std::pair<void*, std::vector<T>*>{g_ws.gates, &a},
                               {g_ws.tokens, &x},
                               {g_ws.grad, &g},
                               {g_ws.out, &da},
                               {g_ws.grad2, &db}})
      if (err.empty()) err = read_sequence(array, s, staging, *host);
    if (!err.empty()) return err;
    double d = 0.0;
    for (int64_t k = 0; k < len; ++k) {  // scan order: from the forward's last step back
      const int64_t t = reverse ? k : len - 1 - k;
      const int64_t next = reverse ? t - 1 : t + 1;  // the step after t in the forward
      const int64_t prev = reverse ? t + 1 : t - 1;  // the step before t in the forward
      const double gate = next >= 0 && next < len ? double(to_float(a[next])) : 1.0;
      d = gate * d + double(to_float(g[t]));
      const double xprev = prev >= 0 && prev < len ? double(to_float(x[prev])) : 0.0;
      for (auto [got, want, what] :
           {std::tuple<double, double, const char*>{to_float(db[t]), d, "db"},
            {to_float(da[t]), d * xprev, "da"}})
        if (!(std::abs(got - want) <= DtypeInfo<T>::kTolerance * (std::abs(want) + 1.0))) {
          char msg[160];
          std::snprintf(msg, sizeof msg, "wrong %s: sequence %lld, t = %lld: got %.7g, want %.7g",
                        what, static_cast<long long>(seq), static_cast<long long>(t), got, want);
          return msg;
        }
    }
  }
  return {};
}

// Compares the first and last sequence of the backward pass's outputs with the double loop.
template <class T>
std::string check_backward(const Extent& shape, bool reverse) {
  return check_backward_seqs<T>(contiguous_ends(shape), reverse);
}

// ---------------------------------------------------------------------------------------------
// One benchmark row.

enum class Op { kCopy, kScan, kCub, kTune, kBackward, kPath, kLookback };

struct Summary {
  double scan_us = NAN, copy_us = NAN, cub_us = NAN, cub_copy_us = NAN;
};
std::vector<std::string> g_case_order;     // case names in registration order
std::map<std::string, double> g_copy_alone;  // copy rows' medians (ms) by buffers and streams
std::map<std::string, Summary> g_summary;  // filled by the rows that ran

std::string shape_name(const Extent& e) {
  return std::to_string(e.batch) + "x" + std::to_string(e.channels) + "x" +
         std::to_string(e.length);
}

// The same-traffic copy of `streams` streams of N elements: streams * N * sizeof(T) / 2 bytes.
template <class T>
std::string measure_copy(int streams, double* ms) {
  const size_t bytes = size_t(streams) * size_t(g_ws.n) * sizeof(T) / 2;
  return time_median(
      [bytes] {
        return cuda_check(cudaMemcpyAsync(g_ws.copy_dst, g_ws.copy_src, bytes,
                                          cudaMemcpyDeviceToDevice, g_gpu.stream),
                          "cudaMemcpyAsync");
      },
      ms);
}

/// At least `bytes` of ascan workspace in g_ws.scratch (allocated outside any timed region).
std::string ensure_scratch(size_t bytes) {
  if (bytes <= g_ws.scratch_bytes) return {};
  cudaFree(g_ws.scratch);
  g_ws.scratch = nullptr;
  g_ws.scratch_bytes = 0;
  std::string err = cuda_check(cudaMalloc(&g_ws.scratch, bytes), "cudaMalloc(ascan workspace)");
  if (err.empty()) g_ws.scratch_bytes = bytes;
  return err;
}

template <class T>
ascan::ScanArgs<T> forward_args(const Extent& shape, bool reverse, bool states) {
  ascan::ScanArgs<T> args;
  args.gates = static_cast<const T*>(g_ws.gates);
  args.tokens = static_cast<const T*>(g_ws.tokens);
  args.out = static_cast<T*>(g_ws.out);
  args.shape = ascan::time_contiguous(shape.batch, shape.channels, shape.length);
  args.reverse = reverse;
  if (states) {
    args.initial_state = static_cast<const T*>(g_ws.h0);
    args.final_state = static_cast<T*>(g_ws.final);
  }
  return args;
}

template <class T>
ascan::ScanBackwardArgs<T> backward_args(const Extent& shape, bool reverse) {
  ascan::ScanBackwardArgs<T> args;
  args.gates = static_cast<const T*>(g_ws.gates);
  args.states = static_cast<const T*>(g_ws.tokens);  // any values: the pass takes them as given
  args.grad_out = static_cast<const T*>(g_ws.grad);
  args.grad_gates = static_cast<T*>(g_ws.out);
  args.grad_tokens = static_cast<T*>(g_ws.grad2);
  args.shape = ascan::time_contiguous(shape.batch, shape.channels, shape.length);
  args.reverse = reverse;
  return args;
}

/// Times `call(workspace, bytes)` after a size query `call(nullptr, bytes)` (CUB's two-phase
/// rule, the library's full dispatch); the workspace is allocated before timing.
template <class Call>
std::string measure_two_phase(const char* what, const Call& call, double* ms) {
  size_t bytes = 0;
  if (const ascan::Status st = call(nullptr, bytes); !st.ok())
    return std::string(what) + " (size query): " + st.message;
  if (std::string err = ensure_scratch(bytes); !err.empty()) return err;
  return time_median(
      [&]() -> std::string {
        size_t b = bytes;
        const ascan::Status st = call(g_ws.scratch, b);
        if (st.ok()) return {};
        return std::string(what) + ": " + st.message;
      },
      ms);
}

template <class T>
std::string measure_scan(const Extent& shape, bool reverse, bool states, double* ms) {
  const ascan::ScanArgs<T> args = forward_args<T>(shape, reverse, states);
  return measure_two_phase(
      "ascan::scan", [&](void* w, size_t& b) { return ascan::scan(args, w, b, g_gpu.stream); }, ms);
}

template <class T>
std::string measure_backward(const Extent& shape, bool reverse, double* ms) {
  const ascan::ScanBackwardArgs<T> args = backward_args<T>(shape, reverse);
  return measure_two_phase(
      "ascan::scan_backward",
      [&](void* w, size_t& b) { return ascan::scan_backward(args, w, b, g_gpu.stream); }, ms);
}

// The tuning sweep (--ascan_tune): the same call with a kernel of a candidate table forced, to
// measure the choices and crossovers recorded beside the table in
// include/ascan/device/dispatch/tuning.cuh. Items are whole 16-byte vectors (runs) per thread.
template <int kBytes>
struct CandidateTable {
  using K = ascan::detail::KernelKind;
  static constexpr int V = 16 / kBytes;  // elements per 16-byte vector
  // kLoop keeps a warp row looping over tiles; a warp row with max_span == tile runs one tile;
  // block rows are one tile by construction. The last field is the occupancy target (blocks per
  // multiprocessor the registers must allow). The current sweep: block sizes and occupancy for
  // one tile of 128 (earlier sweeps' candidates and results: bench/RESULTS.md).
  static constexpr int64_t kLoop = INT64_MAX;
  static constexpr int kA = 128 / (2 * V), kB = 128 / V;  // lanes for one tile of 128
  static constexpr ascan::detail::ScanPolicy kPolicies[] = {
      {128, K::kWarp, 128, kA, 2 * V, 10}, {128, K::kWarp, 256, kA, 2 * V, 5},
      {128, K::kWarp, 512, kA, 2 * V, 2},  {128, K::kWarp, 128, kB, V, 16},
      {128, K::kWarp, 256, kB, V, 8},      {128, K::kWarp, 512, kB, V, 4},
      {128, K::kWarp, 128, kA, 2 * V, 1},  {128, K::kWarp, 128, kB, V, 1},
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

template <class T>
std::string measure_row(const Extent& shape, bool reverse, int row, double* ms) {
  const ascan::ScanArgs<T> args = forward_args<T>(shape, reverse, false);
  if (const ascan::Status st = ascan::can_implement(args); !st.ok()) return st.message;
  bool vector = false;
  const auto params = ascan::detail::make_params(args, vector);
  return time_median(
      [&]() -> std::string {
        return cuda_check(ascan::detail::launch_scan_row<ascan::detail::ForwardProblem, T,
                                                         CandidateTable<sizeof(T)>>(
                              row, reverse, vector, params, g_gpu.stream),
                          "launch_scan_row");
      },
      ms);
}

template <class T>
std::string measure_row_backward(const Extent& shape, bool reverse, int row, double* ms) {
  const ascan::ScanBackwardArgs<T> args = backward_args<T>(shape, reverse);
  if (const ascan::Status st = ascan::can_implement(args); !st.ok()) return st.message;
  bool vector = false;
  const auto params = ascan::detail::make_backward_params(args, vector);
  return time_median(
      [&]() -> std::string {
        return cuda_check(ascan::detail::launch_scan_row<ascan::detail::BackwardProblem, T,
                                                         CandidateTable<sizeof(T)>>(
                              row, reverse, vector, params, g_gpu.stream),
                          "launch_scan_row");
      },
      ms);
}

// The multi-block sweeps (--ascan_tune_multi). Path rows force one path of the library's
// dispatch (default tables); lookback rows run one candidate tile shape of the multi-block kernel
// (forward direction, vector path) to choose LookbackTuning.
using ascan::detail::LookbackHold;
template <class T, int kThreads, int kVectors, int kMinBlocks, LookbackHold kHold,
          int kRegisterVectors = 0, int kUnroll = 0, int kPacePercent = 0>
struct LookbackCandidate {
  static constexpr int kV = 16 / int(sizeof(T));
  static constexpr ascan::detail::LookbackPolicy kPolicy{
      kThreads,   (kVectors + kRegisterVectors) * kV,
      kMinBlocks, 4,
      kHold,      kRegisterVectors* kV,
      kUnroll,    kPacePercent / 100.0};
  static std::string name() {
    return "multi_t" + std::to_string(kThreads) + "_v" + std::to_string(kVectors) +
           (kUnroll > 0 ? "_u" + std::to_string(kUnroll) : std::string()) +
           (kRegisterVectors > 0 ? "_r" + std::to_string(kRegisterVectors) : std::string()) + "_m" +
           std::to_string(kMinBlocks) +
           (kPacePercent > 0 ? "_p" + std::to_string(kPacePercent) : std::string()) +
           (kHold == LookbackHold::kReload   ? "_reload"
            : kHold == LookbackHold::kShared ? "_shared"
                                             : "_staged");
  }
};
constexpr LookbackHold kStaged = LookbackHold::kStaged;  // the holds of the current candidates
// Staged candidates: v = vectors per thread staged in shared memory, r = vectors per thread held
// in registers, u = staged vectors per loop iteration (none: fully unrolled), p = the first
// wave's pace in percent of the device's peak memory bandwidth (none: not paced).
template <class T>
using ForwardCandidates = std::tuple<LookbackCandidate<T, 64, 17, 6, kStaged, 8>,
                                     LookbackCandidate<T, 64, 17, 6, kStaged, 8, 0, 80>,
                                     LookbackCandidate<T, 64, 13, 8, kStaged, 6, 2>,
                                     LookbackCandidate<T, 64, 13, 8, kStaged, 6, 2, 70>,
                                     LookbackCandidate<T, 64, 13, 8, kStaged, 6, 2, 80>,
                                     LookbackCandidate<T, 64, 13, 8, kStaged, 6, 2, 90>,
                                     LookbackCandidate<T, 64, 13, 8, kStaged, 4, 2, 80>,
                                     LookbackCandidate<T, 64, 11, 8, kStaged, 4, 2, 80>,
                                     LookbackCandidate<T, 64, 9, 8, kStaged, 4, 2, 80>,
                                     LookbackCandidate<T, 64, 15, 7, kStaged, 6, 2, 80>>;
template <class T>
using BackwardCandidates = std::tuple<LookbackCandidate<T, 64, 9, 8, kStaged>,
                                      LookbackCandidate<T, 64, 9, 8, kStaged, 0, 0, 70>,
                                      LookbackCandidate<T, 64, 9, 8, kStaged, 0, 0, 80>,
                                      LookbackCandidate<T, 64, 9, 8, kStaged, 0, 0, 90>>;

template <class T>
std::string measure_path(const Extent& shape, bool backward, int row, double* ms) {
  const auto path = row == 0 ? ascan::detail::Path::kOneBlock : ascan::detail::Path::kMultiBlock;
  if (backward) {
    const ascan::ScanBackwardArgs<T> args = backward_args<T>(shape, false);
    return measure_two_phase(
        "scan_backward_with",
        [&](void* w, size_t& b) {
          return ascan::detail::scan_backward_with(args, ascan::detail::Scratch::two_phase(w, b),
                                                   g_gpu.stream, path);
        },
        ms);
  }
  const ascan::ScanArgs<T> args = forward_args<T>(shape, false, false);
  return measure_two_phase(
      "scan_with",
      [&](void* w, size_t& b) {
        return ascan::detail::scan_with(args, ascan::detail::Scratch::two_phase(w, b), g_gpu.stream,
                                        path);
      },
      ms);
}

template <class T, class Candidate, bool kBackward>
std::string measure_lookback(const Extent& shape, bool backward, double* ms) {
  using C = ascan::compute_t<T>;
  constexpr int kVec = 16 / int(sizeof(T));
  ascan::detail::Plan plan;
  const ascan::Status st = ascan::detail::make_plan<C, kVec, Candidate>(
      shape.sequences(), shape.length, ascan::detail::Path::kMultiBlock, true, plan);
  if (!st.ok()) return st.message;
  if (std::string err = ensure_scratch(plan.bytes); !err.empty()) return err;
  if (backward != kBackward) return "candidate registered for the other direction";
  const auto time_problem = [&](auto* problem, const auto& params) {
    using Problem = std::remove_pointer_t<decltype(problem)>;
    return time_median(
        [&] {
          return cuda_check(ascan::detail::launch_lookback<Problem, Candidate,
                                                           ascan::detail::FallbackOf<Candidate>>(
                                params, g_ws.scratch, g_gpu.stream),
                            "launch_lookback");
        },
        ms);
  };
  bool vector = false;
  if constexpr (kBackward)
    return time_problem(
        static_cast<ascan::detail::BackwardProblem<T, false, true>*>(nullptr),
        ascan::detail::make_backward_params(backward_args<T>(shape, false), vector));
  else
    return time_problem(static_cast<ascan::detail::ForwardProblem<T, false, true>*>(nullptr),
                        ascan::detail::make_params(forward_args<T>(shape, false, false), vector));
}

template <class T>
std::string measure_cub(const Extent& shape, double* ms) {
  if (shape.elements() > int64_t{std::numeric_limits<uint32_t>::max()})
    return "N exceeds the CUB baseline's 32-bit index";
  const auto in = cub_input(static_cast<const T*>(g_ws.gates), static_cast<const T*>(g_ws.tokens),
                            static_cast<uint32_t>(shape.length));
  const auto out = cub_output(static_cast<T*>(g_ws.out));
  const uint32_t n = static_cast<uint32_t>(shape.elements());
  // Two-phase temp-storage query, allocation outside the timed region.
  size_t temp_bytes = 0;
  std::string err = cuda_check(
      cub::DeviceScan::InclusiveScan(nullptr, temp_bytes, in, out, CubCompose{}, n, g_gpu.stream),
      "cub::DeviceScan (query)");
  if (!err.empty()) return err;
  if (temp_bytes > g_ws.cub_temp_bytes) {
    cudaFree(g_ws.cub_temp);
    g_ws.cub_temp = nullptr;
    g_ws.cub_temp_bytes = 0;
    err = cuda_check(cudaMalloc(&g_ws.cub_temp, temp_bytes), "cudaMalloc(cub temp)");
    if (!err.empty()) return err;
    g_ws.cub_temp_bytes = temp_bytes;
  }
  return time_median(
      [&] {
        size_t bytes = g_ws.cub_temp_bytes;
        return cuda_check(cub::DeviceScan::InclusiveScan(g_ws.cub_temp, bytes, in, out,
                                                         CubCompose{}, n, g_gpu.stream),
                          "cub::DeviceScan");
      },
      ms);
}

using Measure = std::string (*)(const Extent&, bool, double*);

// The time (the operation's median, the copy's on a copy row), the counters and the summary of
// a row that ran; `bytes` the traffic the operation must move.
void report_row(benchmark::State& state, Op op, const std::string& case_name,
                const std::string& copy_key, double bytes, double copy_ms, double op_ms) {
  if (op == Op::kCopy) op_ms = copy_ms;

  for (auto _ : state) state.SetIterationTime(op_ms / 1e3);

  state.counters["bytes_per_second"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["copy_us"] = copy_ms * 1e3;
  state.counters["scan_us"] = op_ms * 1e3;
  state.counters["efficiency"] = copy_ms / op_ms;
  if (op != Op::kCopy) {
    // the spread of the paired samples, and the paired copy against the case's copy row (the
    // same bytes timed alone in this process): more than 10% off flags the row's copy
    state.counters["ratio_p10"] = g_pair.ratio_p10;
    state.counters["ratio_p90"] = g_pair.ratio_p90;
    const auto alone = g_copy_alone.find(copy_key);
    if (alone != g_copy_alone.end()) {
      const double vs = copy_ms / alone->second;
      state.counters["copy_vs_alone"] = vs;
      state.counters["copy_outlier"] = vs > 1.1 || vs < 1.0 / 1.1 ? 1.0 : 0.0;
    }
  } else {
    g_copy_alone[copy_key] = copy_ms;
  }
  if (op == Op::kTune || op == Op::kPath || op == Op::kLookback) return;
  Summary& sum = g_summary[case_name];
  if (op == Op::kScan || op == Op::kBackward) {
    sum.scan_us = op_ms * 1e3;
    sum.copy_us = copy_ms * 1e3;
  } else if (op == Op::kCub) {
    sum.cub_us = op_ms * 1e3;
    sum.cub_copy_us = copy_ms * 1e3;
  } else if (std::isnan(sum.copy_us)) {
    sum.copy_us = copy_ms * 1e3;
  }
}

template <class T>
void run_row(benchmark::State& state, Op op, const std::string& case_name, const Extent& shape,
             bool reverse, bool backward, bool states = false, int row = -1,
             Measure lookback = nullptr) {
  if (const std::string& err = gpu_setup(); !err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  const int streams = backward ? 5 : 3;
  const std::string key = std::string(DtypeInfo<T>::kName) + "/" + shape_name(shape);
  std::string err = workspace_for<T>(key, shape);
  double copy_ms = 0.0, op_ms = 0.0;
  // A copy row times the copy alone; every other row pairs its own copy with the operation
  // (time_median), sample by sample.
  if (err.empty() && op == Op::kCopy) err = measure_copy<T>(streams, &copy_ms);
  if (err.empty() && op != Op::kCopy) {
    g_pair = Pairing{};
    g_pair.copy_bytes = size_t(streams) * size_t(g_ws.n) * sizeof(T) / 2;
    g_pair.copy_dst = g_ws.copy_dst;
    g_pair.copy_src = g_ws.copy_src;
    // Poison the outputs (all-ones bytes are NaN in every dtype) so stale results cannot pass.
    for (void* out : {g_ws.out, g_ws.grad2})
      if (err.empty())
        err = cuda_check(cudaMemsetAsync(out, 0xFF, size_t(g_ws.n) * sizeof(T), g_gpu.stream),
                         "cudaMemsetAsync(out)");
    if (err.empty()) {
      switch (op) {
        case Op::kScan:
          err = measure_scan<T>(shape, reverse, states, &op_ms);
          break;
        case Op::kBackward:
          err = measure_backward<T>(shape, reverse, &op_ms);
          break;
        case Op::kTune:
          err = backward ? measure_row_backward<T>(shape, reverse, row, &op_ms)
                         : measure_row<T>(shape, reverse, row, &op_ms);
          break;
        case Op::kPath:
          err = measure_path<T>(shape, backward, row, &op_ms);
          break;
        case Op::kLookback:
          err = lookback(shape, backward, &op_ms);
          break;
        default:
          err = measure_cub<T>(shape, &op_ms);
      }
    }
    copy_ms = g_pair.copy_ms;
    g_pair.copy_bytes = 0;
    if (err.empty() && !(copy_ms > 0.0)) err = "the paired copy took no samples";
    if (err.empty())
      err = backward ? check_backward<T>(shape, reverse)
                     : check_output<T>(shape, reverse, states && op == Op::kScan);
  }
  if (!err.empty()) {
    cudaGetLastError();  // clear a non-sticky error so the next case starts clean
    state.SkipWithError(err.c_str());
    return;
  }
  // States rows move two (B, C) arrays more; the copy row of the same shape stands beside them.
  const double bytes =
      (double(streams) * double(g_ws.n) + (states ? 2.0 * double(shape.sequences()) : 0.0)) *
      sizeof(T);
  report_row(state, op, case_name, key + "/" + std::to_string(streams), bytes, copy_ms, op_ms);
}

template <class T>
void register_case(const GridRow& row) {
  const std::string case_name = std::string(DtypeInfo<T>::kName) + "/" + shape_name(row.shape) +
                                (row.reverse ? "/reverse" : "") + (row.backward ? "/bwd" : "") +
                                (row.states ? "/states" : "");
  g_case_order.push_back(case_name);
  auto add = [&](Op op, const char* prefix) {
    const Extent shape = row.shape;
    const bool reverse = row.reverse;
    const bool backward = row.backward;
    const bool states = row.states;
    benchmark::RegisterBenchmark((std::string(prefix) + "/" + case_name).c_str(),
                                 [=](benchmark::State& st) {
                                   run_row<T>(st, op, case_name, shape, reverse, backward, states);
                                 })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMicrosecond);
  };
  // A reverse or states case moves the bytes of the plain forward case (the states add 2 * B * C
  // elements, in the bytes counter): its copy row would repeat. The CUB
  // baseline is a forward scan.
  if (!row.reverse && !row.states) add(Op::kCopy, "copy");
  add(row.backward ? Op::kBackward : Op::kScan, "scan");
  if (!row.reverse && !row.backward && !row.states) add(Op::kCub, "cub");
}

const char* kind_name(ascan::detail::KernelKind k) {
  return k == ascan::detail::KernelKind::kWarp    ? "warp"
         : k == ascan::detail::KernelKind::kBlock ? "block"
                                                  : "chunked";
}

// Tuning rows: every candidate kernel that can scan this shape in one launch.
template <class T>
void register_tuning(const GridRow& grid_row) {
  using Table = CandidateTable<sizeof(T)>;
  const std::string case_name = std::string(DtypeInfo<T>::kName) + "/" +
                                shape_name(grid_row.shape) + (grid_row.reverse ? "/reverse" : "") +
                                (grid_row.backward ? "/bwd" : "");
  for (int r = 0; r < Table::kCount; ++r) {
    const auto& policy = Table::kPolicies[r];
    const bool one_tile =
        policy.kind == ascan::detail::KernelKind::kBlock ||
        (policy.kind == ascan::detail::KernelKind::kWarp && policy.max_span <= policy.tile());
    if (one_tile && grid_row.shape.length > policy.tile()) continue;
    const Extent shape = grid_row.shape;
    const bool reverse = grid_row.reverse;
    const bool backward = grid_row.backward;
    benchmark::RegisterBenchmark(
        ("tune/" + case_name + "/" + kind_name(policy.kind) + "_t" +
         std::to_string(policy.threads) + "_l" + std::to_string(policy.lanes) + "_i" +
         std::to_string(policy.items) +
         (policy.kind == ascan::detail::KernelKind::kWarp && policy.max_span <= policy.tile()
              ? "_one"
              : "") +
         "_m" + std::to_string(policy.min_blocks))
            .c_str(),
        [=](benchmark::State& st) {
          run_row<T>(st, Op::kTune, case_name, shape, reverse, backward, false, r);
        })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMicrosecond);
  }
}

// Multi-block sweep rows: both paths (`paths`) on the crossover and short-tile shapes, and every
// lookback candidate (`candidates`) on the short-tile shapes and the long rows of the standard
// grid.
template <class T>
void register_multi_tuning(const GridRow& row, bool paths, bool candidates) {
  if constexpr (std::is_same_v<T, __half>) {
    return;  // the sweep covers float and bfloat16
  } else {
    const std::string case_name = std::string(DtypeInfo<T>::kName) + "/" + shape_name(row.shape) +
                                  (row.backward ? "/bwd" : "");
    const Extent shape = row.shape;
    const bool backward = row.backward;
    auto reg = [&](const std::string& name, Op op, int r, Measure m) {
      benchmark::RegisterBenchmark(name.c_str(),
                                   [=](benchmark::State& st) {
                                     run_row<T>(st, op, case_name, shape, false, backward, false, r,
                                                m);
                                   })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMicrosecond);
    };
    if (paths) {
      reg("path/" + case_name + "/one_block", Op::kPath, 0, nullptr);
      reg("path/" + case_name + "/multi_block", Op::kPath, 1, nullptr);
    }
    if (!candidates) return;
    auto each = [&](auto candidates, auto direction) {
      std::apply(
          [&](auto... c) {
            (reg("tune/" + case_name + "/" + decltype(c)::name(), Op::kLookback, -1,
                 &measure_lookback<T, decltype(c), decltype(direction)::value>),
             ...);
          },
          candidates);
    };
    if (backward)
      each(BackwardCandidates<T>{}, std::true_type{});
    else
      each(ForwardCandidates<T>{}, std::false_type{});
  }
}

// ---------------------------------------------------------------------------------------------
// Layout and packed-sequence (varlen) rows: the same copy and scan rows as register_case's, on
// the channel-last layout and on packed batches of varied lengths (see the top of the file).

enum class Layout { kTimeContiguous, kChannelLast };

/// The seed of the log-uniform batch's lengths (std::mt19937_64): the batch is the same in every
/// run and on every machine.
constexpr uint64_t kVarlenSeed = 20251201;
constexpr int64_t kVarlenTokens = int64_t{1} << 22;  // the log-uniform batch's total
constexpr int64_t kVarlenMaxLength = 16384;
constexpr int64_t kSkewedShort = 1000;  // sequences of length 1 after the skewed batch's long one
constexpr int64_t kVarlenChannels = 1024;
/// What one varlen row may hold on the device (workspace_bytes: five arrays of N elements, the
/// copy's two buffers of 5 N / 2, the flush buffer): of the H200's ~140 GiB, 130 for the
/// log-uniform batch; 60 for the skewed one, which otherwise runs at 256 channels.
constexpr size_t kVarlenBudget = size_t{130} << 30;
constexpr size_t kSkewedBudget = size_t{60} << 30;

/// cu_seqlens of lengths floor(exp(u * ln(max_length + 1))), u uniform in [0, 1) from the top 53
/// bits of one std::mt19937_64 draw (so no library's distribution code enters): log-uniform over
/// 1..max_length. Drawn until the total reaches `total`; the last length is trimmed to hit it.
std::vector<int32_t> loguniform_offsets(int64_t total, int64_t max_length, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double log_range = std::log(double(max_length) + 1.0);
  std::vector<int32_t> offsets = {0};
  int64_t sum = 0;
  while (sum < total) {
    const double u = double(rng() >> 11) * 0x1.0p-53;
    int64_t length = std::clamp<int64_t>(int64_t(std::exp(u * log_range)), 1, max_length);
    length = std::min(length, total - sum);
    sum += length;
    offsets.push_back(static_cast<int32_t>(sum));
  }
  return offsets;
}

/// cu_seqlens of one sequence of `long_length` tokens followed by `short_count` of length 1.
std::vector<int32_t> skewed_offsets(int64_t long_length, int64_t short_count) {
  std::vector<int32_t> offsets = {0};
  for (int64_t i = 0; i <= short_count; ++i)
    offsets.push_back(static_cast<int32_t>(long_length + i));
  return offsets;
}

struct LayoutCase {
  std::string name;     // the row name after "<group>/<op>/<dtype>/", without "/bwd"
  std::string buffers;  // the workspace key after "<dtype>/": cases that share it share buffers
  Extent extent;        // (B, C, T) sizes; packed: (1, C, total tokens)
  Layout layout = Layout::kChannelLast;
  std::shared_ptr<const std::vector<int32_t>> offsets;  // packed: count + 1 cu_seqlens; else null

  int64_t count() const { return offsets ? int64_t(offsets->size()) - 1 : 0; }
  ascan::Shape shape() const {
    return layout == Layout::kChannelLast
               ? ascan::channel_last(extent.batch, extent.length, extent.channels)
               : ascan::time_contiguous(extent.batch, extent.channels, extent.length);
  }
  int64_t length(int64_t n) const { return (*offsets)[n + 1] - (*offsets)[n]; }
  /// Sequence (b, c) as the checks read it; b is the packed sequence's index when packed.
  SeqRef seq(int64_t b, int64_t c) const {
    const ascan::Shape s = shape();
    const int64_t id = b * extent.channels + c;
    if (!offsets)
      return {id, b * s.batch_stride + c * s.channel_stride, s.time_stride, extent.length};
    return {id, c * s.channel_stride + (*offsets)[b] * s.time_stride, s.time_stride, length(b)};
  }
  /// The first and the last sequence; packed, also the longest and the one after it.
  std::vector<SeqRef> check_seqs() const {
    const int64_t last_channel = extent.channels - 1;
    if (!offsets) return {seq(0, 0), seq(extent.batch - 1, last_channel)};
    const int64_t n = count();
    int64_t longest = 0;
    for (int64_t i = 1; i < n; ++i)
      if (length(i) > length(longest)) longest = i;
    std::vector<SeqRef> seqs = {seq(0, 0), seq(longest, extent.channels / 2)};
    if (longest + 1 < n) seqs.push_back(seq(longest + 1, std::min<int64_t>(1, last_channel)));
    seqs.push_back(seq(n - 1, last_channel));
    return seqs;
  }
};

/// The channel-last rows: (B, T, C) tensors, ascan::channel_last(B, T, C).
std::vector<LayoutCase> layout_cases() {
  std::vector<LayoutCase> cases;
  auto add = [&](int64_t b, int64_t t, int64_t c) {
    const std::string name =
        "channel_last/B" + std::to_string(b) + "_T" + std::to_string(t) + "_C" + std::to_string(c);
    cases.push_back({name, name, Extent{b, c, t}, Layout::kChannelLast, nullptr});
  };
  for (int k : {7, 10, 13, 16}) add(8, int64_t{1} << k, 1536);
  add(4, 4096, 4096);
  add(1, int64_t{1} << 20, 256);
  add(16, 2048, 2048);
  return cases;
}

/// The packed rows for elements of `elem_bytes`: each batch in both layouts, at the channel count
/// whose buffers fit the batch's budget (kVarlenBudget: the largest power of two up to
/// kVarlenChannels, f32 512 and bf16 1024; kSkewedBudget: kVarlenChannels or else 256, 256 for
/// both dtypes). Offsets are int32.
std::vector<LayoutCase> varlen_cases(size_t elem_bytes) {
  static const auto loguniform = std::make_shared<const std::vector<int32_t>>(
      loguniform_offsets(kVarlenTokens, kVarlenMaxLength, kVarlenSeed));
  static const auto skewed =
      std::make_shared<const std::vector<int32_t>>(skewed_offsets(kVarlenTokens, kSkewedShort));
  auto fits = [&](const std::vector<int32_t>& offsets, int64_t channels, size_t budget) {
    return workspace_bytes(int64_t{offsets.back()} * channels, channels, elem_bytes,
                           int64_t(offsets.size())) <= budget;
  };
  std::vector<LayoutCase> cases;
  for (const auto& [batch, offsets] :
       {std::pair<const char*, std::shared_ptr<const std::vector<int32_t>>>{"loguniform",
                                                                            loguniform},
        {"skewed", skewed}}) {
    const bool is_skewed = offsets == skewed;
    int64_t channels = kVarlenChannels;
    if (is_skewed) {
      if (!fits(*offsets, channels, kSkewedBudget)) channels = 256;
    } else {
      while (channels > 1 && !fits(*offsets, channels, kVarlenBudget)) channels /= 2;
    }
    const int64_t total = offsets->back();
    const std::string sizes = std::string(batch) + "_n" + std::to_string(offsets->size() - 1) +
                              "/T" + std::to_string(total) + "_C" + std::to_string(channels);
    // Both layouts hold the same elements (filled by flat index): one set of buffers.
    for (Layout layout : {Layout::kChannelLast, Layout::kTimeContiguous})
      cases.push_back(
          {std::string(layout == Layout::kChannelLast ? "channel_last/" : "time_contiguous/") +
               sizes,
           "varlen/" + sizes, Extent{1, channels, total}, layout, offsets});
  }
  return cases;
}

template <class T>
void run_layout_row(benchmark::State& state, Op op, const std::string& case_name,
                    const LayoutCase& c, bool backward) {
  if (const std::string& err = gpu_setup(); !err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  const int streams = backward ? 5 : 3;
  std::string err = workspace_for<T>(std::string(DtypeInfo<T>::kName) + "/" + c.buffers, c.extent,
                                     c.offsets.get());
  double copy_ms = 0.0, op_ms = 0.0;
  // A copy row times the copy alone; every other row pairs its own copy with the operation
  // (time_median), sample by sample.
  if (err.empty() && op == Op::kCopy) err = measure_copy<T>(streams, &copy_ms);
  if (err.empty() && op != Op::kCopy) {
    g_pair = Pairing{};
    g_pair.copy_bytes = size_t(streams) * size_t(g_ws.n) * sizeof(T) / 2;
    g_pair.copy_dst = g_ws.copy_dst;
    g_pair.copy_src = g_ws.copy_src;
    // Poison the outputs (all-ones bytes are NaN in every dtype) so stale results cannot pass.
    for (void* out : {g_ws.out, g_ws.grad2})
      if (err.empty())
        err = cuda_check(cudaMemsetAsync(out, 0xFF, size_t(g_ws.n) * sizeof(T), g_gpu.stream),
                         "cudaMemsetAsync(out)");
    const ascan::Packed packed =
        c.offsets ? ascan::packed(static_cast<const int32_t*>(g_ws.offsets), c.count())
                  : ascan::Packed{};
    if (err.empty() && backward) {
      ascan::ScanBackwardArgs<T> args = backward_args<T>(c.extent, false);
      args.shape = c.shape();
      args.packed = packed;
      err = measure_two_phase(
          "ascan::scan_backward",
          [&](void* w, size_t& b) { return ascan::scan_backward(args, w, b, g_gpu.stream); },
          &op_ms);
    } else if (err.empty()) {
      ascan::ScanArgs<T> args = forward_args<T>(c.extent, false, false);
      args.shape = c.shape();
      args.packed = packed;
      err = measure_two_phase(
          "ascan::scan", [&](void* w, size_t& b) { return ascan::scan(args, w, b, g_gpu.stream); },
          &op_ms);
    }
    copy_ms = g_pair.copy_ms;
    g_pair.copy_bytes = 0;
    if (err.empty() && !(copy_ms > 0.0)) err = "the paired copy took no samples";
    if (err.empty())
      err = backward ? check_backward_seqs<T>(c.check_seqs(), false)
                     : check_output_seqs<T>(c.check_seqs(), false, false);
  }
  if (!err.empty()) {
    cudaGetLastError();  // clear a non-sticky error so the next case starts clean
    state.SkipWithError(err.c_str());
    return;
  }
  const std::string copy_key =
      std::string(DtypeInfo<T>::kName) + "/" + c.buffers + "/" + std::to_string(streams);
  report_row(state, op, case_name, copy_key, double(streams) * double(g_ws.n) * sizeof(T), copy_ms,
             op_ms);
}

/// The copy and scan rows of one layout or varlen case, "<group>/{copy,scan}/<dtype>/<name>".
template <class T>
void register_layout_case(const char* group, const LayoutCase& c, bool backward) {
  const std::string tail =
      std::string(DtypeInfo<T>::kName) + "/" + c.name + (backward ? "/bwd" : "");
  const std::string case_name = std::string(group) + "/" + tail;
  g_case_order.push_back(case_name);
  for (Op op : {Op::kCopy, backward ? Op::kBackward : Op::kScan})
    benchmark::RegisterBenchmark(
        (std::string(group) + (op == Op::kCopy ? "/copy/" : "/scan/") + tail).c_str(),
        [=](benchmark::State& st) { run_layout_row<T>(st, op, case_name, c, backward); })
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMicrosecond);
}

void print_summary(FILE* f) {
  bool any = false;
  for (const std::string& name : g_case_order) any |= g_summary.count(name) > 0;
  if (!any) return;
  std::fprintf(f, "\n%-26s %10s %10s %6s %10s %8s\n", "case", "scan_us", "copy_us", "eff", "cub_us",
               "cub_eff");
  for (const std::string& name : g_case_order) {
    auto it = g_summary.find(name);
    if (it == g_summary.end()) continue;
    const Summary& s = it->second;
    auto num = [](double v, int prec) {
      char buf[32];
      if (std::isnan(v))
        std::snprintf(buf, sizeof buf, "-");
      else
        std::snprintf(buf, sizeof buf, "%.*f", prec, v);
      return std::string(buf);
    };
    std::fprintf(f, "%-26s %10s %10s %6s %10s %8s\n", name.c_str(), num(s.scan_us, 1).c_str(),
                 num(s.copy_us, 1).c_str(), num(s.copy_us / s.scan_us, 3).c_str(),
                 num(s.cub_us, 1).c_str(), num(s.cub_copy_us / s.cub_us, 3).c_str());
  }
}

// Adds the GPU, driver and runtime to the context block of the console and JSON output.
void add_context() {
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
  std::vector<GridRow> shapes;  // --ascan_shapes: these rows in place of the standard grid
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
    if (std::strcmp(arg, "--ascan_tune") == 0) {
      tune = true;
      continue;
    }
    if (std::strcmp(arg, "--ascan_tune_multi") == 0) {
      tune_multi = true;
      continue;
    }
    if (std::strcmp(arg, "--benchmark_format=json") == 0 ||
        std::strcmp(arg, "--benchmark_format=csv") == 0)
      summary_to_stderr = true;
    argv[kept++] = argv[i];
  }
  argc = kept;

  for (Dtype d : {Dtype::kF32, Dtype::kBF16}) {
    if (!tune_multi) break;
    for (int sweep : {0, 1, 2})  // the crossover, the short-tile shapes, the long rows
      for (const GridRow& row : sweep == 0   ? crossover_grid()
                                : sweep == 1 ? short_grid()
                                             : standard_grid()) {
        if (std::find(row.dtypes.begin(), row.dtypes.end(), d) == row.dtypes.end()) continue;
        if (sweep == 2 && row.shape.sequences() > 128) continue;  // the long rows only
        with_dtype(d, [&](auto* tag) {
          using T = std::remove_pointer_t<decltype(tag)>;
          register_multi_tuning<T>(row, sweep != 2, sweep != 0);
        });
      }
  }
  for (Dtype d : {Dtype::kF32, Dtype::kBF16, Dtype::kF16}) {
    if (tune_multi) break;
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
    if (tune_multi || tune || !shapes.empty()) break;
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
  add_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary(summary_to_stderr ? stderr : stdout);
  g_ws.release();
  gpu_teardown();
  return 0;
}
