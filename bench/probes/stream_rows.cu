// bench/probes/stream_rows.cu: dense channel-last (B, T, C) forward calls, one warp a chain of
// channels walking every position in order, its rows streamed through a ring in shared memory.
//
// The short 16-bit channel-last rows miss the copy on the H100 and the H200 in every block shape
// of the dense row kernel (bench/RESULTS.md, "The channel-last bf16 misses in every block shape",
// "128-row tiles in narrower slabs for the short rows"). A call of (8, 128, 1536) is under one wave
// of tiles: every block loads its whole tile, waits for all of it, scans it across its threads
// and only then stores, so the GPU's loads and its stores run one after the other where a copy
// overlaps them. This probe tries the other extreme: each warp takes one chain (a batch and a
// slab of 32 lanes x kBytes), issues the cp.async copies of its first kDepth rows at once, and
// walks the positions serially (x = a * x + b in float per channel), storing each row as soon as
// its chunk of kChunk rows has landed and reissuing the chunk's ring slot for the rows kDepth on.
// No cross-thread scan, no barrier, no look-back: the stores of the first rows go out while the
// later rows still load. The price is parallelism: B * C / (kBytes / sizeof(T)) threads in all.
// Forward, no states; f32 and bf16; lanes of 4 or 8 bytes, rings of 32 to 128 rows.
//
// Each cell is timed by ascan_bench's own time_median (bench/bench_harness.cuh, through
// probe_util.cuh's time_paired): 3 warm-ups, 51 samples each after a 256 MiB memset that flushes
// the L2, each paired with a same-traffic cudaMemcpyAsync, the pair's order alternating. The
// library's ascan::scan (two-phase entry point, channel_last) on the same arrays is timed the
// same way in the same process, before and after the candidates. Every output is checked against a
// double loop on the rounded inputs (every position of every 61st channel and the last, in every
// batch), in units of the output's rounding.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I include bench/probes/stream_rows.cu -o stream_rows
//   ./stream_rows
#include <cuda_bf16.h>
#include <cuda_pipeline_primitives.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <ascan/ascan.cuh>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "probe_util.cuh"  // CHECK, time_paired, to_f / from_f, the inputs and the checks

template <int kBytes>
using LaneWord = std::conditional_t<kBytes == 4, uint32_t, uint2>;

