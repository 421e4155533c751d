// downstream/main.cu: a consumer of ascan. Scans one tiny (1, 1, 8) problem on the GPU and
// checks it against the double-precision sequential reference. Without a CUDA device it only
// proves that the headers compile and link, and exits 0.
#include <ascan/ascan.cuh>
#include <ascan/reference/scan_reference.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

int fail(const char* what, cudaError_t e) {
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

}  // namespace

int main() {
  constexpr int64_t kBatch = 1, kChannels = 1, kLength = 8;
  constexpr int64_t kN = kBatch * kChannels * kLength;

  std::vector<float> gates(kN), tokens(kN), out(kN, 0.0f);
  for (int64_t t = 0; t < kN; ++t) {
    gates[t] = 0.5f + 0.0625f * static_cast<float>(t);     // 0.5 .. 0.9375
    tokens[t] = 1.0f - 0.25f * static_cast<float>(t % 3);  // 1, 0.75, 0.5, ...
  }

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the error a driverless machine reports
    std::printf("no CUDA device: compiled and linked against ascan, not run\n");
    return 0;
  }

  float* d_gates = nullptr;
  float* d_tokens = nullptr;
  float* d_out = nullptr;
  const size_t bytes = kN * sizeof(float);
  cudaError_t e = cudaMalloc(&d_gates, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&d_tokens, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&d_out, bytes);
  if (e == cudaSuccess) e = cudaMemcpy(d_gates, gates.data(), bytes, cudaMemcpyHostToDevice);
  if (e == cudaSuccess) e = cudaMemcpy(d_tokens, tokens.data(), bytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return fail("setup", e);

  ascan::ScanArgs<float> args;
  args.gates = d_gates;
  args.tokens = d_tokens;
  args.out = d_out;
  args.shape = ascan::time_contiguous(kBatch, kChannels, kLength);

  cudaStream_t stream = nullptr;
  const ascan::Status st = ascan::scan(args, stream);
  if (!st.ok()) {
    std::fprintf(stderr, "ascan::scan failed: %s\n", st.message);
    return 1;
  }
  e = cudaStreamSynchronize(stream);
  if (e == cudaSuccess) e = cudaMemcpy(out.data(), d_out, bytes, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return fail("scan", e);
  cudaFree(d_gates);
  cudaFree(d_tokens);
  cudaFree(d_out);

  std::vector<double> a(gates.begin(), gates.end()), b(tokens.begin(), tokens.end()), x(kN);
  ascan::reference::sequential_scan(a.data(), b.data(), kLength, /*reverse=*/false,
                                    /*h0=*/0.0, x.data());

  int bad = 0;
  for (int64_t t = 0; t < kN; ++t) {
    const double err = std::fabs(static_cast<double>(out[t]) - x[t]);
    if (err > 1e-5 * (1.0 + std::fabs(x[t]))) {
      std::fprintf(stderr, "x[%lld] = %.8g, reference %.8g\n", static_cast<long long>(t),
                   static_cast<double>(out[t]), x[t]);
      ++bad;
    }
  }
  if (bad != 0) return 1;
  std::printf("ascan::scan matches the reference on a (1, 1, 8) problem\n");
  return 0;
}
