// bench/probes/probe_util.cuh: what the probes that time kernels against a paired copy share
// (dense_as_packed.cu, serial_path.cu, serial_tiles.cu, stream_rows.cu, short_rows.cu): a CUDA
// check that exits, ascan_bench's own paired timing (bench_harness.cuh's time_median) around a
// launch that returns an ascan::Status or a cudaError_t, the conversions and the hashed inputs
// of the kernels they try, and the checks of outputs against a double loop or against another
// path's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <ascan/ascan.cuh>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "../bench_harness.cuh"  // gpu_setup, time_median and Pairing: the rows' timing

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

struct Timing {
  float op_us, copy_us;
};

/// What went wrong in a launch, empty where nothing did: an ascan::Status or a CUDA error.
inline std::string launch_message(const ascan::Status& s) {
  return s.ok() ? std::string() : std::string(s.message);
}
inline std::string launch_message(cudaError_t e) { return cuda_check(e, "launch"); }

/// `launch` (returning an ascan::Status or a cudaError_t) timed as ascan_bench times a row
/// (time_median), paired with a copy of `copy_bytes` from `src` to `dst`.
template <class Launch>
Timing time_paired(const Launch& launch, void* dst, const void* src, size_t copy_bytes) {
  g_pair = Pairing{};
  g_pair.copy_bytes = copy_bytes;
  g_pair.copy_dst = dst;
  g_pair.copy_src = src;
  double ms = 0.0;
  const std::string err = time_median([&] { return launch_message(launch()); }, &ms);
  g_pair.copy_bytes = 0;
  if (!err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    std::exit(1);
  }
  return {float(ms * 1e3), float(g_pair.copy_ms * 1e3)};
}

/// A storage value in float, and a float rounded to storage (f32 and bf16), on the device.
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_f(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return __float2bfloat16_rn(v);
}

/// Gates in [0.9, 1), tokens in [-1, 1), from a hash of the index (device-side, any size).
template <class T>
__global__ void fill_gates_tokens(T* a, T* b, size_t n, uint64_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    const float u = float(h & 0xFFFFFF) / float(1 << 24);
    const float w = float((h >> 24) & 0xFFFFFF) / float(1 << 24);
    a[i] = from_f<T>(0.9f + 0.1f * u);
    b[i] = from_f<T>(2.0f * w - 1.0f);
  }
}

float host_f(float v) { return v; }
float host_f(__nv_bfloat16 v) { return __bfloat162float(v); }

/// Largest error of `got` against a double loop on the rounded inputs, in units of the output's
/// rounding at the reference's magnitude, over every 61st sequence and the last.
template <class T>
double check_forward(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& got,
                     int64_t s_count, int length) {
  double worst = 0;
  const double ulp = std::is_same_v<T, float> ? std::ldexp(1.0, -23) : std::ldexp(1.0, -7);
  for (int64_t s = 0; s < s_count; ++s) {
    if (s % 61 != 0 && s != s_count - 1) continue;
    double x = 0;
    for (int t = 0; t < length; ++t) {
      const int64_t i = s * length + t;
      x = double(host_f(a[i])) * x + double(host_f(b[i]));
      const double err =
          std::fabs(double(host_f(got[i])) - x) / (ulp * std::max(std::fabs(x), 1e-30));
      if (!(err <= 1e30)) return INFINITY;  // NaN or Inf
      worst = std::max(worst, err);
    }
  }
  return worst;
}

/// Largest error of a dense channel-last (batch, length, channels) forward scan's output `got`
/// against a double loop on the rounded inputs, in units of the output's rounding at
/// max(|reference|, 1): every position of every 61st channel and the last.
template <class T>
double check_channel_last(const std::vector<T>& a, const std::vector<T>& b,
                          const std::vector<T>& got, int64_t batch, int64_t length,
                          int64_t channels) {
  double worst = 0;
  const double ulp = std::is_same_v<T, float> ? std::ldexp(1.0, -23) : std::ldexp(1.0, -7);
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      if (c % 61 != 0 && c != channels - 1) continue;
      double x = 0;
      for (int64_t t = 0; t < length; ++t) {
        const size_t i = size_t((s * length + t) * channels + c);
        x = double(host_f(a[i])) * x + double(host_f(b[i]));
        const double err =
            std::fabs(double(host_f(got[i])) - x) / (ulp * std::max(std::fabs(x), 1.0));
        if (!(err <= 1e30)) return INFINITY;  // NaN or Inf
        worst = std::max(worst, err);
      }
    }
  return worst;
}

/// Largest |x - y| over the largest |y|, every element (NaN or Inf: infinity).
template <class T>
double relative_difference(const std::vector<T>& x, const std::vector<T>& y) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double u = host_f(x[i]), v = host_f(y[i]);
    if (!std::isfinite(u) || !std::isfinite(v)) return INFINITY;
    diff = std::max(diff, std::fabs(u - v));
    scale = std::max(scale, std::fabs(v));
  }
  return diff / std::max(scale, 1e-30);
}

template <class T>
std::vector<T> fetch(const T* d, int64_t n) {
  std::vector<T> h(n);
  CHECK(cudaMemcpy(h.data(), d, size_t(n) * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
