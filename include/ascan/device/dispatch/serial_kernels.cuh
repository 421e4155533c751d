// ascan/device/dispatch/serial_kernels.cuh: the serial kernel, one thread a sequence, for many
// very short time-contiguous sequences, and the host rule that takes it.
//
// Where sequences are a few dozen elements long and there are tens of thousands of them, every
// tiled kernel spends its block-wide scan, its marks and its per-tile setup on a handful of
// elements a lane, and keeps only a tile or two of bytes in flight a block. Here a block of
// kSerialThreads threads takes that many whole sequences, which lie back to back in every array
// (flat_layout), stages all of their elements in shared memory with 16-byte asynchronous copies
// (cp.async: no register holds them while they fly, so a multiprocessor keeps a dozen blocks'
// bytes in flight), lets each thread walk its own sequence serially out of shared memory in the
// compute type, with the results put over its inputs, and stores the range back in coalesced
// 16-byte stretches. No scan across threads, no padding, no scratch, nothing crosses from one
// block to another: bitwise the same result run after run, and the most accurate order there is
// (one fma a step, each output rounded once).
//
// The arrays may sit at any alignment: a range is staged at the slot offset that puts its
// 16-byte boundaries on the slots' (stage_serial), its ends element by element; outputs whose
// alignment differs from their staged inputs' are stored element by element.
#pragma once

#include <cuda_pipeline_primitives.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "../../affine.cuh"
#include "../agent/backward_problem.cuh"
#include "../agent/forward_problem.cuh"
#include "scan_kernels.cuh"
#include "tuning.cuh"

namespace ascan {
namespace detail {

/// Threads (sequences) a serial block takes.
constexpr int kSerialThreads = 32;

/// The serial kernel's shared memory a stream: a block's elements plus a vector of slack for the
/// range's misalignment, in whole 16-byte slots.
template <class T>
constexpr int64_t serial_stream_bytes(int64_t length) {
  return (int64_t(kSerialThreads) * length * int64_t(sizeof(T)) + 16 + 15) / 16 * 16;
}

/// The most bytes a sequence of the serial kernel may hold (its three backward streams at 32
/// sequences a block then take 48 KiB, the default limit of a block's dynamic shared memory).
constexpr int64_t kSerialMaxSequenceBytes = 496;

/// The greatest common divisor of two positive numbers.
__host__ __device__ constexpr int64_t serial_gcd(int64_t a, int64_t b) {
  return b == 0 ? a : serial_gcd(b, a % b);
}

/// The bank passes each read of the serial walk takes: a warp's 32 lanes walk 32 sequences that
/// lie `length` elements apart in shared memory, so where that stride shares a factor with the
/// 32 four-byte banks, lanes read the same bank in the same step (T = 64 f32: all 32 of them).
/// 4-byte elements: gcd(length, 32); 8-byte ones, read in two passes of 16 lanes: gcd(length,
/// 16) each; 16-bit ones, two to a bank word: gcd(length / 2, 32) where the length is a multiple
/// of 4, 1 where it is 2 more than one, 2 where it is odd (neighbouring lanes' words meet). The
/// rule (serial_pays) takes the kernel only where this is small: measured, T = 16, 64 and 128 ran
/// 0.2-0.7 of one block per sequence's speed, and a walk skewed to spread the lanes over the
/// banks (31-62 iterations more) was slower still than the conflicts it spared at T = 33 and 100
/// in 16-bit (results/serial_path_5b431fb_h100.txt, results/serial_path_dcb6a4b_h100.txt).
__host__ __device__ constexpr int64_t serial_bank_passes(int64_t length, int bytes) {
  if (bytes == 2) {
    const int64_t m = length % 4;
    return m == 0 ? serial_gcd(length / 2, 32) : m == 2 || length == 1 ? 1 : 2;
  }
  return serial_gcd(length, bytes == 8 ? 16 : 32);
}

#if defined(__CUDACC__)

/// Elements of `p` past the 16-byte boundary below it (pointers are aligned to their element).
template <class T>
__device__ __forceinline__ int serial_misalignment(const T* p) {
  return static_cast<int>((reinterpret_cast<uintptr_t>(p) % 16) / sizeof(T));
}

/// Stages the `n` elements from `src` at `slots + serial_misalignment(src)` (slots 16-byte
/// aligned), so that src's 16-byte stretches land on whole slots: those by cp.async, the
/// elements before the first and after the last one by plain loads and stores. Thread `rank` of
/// kThreads takes every kThreads-th piece. The caller commits and waits.
template <class T, int kThreads>
__device__ __forceinline__ void stage_serial(T* slots, const T* src, int n, int rank) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  T* const dst = slots + serial_misalignment(src);
  const int head = (kVec - serial_misalignment(src)) % kVec < n
                       ? (kVec - serial_misalignment(src)) % kVec
                       : n;  // elements before src's first 16-byte boundary
  const int chunks = (n - head) / kVec;
  for (int e = rank; e < head; e += kThreads) dst[e] = src[e];
  for (int c = rank; c < chunks; c += kThreads)
    __pipeline_memcpy_async(dst + head + c * kVec, src + head + c * kVec, 16);
  for (int e = head + chunks * kVec + rank; e < n; e += kThreads) dst[e] = src[e];
}

/// Stores the `n` staged elements at `staged` to `dst`: by 16-byte stretches where `dst` and
/// `staged` lie alike against the 16-byte grid, element by element otherwise.
template <class T, int kThreads>
__device__ __forceinline__ void store_serial(T* dst, const T* staged, int n, int rank) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  const int m = serial_misalignment(dst);
  if (m != serial_misalignment(staged)) {
    for (int e = rank; e < n; e += kThreads) dst[e] = staged[e];
    return;
  }
  const int head = (kVec - m) % kVec < n ? (kVec - m) % kVec : n;
  const int chunks = (n - head) / kVec;
  for (int e = rank; e < head; e += kThreads) dst[e] = staged[e];
  for (int c = rank; c < chunks; c += kThreads)
    *reinterpret_cast<uint4*>(dst + head + c * kVec) =
        *reinterpret_cast<const uint4*>(staged + head + c * kVec);
  for (int e = head + chunks * kVec + rank; e < n; e += kThreads) dst[e] = staged[e];
}

