// bench/probes/serial_path.cu: the serial kernel (dispatch/serial_kernels.cuh, Path::kSerial)
// forced against the flat kernel forced (Path::kFlat), one block per sequence forced
// (Path::kOneBlock), many blocks per sequence forced (Path::kMultiBlock) and the library's choice
// (Path::kAuto), on dense time-contiguous calls, forward and backward, f32 and bf16, no states;
// a path that does not take a call prints "-". The measurement behind the serial rule, the flat
// rule's bounds and the cells between the sweep's.
//
// Each call is timed by ascan_bench's own time_median (bench/bench_harness.cuh): 3 warm-ups, 51
// samples each after a 256 MiB memset that flushes the L2, each paired with a same-traffic
// cudaMemcpyAsync (forward 3 streams, backward 5), the pair's order alternating, each side the mean
// of its two orders' medians. Every path's forward output is checked against a double loop on the
// rounded inputs (every 61st sequence and the last) and its backward gradients against the
// one-block path's (largest difference over the largest magnitude, every element).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I include bench/probes/serial_path.cu -o serial_path
//   ./serial_path                       the cells of 16384-65536 sequences of 1-200 elements
//   ./serial_path 65536:700,1500 16384:300  those cells (S:T[,T...]), f32 and bf16
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <ascan/ascan.cuh>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "probe_util.cuh"  // CHECK, time_paired (bench_harness.cuh's timing), the checks

namespace d = ascan::detail;
constexpr d::Path kPaths[] = {d::Path::kAuto, d::Path::kSerial, d::Path::kFlat, d::Path::kOneBlock,
                              d::Path::kMultiBlock};
