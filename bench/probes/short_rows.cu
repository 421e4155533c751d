// bench/probes/short_rows.cu: the short channel-last rows' one-tile chains, their rows staged in
// shared memory by cp.async (as dense_row_kernel stages them) or loaded straight into registers.
//
// A dense channel-last call of at most 128 positions is one tile a chain in the library's narrow
// block (128 threads, 8 rows a thread, 8 lanes of 16 bytes): no look-back, yet the 16-bit rows
// run at 0.70-0.83 of the copy on the H100 and the H200 (bench/RESULTS.md, "The channel-last bf16
// misses in every block shape"), where the time-contiguous grid's (8, 1536, 128) rows, the same
// elements, reach 0.88-0.9 in tiles held in registers. This probe takes the narrow block's tile
// and arithmetic (each thread's aggregate over its rows, a shuffle scan over the warp's row
// groups, the warps' totals through shared memory, the rows again from the carry, one 16-byte
// store a vector as the library's store_vector_16) without the look-back's records, and times it
// two ways: rows staged in 32 KiB of dynamic shared memory by cp.async (`staged`), and rows loaded
// into registers (`registers`, no dynamic shared memory); and a third way, each warp owning all
// the positions of 2 of the tile's 8 lanes (`warp rows`, 4 warps a block) or 4 (`warp rows, 4`,
// 2 warps a block; f32 only, 16-bit spills), its row groups joined by shuffles: no shared memory,
// no barrier, no warp waits for another. Also timed: an empty kernel of the same grid with and
// without 32 KiB of dynamic shared memory, to see what asking for the staging costs on its own
// after the flush (a memset, which runs with none); and six copies of the scan's traffic (read
// gates and tokens, write the tokens to out), for what the tile's shape costs without its scan:
//   tile copy        the tile's own loads and stores (128 rows of 8 x 16 bytes a block, a row's
//                    bytes `channels` elements apart), every load issued before the stores
//   tile copy, sync  the same with a block barrier between loads and stores, so that no row is
//                    stored before the block's data is in, as in the scan
//   tile copy 4x4    rows of 4 x 16 bytes, 4 rows a thread: the same positions, twice the blocks
//   chunk copy       the tile's grid over contiguous chunks (as many vectors a thread)
//   chunk copy, x2   half the vectors a thread, twice the blocks
//   vector copy      one 16-byte vector a thread
// Each copy's output is checked byte for byte. Forward, no states, f32 and bf16, T = 32, 64 and
// 128; the library's ascan::scan (two-phase, channel_last) on the same arrays beside it, before and
// after. Every output is checked against a double loop (every position of every 61st channel and
// the last), in units of the output's rounding at max(|reference|, 1).
//
// Timing: ascan_bench's time_median (bench/bench_harness.cuh, through probe_util.cuh's
// time_paired): 3 warm-ups, 51 samples each after a 256 MiB memset that flushes the L2, each
// paired with a same-traffic cudaMemcpyAsync, the pair's order alternating.
//
//   nvcc -std=c++17 -O3 -gencode arch=compute_90,code=sm_90 -I include \
//       bench/probes/short_rows.cu -o short_rows
//   ./short_rows
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

#include "probe_util.cuh"  // CHECK, time_paired, the inputs and the checks, fetch

