// bench/probes/serial_tiles.cu: many short time-contiguous sequences, one thread a sequence.
//
// The sweep's cells of many short sequences (S = 1024-65536, T = 33-1500) miss the copy on
// the issue rate ("Why the cells miss", "The launch-bound cells and the sequences' edge vectors"
// in bench/RESULTS.md): one scan per padded tile per sequence costs a few hundred warp
// instructions. This probe tries the other extreme, as the channel-last row kernel walks rows:
// a block of K threads takes K whole sequences, whose K * T elements lie contiguous in each array,
// stages them in shared memory with 16-byte cp.async copies (K a multiple of 8, so every block's
// range starts on a 16-byte boundary), lets each thread walk its sequence serially out of shared
// memory (x = a * x + b in float, the result over its token), then stores the range with 16-byte
// stores. No padding, no cross-thread scan: a few warp instructions an element step for 32
// elements. Forward only, no h0, f32 and bf16; K = 8, 16, 32 and 64, each whose staging (both
// arrays) fits two blocks a multiprocessor.
//
// Each cell is timed by ascan_bench's own time_median (bench/bench_harness.cuh, through
// probe_util.cuh's time_paired): 3 warm-ups, 51 samples each after a 256 MiB memset that flushes
// the L2, each paired with a same-traffic cudaMemcpyAsync, the pair's order alternating, each side
// the mean of its two orders' medians. The library's ascan::scan (two-phase entry point) on the
// same arrays is timed the same way beside it. Both outputs are checked against a double loop on
// the rounded inputs (every sequence of the first and last block, and every 97th).
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I include bench/probes/serial_tiles.cu -o serial_tiles
//   ./serial_tiles
#include <cuda_bf16.h>
#include <cuda_pipeline_primitives.h>
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

#include "probe_util.cuh"  // CHECK, time_paired, to_f / from_f, host_f

/// Bytes of a block's staged range of `n` elements of each array, rounded up to 16.
template <class T>
__host__ __device__ constexpr size_t staged_bytes(int64_t n) {
  return (size_t(n) * sizeof(T) + 15) / 16 * 16;
}

/// Copies `bytes` from global `src` (16-byte aligned) to shared `dst` (16-byte aligned): whole
/// 16-byte chunks by cp.async, the tail element by element.
template <class T>
__device__ __forceinline__ void stage(T* dst, const T* src, int64_t n) {
  const int64_t chunks = int64_t(n) * int64_t(sizeof(T)) / 16;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x)
    __pipeline_memcpy_async(reinterpret_cast<uint4*>(dst) + c,
                            reinterpret_cast<const uint4*>(src) + c, 16);
  for (int64_t e = chunks * 16 / int64_t(sizeof(T)) + threadIdx.x; e < n; e += blockDim.x)
    dst[e] = src[e];
}

template <class T, int kSeqs>
__global__ void __launch_bounds__(kSeqs)
    serial_tile_kernel(const T* __restrict__ gates, const T* __restrict__ tokens,
                       T* __restrict__ out, int64_t sequences, int length) {
  static_assert(kSeqs % 8 == 0, "a block's range starts on a 16-byte boundary");
  extern __shared__ uint4 serial_shared[];
  const int64_t first = int64_t(blockIdx.x) * kSeqs;
  const int count = sequences - first < kSeqs ? int(sequences - first) : kSeqs;
  const int64_t n = int64_t(count) * length;
  T* const sa = reinterpret_cast<T*>(serial_shared);
  T* const sb = reinterpret_cast<T*>(reinterpret_cast<char*>(serial_shared) +
                                     staged_bytes<T>(int64_t(kSeqs) * length));
  const int64_t base = first * length;
  stage(sa, gates + base, n);
  stage(sb, tokens + base, n);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  if (int(threadIdx.x) < count) {
    const T* a = sa + int64_t(threadIdx.x) * length;
    T* b = sb + int64_t(threadIdx.x) * length;
    float x = 0.0f;
    int t = 0;
    for (; t + 8 <= length; t += 8) {
      float av[8], bv[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        av[u] = to_f(a[t + u]);
        bv[u] = to_f(b[t + u]);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        x = fmaf(av[u], x, bv[u]);
        b[t + u] = from_f<T>(x);
      }
    }
    for (; t < length; ++t) {
      x = fmaf(to_f(a[t]), x, to_f(b[t]));
      b[t] = from_f<T>(x);
    }
  }
  __syncthreads();
  const int64_t chunks = n * int64_t(sizeof(T)) / 16;
  uint4* const dst = reinterpret_cast<uint4*>(out + base);
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x)
    dst[c] = reinterpret_cast<const uint4*>(sb)[c];
  for (int64_t e = chunks * 16 / int64_t(sizeof(T)) + threadIdx.x; e < n; e += blockDim.x)
    out[base + e] = sb[e];
}

template <class T, int kSeqs>
cudaError_t launch_serial(const T* a, const T* b, T* x, int64_t s, int length, cudaStream_t st) {
  const size_t shared = 2 * staged_bytes<T>(int64_t(kSeqs) * length);
  auto kernel = &serial_tile_kernel<T, kSeqs>;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (e != cudaSuccess) return e;
  kernel<<<unsigned((s + kSeqs - 1) / kSeqs), kSeqs, shared, st>>>(a, b, x, s, length);
  return cudaGetLastError();
}

