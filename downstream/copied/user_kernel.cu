// downstream/copied/user_kernel.cu: the device layers used the way README's "Using it" says a
// user may take them: affine.cuh, warp_scan.cuh and block_scan.cuh copied into one folder of the
// user's project (.ci/run copies them flat and compiles this file against that folder alone).
//
// A user kernel: one block per sequence of n <= kThreads steps, x[t] = a[t] x[t-1] + b[t] from
// x[-1] = h0, with BlockScan; and one warp per sequence of 32 steps with WarpScan. Checked
// against a serial loop in double on the host. Without a GPU it says so and exits 0 (the
// compile is what CI checks there).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "block_scan.cuh"  // beside affine.cuh, not under ascan/
#include "warp_scan.cuh"

constexpr int kThreads = 256;

__global__ void block_recurrence(const float* a, const float* b, const float* h0, float* x, int n) {
  using Scan = ascan::BlockScan<float, kThreads>;
  __shared__ Scan::TempStorage storage;
  const int t = threadIdx.x;
  const size_t base = size_t(blockIdx.x) * n;
  const ascan::Affine<float> pair =
      t < n ? ascan::Affine<float>{a[base + t], b[base + t]} : ascan::affine_identity<float>();
  float carry = h0[blockIdx.x];
  const float before = Scan(storage).scan_state(pair, carry);  // the state entering step t
  if (t < n) x[base + t] = pair.a * before + pair.b;
}

__global__ void warp_recurrence(const float* a, const float* b, float* x) {
  using Scan = ascan::WarpScan<float>;
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;  // one warp: 32 steps
  float carry = 0.0f;
  const float before = Scan::scan_state(ascan::Affine<float>{a[i], b[i]}, carry);
  x[i] = a[i] * before + b[i];
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("user_kernel: compiled against the copied headers; no GPU here, nothing run\n");
    return 0;
  }
  const int seqs = 64, n = 200;  // block kernel: 64 sequences of 200 steps
  std::vector<float> a(seqs * n), b(seqs * n), h0(seqs), x(seqs * n);
  unsigned s = 12345u;
  auto uniform = [&] {
    s = s * 1664525u + 1013904223u;
    return float(s >> 8) / float(1 << 24);
  };
  for (auto& v : a) v = 0.5f + 0.5f * uniform();
  for (auto& v : b) v = uniform() - 0.5f;
  for (auto& v : h0) v = uniform();
  float *da, *db, *dh, *dx;
  cudaMalloc(&da, a.size() * 4);
  cudaMalloc(&db, b.size() * 4);
  cudaMalloc(&dh, h0.size() * 4);
  cudaMalloc(&dx, x.size() * 4);
  cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dh, h0.data(), h0.size() * 4, cudaMemcpyHostToDevice);
  double worst = 0;
  block_recurrence<<<seqs, kThreads>>>(da, db, dh, dx, n);
  cudaMemcpy(x.data(), dx, x.size() * 4, cudaMemcpyDeviceToHost);
  for (int q = 0; q < seqs; ++q) {
    double h = h0[q];
    for (int t = 0; t < n; ++t) {
      h = double(a[q * n + t]) * h + b[q * n + t];
      worst = std::fmax(worst, std::fabs(x[q * n + t] - h) / (1.0 + std::fabs(h)));
    }
  }
  warp_recurrence<<<seqs * n / 32 / 8, 256>>>(da, db, dx);  // 12800 steps: 400 warps of 32
  cudaMemcpy(x.data(), dx, x.size() * 4, cudaMemcpyDeviceToHost);
  for (int w = 0; w < seqs * n / 32; ++w) {
    double h = 0;
    for (int t = 0; t < 32; ++t) {
      const int i = w * 32 + t;
      h = double(a[i]) * h + b[i];
      worst = std::fmax(worst, std::fabs(x[i] - h) / (1.0 + std::fabs(h)));
    }
  }
  const cudaError_t e = cudaDeviceSynchronize();
  cudaFree(da);
  cudaFree(db);
  cudaFree(dh);
  cudaFree(dx);
  std::printf("user_kernel: worst relative error %.3g (%s)\n", worst, cudaGetErrorString(e));
  return e == cudaSuccess && worst < 1e-5 ? 0 : 1;
}
