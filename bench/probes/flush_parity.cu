// bench/probes/flush_parity.cu: does a row's paired copy time depend on what ran before the row?
// Replays the benchmark harness's timing loop (bench_harness.cuh, time_median) on plain copies:
// each "row" is kWarmup flush + op launches, then kReps pairs of (flush, copy, flush, op), each
// timed with events; the L2 flush a 256 MiB cudaMemsetAsync. The op is a grid-stride copy kernel
// of the same bytes between other buffers, so both halves of a pair move the same traffic. Rows
// run back to back in one process, as the benchmark's do; each variant prints per-row medians.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 bench/probes/flush_parity.cu -o flush_parity
//   ./flush_parity SET   (SET 1-4: the variants named in main)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

constexpr int kWarmup = 3, kReps = 51;
constexpr size_t kFlushBytes = size_t{256} << 20;

__global__ void copy_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}
// reads every line of p (nothing written unless the sum is the impossible value `never`)
__global__ void read_flush_kernel(const int4* p, size_t n, int never, int* sink) {
  int acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == never) *sink = acc;
}
__global__ void flush_kernel(int4* p, size_t n, int v) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = make_int4(v, v + 1, v + 2, int(i));
}

struct Bufs {
  void *flush, *csrc, *cdst, *osrc, *odst;
  size_t bytes;
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

enum Flush { kMemsetRep, kMemsetCounter, kKernelCounter, kRead, kMemsetTwice, kMemsetThenRead };
long g_counter = 0;

// One row; `extra` flushes before it (to shift the count's parity); returns medians (us).
struct RowOpts {
  int extra_copies = 0;    // untimed cudaMemcpyAsync of the copy's bytes before the row
  bool op_memcpy = false;  // the op a cudaMemcpyAsync too (other buffers)
  bool op_first = false;   // each pair times the op before the copy
  bool dump = false;       // print the first samples
  int warmup = kWarmup;    // untimed (flush, op) pairs before the samples
  int between = 0;         // between each pair's copy and op: 1 flush + untimed op, 2 untimed op,
                           // 3 an empty kernel, 4 a flush
  bool empty_before_flush = false;  // an empty kernel before every flush
  bool balanced = false;            // odd samples time the op first; each half's medians averaged
};

__global__ void empty_kernel() {}

void row(const Bufs& b, cudaStream_t s, Flush mode, int extra, bool paired, int sms, float* copy_us,
         float* op_us, RowOpts opt = {}) {
  std::vector<cudaEvent_t> ev(4 * kReps);
  for (auto& e : ev) CHECK(cudaEventCreate(&e));
  const auto flush = [&](int i) {
    if (opt.empty_before_flush) empty_kernel<<<1, 32, 0, s>>>();
    const int v = mode == kMemsetRep ? (i & 0xFF) : int(++g_counter & 0xFF);
    if (mode == kRead || mode == kMemsetThenRead) {
      if (mode == kMemsetThenRead) CHECK(cudaMemsetAsync(b.flush, v, kFlushBytes, s));
      read_flush_kernel<<<sms * 8, 256, 0, s>>>(static_cast<const int4*>(b.flush), kFlushBytes / 16,
                                                0x7fffffff, static_cast<int*>(b.osrc));
      return;
    }
    if (mode == kMemsetTwice) CHECK(cudaMemsetAsync(b.flush, v, kFlushBytes, s));
    if (mode == kKernelCounter)
      flush_kernel<<<sms * 8, 256, 0, s>>>(static_cast<int4*>(b.flush), kFlushBytes / 16,
                                           int(g_counter));
    else
      CHECK(cudaMemsetAsync(b.flush, v, kFlushBytes, s));
  };
  const auto copy = [&] {
    CHECK(cudaMemcpyAsync(b.cdst, b.csrc, b.bytes, cudaMemcpyDeviceToDevice, s));
  };
  const auto op = [&] {
    if (opt.op_memcpy) {
      CHECK(cudaMemcpyAsync(b.odst, b.osrc, b.bytes, cudaMemcpyDeviceToDevice, s));
      return;
    }
    copy_kernel<<<sms * 8, 256, 0, s>>>(static_cast<const int4*>(b.osrc),
                                        static_cast<int4*>(b.odst), b.bytes / 16);
  };
  for (int i = 0; i < extra; ++i) flush(i);
  for (int i = 0; i < opt.extra_copies; ++i) copy();
  for (int i = 0; i < opt.warmup; ++i) {
    flush(i);
    op();
  }
  for (int i = 0; i < kReps; ++i) {
    const auto timed_copy = [&] {
      if (!paired) return;
      flush(i);
      CHECK(cudaEventRecord(ev[4 * i], s));
      copy();
      CHECK(cudaEventRecord(ev[4 * i + 1], s));
    };
    const bool op_first = opt.op_first || (opt.balanced && (i & 1));
    if (!op_first) timed_copy();
    if (opt.between == 1 || opt.between == 4) flush(i);
    if (opt.between == 1 || opt.between == 2) op();
    if (opt.between == 3) empty_kernel<<<1, 32, 0, s>>>();
    flush(i);
    CHECK(cudaEventRecord(ev[4 * i + 2], s));
    op();
    CHECK(cudaEventRecord(ev[4 * i + 3], s));
    if (op_first) timed_copy();
  }
  CHECK(cudaStreamSynchronize(s));
  std::vector<float> c, o;
  for (int i = 0; i < kReps; ++i) {
    float ms = 0;
    if (paired) {
      CHECK(cudaEventElapsedTime(&ms, ev[4 * i], ev[4 * i + 1]));
      c.push_back(ms * 1e3f);
    }
    CHECK(cudaEventElapsedTime(&ms, ev[4 * i + 2], ev[4 * i + 3]));
    o.push_back(ms * 1e3f);
  }
  for (auto& e : ev) CHECK(cudaEventDestroy(e));
  if (opt.dump) {
    std::printf("\n    samples copy:");
    for (int i = 0; i < 12 && i < int(c.size()); ++i) std::printf(" %.2f", c[i]);
    std::printf("\n    samples op:  ");
    for (int i = 0; i < 12; ++i) std::printf(" %.2f", o[i]);
  }
  if (opt.balanced) {  // the mean of the two orders' medians
    std::vector<float> c0, c1, o0, o1;
    for (int i = 0; i < kReps; ++i) {
      (i & 1 ? c1 : c0).push_back(c[i]);
      (i & 1 ? o1 : o0).push_back(o[i]);
    }
    *copy_us = 0.5f * (median(c0) + median(c1));
    *op_us = 0.5f * (median(o0) + median(o1));
    return;
  }
  *copy_us = paired ? median(c) : 0.f;
  *op_us = median(o);
}

int main(int argc, char** argv) {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, sms);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // which variants (the runs of results/flush_parity_h100.txt): 1 the flush's kind and value,
  // 2 warm-ups and launches between a pair's halves, 3 an empty kernel before each flush and the
  // sizes, 4 the balanced order the benchmark takes (time_median)
  const int set = argc > 1 ? std::atoi(argv[1]) : 1;
  struct V {
    const char* name;
    Flush mode;
    bool copy_rows;  // a copy row (unpaired: the copy as the op) before each paired row
    int extra;       // extra flushes before every other row
    RowOpts opt{};
  };
  const RowOpts dump{0, false, false, true};
  std::vector<V> variants;
  std::vector<size_t> sizes;  // the copy's bytes (9 MiB: (8, 128, 1536) f32 forward)
  if (set == 1) {
    sizes = {9437184, 37748736};
    variants = {
        {"harness, samples of rows 0-1", kMemsetRep, false, 0, dump},
        {"one untimed copy before every other row", kMemsetRep, false, 0, {-1}},
        {"op a cudaMemcpyAsync too", kMemsetRep, false, 0, {0, true}},
        {"op timed before the copy", kMemsetRep, false, 0, {0, false, true}},
        {"read flush (a kernel reading 256 MiB)", kRead, false, 0, dump},
        {"two memsets before each timed op", kMemsetTwice, false, 0},
        {"memset then read before each timed op", kMemsetThenRead, false, 0},
        {"memset i&0xFF, copy row before each", kMemsetRep, true, 0},
        {"memset i&0xFF, +1 flush every other row", kMemsetRep, false, 1},
        {"memset, fresh value each flush", kMemsetCounter, false, 0},
        {"kernel flush, fresh values", kKernelCounter, false, 0},
    };
  } else if (set == 2) {
    sizes = {9437184};
    RowOpts w4 = dump, b1 = dump, w4b1{}, b2{}, b3{}, b4{}, w2{};
    w4.warmup = 4;
    b1.between = 1;
    w4b1.warmup = 4;
    w4b1.between = 1;
    b2.between = 2;
    b3.between = 3;
    b4.between = 4;
    w2.warmup = 2;
    variants = {
        {"harness, samples of rows 0-1", kMemsetRep, false, 0, dump},
        {"4 warm-ups", kMemsetRep, false, 0, w4},
        {"flush + untimed op between copy and op", kMemsetRep, false, 0, b1},
        {"4 warm-ups, flush + untimed op between", kMemsetRep, false, 0, w4b1},
        {"untimed op between (no flush)", kMemsetRep, false, 0, b2},
        {"empty kernel between", kMemsetRep, false, 0, b3},
        {"flush between", kMemsetRep, false, 0, b4},
        {"2 warm-ups", kMemsetRep, false, 0, w2},
    };
  } else {
    sizes = {1048576, 9437184, 37748736};
    RowOpts b3 = dump, e = dump, e4{}, ef{}, er{}, bal = dump, bal4{}, bale{};
    b3.between = 3;
    e.empty_before_flush = e4.empty_before_flush = ef.empty_before_flush = true;
    er.empty_before_flush = true;
    e4.warmup = 4;
    ef.op_first = true;
    bal.balanced = bal4.balanced = bale.balanced = true;
    bal4.warmup = 4;
    bale.extra_copies = -1;
    if (set == 3)
      variants = {
          {"harness", kMemsetRep, false, 0, dump},
          {"empty kernel between copy and op", kMemsetRep, false, 0, b3},
          {"empty kernel before every flush", kMemsetRep, false, 0, e},
          {"empty kernel before every flush, 4 warm-ups", kMemsetRep, false, 0, e4},
          {"empty kernel before every flush, op first", kMemsetRep, false, 0, ef},
          {"empty kernel before every flush, read flush", kRead, false, 0, er},
      };
    else
      variants = {
          {"harness", kMemsetRep, false, 0, dump},
          {"balanced order", kMemsetRep, false, 0, bal},
          {"balanced order, 4 warm-ups", kMemsetRep, false, 0, bal4},
          {"balanced order, one untimed copy before every other row", kMemsetRep, false, 0, bale},
      };
  }
  for (size_t bytes : sizes) {
    Bufs b{};
    b.bytes = bytes;
    CHECK(cudaMalloc(&b.flush, kFlushBytes));
    for (void** p : {&b.csrc, &b.cdst, &b.osrc, &b.odst}) {
      CHECK(cudaMalloc(p, bytes));
      CHECK(cudaMemset(*p, 0x3C, bytes));
    }
    for (const V& v : variants) {
      std::printf("\n%zu bytes, %s\n  row:", bytes, v.name);
      std::vector<float> cs, os;
      for (int r = 0; r < 8; ++r) {
        float c = 0, o = 0, dummy = 0;
        if (v.copy_rows) row(b, s, v.mode, 0, false, sms, &dummy, &dummy);
        RowOpts opt = v.opt;
        if (opt.extra_copies < 0) opt.extra_copies = r & 1;
        if (opt.dump && r > 1) opt.dump = false;
        row(b, s, v.mode, (r & 1) ? v.extra : 0, true, sms, &c, &o, opt);
        cs.push_back(c);
        os.push_back(o);
      }
      std::printf("\n  copy:");
      for (float c : cs) std::printf(" %7.2f", c);
      std::printf("\n  op:  ");
      for (float o : os) std::printf(" %7.2f", o);
      std::printf("\n  sum: ");
      for (int r = 0; r < 8; ++r) std::printf(" %7.2f", cs[r] + os[r]);
      std::printf("\n");
    }
    for (void* p : {b.flush, b.csrc, b.cdst, b.osrc, b.odst}) CHECK(cudaFree(p));
  }
  return 0;
}