// Largest error of `got` against a double loop on the rounded inputs, in units of the output's
// rounding (ulps of its type at the reference's magnitude), over the sequences checked.
template <class T>
double check(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& got,
             int64_t s_count, int length, int k) {
  double worst = 0;
  const double ulp = std::is_same_v<T, float> ? std::ldexp(1.0, -23) : std::ldexp(1.0, -7);
  for (int64_t s = 0; s < s_count; ++s) {
    const bool edge = s < k || s >= s_count - k;
    if (!edge && s % 97 != 0) continue;
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

template <class T>
void run_cell(int64_t s_count, int length) {
  const cudaStream_t st = g_gpu.stream;
  const int64_t n = s_count * length;
  std::mt19937_64 rng(s_count * 1000003 + length);
  std::uniform_real_distribution<float> gate(0.999f, 1.0f), token(0.0f, 1.0f);
  std::vector<T> a(n), b(n), got(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = T(gate(rng));
    b[i] = T(token(rng));
  }
  T *da, *db, *dx;
  void *csrc, *cdst;
  const size_t bytes = size_t(n) * sizeof(T);
  const size_t cbytes = 3 * bytes / 2;
  CHECK(cudaMalloc(&da, bytes));
  CHECK(cudaMalloc(&db, bytes));
  CHECK(cudaMalloc(&dx, bytes));
  CHECK(cudaMalloc(&csrc, cbytes));
  CHECK(cudaMalloc(&cdst, cbytes));
  CHECK(cudaMemset(csrc, 0x3C, cbytes));
  CHECK(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice));

  const char* name = std::is_same_v<T, float> ? "f32" : "bf16";
  std::printf("%-5s %6lld %6d", name, static_cast<long long>(s_count), length);

  // the library, two-phase
  ascan::ScanArgs<T> args;
  args.gates = da;
  args.tokens = db;
  args.out = dx;
  args.shape = ascan::time_contiguous(1, s_count, length);
  size_t wbytes = 0;
  ascan::Status q = ascan::scan(args, nullptr, wbytes, st);
  if (!q.ok()) {
    std::printf("  library: %s\n", q.message);
    return;
  }
  void* work = nullptr;
  CHECK(cudaMalloc(&work, std::max<size_t>(wbytes, 1)));
  CHECK(cudaMemsetAsync(dx, 0xFF, bytes, st));
  const Timing lib = time_paired(
      [&] {
        size_t wb = wbytes;
        return ascan::scan(args, work, wb, st);
      },
      cdst, csrc, cbytes);
  CHECK(cudaMemcpy(got.data(), dx, bytes, cudaMemcpyDeviceToHost));
  const double lib_err = check(a, b, got, s_count, length, 64);
  std::printf("  | copy %7.2f  library %7.2f %5.3f (err %.2g ulp)", lib.copy_us, lib.op_us,
              lib.copy_us / lib.op_us, lib_err);

  std::printf("\n");
  // the serial tiles in every block size whose staging fits two blocks a multiprocessor
  for (int k : {8, 16, 32, 64}) {
    const size_t shared = 2 * staged_bytes<T>(int64_t(k) * length);
    if (shared > 110 * 1024) continue;
    CHECK(cudaMemsetAsync(dx, 0xFF, bytes, st));
    const auto launch = [&]() -> cudaError_t {
      switch (k) {
        case 64:
          return launch_serial<T, 64>(da, db, dx, s_count, length, st);
        case 32:
          return launch_serial<T, 32>(da, db, dx, s_count, length, st);
        case 16:
          return launch_serial<T, 16>(da, db, dx, s_count, length, st);
        default:
          return launch_serial<T, 8>(da, db, dx, s_count, length, st);
      }
    };
    const Timing ser = time_paired(launch, cdst, csrc, cbytes);
    CHECK(cudaMemcpy(got.data(), dx, bytes, cudaMemcpyDeviceToHost));
    const double ser_err = check(a, b, got, s_count, length, k);
    std::printf("%-5s %6lld %6d  | copy %7.2f  serial(%2d, %3zu KiB) %7.2f %5.3f (err %.2g ulp)\n",
                name, static_cast<long long>(s_count), length, ser.copy_us, k, shared / 1024,
                ser.op_us, ser.copy_us / ser.op_us, ser_err);
  }
  for (void* p :
       {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dx), csrc, cdst, work})
    CHECK(cudaFree(p));
}

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  CHECK(cudaDriverGetVersion(&driver));
  std::printf("# %s, %d SMs, driver API %d; times in us, efficiency = copy / op\n", prop.name,
              prop.multiProcessorCount, driver);
  if (const std::string& err = gpu_setup(); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  for (int64_t s : {1024, 4096, 16384, 65536})
    for (int t : {33, 100, 300, 700, 1500}) {
      run_cell<float>(s, t);
      run_cell<__nv_bfloat16>(s, t);
    }
  gpu_teardown();
  return 0;
}