/// One warp a chain (batch b, channels [slab * 32 * kV, +32 * kV)), kWarps chains a block. The
/// ring holds kDepth rows of each input, kDepth / kChunk cp.async groups in flight.
template <class T, int kBytes, int kDepth, int kChunk, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    stream_rows_kernel(const T* __restrict__ gates, const T* __restrict__ tokens,
                       T* __restrict__ out, int64_t batch, int64_t length, int64_t channels) {
  constexpr int kV = kBytes / int(sizeof(T));
  constexpr int kGroups = kDepth / kChunk;
  static_assert(kDepth % kChunk == 0, "whole chunks in the ring");
  using W = LaneWord<kBytes>;
  extern __shared__ uint4 stream_shared[];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int64_t slabs = (channels + 32 * kV - 1) / (32 * kV);
  const int64_t chain = int64_t(blockIdx.x) * kWarps + warp;
  if (chain >= batch * slabs) return;
  const int64_t b = chain / slabs, slab = chain % slabs;
  const int64_t c0 = slab * 32 * kV + int64_t(lane) * kV;
  if (c0 >= channels) return;  // the probe's channels are a multiple of kV
  W* const ring_a = reinterpret_cast<W*>(stream_shared) + size_t(warp) * 2 * kDepth * 32;
  W* const ring_b = ring_a + kDepth * 32;
  const size_t base = size_t(b) * size_t(length) * size_t(channels) + size_t(c0);
  const T* const pa = gates + base;
  const T* const pb = tokens + base;
  T* const po = out + base;
  const int64_t chunks = (length + kChunk - 1) / kChunk;

  const auto issue = [&](int64_t chunk) {
    const int slot = int(chunk % kGroups) * kChunk;
#pragma unroll
    for (int r = 0; r < kChunk; ++r) {
      const int64_t t = chunk * kChunk + r;
      if (t < length) {
        __pipeline_memcpy_async(ring_a + (slot + r) * 32 + lane, pa + t * channels, kBytes);
        __pipeline_memcpy_async(ring_b + (slot + r) * 32 + lane, pb + t * channels, kBytes);
      }
    }
    __pipeline_commit();  // empty past the end: the count of groups stays one a chunk
  };
#pragma unroll 1
  for (int g = 0; g < kGroups; ++g) issue(g);

  float x[kV];
#pragma unroll
  for (int v = 0; v < kV; ++v) x[v] = 0.0f;
#pragma unroll 1
  for (int64_t k = 0; k < chunks; ++k) {
    __pipeline_wait_prior(kGroups - 1);  // chunk k has landed
    const int slot = int(k % kGroups) * kChunk;
#pragma unroll
    for (int r = 0; r < kChunk; ++r) {
      const int64_t t = k * kChunk + r;
      if (t < length) {
        const W wa = ring_a[(slot + r) * 32 + lane];
        const W wb = ring_b[(slot + r) * 32 + lane];
        T va[kV], vb[kV], y[kV];
        memcpy(va, &wa, kBytes);
        memcpy(vb, &wb, kBytes);
#pragma unroll
        for (int v = 0; v < kV; ++v) {
          x[v] = fmaf(to_f(va[v]), x[v], to_f(vb[v]));
          y[v] = from_f<T>(x[v]);
        }
        W wy;
        memcpy(&wy, y, kBytes);
        *reinterpret_cast<W*>(po + t * channels) = wy;
      }
    }
    issue(k + kGroups);
  }
  __pipeline_wait_prior(0);
}

template <class T, int kBytes, int kDepth, int kChunk, int kWarps>
cudaError_t launch_stream(const T* a, const T* b, T* x, int64_t batch, int64_t length,
                          int64_t channels, cudaStream_t st) {
  constexpr int kV = kBytes / int(sizeof(T));
  const size_t shared = size_t(kWarps) * 2 * kDepth * 32 * kBytes;
  auto kernel = &stream_rows_kernel<T, kBytes, kDepth, kChunk, kWarps>;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (e != cudaSuccess) return e;
  const int64_t chains = batch * ((channels + 32 * kV - 1) / (32 * kV));
  kernel<<<unsigned((chains + kWarps - 1) / kWarps), kWarps * 32, shared, st>>>(a, b, x, batch,
                                                                                length, channels);
  return cudaGetLastError();
}

