// bench/probes/dense_as_packed.cu: a dense time-contiguous call of S sequences of T elements,
// scanned as it is (ascan::scan on time_contiguous(1, S, T)) and as one packed row of S sequences
// (time_contiguous(1, 1, S * T) with cu_seqlens = 0, T, 2T, ..., S * T: the packed windows of
// dispatch/flat_packed.cuh, whose work does not depend on T), forward and backward, no states.
//
// Issue 20's hint: a dense tensor is a packed tensor of equal-length sequences. The sweep's cells
// of many short sequences (S >= 4096, T <= 300) miss the copy on the H100 and the H200
// (bench/RESULTS.md, "Why the cells miss"); bench/probes/serial_tiles.cu found that blocks holding
// far more bytes in flight (a range staged whole in shared memory) lift T <= 100. The packed
// windows stage 10-16 KiB of each input a block by cp.async. This probe measures whether routing
// such dense calls to the window kernel would pay before any dispatch is written for it.
//
// Each cell is timed by ascan_bench's own time_median (bench/bench_harness.cuh): 3 warm-ups, 51
// samples each after a 256 MiB memset that flushes the L2, each paired with a same-traffic
// cudaMemcpyAsync (forward 3 streams, backward 5), the pair's order alternating, each side the mean
// of its two orders' medians. Both entry points two-phase with a workspace. Forward outputs are
// checked against a double loop on the rounded inputs (every 61st sequence and the last), and
// the packed backward's gradients against the dense call's (largest difference over the largest
// magnitude, every element).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I include bench/probes/dense_as_packed.cu -o dense_as_packed
//   ./dense_as_packed
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <ascan/ascan.cuh>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "probe_util.cuh"  // CHECK, time_paired (bench_harness.cuh's timing), the checks