namespace {

constexpr int kThreads = 128, kRows = 8, kLanes = 8, kGroupsPerWarp = 32 / kLanes;
constexpr int kWarps = kThreads / 32;
constexpr int kStageBytes = 2 * kRows * kThreads * 16;

template <class T>
__device__ __forceinline__ void widen16(const uint4& w, float (&x)[16 / sizeof(T)]) {
  constexpr int kVec = 16 / int(sizeof(T));
  T v[kVec];
  memcpy(v, &w, 16);
#pragma unroll
  for (int i = 0; i < kVec; ++i) x[i] = to_f(v[i]);  // probe_util.cuh
}

template <class T>
__device__ __forceinline__ uint4 narrow16(const float (&x)[16 / sizeof(T)]) {
  uint4 w;
  if constexpr (std::is_same_v<T, float>) {
    memcpy(&w, x, 16);
  } else {
    __nv_bfloat162 h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(x[2 * i], x[2 * i + 1]);
    memcpy(&w, h, 16);
  }
  return w;
}

/// Where a thread's rows lie: block blockIdx.x is a chain (a batch and a slab of kL lanes of 16
/// bytes); the thread's lane within the slab, its first position p0 (its row group times kR) and
/// how many of its kR positions lie inside the length; addresses in 16-byte vectors (a position is
/// `row` vectors after the one before, `base` the thread's vector at position 0), so that the
/// compiler sees every access 16-byte aligned and keeps each store one vector.
struct RowsAt {
  int p0, valid;
  int64_t row;
  size_t base;
};
template <class T, int kL, int kR>
__device__ __forceinline__ RowsAt rows_at(int lane, int group, int64_t length, int64_t channels) {
  constexpr int kVec = 16 / int(sizeof(T));
  const int64_t slabs = channels / (kL * kVec);
  const int64_t seq = int64_t(blockIdx.x) / slabs, slab = int64_t(blockIdx.x) % slabs;
  const int64_t c0 = slab * kL * kVec + lane * kVec;
  RowsAt at;
  at.p0 = group * kR;
  at.valid = at.p0 >= length ? 0 : (length - at.p0 < kR ? int(length - at.p0) : kR);
  at.row = channels / kVec;
  at.base = (size_t(seq) * size_t(length) * size_t(channels) + size_t(c0)) / kVec;
  return at;
}

/// Rows [p0, p0 + valid) of gates and tokens (16-byte vectors, `row` vectors apart) into registers.
template <int kR>
__device__ __forceinline__ void load_rows(const uint4* pa, const uint4* pb, int p0, int valid,
                                          int64_t row, uint4 (&ra)[kR], uint4 (&rb)[kR]) {
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    if (i < valid) {
      ra[i] = __ldg(pa + (p0 + i) * row);
      rb[i] = __ldg(pb + (p0 + i) * row);
    }
  }
}

/// The map (x -> ma * x + mb, per element) of a thread's `valid` rows.
template <class T, int kR, int kVec = 16 / int(sizeof(T))>
__device__ __forceinline__ void thread_aggregate(const uint4 (&ra)[kR], const uint4 (&rb)[kR],
                                                 int valid, float (&ma)[kVec], float (&mb)[kVec]) {
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    ma[v] = 1.0f;
    mb[v] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    if (i < valid) {
      float a[kVec], b[kVec];
      widen16<T>(ra[i], a);
      widen16<T>(rb[i], b);
#pragma unroll
      for (int v = 0; v < kVec; ++v) {
        mb[v] = fmaf(a[v], mb[v], b[v]);
        ma[v] *= a[v];
      }
    }
  }
}

/// The inclusive scan of the maps over a warp's kGroups row groups (group g in lanes
/// g * kStride ...), by shuffles.
template <int kGroups, int kStride, int kVec>
__device__ __forceinline__ void group_scan(int group, float (&ma)[kVec], float (&mb)[kVec]) {
#pragma unroll
  for (int d = 1; d < kGroups; d *= 2) {
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const float ea = __shfl_up_sync(0xffffffffu, ma[v], d * kStride);
      const float eb = __shfl_up_sync(0xffffffffu, mb[v], d * kStride);
      if (group >= d) {
        mb[v] = fmaf(ma[v], eb, mb[v]);
        ma[v] *= ea;
      }
    }
  }
}

/// The thread's rows scanned again from the state x before them, each output stored whole.
template <class T, int kR, int kVec = 16 / int(sizeof(T))>
__device__ __forceinline__ void walk_rows(const uint4 (&ra)[kR], const uint4 (&rb)[kR], int valid,
                                          float (&x)[kVec], uint4* po, int p0, int64_t row) {
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    if (i < valid) {
      float a[kVec], b[kVec];
      widen16<T>(ra[i], a);
      widen16<T>(rb[i], b);
#pragma unroll
      for (int v = 0; v < kVec; ++v) x[v] = fmaf(a[v], x[v], b[v]);
      ascan::detail::store_vector_16(po + (p0 + i) * row, narrow16<T>(x));
    }
  }
}