/// The backward of stream_rows_kernel, walking positions from the last: d = a[t+1] * d + g[t]
/// (the gate of the row walked before, held in registers; d = g at the last position), grad_tokens
/// = d, grad_gates = d * x[t-1] (0 before the first position). A row's ring slot holds its gate,
/// its gradient and the state one position earlier.
template <class T, int kBytes, int kDepth, int kChunk, int kWarps>
__global__ void __launch_bounds__(kWarps * 32)
    stream_rows_backward_kernel(const T* __restrict__ gates, const T* __restrict__ states,
                                const T* __restrict__ grad_out, T* __restrict__ grad_gates,
                                T* __restrict__ grad_tokens, int64_t batch, int64_t length,
                                int64_t channels) {
  constexpr int kV = kBytes / int(sizeof(T));
  constexpr int kGroups = kDepth / kChunk;
  static_assert(kDepth % kChunk == 0, "whole chunks in the ring");
  using W = LaneWord<kBytes>;
  extern __shared__ uint4 stream_shared[];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int64_t slabs = (channels + 32 * kV - 1) / (32 * kV);
  const int64_t chain = int64_t(blockIdx.x) * kWarps + warp;
  if (chain >= batch * slabs) return;
  const int64_t b = chain / slabs, slab = chain % slabs;
  const int64_t c0 = slab * 32 * kV + int64_t(lane) * kV;
  if (c0 >= channels) return;
  W* const ring_a = reinterpret_cast<W*>(stream_shared) + size_t(warp) * 3 * kDepth * 32;
  W* const ring_g = ring_a + kDepth * 32;
  W* const ring_x = ring_g + kDepth * 32;
  const size_t base = size_t(b) * size_t(length) * size_t(channels) + size_t(c0);
  const T* const pa = gates + base;
  const T* const pg = grad_out + base;
  const T* const px = states + base;
  T* const pga = grad_gates + base;
  T* const pgt = grad_tokens + base;
  const int64_t chunks = (length + kChunk - 1) / kChunk;
  // walk step j is position t = length - 1 - j
  const auto issue = [&](int64_t chunk) {
    const int slot = int(chunk % kGroups) * kChunk;
#pragma unroll
    for (int r = 0; r < kChunk; ++r) {
      const int64_t t = length - 1 - (chunk * kChunk + r);
      if (t >= 0) {
        __pipeline_memcpy_async(ring_a + (slot + r) * 32 + lane, pa + t * channels, kBytes);
        __pipeline_memcpy_async(ring_g + (slot + r) * 32 + lane, pg + t * channels, kBytes);
        if (t > 0)
          __pipeline_memcpy_async(ring_x + (slot + r) * 32 + lane, px + (t - 1) * channels, kBytes);
      }
    }
    __pipeline_commit();
  };
#pragma unroll 1
  for (int g = 0; g < kGroups; ++g) issue(g);

  float d[kV], a_next[kV];
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    d[v] = 0.0f;
    a_next[v] = 0.0f;
  }
#pragma unroll 1
  for (int64_t k = 0; k < chunks; ++k) {
    __pipeline_wait_prior(kGroups - 1);
    const int slot = int(k % kGroups) * kChunk;
#pragma unroll
    for (int r = 0; r < kChunk; ++r) {
      const int64_t t = length - 1 - (k * kChunk + r);
      if (t >= 0) {
        const W wa = ring_a[(slot + r) * 32 + lane];
        const W wg = ring_g[(slot + r) * 32 + lane];
        W wx{};
        if (t > 0) wx = ring_x[(slot + r) * 32 + lane];
        T va[kV], vg[kV], vx[kV], ygg[kV], ygt[kV];
        memcpy(va, &wa, kBytes);
        memcpy(vg, &wg, kBytes);
        memcpy(vx, &wx, kBytes);
#pragma unroll
        for (int v = 0; v < kV; ++v) {
          d[v] = fmaf(a_next[v], d[v], to_f(vg[v]));
          a_next[v] = to_f(va[v]);
          ygt[v] = from_f<T>(d[v]);
          ygg[v] = from_f<T>(d[v] * to_f(vx[v]));
        }
        W w1, w2;
        memcpy(&w1, ygg, kBytes);
        memcpy(&w2, ygt, kBytes);
        *reinterpret_cast<W*>(pga + t * channels) = w1;
        *reinterpret_cast<W*>(pgt + t * channels) = w2;
      }
    }
    issue(k + kGroups);
  }
  __pipeline_wait_prior(0);
}

template <class T, int kBytes, int kDepth, int kChunk, int kWarps>
cudaError_t launch_stream_backward(const T* a, const T* x, const T* g, T* ga, T* gt, int64_t batch,
                                   int64_t length, int64_t channels, cudaStream_t st) {
  constexpr int kV = kBytes / int(sizeof(T));
  const size_t shared = size_t(kWarps) * 3 * kDepth * 32 * kBytes;
  auto kernel = &stream_rows_backward_kernel<T, kBytes, kDepth, kChunk, kWarps>;
  cudaError_t e =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (e != cudaSuccess) return e;
  const int64_t chains = batch * ((channels + 32 * kV - 1) / (32 * kV));
  kernel<<<unsigned((chains + kWarps - 1) / kWarps), kWarps * 32, shared, st>>>(
      a, x, g, ga, gt, batch, length, channels);
  return cudaGetLastError();
}

