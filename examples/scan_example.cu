// examples/scan_example.cu: scan a batch of random sequences on the GPU, check the result against
// the double-precision reference, and time it.
//
//     x[t] = a[t] * x[t-1] + b[t]   for (batch, channels, length) = (8, 1536, 4096), float
//
// Exits non-zero when there is no GPU, when a call fails, or when the error is over tolerance.
#include <cuda_runtime.h>

#include <ascan/ascan.cuh>
#include <ascan/reference/scan_reference.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#define CHECK_CUDA(call)                                                      \
  do {                                                                        \
    const cudaError_t e_ = (call);                                            \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "scan_example: no CUDA device found; this example needs an NVIDIA GPU.\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));

  const int64_t B = 8, C = 1536, T = 4096, N = B * C * T;
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> gate(0.9f, 1.0f), token(-1.0f, 1.0f);
  std::vector<float> a(N), b(N), x(N);
  for (int64_t i = 0; i < N; ++i) a[i] = gate(rng), b[i] = token(rng);

  float *d_a, *d_b, *d_x;
  CHECK_CUDA(cudaMalloc(&d_a, N * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_b, N * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_x, N * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(d_a, a.data(), N * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_b, b.data(), N * sizeof(float), cudaMemcpyHostToDevice));

  ascan::ScanArgs<float> args;
  args.gates = d_a;
  args.tokens = d_b;
  args.out = d_x;
  args.shape = ascan::time_contiguous(B, C, T);

  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  ascan::Status st = ascan::scan(args);  // warm-up (module load)
  if (!st.ok()) {
    std::fprintf(stderr, "ascan::scan failed: %s\n", st.message);
    return 1;
  }
  CHECK_CUDA(cudaEventRecord(start));
  st = ascan::scan(args);
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  if (!st.ok()) {
    std::fprintf(stderr, "ascan::scan failed: %s\n", st.message);
    return 1;
  }
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaMemcpy(x.data(), d_x, N * sizeof(float), cudaMemcpyDeviceToHost));

  // Worst per-sequence relative L2 error against the sequential loop in double.
  std::vector<double> ad(T), bd(T), ref(T);
  double worst = 0;
  for (int64_t s = 0; s < B * C; ++s) {
    for (int64_t t = 0; t < T; ++t) ad[t] = a[s * T + t], bd[t] = b[s * T + t];
    ascan::reference::sequential_scan(ad.data(), bd.data(), T, false, 0.0, ref.data());
    double num = 0, den = 0;
    for (int64_t t = 0; t < T; ++t) {
      const double d = x[s * T + t] - ref[t];
      num += d * d;
      den += ref[t] * ref[t];
    }
    const double err = std::sqrt(num / (den > 0 ? den : 1));
    worst = std::isnan(err) || err > worst ? err : worst;
  }
  const double gb = 3.0 * N * sizeof(float) / 1e9;
  std::printf("ascan example on %s: (B, C, T) = (%lld, %lld, %lld) float\n", prop.name,
              static_cast<long long>(B), static_cast<long long>(C), static_cast<long long>(T));
  std::printf("  worst relative L2 error per sequence: %.3e (tolerance 1e-5)\n", worst);
  std::printf("  time: %.3f ms (%.0f GB/s, one run, L2 not flushed; see bench/ for timings)\n", ms,
              gb / (ms / 1e3));
  cudaFree(d_a);
  cudaFree(d_b);
  cudaFree(d_x);
  const bool ok = worst <= 1e-5;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