/// One block a chain (batch, slab of 8 lanes x 16 bytes) of at most 128 positions.
template <class T, bool kStaged>
__global__ void __launch_bounds__(kThreads)
    short_rows_kernel(const T* __restrict__ gates, const T* __restrict__ tokens,
                      T* __restrict__ out, int64_t batch, int64_t length, int64_t channels) {
  constexpr int kVec = 16 / int(sizeof(T));
  extern __shared__ uint4 stage[];
  __shared__ float total_a[kWarps][kLanes * kVec], total_b[kWarps][kLanes * kVec];
  const int tid = int(threadIdx.x), lane = tid % kLanes, group = tid / kLanes;
  const int warp = tid / 32, group_in_warp = (tid % 32) / kLanes;
  const auto [p0, valid, row, base] = rows_at<T, kLanes, kRows>(lane, group, length, channels);
  const uint4* const pa = reinterpret_cast<const uint4*>(gates) + base;
  const uint4* const pb = reinterpret_cast<const uint4*>(tokens) + base;

  uint4 ra[kRows], rb[kRows];
  if constexpr (kStaged) {
    for (int i = 0; i < valid; ++i) {
      __pipeline_memcpy_async(stage + (0 * kRows + i) * kThreads + tid, pa + (p0 + i) * row, 16);
      __pipeline_memcpy_async(stage + (1 * kRows + i) * kThreads + tid, pb + (p0 + i) * row, 16);
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      ra[i] = stage[(0 * kRows + i) * kThreads + tid];
      rb[i] = stage[(1 * kRows + i) * kThreads + tid];
    }
  } else {
    load_rows(pa, pb, p0, valid, row, ra, rb);
  }
  // the thread's aggregate, across the warp's row groups (inclusive), then exclusive
  float ma[kVec], mb[kVec];
  thread_aggregate<T>(ra, rb, valid, ma, mb);
  group_scan<kGroupsPerWarp, kLanes>(group_in_warp, ma, mb);
  float xa[kVec], xb[kVec];
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    xa[v] = __shfl_up_sync(0xffffffffu, ma[v], kLanes);
    xb[v] = __shfl_up_sync(0xffffffffu, mb[v], kLanes);
    if (group_in_warp == 0) {
      xa[v] = 1.0f;
      xb[v] = 0.0f;
    }
  }
  if (group_in_warp == kGroupsPerWarp - 1) {
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      total_a[warp][lane * kVec + v] = ma[v];
      total_b[warp][lane * kVec + v] = mb[v];
    }
  }
  __syncthreads();
  // the state before the thread's rows, from 0: the earlier warps' totals, then its own prefix
  float x[kVec];
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    float s = 0.0f;
    for (int w = 0; w < warp; ++w)
      s = fmaf(total_a[w][lane * kVec + v], s, total_b[w][lane * kVec + v]);
    x[v] = fmaf(xa[v], s, xb[v]);
  }
  walk_rows<T>(ra, rb, valid, x, reinterpret_cast<uint4*>(out) + base, p0, row);
}

/// One-tile chains owned by warps: each warp scans all (at most 128) positions of its own
/// kWarpLanes lanes of 16 bytes (32 / kWarpLanes row groups of 4 * kWarpLanes rows), the row
/// groups joined by shuffles alone, so no warp waits for another (no shared memory, no block
/// barrier). A block's 8 / kWarpLanes warps cover the narrow tile's 8 lanes: the same grid and
/// the same bytes a block as short_rows_kernel.
template <class T, int kWarpLanes>
__global__ void __launch_bounds__(32 * kLanes / kWarpLanes)
    warp_rows_kernel(const T* __restrict__ gates, const T* __restrict__ tokens, T* __restrict__ out,
                     int64_t batch, int64_t length, int64_t channels) {
  constexpr int kVec = 16 / int(sizeof(T));
  constexpr int kWarpGroups = 32 / kWarpLanes, kR = 128 / kWarpGroups;
  static_assert(kLanes % kWarpLanes == 0 && kWarpGroups * kR == 128, "the narrow tile");
  const int tid = int(threadIdx.x), warp = tid / 32, lane32 = tid % 32;
  const int group = lane32 / kWarpLanes, lane = warp * kWarpLanes + lane32 % kWarpLanes;
  const auto [p0, valid, row, base] = rows_at<T, kLanes, kR>(lane, group, length, channels);
  const uint4* const pa = reinterpret_cast<const uint4*>(gates) + base;
  const uint4* const pb = reinterpret_cast<const uint4*>(tokens) + base;
  uint4 ra[kR], rb[kR];
  load_rows(pa, pb, p0, valid, row, ra, rb);
  float ma[kVec], mb[kVec];
  thread_aggregate<T>(ra, rb, valid, ma, mb);
  group_scan<kWarpGroups, kWarpLanes>(group, ma, mb);
  // the state before the thread's rows, from 0: the earlier groups' inclusive b
  float x[kVec];
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    x[v] = __shfl_up_sync(0xffffffffu, mb[v], kWarpLanes);
    if (group == 0) x[v] = 0.0f;
  }
  walk_rows<T>(ra, rb, valid, x, reinterpret_cast<uint4*>(out) + base, p0, row);
}

