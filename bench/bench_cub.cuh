// bench/bench_cub.cuh: the CUB baseline of the cub/... rows: cub::DeviceScan::InclusiveScan
// over the flattened batch with the affine-pair operator, what a user gets from CUB alone.
// Included by scan_bench.cu only (its anonymous namespace).
#pragma once

#include "bench_harness.cuh"

#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>
#include <cub/device/device_scan.cuh>

#include <cstdint>
#include <limits>
#include <string>

namespace {

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

/// Times CUB's scan of the case in g_ws (its two-phase temp storage allocated before timing).
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

}  // namespace