/// Largest error of the backward's gradients against a double loop on the rounded inputs, in
/// units of the output's rounding at max(|reference|, 1): every position of every 61st channel and
/// the last.
template <class T>
double check_backward(const std::vector<T>& a, const std::vector<T>& x, const std::vector<T>& g,
                      const std::vector<T>& ga, const std::vector<T>& gt, int64_t batch,
                      int64_t length, int64_t channels) {
  double worst = 0;
  const double ulp = std::is_same_v<T, float> ? std::ldexp(1.0, -23) : std::ldexp(1.0, -7);
  const auto err = [&](double got, double want) {
    return std::fabs(got - want) / (ulp * std::max(std::fabs(want), 1.0));
  };
  for (int64_t s = 0; s < batch; ++s)
    for (int64_t c = 0; c < channels; ++c) {
      if (c % 61 != 0 && c != channels - 1) continue;
      double d = 0, a_next = 0;
      for (int64_t t = length - 1; t >= 0; --t) {
        const size_t i = size_t((s * length + t) * channels + c);
        d = a_next * d + double(host_f(g[i]));
        a_next = double(host_f(a[i]));
        const double prev = t > 0 ? double(host_f(x[i - size_t(channels)])) : 0.0;
        const double e =
            std::max(err(double(host_f(gt[i])), d), err(double(host_f(ga[i])), d * prev));
        if (!(e <= 1e30)) return INFINITY;
        worst = std::max(worst, e);
      }
    }
  return worst;
}

template <class T>
struct Cell {
  int64_t batch, length, channels;
  T *a, *b, *g, *x, *y;  // forward a, b -> x; backward gates a, states b, grad_out g -> x, y
  void *csrc, *cdst;
  size_t bytes;
  std::vector<T> ha, hb, hg;
};

template <class T>
void report(const char* pass, const char* what, Cell<T>& c, const Timing& t, bool backward) {
  const int64_t n = c.batch * c.length * c.channels;
  const std::vector<T> got = fetch(c.x, n);
  const double err =
      backward ? check_backward(c.ha, c.hb, c.hg, got, fetch(c.y, n), c.batch, c.length, c.channels)
               : check_channel_last(c.ha, c.hb, got, c.batch, c.length, c.channels);
  std::printf("%-5s (%lld, %lld, %lld) %-8s %-24s copy %8.2f  op %8.2f  %5.3f  (err %.2g ulp)\n",
              std::is_same_v<T, float> ? "f32" : "bf16", static_cast<long long>(c.batch),
              static_cast<long long>(c.length), static_cast<long long>(c.channels), pass, what,
              t.copy_us, t.op_us, t.copy_us / t.op_us, err);
  std::fflush(stdout);
}

template <class T>
void poison(Cell<T>& c) {
  const size_t n = size_t(c.batch * c.length * c.channels);
  CHECK(cudaMemsetAsync(c.x, 0xFF, n * sizeof(T), g_gpu.stream));
  CHECK(cudaMemsetAsync(c.y, 0xFF, n * sizeof(T), g_gpu.stream));
}

template <class T, int kBytes, int kDepth, int kChunk, int kWarps>
void run_stream(Cell<T>& c, bool backward) {
  const size_t shared = size_t(kWarps) * (backward ? 3 : 2) * kDepth * 32 * kBytes;
  if (shared > 200 * 1024) return;
  poison(c);
  const Timing t = time_paired(
      [&] {
        return backward ? launch_stream_backward<T, kBytes, kDepth, kChunk, kWarps>(
                              c.a, c.b, c.g, c.x, c.y, c.batch, c.length, c.channels, g_gpu.stream)
                        : launch_stream<T, kBytes, kDepth, kChunk, kWarps>(
                              c.a, c.b, c.x, c.batch, c.length, c.channels, g_gpu.stream);
      },
      c.cdst, c.csrc, (backward ? 5 : 3) * c.bytes / 2);
  char what[64];
  std::snprintf(what, sizeof what, "stream %dB d%d c%d w%d %zuK", kBytes, kDepth, kChunk, kWarps,
                shared / 1024);
  report(backward ? "backward" : "forward", what, c, t, backward);
}

