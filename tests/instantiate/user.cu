// tests/instantiate/user.cu: a TU that calls ascan through the extern templates of
// ascan/instantiate.cuh and so compiles none of its kernels (they come from kernels.cu). It
// scans and differentiates a small f32 batch on every entry point and checks the results against
// the host reference; without a GPU it returns 77 (ctest: skipped, with the reason printed).
#include <ascan/instantiate.cuh>
#include <ascan/reference/scan_reference.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

ASCAN_EXTERN_TEMPLATES(float)
ASCAN_EXTERN_TEMPLATES(__nv_bfloat16)

namespace {

bool check(const char* what, const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::fmax(worst, std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i])));
  std::printf("%s: worst relative error %.3g\n", what, worst);
  return worst < 1e-5;
}

}  // namespace

int main() {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device (%s)\n", cudaGetErrorString(e));
    return 77;
  }
  const int64_t B = 2, C = 3, T = 5000;
  const size_t n = size_t(B * C * T);
  std::vector<float> a(n), b(n), g(n);
  unsigned s = 7u;
  auto uniform = [&] {
    s = s * 1664525u + 1013904223u;
    return float(s >> 8) / float(1 << 24);
  };
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0.9f + 0.1f * uniform();
    b[i] = uniform() - 0.5f;
    g[i] = uniform() - 0.5f;
  }
  float *da, *db, *dx, *dg, *dga, *dgb;
  for (float** p : {&da, &db, &dx, &dg, &dga, &dgb}) cudaMalloc(p, n * sizeof(float));
  cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dg, g.data(), n * 4, cudaMemcpyHostToDevice);

  // the reference in double, one sequence after another
  std::vector<double> x(n), ga(n), gb(n);
  for (int64_t q = 0; q < B * C; ++q) {
    double h = 0;
    for (int64_t t = 0; t < T; ++t) x[q * T + t] = h = a[q * T + t] * h + b[q * T + t];
    double d = 0;
    for (int64_t t = T - 1; t >= 0; --t) {
      d = g[q * T + t] + (t + 1 < T ? a[q * T + t + 1] * d : 0.0);
      gb[q * T + t] = d;
      ga[q * T + t] = d * (t > 0 ? x[q * T + t - 1] : 0.0);
    }
  }
  std::vector<float> xs(n);
  for (size_t i = 0; i < n; ++i) xs[i] = float(x[i]);  // the states the backward pass takes
  float* dxs;
  cudaMalloc(&dxs, n * sizeof(float));
  cudaMemcpy(dxs, xs.data(), n * 4, cudaMemcpyHostToDevice);

  ascan::ScanArgs<float> fwd;
  fwd.gates = da;
  fwd.tokens = db;
  fwd.out = dx;
  fwd.shape = ascan::time_contiguous(B, C, T);
  ascan::ScanBackwardArgs<float> bwd;
  bwd.gates = da;
  bwd.states = dxs;
  bwd.grad_out = dg;
  bwd.grad_gates = dga;
  bwd.grad_tokens = dgb;
  bwd.shape = fwd.shape;

  bool ok = true;
  std::vector<float> got(n), got2(n);
  for (int entry = 0; entry < 3; ++entry) {
    size_t bytes = 0;
    void* workspace = nullptr;
    ascan::Status st, st2;
    if (entry == 0) {
      st = ascan::scan(fwd, nullptr, bytes);
      if (st.ok()) cudaMalloc(&workspace, bytes);
      if (st.ok()) st = ascan::scan(fwd, workspace, bytes);
      size_t bytes2 = 0;
      void* workspace2 = nullptr;
      st2 = ascan::scan_backward(bwd, nullptr, bytes2);
      if (st2.ok()) cudaMalloc(&workspace2, bytes2);
      if (st2.ok()) st2 = ascan::scan_backward(bwd, workspace2, bytes2);
      cudaDeviceSynchronize();
      cudaFree(workspace2);
    } else if (entry == 1) {
      st = ascan::scan(fwd, ascan::malloc_async);
      st2 = ascan::scan_backward(bwd, ascan::malloc_async);
    } else {
      st = ascan::scan(fwd);
      st2 = ascan::scan_backward(bwd);
    }
    cudaDeviceSynchronize();
    cudaFree(workspace);
    if (!st.ok() || !st2.ok()) {
      std::printf("entry point %d failed: %s / %s\n", entry, st.message, st2.message);
      return 1;
    }
    cudaMemcpy(got.data(), dx, n * 4, cudaMemcpyDeviceToHost);
    ok = check("scan", got, x) && ok;
    cudaMemcpy(got.data(), dgb, n * 4, cudaMemcpyDeviceToHost);
    ok = check("scan_backward grad_tokens", got, gb) && ok;
    cudaMemcpy(got2.data(), dga, n * 4, cudaMemcpyDeviceToHost);
    ok = check("scan_backward grad_gates", got2, ga) && ok;
  }
  for (float* p : {da, db, dx, dg, dga, dgb, dxs}) cudaFree(p);
  return ok && cudaGetLastError() == cudaSuccess ? 0 : 1;
}