constexpr const char* kPathNames[] = {"auto", "serial", "flat", "one-block", "multi-block"};
constexpr int kPathCount = 5;

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
  const size_t bytes = size_t(n) * sizeof(T);
  T *da, *db, *dx, *dg, *dga, *dgt;
  void *csrc, *cdst, *work;
  const size_t cbytes = 5 * bytes / 2;  // the backward's; the forward copies 3 * bytes / 2
  for (T** p : {&da, &db, &dx, &dg, &dga, &dgt}) CHECK(cudaMalloc(p, bytes));
  CHECK(cudaMalloc(&csrc, cbytes));
  CHECK(cudaMalloc(&cdst, cbytes));
  CHECK(cudaMemset(csrc, 0x3C, cbytes));
  CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dg, b.data(), bytes, cudaMemcpyHostToDevice));  // an upstream gradient
  ascan::ScanArgs<T> fwd;
  fwd.gates = da;
  fwd.tokens = db;
  fwd.out = dx;
  fwd.shape = ascan::time_contiguous(1, s_count, length);
  ascan::ScanBackwardArgs<T> bwd;
  bwd.gates = da;
  bwd.states = dx;
  bwd.grad_out = dg;
  bwd.grad_gates = dga;
  bwd.grad_tokens = dgt;
  bwd.shape = fwd.shape;
  size_t wbytes = 1;
  for (d::Path path : kPaths) {
    size_t w = 0;
    const ascan::Status q = d::scan_with(fwd, d::Scratch::two_phase(nullptr, w), st, path);
    if (q.ok()) wbytes = std::max(wbytes, w);
    w = 0;
    const ascan::Status r = d::scan_backward_with(bwd, d::Scratch::two_phase(nullptr, w), st, path);
    if (r.ok()) wbytes = std::max(wbytes, w);
  }
  CHECK(cudaMalloc(&work, wbytes));
  const char* name = std::is_same_v<T, float> ? "f32" : "bf16";
  std::vector<T> states;  // the one-block forward's, read by every backward
  {
    size_t wb = wbytes;
    const ascan::Status r =
        d::scan_with(fwd, d::Scratch::two_phase(work, wb), st, d::Path::kOneBlock);
    if (!r.ok()) {
      std::printf("one-block forward: %s\n", r.message);
      std::exit(1);
    }
    CHECK(cudaStreamSynchronize(st));
    states = fetch(dx, n);
  }
  std::vector<T> ref_ga, ref_gt;
  for (int pass = 0; pass < 2; ++pass) {
    std::printf("%-4s %6lld %4d %s | copy", name, static_cast<long long>(s_count), length,
                pass == 0 ? "fwd" : "bwd");
    Timing t[kPathCount];
    bool ran[kPathCount] = {};
    double err[kPathCount] = {};
    // one-block first in the backward: its gradients are the others' reference
    for (int k : {3, 0, 1, 2, 4}) {
      const d::Path path = kPaths[k];
      size_t w = 0;
      const ascan::Status q =
          pass == 0 ? d::scan_with(fwd, d::Scratch::two_phase(nullptr, w), st, path)
                    : d::scan_backward_with(bwd, d::Scratch::two_phase(nullptr, w), st, path);
      if (!q.ok()) continue;  // the path does not take the call (the serial kernel's bound)
      ran[k] = true;
      if (pass == 0) {
        CHECK(cudaMemsetAsync(dx, 0xFF, bytes, st));
      } else {
        CHECK(cudaMemcpy(dx, states.data(), bytes, cudaMemcpyHostToDevice));
        CHECK(cudaMemsetAsync(dga, 0xFF, bytes, st));
        CHECK(cudaMemsetAsync(dgt, 0xFF, bytes, st));
      }
      t[k] = time_paired(
          [&] {
            size_t wb = wbytes;
            return pass == 0
                       ? d::scan_with(fwd, d::Scratch::two_phase(work, wb), st, path)
                       : d::scan_backward_with(bwd, d::Scratch::two_phase(work, wb), st, path);
          },
          cdst, csrc, pass == 0 ? 3 * bytes / 2 : cbytes);
      CHECK(cudaStreamSynchronize(st));
      if (pass == 0) {
        err[k] = check_forward(a, b, fetch(dx, n), s_count, length);
      } else if (k == 3) {
        ref_ga = fetch(dga, n);
        ref_gt = fetch(dgt, n);
      } else {
        err[k] = std::max(relative_difference(fetch(dga, n), ref_ga),
                          relative_difference(fetch(dgt, n), ref_gt));
      }
    }
    std::printf(" %7.2f", t[3].copy_us);
    for (int k = 0; k < kPathCount; ++k) {
      if (ran[k])
        std::printf(" | %s %7.2f %5.3f (%.2g)", kPathNames[k], t[k].op_us,
                    t[k].copy_us / t[k].op_us, err[k]);
      else
        std::printf(" | %s -", kPathNames[k]);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  for (void* p :
       {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dx),
        static_cast<void*>(dg), static_cast<void*>(dga), static_cast<void*>(dgt), csrc, cdst, work})
    CHECK(cudaFree(p));
}

int main(int argc, char** argv) {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf(
      "# %s, %d SMs; times in us (each side the mean of its two orders' medians of 51);\n"
      "# efficiency = copy / op (the copy of each path's own pairs); in brackets forward: the\n"
      "# largest error in output ulps against double, backward: the largest difference from the\n"
      "# one-block path's gradients over their largest magnitude\n",
      prop.name, prop.multiProcessorCount);
  if (const std::string& err = gpu_setup(); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  if (argc > 1) {  // cells given: S:T[,T...] each, f32 and bf16
    for (int i = 1; i < argc; ++i) {
      const char* arg = argv[i];
      const char* colon = std::strchr(arg, ':');
      if (colon == nullptr) {
        std::fprintf(stderr, "serial_path: a cell is S:T[,T...], not '%s'\n", arg);
        return 2;
      }
      const int64_t s = std::atoll(arg);
      for (const char* t = colon + 1; *t != '\0';) {
        const int length = std::atoi(t);
        run_cell<float>(s, length);
        run_cell<__nv_bfloat16>(s, length);
        t = std::strchr(t, ',');
        if (t == nullptr) break;
        ++t;
      }
    }
  } else {
    for (int64_t s : {16384, 32768, 65536})
      for (int t : {1, 2, 4, 7, 16, 33, 64, 100, 128, 200}) {
        if (t <= 124) run_cell<float>(s, t);
        run_cell<__nv_bfloat16>(s, t);
      }
  }
  gpu_teardown();
  return 0;
}