/// The copies' output vector: the tokens' 16 bytes, XORed with the sign bits of the gates' 16
/// (all clear: the gates are positive) so that every byte of both loads is used and the store
/// is one 16-byte vector.
template <class T>
__device__ __forceinline__ uint4 copied_vector(const uint4& gate, const uint4& token) {
  constexpr uint32_t kSigns = sizeof(T) == 4 ? 0x80000000u : 0x80008000u;
  const uint32_t s = (gate.x | gate.y | gate.z | gate.w) & kSigns;
  return make_uint4(token.x ^ s, token.y ^ s, token.z ^ s, token.w ^ s);
}

/// The narrow tile's traffic without its scan: the same loads (registers), then each thread's
/// token rows stored where the scan stores its outputs (a tile-shaped copy of the same bytes).
/// kL lanes of 16 bytes a row and kR rows a thread: 8 x 8 is the library's narrow tile; 4 x 4
/// covers the same 128 positions in half as wide a slab, twice the blocks. kSync puts a block
/// barrier between the loads and the stores, as the scan's exchange of warp totals does.
template <class T, int kL = kLanes, int kR = kRows, bool kSync = false>
__global__ void __launch_bounds__(kThreads)
    tile_copy_kernel(const T* __restrict__ gates, const T* __restrict__ tokens, T* __restrict__ out,
                     int64_t batch, int64_t length, int64_t channels) {
  const int tid = int(threadIdx.x);
  const auto [p0, valid, row, base] = rows_at<T, kL, kR>(tid % kL, tid / kL, length, channels);
  const uint4* const pa = reinterpret_cast<const uint4*>(gates) + base;
  const uint4* const pb = reinterpret_cast<const uint4*>(tokens) + base;
  uint4* const po = reinterpret_cast<uint4*>(out) + base;
  uint4 ra[kR], rb[kR];
  load_rows(pa, pb, p0, valid, row, ra, rb);
  if constexpr (kSync) {  // every row of the block loaded before any is stored
    int any = 0;
#pragma unroll
    for (int i = 0; i < kR; ++i)
      if (i < valid) any |= int((ra[i].x ^ rb[i].x) & 1u);
    __syncthreads_or(any);
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    if (i < valid) {
      ascan::detail::store_vector_16(po + (p0 + i) * row, copied_vector<T>(ra[i], rb[i]));
    }
  }
}