template <class T>
void run_cell(int64_t s_count, int length) {
  const cudaStream_t st = g_gpu.stream;
  const int64_t n = s_count * length;
  std::mt19937_64 rng(s_count * 1000003 + length);
  std::uniform_real_distribution<float> gate(0.999f, 1.0f), token(0.0f, 1.0f);
  std::vector<T> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = T(gate(rng));
    b[i] = T(token(rng));
  }
  std::vector<int32_t> offsets(s_count + 1);
  for (int64_t s = 0; s <= s_count; ++s) offsets[s] = int32_t(s * length);
  const size_t bytes = size_t(n) * sizeof(T);
  T *da, *db, *dx, *dg, *dga, *dgt;
  int32_t* doff;
  void *csrc, *cdst, *work;
  const size_t cbytes = 5 * bytes / 2;  // the backward's; the forward copies 3 * bytes / 2
  for (T** p : {&da, &db, &dx, &dg, &dga, &dgt}) CHECK(cudaMalloc(p, bytes));
  CHECK(cudaMalloc(&doff, offsets.size() * sizeof(int32_t)));
  CHECK(cudaMalloc(&csrc, cbytes));
  CHECK(cudaMalloc(&cdst, cbytes));
  CHECK(cudaMemset(csrc, 0x3C, cbytes));
  CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dg, b.data(), bytes, cudaMemcpyHostToDevice));  // an upstream gradient
  CHECK(cudaMemcpy(doff, offsets.data(), offsets.size() * sizeof(int32_t), cudaMemcpyHostToDevice));

  ascan::ScanArgs<T> dense;
  dense.gates = da;
  dense.tokens = db;
  dense.out = dx;
  dense.shape = ascan::time_contiguous(1, s_count, length);
  ascan::ScanArgs<T> packed = dense;
  packed.shape = ascan::time_contiguous(1, 1, n);
  packed.packed = ascan::packed(doff, s_count);
  ascan::ScanBackwardArgs<T> dense_bwd;
  dense_bwd.gates = da;
  dense_bwd.states = dx;
  dense_bwd.grad_out = dg;
  dense_bwd.grad_gates = dga;
  dense_bwd.grad_tokens = dgt;
  dense_bwd.shape = dense.shape;
  ascan::ScanBackwardArgs<T> packed_bwd = dense_bwd;
  packed_bwd.shape = packed.shape;
  packed_bwd.packed = packed.packed;

  size_t wbytes = 0;
  const auto need = [&](const ascan::Status& q, size_t w) {
    if (!q.ok()) {
      std::printf("workspace query: %s\n", q.message);
      std::exit(1);
    }
    wbytes = std::max(wbytes, w);
  };
  size_t w[4] = {0, 0, 0, 0};
  const ascan::Status q[4] = {ascan::scan(dense, nullptr, w[0], st),
                              ascan::scan(packed, nullptr, w[1], st),
                              ascan::scan_backward(dense_bwd, nullptr, w[2], st),
                              ascan::scan_backward(packed_bwd, nullptr, w[3], st)};
  for (int i = 0; i < 4; ++i) need(q[i], w[i]);  // the sizes once every query has returned
  CHECK(cudaMalloc(&work, std::max<size_t>(wbytes, 1)));
  const char* name = std::is_same_v<T, float> ? "f32" : "bf16";

  // forward: dense, then packed (out poisoned before each)
  std::vector<T> got[2];
  Timing fwd[2];
  for (int k = 0; k < 2; ++k) {
    const ascan::ScanArgs<T>& args = k == 0 ? dense : packed;
    CHECK(cudaMemsetAsync(dx, 0xFF, bytes, st));
    fwd[k] = time_paired(
        [&] {
          size_t wb = wbytes;
          return ascan::scan(args, work, wb, st);
        },
        cdst, csrc, 3 * bytes / 2);
    CHECK(cudaStreamSynchronize(st));
    got[k] = fetch(dx, n);
  }
  // backward, from the dense forward's states (dx holds the packed forward's: the same to within
  // rounding; restored to the dense one's so that both passes read the same states)
  CHECK(cudaMemcpy(dx, got[0].data(), bytes, cudaMemcpyHostToDevice));
  std::vector<T> gg[2], gt[2];
  Timing bwd[2];
  for (int k = 0; k < 2; ++k) {
    const ascan::ScanBackwardArgs<T>& args = k == 0 ? dense_bwd : packed_bwd;
    CHECK(cudaMemsetAsync(dga, 0xFF, bytes, st));
    CHECK(cudaMemsetAsync(dgt, 0xFF, bytes, st));
    bwd[k] = time_paired(
        [&] {
          size_t wb = wbytes;
          return ascan::scan_backward(args, work, wb, st);
        },
        cdst, csrc, cbytes);
    CHECK(cudaStreamSynchronize(st));
    gg[k] = fetch(dga, n);
    gt[k] = fetch(dgt, n);
  }
  const double e_dense = check_forward(a, b, got[0], s_count, length);
  const double e_packed = check_forward(a, b, got[1], s_count, length);
  const double d_bwd =
      std::max(relative_difference(gg[1], gg[0]), relative_difference(gt[1], gt[0]));
  std::printf(
      "%-4s %6lld %5d | fwd copy %7.2f dense %7.2f %5.3f packed %7.2f %5.3f | bwd copy %7.2f "
      "dense %7.2f %5.3f packed %7.2f %5.3f | fwd err %.2g / %.2g ulp, bwd diff %.2g\n",
      name, static_cast<long long>(s_count), length, fwd[0].copy_us, fwd[0].op_us,
      fwd[0].copy_us / fwd[0].op_us, fwd[1].op_us, fwd[1].copy_us / fwd[1].op_us, bwd[0].copy_us,
      bwd[0].op_us, bwd[0].copy_us / bwd[0].op_us, bwd[1].op_us, bwd[1].copy_us / bwd[1].op_us,
      e_dense, e_packed, d_bwd);
  std::fflush(stdout);
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dx),
                  static_cast<void*>(dg), static_cast<void*>(dga), static_cast<void*>(dgt),
                  static_cast<void*>(doff), csrc, cdst, work})
    CHECK(cudaFree(p));
}

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "# %s, %d SMs; times in us (each side the mean of its two orders' medians of 51);\n"
      "# efficiency = copy / op; dense: time_contiguous(1, S, T); packed: one row of S\n"
      "# sequences of T (cu_seqlens int32), no states, two-phase with a workspace\n",
      prop.name, prop.multiProcessorCount);
  if (const std::string& err = gpu_setup(); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  for (int64_t s : {1024, 4096, 16384, 65536})
    for (int t : {1, 7, 33, 100, 300, 700, 1500}) {
      run_cell<float>(s, t);
      run_cell<__nv_bfloat16>(s, t);
    }
  gpu_teardown();
  return 0;
}