template <class T>
void run_library(Cell<T>& c, const char* what, bool backward) {
  ascan::ScanArgs<T> args;
  args.gates = c.a;
  args.tokens = c.b;
  args.out = c.x;
  args.shape = ascan::channel_last(c.batch, c.length, c.channels);
  ascan::ScanBackwardArgs<T> bargs;
  bargs.gates = c.a;
  bargs.states = c.b;
  bargs.grad_out = c.g;
  bargs.grad_gates = c.x;
  bargs.grad_tokens = c.y;
  bargs.shape = args.shape;
  size_t wbytes = 0;
  const ascan::Status q = backward ? ascan::scan_backward(bargs, nullptr, wbytes, g_gpu.stream)
                                   : ascan::scan(args, nullptr, wbytes, g_gpu.stream);
  if (!q.ok()) {
    std::printf("library: %s\n", q.message);
    std::exit(1);
  }
  void* work = nullptr;
  CHECK(cudaMalloc(&work, std::max<size_t>(wbytes, 1)));
  poison(c);
  const Timing t = time_paired(
      [&] {
        size_t wb = wbytes;
        return backward ? ascan::scan_backward(bargs, work, wb, g_gpu.stream)
                        : ascan::scan(args, work, wb, g_gpu.stream);
      },
      c.cdst, c.csrc, (backward ? 5 : 3) * c.bytes / 2);
  report(backward ? "backward" : "forward", what, c, t, backward);
  CHECK(cudaFree(work));
}

template <class T>
void run_cell(int64_t batch, int64_t length, int64_t channels) {
  Cell<T> c{batch, length, channels};
  const int64_t n = batch * length * channels;
  c.bytes = size_t(n) * sizeof(T);
  const size_t cbytes = 5 * c.bytes / 2;
  for (T** p : {&c.a, &c.b, &c.g, &c.x, &c.y}) CHECK(cudaMalloc(p, c.bytes));
  CHECK(cudaMalloc(&c.csrc, cbytes));
  CHECK(cudaMalloc(&c.cdst, cbytes));
  CHECK(cudaMemset(c.csrc, 0x3C, cbytes));
  const uint64_t seed = uint64_t(batch * 7919 + length * 131 + channels);
  fill_gates_tokens<<<1024, 256>>>(c.a, c.b, size_t(n), seed);
  fill_gates_tokens<<<1024, 256>>>(c.x, c.g, size_t(n), seed ^ 0x5555);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  c.ha = fetch(c.a, n);
  c.hb = fetch(c.b, n);
  c.hg = fetch(c.g, n);

  for (const bool backward : {false, true}) {
    run_library(c, "library", backward);
    run_stream<T, 4, 32, 8, 1>(c, backward);
    run_stream<T, 4, 64, 8, 1>(c, backward);
    run_stream<T, 4, 128, 8, 1>(c, backward);
    run_stream<T, 4, 128, 16, 1>(c, backward);
    run_stream<T, 4, 64, 8, 2>(c, backward);
    run_stream<T, 8, 64, 8, 1>(c, backward);
    run_library(c, "library again", backward);
  }
  for (void* p : {static_cast<void*>(c.a), static_cast<void*>(c.b), static_cast<void*>(c.g),
                  static_cast<void*>(c.x), static_cast<void*>(c.y), c.csrc, c.cdst})
    CHECK(cudaFree(p));
}

int main(int argc, char** argv) {
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
  const bool big = argc > 1 && std::strcmp(argv[1], "--big") == 0;
  const int64_t shapes[][3] = {
      {8, 128, 1536}, {8, 1024, 1536}, {8, 8192, 1536}, {16, 2048, 2048}, {4, 4096, 4096}};
  for (const auto& s : shapes) {
    if (!big && s[1] > 1024) continue;
    run_cell<float>(s[0], s[1], s[2]);
    run_cell<__nv_bfloat16>(s[0], s[1], s[2]);
  }
  gpu_teardown();
  return 0;
}
