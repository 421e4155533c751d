// bench/bench_harness.cuh: what every row of ascan_bench stands on: the element types, the GPU
// state (stream, events, the L2 flush buffer), time_median with its paired same-traffic copy
// (Pairing), and the case's buffers (Workspace, filled on the device). Part of scan_bench.cu's
// one translation unit (and of bench/probes/serial_tiles.cu's, which times as the rows do):
// included by those only, so its anonymous namespace is theirs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Element types and sizes.

enum class Dtype { kF32, kBF16, kF16 };

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

/// A case's sizes: `batch` * `channels` sequences of `length` steps.
struct Extent {
  int64_t batch;
  int64_t channels;
  int64_t length;
  int64_t elements() const { return batch * channels * length; }
  int64_t sequences() const { return batch * channels; }
};

constexpr int kWarmup = 3;
constexpr int kDefaultReps = 51;
constexpr size_t kFlushBytes = size_t{256} << 20;

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
/// time_median takes one sample of that copy beside each sample of the operation, each after its
/// own L2 flush, so both see the same conditions; it leaves the copy's time and the 10th and 90th
/// percentiles of the per-pair ratios (copy / operation) here.
///
/// The pair's order alternates: the copy first in even samples, the operation first in odd ones,
/// and each side's time is the mean of its two orders' medians. On the H100 and the H200 a fixed
/// 0.3-0.5 µs lands in one half of every pair of a row, the first or the second by what the
/// stream ran before the row, so with a fixed order the same row read 0.86 or 0.97 by its place
/// in the process (bench/RESULTS.md, "The short rows' paired copies alternate from row to row";
/// bench/probes/flush_parity.cu). Alternating the order gives each side that time in half its
/// samples whatever the row's phase.
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