/// The sequences a serial block takes: kSerialThreads of them from `first` (`count`, fewer in the
/// grid's last block), `n` elements from `base` in every array, thread `rank`'s at `first + rank`.
struct SerialBlock {
  int64_t first;
  int count;
  int n;
  int64_t base;
  int rank;
  __device__ __forceinline__ SerialBlock(int64_t sequences, int length)
      : first(int64_t(blockIdx.x) * kSerialThreads),
        count(sequences - first < kSerialThreads ? static_cast<int>(sequences - first)
                                                 : kSerialThreads),
        n(count * length),
        base(first * length),
        rank(static_cast<int>(threadIdx.x)) {}
};

/// Forward (or reverse) scan of kSerialThreads whole sequences a block, one a thread (see the
/// file's comment); the states of sequence s at s * p.state_channel_stride.
template <class T, bool kReverse>
__global__ void __launch_bounds__(kSerialThreads)
    serial_scan_kernel(const ScanParams<T> p, const int64_t stream_elements) {
  using C = compute_t<T>;
  constexpr int kThreads = kSerialThreads;
  extern __shared__ uint4 serial_slots[];
  T* const slots_a = reinterpret_cast<T*>(serial_slots);
  T* const slots_b = slots_a + stream_elements;
  const int length = static_cast<int>(p.length);  // the rule bounds it (serial_fits)
  const SerialBlock blk(p.sequences, length);
  const int rank = blk.rank, count = blk.count, n = blk.n;
  const int64_t base = blk.base;
  stage_serial<T, kThreads>(slots_a, p.gates + base, n, rank);
  stage_serial<T, kThreads>(slots_b, p.tokens + base, n, rank);
  __pipeline_commit();
  const int64_t s = blk.first + rank;
  C x = C(0);
  if (rank < count && p.initial_state != nullptr)
    x = to_compute<C>(p.initial_state[s * p.state_channel_stride]);
  __pipeline_wait_prior(0);
  __syncthreads();
  T* const b = slots_b + serial_misalignment(p.tokens + base);
  if (rank < count) {
    const T* a = slots_a + serial_misalignment(p.gates + base) + rank * length;
    T* y = b + rank * length;
#pragma unroll 4
    for (int k = 0; k < length; ++k) {
      const int t = kReverse ? length - 1 - k : k;
      x = to_compute<C>(a[t]) * x + to_compute<C>(y[t]);
      y[t] = to_storage<T>(x);
    }
    if (p.final_state != nullptr) p.final_state[s * p.state_channel_stride] = to_storage<T>(x);
  }
  __syncthreads();
  store_serial<T, kThreads>(p.out + base, b, n, rank);
}

