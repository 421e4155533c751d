// bench/bench_check.cuh: the check after every timed row: the first and last sequence of the
// output (for packed batches also the longest and the one after it) against a double loop over
// the same stored inputs, strided sequences read through a device gather, so that a broken
// kernel cannot show a fast number. Included by scan_bench.cu only (its anonymous namespace).
#pragma once

#include "bench_harness.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

// dst[i] = src[i * stride] for i in [0, n): one strided sequence gathered for the checks.
template <class T>
__global__ void gather_strided(T* dst, const T* src, int64_t stride, int64_t n) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += step)
    dst[i] = src[i * stride];
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

}  // namespace
