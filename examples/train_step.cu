// examples/train_step.cu: one training-style step on the GPU (forward scan, a loss, backward
// pass), with a few gradient entries checked against central finite differences on the GPU.
//
//     x[t] = a[t] * x[t-1] + b[t],  x[-1] = h0     for (batch, channels, length) = (4, 256, 2048)
//     L    = sum_t w[t] * x[t]  +  sum over sequences of wT * x[T-1]
//
// so the upstream gradients are dL/dx = w and dL/d(final state) = wT. The whole example runs in
// double so that the finite-difference check is not drowned in rounding noise; a float (or
// 16-bit) model calls ascan::scan and ascan::scan_backward exactly the same way with float.
//
// Exits 2 when there is no GPU, 1 when a call fails or a gradient is off, 0 otherwise.
#include <cuda_runtime.h>

#include <ascan/ascan.cuh>
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

#define CHECK_ASCAN(call)                                         \
  do {                                                            \
    const ascan::Status s_ = (call);                              \
    if (!s_.ok()) {                                               \
      std::fprintf(stderr, "%s failed: %s\n", #call, s_.message); \
      return 1;                                                   \
    }                                                             \
  } while (0)

using Real = double;
constexpr int kLossBlocks = 256, kLossThreads = 256;

// Per-block partial sums of the loss, in double; the host adds the kLossBlocks partials in a fixed
// order, so the loss is deterministic (no atomics) and L+ and L- differ only by the perturbation.
__global__ void loss_partials(const Real* x, const Real* w, int64_t n, const Real* x_final,
                              const Real* w_final, int64_t sequences, double* partials) {
  __shared__ double sum[kLossThreads];
  double acc = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    acc += double(w[i]) * double(x[i]);
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < sequences; i += stride)
    acc += double(w_final[i]) * double(x_final[i]);
  sum[threadIdx.x] = acc;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sum[threadIdx.x] += sum[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sum[0];
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "train_step: no CUDA device found; this example needs an NVIDIA GPU.\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));

  const int64_t B = 4, C = 256, T = 2048, S = B * C, N = S * T;
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<Real> gate(0.9, 1.0), unit(-1.0, 1.0);
  std::vector<Real> a(N), b(N), w(N), h0(S), wT(S);
  for (int64_t i = 0; i < N; ++i) a[i] = gate(rng), b[i] = unit(rng), w[i] = unit(rng);
  for (int64_t s = 0; s < S; ++s) h0[s] = unit(rng), wT[s] = unit(rng);

  // Device arrays: N-sized a, b, x, w (= grad_out), da, db; S-sized h0, x_final, wT, dh0.
  Real *d_a, *d_b, *d_x, *d_w, *d_da, *d_db, *d_h0, *d_xT, *d_wT, *d_dh0;
  double* d_partials;
  for (Real** p : {&d_a, &d_b, &d_x, &d_w, &d_da, &d_db})
    CHECK_CUDA(cudaMalloc(p, N * sizeof(Real)));
  for (Real** p : {&d_h0, &d_xT, &d_wT, &d_dh0}) CHECK_CUDA(cudaMalloc(p, S * sizeof(Real)));
  CHECK_CUDA(cudaMalloc(&d_partials, kLossBlocks * sizeof(double)));
  CHECK_CUDA(cudaMemcpy(d_a, a.data(), N * sizeof(Real), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_b, b.data(), N * sizeof(Real), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_w, w.data(), N * sizeof(Real), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_h0, h0.data(), S * sizeof(Real), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_wT, wT.data(), S * sizeof(Real), cudaMemcpyHostToDevice));

  // Forward: x = scan(a, b) from h0, final state x[T-1] of each sequence into d_xT.
  ascan::ScanArgs<Real> fwd;
  fwd.gates = d_a;
  fwd.tokens = d_b;
  fwd.out = d_x;
  fwd.shape = ascan::time_contiguous(B, C, T);
  fwd.initial_state = d_h0;
  fwd.final_state = d_xT;

  // Backward: dL/dx = w, dL/d(final state) = wT; gradients of a, b and h0.
  ascan::ScanBackwardArgs<Real> bwd;
  bwd.gates = d_a;
  bwd.states = d_x;
  bwd.grad_out = d_w;
  bwd.grad_gates = d_da;
  bwd.grad_tokens = d_db;
  bwd.shape = fwd.shape;
  bwd.initial_state = d_h0;
  bwd.grad_final_state = d_wT;
  bwd.grad_initial_state = d_dh0;

  std::vector<double> partials(kLossBlocks);
  double loss = 0;  // set by forward_loss: runs the forward scan and reduces L on the GPU
  auto forward_loss = [&]() -> cudaError_t {
    if (const ascan::Status st = ascan::scan(fwd); !st.ok()) {
      std::fprintf(stderr, "ascan::scan failed: %s\n", st.message);
      return st.cuda != cudaSuccess ? st.cuda : cudaErrorInvalidValue;
    }
    loss_partials<<<kLossBlocks, kLossThreads>>>(d_x, d_w, N, d_xT, d_wT, S, d_partials);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    const cudaError_t e = cudaMemcpy(partials.data(), d_partials, kLossBlocks * sizeof(double),
                                     cudaMemcpyDeviceToHost);
    loss = 0;
    for (const double p : partials) loss += p;
    return e;
  };

  // The training step: forward, loss, backward.
  CHECK_CUDA(forward_loss());
  CHECK_ASCAN(ascan::scan_backward(bwd));
  std::vector<Real> da(N), db(N), dh0(S);
  CHECK_CUDA(cudaMemcpy(da.data(), d_da, N * sizeof(Real), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(db.data(), d_db, N * sizeof(Real), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(dh0.data(), d_dh0, S * sizeof(Real), cudaMemcpyDeviceToHost));
  std::printf("train_step on %s: (B, C, T) = (%lld, %lld, %lld) double, loss L = %.10f\n",
              prop.name, static_cast<long long>(B), static_cast<long long>(C),
              static_cast<long long>(T), loss);

  // Central finite differences, on the GPU: set one input element to v + eps and v - eps (one
  // cudaMemcpy each), rerun the forward and the loss, restore v. L is affine in any single
  // element of a, b or h0 (x[t] is linear in a[t], b[t] and h0, and the later states are
  // linear in x[t]), so the central difference has no truncation error and eps only has to be
  // large enough for rounding in L (a sum of ~2M terms) to stay far below L+ - L-.
  const Real eps = 1e-2;
  const double tol = 1e-6;
  bool ok = true;
  struct Input {
    const char* name;
    Real* dev;
    const std::vector<Real>* host;  // the unperturbed values
    const std::vector<Real>* grad;  // the backward's gradient
    int64_t n;
  };
  const Input inputs[] = {
      {"da", d_a, &a, &da, N}, {"db", d_b, &b, &db, N}, {"dh0", d_h0, &h0, &dh0, S}};
  for (const Input& in : inputs) {
    // Five positions: for a and b the first and last step of a sequence (they meet h0 and the
    // final-state gradient) and three random ones; for h0 five random sequences.
    std::uniform_int_distribution<int64_t> pick(0, in.n - 1), seq(0, S - 1);
    std::vector<int64_t> at;
    if (in.n == N) at = {seq(rng) * T, seq(rng) * T + T - 1};
    while (at.size() < 5) at.push_back(pick(rng));
    for (const int64_t i : at) {
      const Real v = (*in.host)[i];
      double loss_pm[2];
      for (int k = 0; k < 2; ++k) {
        const Real vk = k == 0 ? v + eps : v - eps;
        CHECK_CUDA(cudaMemcpy(in.dev + i, &vk, sizeof(Real), cudaMemcpyHostToDevice));
        CHECK_CUDA(forward_loss());
        loss_pm[k] = loss;
      }
      CHECK_CUDA(cudaMemcpy(in.dev + i, &v, sizeof(Real), cudaMemcpyHostToDevice));
      const double fd = (loss_pm[0] - loss_pm[1]) / (2 * eps), g = (*in.grad)[i];
      const double rel =
          std::fabs(g - fd) / std::fmax(std::fmax(std::fabs(g), std::fabs(fd)), 1e-30);
      const bool good = rel <= tol;  // also false for NaN
      ok = ok && good;
      if (in.n == N)
        std::printf("  %-3s (seq %4lld, t %4lld): backward % .12e  fd % .12e  rel %.1e%s\n",
                    in.name, static_cast<long long>(i / T), static_cast<long long>(i % T), g, fd,
                    rel, good ? "" : "  <-- off");
      else
        std::printf("  %-3s (seq %4lld)        : backward % .12e  fd % .12e  rel %.1e%s\n", in.name,
                    static_cast<long long>(i), g, fd, rel, good ? "" : "  <-- off");
    }
  }
  for (Real* p : {d_a, d_b, d_x, d_w, d_da, d_db, d_h0, d_xT, d_wT, d_dh0}) cudaFree(p);
  cudaFree(d_partials);
  std::printf("%s (tolerance %.0e relative)\n", ok ? "OK" : "FAILED", tol);
  return ok ? 0 : 1;
}