/// The same bytes as the tile copy in contiguous chunks: block k moves vectors [k * chunk,
/// (k + 1) * chunk) of 16 bytes, `rows` a thread 128 apart, all loads before the stores. With the
/// tile's grid (chunk = rows * 128) it holds what the tile holds in flight and differs only in
/// where the bytes lie; with rows = 1 it is the plain one-vector-a-thread copy kernel.
template <class T, int kMaxRows>
__global__ void __launch_bounds__(kThreads)
    chunk_copy_kernel(const T* __restrict__ gates, const T* __restrict__ tokens,
                      T* __restrict__ out, int64_t vectors, int rows) {
  const int tid = int(threadIdx.x);
  const int64_t first = int64_t(blockIdx.x) * rows * kThreads + tid;
  const uint4* const pa = reinterpret_cast<const uint4*>(gates);
  const uint4* const pb = reinterpret_cast<const uint4*>(tokens);
  uint4 ra[kMaxRows], rb[kMaxRows];
#pragma unroll
  for (int i = 0; i < kMaxRows; ++i) {
    const int64_t v = first + int64_t(i) * kThreads;
    if (i < rows && v < vectors) {
      ra[i] = __ldg(pa + v);
      rb[i] = __ldg(pb + v);
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxRows; ++i) {
    const int64_t v = first + int64_t(i) * kThreads;
    if (i < rows && v < vectors) {
      ascan::detail::store_vector_16(reinterpret_cast<uint4*>(out) + v,
                                     copied_vector<T>(ra[i], rb[i]));
    }
  }
}

__global__ void empty_kernel(int* sink) {
  extern __shared__ int empty_shared[];
  if (sink != nullptr && threadIdx.x == 0) sink[blockIdx.x] = empty_shared[0];
}

template <class T, bool kStaged>
cudaError_t launch_short(const T* a, const T* b, T* x, int64_t batch, int64_t length,
                         int64_t channels, cudaStream_t st) {
  constexpr int kVec = 16 / int(sizeof(T));
  const int shared = kStaged ? kStageBytes : 0;
  auto kernel = &short_rows_kernel<T, kStaged>;
  if (kStaged) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
    if (e != cudaSuccess) return e;
  }
  const int64_t blocks = batch * (channels / (kLanes * kVec));
  kernel<<<unsigned(blocks), kThreads, shared, st>>>(a, b, x, batch, length, channels);
  return cudaGetLastError();
}