// Times `launch` (a callable returning an error string) as described at the top of scan_bench.cu
// and writes the median in milliseconds; paired with a copy where g_pair says so.
template <class Launch>
std::string time_median(const Launch& launch, double* median_ms) {
  cudaStream_t s = g_gpu.stream;
  const size_t copy_bytes = g_pair.copy_bytes;
  const auto copy = [&] {
    return cuda_check(
        cudaMemcpyAsync(g_pair.copy_dst, g_pair.copy_src, copy_bytes, cudaMemcpyDeviceToDevice, s),
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
    // one sample of `op` between events `start` and `stop`, after its own flush
    const auto timed = [&](cudaEvent_t start, cudaEvent_t stop, const auto& op) {
      std::string e = flush(i);
      if (e.empty()) e = cuda_check(cudaEventRecord(start, s), "cudaEventRecord");
      if (e.empty()) e = op();
      if (e.empty()) e = cuda_check(cudaEventRecord(stop, s), "cudaEventRecord");
      return e;
    };
    const auto timed_copy = [&] { return timed(g_gpu.copy_start[i], g_gpu.copy_stop[i], copy); };
    const auto timed_launch = [&] { return timed(g_gpu.start[i], g_gpu.stop[i], launch); };
    if (copy_bytes == 0) {
      err = timed_launch();
    } else if (i % 2 == 0) {  // the copy first in even samples, second in odd ones (Pairing)
      err = timed_copy();
      if (err.empty()) err = timed_launch();
    } else {
      err = timed_launch();
      if (err.empty()) err = timed_copy();
    }
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
  if (copy_bytes == 0) {
    *median_ms = median_of(ms);
  } else {
    // each order's median, the two averaged (Pairing)
    const auto balanced = [](const std::vector<float>& v) {
      std::vector<float> first, second;
      for (size_t i = 0; i < v.size(); ++i) (i % 2 == 0 ? first : second).push_back(v[i]);
      return second.empty() ? median_of(first) : 0.5 * (median_of(first) + median_of(second));
    };
    *median_ms = balanced(ms);
    g_pair.copy_ms = balanced(copy_ms);
    std::vector<float> ratio(g_gpu.reps);
    for (int i = 0; i < g_gpu.reps; ++i) ratio[i] = copy_ms[i] / ms[i];
    std::sort(ratio.begin(), ratio.end());
    const size_t last = ratio.size() - 1;
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
  /// Where the copy's own buffers do not fit the device (copy_in_arrays): one allocation holds
  /// the five arrays, and the copy reads the first half of it and writes the second.
  void* arrays = nullptr;
  bool copy_in_arrays = false;

  void release() {
    if (arrays != nullptr) {
      cudaFree(arrays);  // gates to grad2 and the copy's buffers lie in it
    } else {
      for (void* p : {gates, tokens, out, grad, grad2, copy_src, copy_dst}) cudaFree(p);
    }
    for (void* p : {h0, final, cub_temp, scratch, static_cast<void*>(offsets)}) cudaFree(p);
    *this = Workspace{};
  }
};
Workspace g_ws;

/// The upstream gradient's `n` elements, filled as every case's are (seed 3): by workspace_for,
/// and again where a paired copy wrote over them (restore_inputs).
template <class T>
void fill_grad(int64_t n, cudaStream_t s) {
  fill_uniform<<<4096, 256, 0, s>>>(static_cast<T*>(g_ws.grad), n, 0.0f, 1.0f, 3);
}

/// Device memory kept free beside a case's buffers for ascan's workspace (the look-back records:
/// a few hundred MiB on the largest rows) before the copy's buffers move into the arrays.
constexpr size_t kWorkspaceHeadroom = size_t{2} << 30;

// Buffers of a case of `shape`; `offsets`, when given, are copied to g_ws.offsets (varlen rows).
// Keep workspace_bytes below in step with what this allocates. Where the copy's two buffers do
// not fit beside the arrays (the log-uniform packed rows on an 80 GB GPU), the copy runs within
// the arrays (g_ws.copy_in_arrays), and run_measured repeats the operation on restored inputs
// before its check.
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
  size_t free_bytes = 0, total_bytes = 0;
  std::string err = cuda_check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const bool in_arrays = 5 * bytes + 2 * copy_bytes + kWorkspaceHeadroom > free_bytes;
  if (err.empty() && in_arrays) {
    // each array on a 256-byte boundary, as cudaMalloc would place it (so a row keeps its
    // vector path whatever its size); the copy's second half past gates and tokens (the inputs
    // the rows' checks and reruns rely on)
    const size_t stride = (bytes + 255) / 256 * 256;
    const size_t rounded = (copy_bytes + 255) / 256 * 256;
    const size_t half = rounded > 2 * stride ? rounded : 2 * stride;
    err = cuda_check(cudaMalloc(&g_ws.arrays, 2 * half > 5 * stride ? 2 * half : 5 * stride),
                     "cudaMalloc(arrays)");
    if (err.empty()) {
      char* const base = static_cast<char*>(g_ws.arrays);
      g_ws.gates = base;
      g_ws.tokens = base + stride;
      g_ws.out = base + 2 * stride;
      g_ws.grad = base + 3 * stride;
      g_ws.grad2 = base + 4 * stride;
      g_ws.copy_src = base;         // the first half: gates, tokens, part of out
      g_ws.copy_dst = base + half;  // the second: the rest of out, grad, grad2
      g_ws.copy_in_arrays = true;
    }
  } else if (err.empty()) {
    err = cuda_check(cudaMalloc(&g_ws.gates, bytes), "cudaMalloc(gates)");
    if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.tokens, bytes), "cudaMalloc(tokens)");
    if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.out, bytes), "cudaMalloc(out)");
    if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.grad, bytes), "cudaMalloc(grad)");
    if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.grad2, bytes), "cudaMalloc(grad2)");
    if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.copy_src, copy_bytes), "cudaMalloc(copy)");
    if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.copy_dst, copy_bytes), "cudaMalloc(copy)");
  }
  const size_t state_bytes = size_t(shape.sequences()) * sizeof(T);
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.h0, state_bytes), "cudaMalloc(h0)");
  if (err.empty()) err = cuda_check(cudaMalloc(&g_ws.final, state_bytes), "cudaMalloc(final)");
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
    fill_grad<T>(n, s);
    fill_uniform<<<4096, 256, 0, s>>>(static_cast<T*>(g_ws.h0), shape.sequences(), 0.0f, 1.0f, 4);
    err = cuda_check(cudaGetLastError(), "fill_uniform");
    if (err.empty() && !g_ws.copy_in_arrays)
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
/// own workspace (multi-block tile states, if the path needs them) comes on top. That is the most
/// it takes: a device without room for the copy's buffers holds the copy in the arrays.
constexpr size_t workspace_bytes(int64_t elements, int64_t sequences, size_t elem_bytes,
                                 int64_t offset_count = 0) {
  const size_t bytes = size_t(elements) * elem_bytes;
  return 5 * bytes + 2 * (5 * bytes / 2) + 2 * size_t(sequences) * elem_bytes +
         size_t(offset_count) * sizeof(int32_t) + kFlushBytes;
}

/// The outputs poisoned (all-ones bytes are NaN in every dtype), so that stale results cannot
/// pass a row's check.
template <class T>
std::string poison_outputs() {
  std::string err;
  for (void* out : {g_ws.out, g_ws.grad2})
    if (err.empty())
      err = cuda_check(cudaMemsetAsync(out, 0xFF, size_t(g_ws.n) * sizeof(T), g_gpu.stream),
                       "cudaMemsetAsync(out)");
  return err;
}

/// Where the paired copy ran within the arrays (copy_in_arrays), what it overwrote of the inputs
/// (the upstream gradient: grad lies in its destination) refilled as workspace_for filled it, and
/// the outputs poisoned, for the operation to run once more before its check.
template <class T>
std::string restore_inputs() {
  fill_grad<T>(g_ws.n, g_gpu.stream);
  std::string err = cuda_check(cudaGetLastError(), "fill_uniform");
  if (err.empty()) err = poison_outputs<T>();
  return err;
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

}  // namespace