/// Backward pass of kSerialThreads whole sequences a block, one a thread: the gradient walks the
/// sequence against the forward's direction,
///     d[t] = a[t+1] d[t+1] + g[t] (d[T-1] = g[T-1] + gT),  dL/da[t] = d[t] x[t-1] (x[-1] = h0),
///     dL/db[t] = d[t],  dL/dh0 = a[0] d[0]      (mirrored where the forward scan was reversed),
/// the gradients put over the staged states and upstream gradients (each read for the last time
/// the step before) and stored from there.
template <class T, bool kForwardReverse>
__global__ void __launch_bounds__(kSerialThreads)
    serial_backward_kernel(const BackwardParams<T> p, const int64_t stream_elements) {
  using C = compute_t<T>;
  constexpr int kThreads = kSerialThreads;
  extern __shared__ uint4 serial_slots[];
  T* const slots_a = reinterpret_cast<T*>(serial_slots);
  T* const slots_x = slots_a + stream_elements;
  T* const slots_g = slots_x + stream_elements;
  const int length = static_cast<int>(p.length);  // the rule bounds it (serial_fits)
  const SerialBlock blk(p.sequences, length);
  const int rank = blk.rank, count = blk.count, n = blk.n;
  const int64_t base = blk.base;
  stage_serial<T, kThreads>(slots_a, p.gates + base, n, rank);
  stage_serial<T, kThreads>(slots_x, p.states + base, n, rank);
  stage_serial<T, kThreads>(slots_g, p.grad_out + base, n, rank);
  __pipeline_commit();
  const int64_t s = blk.first + rank;
  C h0 = C(0), d = C(0);
  if (rank < count) {
    if (p.initial_state != nullptr) h0 = to_compute<C>(p.initial_state[s * p.state_channel_stride]);
    if (p.grad_final_state != nullptr)
      d = to_compute<C>(p.grad_final_state[s * p.state_channel_stride]);
  }
  __pipeline_wait_prior(0);
  __syncthreads();
  T* const xs = slots_x + serial_misalignment(p.states + base);
  T* const gs = slots_g + serial_misalignment(p.grad_out + base);
  if (rank < count) {
    const T* a = slots_a + serial_misalignment(p.gates + base) + rank * length;
    T* x = xs + rank * length;  // states in, dL/da out
    T* g = gs + rank * length;  // upstream gradients in, dL/db out
    // the gradient's first step (the forward's last) takes gT alone as the state after it
    C a_next = C(1);
#pragma unroll 4
    for (int k = 0; k < length; ++k) {
      const int t = kForwardReverse ? k : length - 1 - k;
      const int before = kForwardReverse ? t + 1 : t - 1;  // the forward's previous step
      d = a_next * d + to_compute<C>(g[t]);
      const C x_before = k + 1 < length ? to_compute<C>(x[before]) : h0;
      a_next = to_compute<C>(a[t]);
      g[t] = to_storage<T>(d);
      x[t] = to_storage<T>(d * x_before);
    }
    if (p.grad_initial_state != nullptr)
      p.grad_initial_state[s * p.state_channel_stride] = to_storage<T>(a_next * d);
  }
  __syncthreads();
  store_serial<T, kThreads>(p.grad_gates + base, xs, n, rank);
  store_serial<T, kThreads>(p.grad_tokens + base, gs, n, rank);
}

/// Launches the serial kernel of a forward call (the sequences back to back, their states at
/// p.state_channel_stride) or of a backward one (the overload below).
template <class T>
cudaError_t launch_serial(bool reverse, const ScanParams<T>& p, cudaStream_t stream) {
  const int64_t stream_bytes = serial_stream_bytes<T>(p.length);
  const int64_t blocks = ceil_div(p.sequences, int64_t(kSerialThreads));
  const auto kernel = reverse ? &serial_scan_kernel<T, true> : &serial_scan_kernel<T, false>;
  return launch_kernel(kernel, blocks, kSerialThreads, static_cast<int>(2 * stream_bytes), stream,
                       p, stream_bytes / int64_t(sizeof(T)));
}
template <class T>
cudaError_t launch_serial(bool reverse, const BackwardParams<T>& p, cudaStream_t stream) {
  const int64_t stream_bytes = serial_stream_bytes<T>(p.length);
  const int64_t blocks = ceil_div(p.sequences, int64_t(kSerialThreads));
  const auto kernel =
      reverse ? &serial_backward_kernel<T, true> : &serial_backward_kernel<T, false>;
  return launch_kernel(kernel, blocks, kSerialThreads, static_cast<int>(3 * stream_bytes), stream,
                       p, stream_bytes / int64_t(sizeof(T)));
}

#endif  // __CUDACC__

/// Whether the serial kernel can take `sequences` sequences of `length` elements of `bytes` bytes:
/// its staging within a block's default shared memory, and a grid of one block per
/// kSerialThreads sequences within CUDA's 2^31 - 1 blocks (the layout is flat_layout's).
constexpr bool serial_fits(int64_t sequences, int64_t length, int bytes) {
  return length >= 1 && length * bytes <= kSerialMaxSequenceBytes &&
         sequences <= int64_t{2147483647} * kSerialThreads;
}

/// Whether the library takes the serial kernel for a call of `sequences` sequences of `length`
/// elements of `bytes` bytes on `sms` multiprocessors (SerialRule, tuning.cuh).
inline bool serial_pays(int64_t sequences, int64_t length, int bytes, int sms,
                        const SerialRule& R) {
  return length >= R.min_length && length * bytes <= R.max_sequence_bytes &&
         serial_bank_passes(length, bytes) <= R.max_bank_passes &&
         double(sequences) >= R.min_sequences_per_sm * double(sms > 0 ? sms : 1);
}

}  // namespace detail
}  // namespace ascan