template <class T>
void run_cell(int64_t batch, int64_t length, int64_t channels) {
  const cudaStream_t st = g_gpu.stream;
  const int64_t n = batch * length * channels;
  const size_t bytes = size_t(n) * sizeof(T), cbytes = 3 * bytes / 2;
  T *a, *b, *x;
  void *csrc, *cdst, *work;
  int* sink;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMalloc(&x, bytes));
  CHECK(cudaMalloc(&csrc, cbytes));
  CHECK(cudaMalloc(&cdst, cbytes));
  CHECK(cudaMalloc(&sink, 1 << 20));
  CHECK(cudaMemset(csrc, 0x3C, cbytes));
  fill_gates_tokens<<<1024, 256>>>(a, b, size_t(n),
                                   uint64_t(batch * 7919 + length * 131 + channels));
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  const std::vector<T> ha = fetch(a, n), hb = fetch(b, n);
  const char* name = std::is_same_v<T, float> ? "f32" : "bf16";
  const auto report = [&](const char* what, const Timing& t, bool check) {
    const double err =
        check ? check_channel_last(ha, hb, fetch(x, n), batch, length, channels) : double(NAN);
    // f32 outputs here are within 10 ulp of the double loop, bf16 within 0.5 (RESULTS)
    const bool wrong = check && !(err <= 32.0);
    std::printf("%-5s (%lld, %lld, %lld) %-16s copy %7.2f  op %7.2f  %5.3f  (err %.2g ulp)%s\n",
                name, static_cast<long long>(batch), static_cast<long long>(length),
                static_cast<long long>(channels), what, t.copy_us, t.op_us, t.copy_us / t.op_us,
                err, wrong ? "  WRONG" : "");
    std::fflush(stdout);
  };

  ascan::ScanArgs<T> args;
  args.gates = a;
  args.tokens = b;
  args.out = x;
  args.shape = ascan::channel_last(batch, length, channels);
  size_t wbytes = 0;
  if (const ascan::Status q = ascan::scan(args, nullptr, wbytes, st); !q.ok()) {
    std::printf("library: %s\n", q.message);
    std::exit(1);
  }
  CHECK(cudaMalloc(&work, std::max<size_t>(wbytes, 1)));
  const auto library = [&] {
    size_t wb = wbytes;
    return ascan::scan(args, work, wb, st);
  };
  const auto poison = [&] { CHECK(cudaMemsetAsync(x, 0xFF, bytes, st)); };
  // Each form: the output poisoned, then timed in pairs with the copy; a scan's output checked
  // against the double loop, a copy's (which writes the tokens: the gates are positive, their
  // sign bits clear) byte for byte, so that a copy that skipped or misplaced a vector fails.
  const auto kernel = [](auto launch) {  // a launch as an operation that returns its error
    return [launch] {
      launch();
      return cudaGetLastError();
    };
  };
  const auto scan_row = [&](const char* what, auto op) {
    poison();
    report(what, time_paired(op, cdst, csrc, cbytes), true);
  };
  const auto copy_row = [&](const char* what, auto launch) {
    poison();
    report(what, time_paired(kernel(launch), cdst, csrc, cbytes), false);
    if (std::memcmp(fetch(x, n).data(), hb.data(), bytes) != 0) {
      std::printf("%s: the output is not the tokens\n", what);
      std::exit(1);
    }
  };
  scan_row("library", library);
  scan_row("staged", [&] { return launch_short<T, true>(a, b, x, batch, length, channels, st); });
  scan_row("registers",
           [&] { return launch_short<T, false>(a, b, x, batch, length, channels, st); });
  constexpr int kVec = 16 / int(sizeof(T));
  const unsigned blocks = unsigned(batch * (channels / (kLanes * kVec)));
  scan_row("warp rows", kernel([&] {
             warp_rows_kernel<T, 2><<<blocks, kThreads, 0, st>>>(a, b, x, batch, length, channels);
           }));
  if constexpr (sizeof(T) == 4)  // 16-bit rows in this form spill (255 registers)
    scan_row("warp rows, 4", kernel([&] {
               warp_rows_kernel<T, 4>
                   <<<blocks, kThreads / 2, 0, st>>>(a, b, x, batch, length, channels);
             }));
  const int64_t vectors = n / kVec;
  const int rows = int((vectors + int64_t(blocks) * kThreads - 1) / (int64_t(blocks) * kThreads));
  if (rows > kRows) {
    std::printf("%d rows a thread exceed the probe's %d\n", rows, kRows);
    std::exit(1);
  }
  copy_row("tile copy", [&] {
    tile_copy_kernel<T><<<blocks, kThreads, 0, st>>>(a, b, x, batch, length, channels);
  });
  copy_row("tile copy, sync", [&] {
    tile_copy_kernel<T, kLanes, kRows, true>
        <<<blocks, kThreads, 0, st>>>(a, b, x, batch, length, channels);
  });
  copy_row("tile copy 4x4", [&] {
    tile_copy_kernel<T, 4, 4><<<2 * blocks, kThreads, 0, st>>>(a, b, x, batch, length, channels);
  });
  copy_row("chunk copy", [&] {
    chunk_copy_kernel<T, kRows><<<blocks, kThreads, 0, st>>>(a, b, x, vectors, rows);
  });
  const int half = (rows + 1) / 2;
  const unsigned half_blocks =
      unsigned((vectors + int64_t(half) * kThreads - 1) / (int64_t(half) * kThreads));
  copy_row("chunk copy, x2", [&] {
    chunk_copy_kernel<T, kRows><<<half_blocks, kThreads, 0, st>>>(a, b, x, vectors, half);
  });
  const unsigned vector_blocks = unsigned((vectors + kThreads - 1) / kThreads);
  copy_row("vector copy", [&] {
    chunk_copy_kernel<T, 1><<<vector_blocks, kThreads, 0, st>>>(a, b, x, vectors, 1);
  });
  CHECK(cudaFuncSetAttribute(&empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kStageBytes));
  for (const int shared : {0, kStageBytes}) {
    const auto empty = [&] { empty_kernel<<<blocks, kThreads, shared, st>>>(nullptr); };
    report(shared > 0 ? "empty, 32 KiB" : "empty, 0 KiB",
           time_paired(kernel(empty), cdst, csrc, cbytes), false);
  }
  scan_row("library again", library);
  for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(x), csrc, cdst,
                  work, static_cast<void*>(sink)})
    CHECK(cudaFree(p));
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs; times in us, efficiency = copy / op\n", prop.name,
              prop.multiProcessorCount);
  if (const std::string& err = gpu_setup(); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  for (int64_t t : {128, 64, 32}) {
    run_cell<float>(8, t, 1536);
    run_cell<__nv_bfloat16>(8, t, 1536);
  }
  run_cell<__nv_bfloat16>(16, 128, 2048);
  gpu_teardown();
  return 0;
}
