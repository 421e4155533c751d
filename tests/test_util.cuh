// tests/test_util.cuh: what the GPU tests share.
//
// A device check that skips (not fails) GPU tests on a machine without one; a fast seeded RNG
// whose seed every case prints, so a failure reproduces (ASCAN_TEST_SEED=<seed> replays it);
// RAII device buffers whose every CUDA call is checked; host conversions of the 16-bit types;
// poison (an all-ones NaN bit pattern) for outputs and padding; the gate distributions; and the
// error measure the suite judges outputs by ("Error measure" below): relative L2 error against
// the recurrence run in double on the STORED (possibly 16-bit) inputs; float <= 1e-5, double
// <= 1e-12, half and bfloat16 <= 1.5x the error of rounding the exact answer to the type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <ascan/ascan.cuh>
#include <ascan/reference/scan_reference.hpp>

namespace ascan::test {

// ---------------------------------------------------------------------------------------------
// Device presence

/// Number of CUDA devices, 0 when the runtime finds none (no GPU, no driver). Clears the
/// runtime's error slot so that a failed query leaves nothing behind for later checks.
inline int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return count;
}

/// Why GPU tests skip here, in a sentence.
inline std::string no_device_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  std::ostringstream s;
  s << "no CUDA device (cudaGetDeviceCount: " << cudaGetErrorName(e) << ", " << n
    << " devices); this test launches kernels and runs only on a GPU";
  return s.str();
}

/// Base of every test that launches kernels: skips with the reason when there is no device.
template <class Base = ::testing::Test>
class RequiresGpu : public Base {
 protected:
  void SetUp() override {
    if (device_count() == 0) GTEST_SKIP() << no_device_reason();
  }
};

// ---------------------------------------------------------------------------------------------
// CUDA call checking

/// Success, or a failure naming the call and the CUDA error. Use as
/// ASSERT_TRUE(cuda_ok(cudaMemcpy(...), "cudaMemcpy gates")).
inline ::testing::AssertionResult cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << " failed: " << cudaGetErrorName(e) << " (" << cudaGetErrorString(e) << ")";
}

/// The runtime's error slot is clear (nothing sticky, nothing pending from a launch).
inline ::testing::AssertionResult no_pending_cuda_error() {
  return cuda_ok(cudaGetLastError(), "cudaGetLastError (a pending or sticky error)");
}

// ---------------------------------------------------------------------------------------------
// Element types

template <class T>
constexpr bool kIs16Bit = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// The type's name as tests print it.
template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, __half>) return "half";
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return "bfloat16";
}

/// The stored value, widened exactly to double on the host.
template <class T>
inline double to_double(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return static_cast<double>(__half2float(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return static_cast<double>(__bfloat162float(v));
  else
    return static_cast<double>(v);
}

/// A double rounded once (to nearest, ties to even) to T on the host.
template <class T>
inline T from_double(double v) {
  if constexpr (std::is_same_v<T, __half>)
    return __double2half(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __double2bfloat16(v);
  else
    return static_cast<T>(v);
}

/// The relative L2 error a correct scan must reach in T (16-bit types: see check_sequence).
template <class T>
constexpr double kRelTolerance = std::is_same_v<T, double> ? 1e-12 : 1e-5;
/// How much worse than storing the exact answer a 16-bit output may be.
constexpr double kRoundingFactor = 1.5;

// ---------------------------------------------------------------------------------------------
// Poison: every byte 0xFF. That is a NaN in each of the four types, and no arithmetic result
// (CUDA's canonical NaN is 0x7fff...) has this pattern, so "still poison" means "never written".

constexpr unsigned char kPoisonByte = 0xFF;

template <class T>
inline T poison_value() {
  T v;
  std::memset(static_cast<void*>(&v), kPoisonByte, sizeof(T));
  return v;
}

template <class T>
inline bool is_poison(const T& v) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  for (unsigned char b : bytes)
    if (b != kPoisonByte) return false;
  return true;
}

template <class T>
inline bool bitwise_equal(const T& x, const T& y) {
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}

// ---------------------------------------------------------------------------------------------
// Random numbers: xoshiro256** seeded through splitmix64. Fast enough that generating inputs is a
// small part of a test's host time.

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) s = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

/// A fresh seed from std::random_device, or ASCAN_TEST_SEED when set (to replay a failure).
inline uint64_t fresh_seed() {
  if (const char* env = std::getenv("ASCAN_TEST_SEED"); env != nullptr && *env != '\0')
    return std::strtoull(env, nullptr, 0);
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

/// The line a case puts in SCOPED_TRACE so that any failure names its seed.
inline std::string seed_note(const std::string& what, uint64_t seed) {
  std::ostringstream s;
  s << what << " [seed " << seed << "; replay with ASCAN_TEST_SEED=" << seed << "]";
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// Inputs

/// How gates are drawn. Tokens are always uniform in (-1, 1): with |gate| <= 1 the state of a
/// sequence of a million steps stays in the thousands, far inside half's range.
enum class Gates {
  kUniform01,  ///< uniform in (0, 1): the state forgets within a few steps
  kNearOne,    ///< uniform in (0.999, 1): long memory
  kOne,        ///< exactly 1: a cumulative sum, the hardest case for precision
  kZero,       ///< exactly 0: out == tokens, any carry bug shows at once
  kNegative,   ///< uniform in (-1, 0): alternating signs
};

inline const char* gates_name(Gates g) {
  switch (g) {
    case Gates::kUniform01:
      return "Uniform01";
    case Gates::kNearOne:
      return "NearOne";
    case Gates::kOne:
      return "One";
    case Gates::kZero:
      return "Zero";
    case Gates::kNegative:
      return "Negative";
  }
  return "?";
}

constexpr Gates kAllGates[] = {Gates::kUniform01, Gates::kNearOne, Gates::kOne, Gates::kZero,
                               Gates::kNegative};

/// One gate drawn from `g`, as a double (round it to T before use).
inline double draw_gate(Rng& rng, Gates g) {
  switch (g) {
    case Gates::kUniform01:
      return rng.uniform(0.0, 1.0);
    case Gates::kNearOne:
      return rng.uniform(0.999, 1.0);
    case Gates::kOne:
      return 1.0;
    case Gates::kZero:
      return 0.0;
    case Gates::kNegative:
      return -rng.uniform(0.0, 1.0);
  }
  return 0.0;
}

inline double draw_token(Rng& rng) { return rng.uniform(-1.0, 1.0); }

/// The offset of element t of sequence s (s = b * C + c) under `sh`'s strides.
inline int64_t element_offset(const Shape& sh, int64_t s, int64_t t) {
  return (s / sh.channels) * sh.batch_stride + (s % sh.channels) * sh.channel_stride +
         t * sh.time_stride;
}

// ---------------------------------------------------------------------------------------------
// Device memory

/// A cudaMalloc'd array of n elements of T, freed on destruction. Every call is checked: the
/// ones returning AssertionResult go in ASSERT_TRUE; a failed free is reported with ADD_FAILURE.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), n_(o.n_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceBuffer() { release(); }

  ::testing::AssertionResult allocate(size_t n) {
    release();
    n_ = n;
    void* p = nullptr;
    // Zero elements still get a real (one-byte) allocation so that pointers are never null.
    auto r = cuda_ok(cudaMalloc(&p, std::max<size_t>(n * sizeof(T), 1)), "cudaMalloc");
    ptr_ = static_cast<T*>(p);
    return r;
  }

  /// Every byte of the buffer set to the poison byte (stream-ordered on the legacy stream;
  /// synchronize before using it from a non-blocking stream).
  ::testing::AssertionResult poison() {
    return cuda_ok(cudaMemset(ptr_, kPoisonByte, n_ * sizeof(T)), "cudaMemset (poison)");
  }

  /// Copies host[0, count) to elements [offset, offset + count).
  ::testing::AssertionResult upload(const T* host, size_t count, size_t offset = 0) {
    if (offset + count > n_) return ::testing::AssertionFailure() << "upload past the buffer";
    return cuda_ok(cudaMemcpy(ptr_ + offset, host, count * sizeof(T), cudaMemcpyHostToDevice),
                   "cudaMemcpy host to device");
  }
  ::testing::AssertionResult upload(const std::vector<T>& host, size_t offset = 0) {
    return upload(host.data(), host.size(), offset);
  }

  /// Copies elements [offset, offset + count) into host[0, count).
  ::testing::AssertionResult download(T* host, size_t count, size_t offset = 0) const {
    if (offset + count > n_) return ::testing::AssertionFailure() << "download past the buffer";
    return cuda_ok(cudaMemcpy(host, ptr_ + offset, count * sizeof(T), cudaMemcpyDeviceToHost),
                   "cudaMemcpy device to host");
  }
  /// The whole buffer.
  ::testing::AssertionResult download(std::vector<T>& host) const {
    host.resize(n_);
    return download(host.data(), n_, 0);
  }

  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  void release() {
    if (ptr_ != nullptr) {
      const auto r = cuda_ok(cudaFree(ptr_), "cudaFree");
      if (!r) ADD_FAILURE() << r.message();
    }
    ptr_ = nullptr;
    n_ = 0;
  }
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

/// A non-blocking stream (it does not synchronize with the legacy default stream, so work put on
/// stream 0 by mistake is not ordered with it), destroyed on scope exit.
class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s_ != nullptr) {
      const auto r = cuda_ok(cudaStreamDestroy(s_), "cudaStreamDestroy");
      if (!r) ADD_FAILURE() << r.message();
    }
  }
  ::testing::AssertionResult create() {
    return cuda_ok(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

/// Holds a stream at a host-side gate: work enqueued behind it cannot start until open() (or a
/// timeout, after which timed_out() is true: whoever waited on the stream blocked the host).
class StreamGate {
 public:
  ::testing::AssertionResult close(cudaStream_t s) {
    return cuda_ok(cudaLaunchHostFunc(s, &StreamGate::wait, this), "cudaLaunchHostFunc (gate)");
  }
  void open() { open_.store(true); }
  bool timed_out() const { return timed_out_.load(); }

 private:
  static void CUDART_CB wait(void* self) {
    auto* g = static_cast<StreamGate*>(self);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!g->open_.load()) {
      if (std::chrono::steady_clock::now() > deadline) {
        g->timed_out_.store(true);
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  std::atomic<bool> open_{false};
  std::atomic<bool> timed_out_{false};
};

// ---------------------------------------------------------------------------------------------
// Entry points

/// Which entry point a case calls.
enum class Via {
  kWorkspace,        ///< scan(args, workspace, bytes, stream) after a size query: the full dispatch
  kPlain,            ///< scan(args, stream): no workspace, one block per sequence
  kMallocAsync,      ///< scan(args, malloc_async, stream)
  kMultiBlock,       ///< the multi-block path forced, with SmallLookback's tiles, so that a few
                     ///< thousand elements span many blocks (sanitizer-sized multi-block cases)
  kMultiBlockShort,  ///< the same, through a tuning's short-tile policy (SmallTiles::kShort)
  kMultiBlockRegisters,  ///< the same, in the kernel that holds tiles in registers (the
                         ///< fallback of staged tiles and the 16-bit short-tile kernel:
                         ///< SmallTiles::kRegisters)
  kRowWalk,              ///< the library's dispatch with a workspace, the row path forced to walk
                         ///< (Path::kOneBlock: one block per chain, whatever the chains' count)
  kRowLookBack,          ///< the same, Path::kMultiBlock: the row path forced to look back, a
                         ///< time-contiguous call forced onto the multi-block path
  kFlat,                 ///< the same, Path::kFlat: the flat kernel forced (time-contiguous
                         ///< sequences back to back, many to a block)
  kSerial,               ///< the same, Path::kSerial: the serial kernel forced (time-contiguous
                         ///< sequences back to back, one a thread)
};

inline const char* via_name(Via v) {
  switch (v) {
    case Via::kWorkspace:
      return "workspace";
    case Via::kPlain:
      return "plain";
    case Via::kMallocAsync:
      return "malloc_async";
    case Via::kMultiBlock:
      return "multi-block(small tiles)";
    case Via::kMultiBlockShort:
      return "multi-block(small short-tile policy)";
    case Via::kMultiBlockRegisters:
      return "multi-block(small tiles in registers)";
    case Via::kRowWalk:
      return "row path walking";
    case Via::kRowLookBack:
      return "row path looking back";
    case Via::kFlat:
      return "flat tiles";
    case Via::kSerial:
      return "serial kernel";
  }
  return "?";
}

/// Which kernel shape a forced multi-block case runs (Via::kMultiBlock*).
enum class SmallTiles {
  kMain,       ///< the tuning's main policy
  kShort,      ///< its short-tile policy (taken whenever a tuning has one and the call is short)
  kRegisters,  ///< the kernel that holds tiles in registers, where the library's staged policies
               ///< fall back to off sm_90 and on the scalar path
};

/// A multi-block tile of 64 threads x 2 vectors (512 floats, 1024 16-bit elements, 256
/// doubles): two warps and two runs, so the block scan's every step is exercised; 6 vectors
/// (3072 16-bit elements) where the library's policy unrolls its staged loops partly.
template <int kBytes, bool kBackward, SmallTiles kTiles = SmallTiles::kMain>
struct SmallLookback {
  // The library's choice of where a tile's elements wait during the look-back, so that the forced
  // cases run the code the long shapes run: with staged tiles, one vector per thread staged in
  // shared memory (five where the library unrolls its staged loops partly: loops of its
  // unrolling with a remainder) and one held in registers when the library's policy holds some
  // there; and the library's pace of the first wave.
  static constexpr int V = 16 / kBytes;
  static constexpr detail::LookbackPolicy kLibrary =
      detail::LookbackTuning<kBytes, kBackward>::kPolicy;
  static constexpr int kHeld = kLibrary.register_items > 0 ? 1 : 0;
  static constexpr int kStaged = kLibrary.unroll > 0 ? 5 : 2 - kHeld;
  static constexpr detail::LookbackPolicy kPolicy{64,
                                                  (kStaged + kHeld) * V,
                                                  1,
                                                  4,
                                                  kLibrary.hold,
                                                  kHeld* V,
                                                  kLibrary.unroll,
                                                  kLibrary.wave_pace};
};
/// The short-tile policy of a tuning, always taken: 64 threads x 3 vectors (forward, one of them
/// held in registers where the library's short policy holds some), another shape than kMain's.
template <int kBytes, bool kBackward>
struct SmallLookback<kBytes, kBackward, SmallTiles::kShort>
    : SmallLookback<kBytes, kBackward, SmallTiles::kMain> {
  using Main = SmallLookback<kBytes, kBackward, SmallTiles::kMain>;
  static constexpr detail::LookbackPolicy kLibraryShort =
      detail::ShortTilesOf<detail::LookbackTuning<kBytes, kBackward>>::kPolicy;
  static constexpr detail::LookbackPolicy kShortPolicy{
      64, 3 * Main::V, 1, 4, kLibraryShort.hold, kLibraryShort.register_items > 0 ? Main::V : 0};
  static constexpr double kShortBelowTilesPerSm = 1e12;
};
/// Tiles held in registers (or shared memory), as the library's fallback policy holds them.
template <int kBytes, bool kBackward>
struct SmallLookback<kBytes, kBackward, SmallTiles::kRegisters> {
  static constexpr int V = 16 / kBytes;
  static constexpr detail::LookbackPolicy kPolicy{
      64, 2 * V, 1, 4, detail::LookbackFallbackTuning<kBytes, kBackward>::kPolicy.hold};
  static_assert(kPolicy.hold != detail::LookbackHold::kStaged, "a fallback does not stage");
};

/// The public entry points of the forward and backward pass under one name.
template <class T>
Status entry(const ScanArgs<T>& a, void* w, size_t& bytes, cudaStream_t s) {
  return scan(a, w, bytes, s);
}
template <class T>
Status entry(const ScanBackwardArgs<T>& a, void* w, size_t& bytes, cudaStream_t s) {
  return scan_backward(a, w, bytes, s);
}
template <class T>
Status entry(const ScanArgs<T>& a, cudaStream_t s) {
  return scan(a, s);
}
template <class T>
Status entry(const ScanBackwardArgs<T>& a, cudaStream_t s) {
  return scan_backward(a, s);
}
template <class T>
Status entry(const ScanArgs<T>& a, MallocAsync m, cudaStream_t s) {
  return scan(a, m, s);
}
template <class T>
Status entry(const ScanBackwardArgs<T>& a, MallocAsync m, cudaStream_t s) {
  return scan_backward(a, m, s);
}
/// The library's own dispatch with a two-phase workspace and `path` given (scan_with).
template <class T>
Status entry_path(const ScanArgs<T>& a, void* w, size_t& bytes, cudaStream_t s, detail::Path path) {
  return detail::scan_with(a, detail::Scratch::two_phase(w, bytes), s, path);
}
template <class T>
Status entry_path(const ScanBackwardArgs<T>& a, void* w, size_t& bytes, cudaStream_t s,
                  detail::Path path) {
  return detail::scan_backward_with(a, detail::Scratch::two_phase(w, bytes), s, path);
}
/// The multi-block path forced with SmallLookback (two-phase, like the public overload).
template <SmallTiles kTiles, class T>
Status entry_small_tiles(const ScanArgs<T>& a, void* w, size_t& bytes, cudaStream_t s) {
  return detail::scan_with<T, detail::ScanTuning<sizeof(T)>,
                           SmallLookback<sizeof(T), false, kTiles>>(
      a, detail::Scratch::two_phase(w, bytes), s, detail::Path::kMultiBlock);
}
template <SmallTiles kTiles, class T>
Status entry_small_tiles(const ScanBackwardArgs<T>& a, void* w, size_t& bytes, cudaStream_t s) {
  return detail::scan_backward_with<T, detail::BackwardTuning<sizeof(T)>,
                                    SmallLookback<sizeof(T), true, kTiles>>(
      a, detail::Scratch::two_phase(w, bytes), s, detail::Path::kMultiBlock);
}
template <class Args>
Status entry_small_tiles(Via via, const Args& a, void* w, size_t& bytes, cudaStream_t s) {
  switch (via) {
    case Via::kMultiBlockShort:
      return entry_small_tiles<SmallTiles::kShort>(a, w, bytes, s);
    case Via::kMultiBlockRegisters:
      return entry_small_tiles<SmallTiles::kRegisters>(a, w, bytes, s);
    case Via::kMultiBlock:
      return entry_small_tiles<SmallTiles::kMain>(a, w, bytes, s);
    default:
      return Status::invalid("test: not a forced multi-block entry point");
  }
}

/// Calls the entry point `via` names on `stream` (forward or backward, by the args' type). The
/// two-phase ones query the size, check that it is at least 1, and run in `workspace`, a fresh
/// allocation of exactly that size filled with poison (a workspace's contents on entry must not
/// matter); the caller keeps it until the stream is done.
template <class Args>
Status call_entry(const Args& a, Via via, cudaStream_t stream,
                  DeviceBuffer<unsigned char>& workspace) {
  if (via == Via::kPlain) return entry(a, stream);
  if (via == Via::kMallocAsync) return entry(a, malloc_async, stream);
  const bool small = via != Via::kWorkspace;
  size_t bytes = 0;
  Status st =
      small ? entry_small_tiles(via, a, nullptr, bytes, stream) : entry(a, nullptr, bytes, stream);
  if (!st.ok()) return st;
  if (bytes == 0)
    return Status::invalid("test: the size query reported 0 bytes (CUB's rule: >= 1)");
  if (!workspace.allocate(bytes) || !workspace.poison() || cudaDeviceSynchronize() != cudaSuccess)
    return Status::invalid("test: allocating and poisoning the workspace failed");
  return small ? entry_small_tiles(via, a, workspace.get(), bytes, stream)
               : entry(a, workspace.get(), bytes, stream);
}

/// Stream order and no hidden synchronization for the public entry point `via` (kWorkspace,
/// kMallocAsync or kPlain; forward or backward by the args' type): with `stream` held at a
/// host-side gate, the call returns without waiting for the stream, and the `n` elements at
/// `watched` (an output the caller poisoned) still hold poison, read by a second stream while
/// the gate holds; then the gate opens and the call must have succeeded. The workspace is sized
/// and allocated before the gate closes (the two-phase rule: the query launches nothing). The
/// caller warms the path up first (a kernel's module loads lazily at its first launch, and that
/// load may wait for the device: the runtime's one-time cost, not ours) and verifies after.
template <class Args, class T>
void check_gated_call(const Args& a, Via via, cudaStream_t stream, const T* watched, size_t n) {
  DeviceBuffer<unsigned char> ws;
  size_t bytes = 0;
  if (via == Via::kWorkspace) {
    const Status q = entry(a, nullptr, bytes, stream);
    ASSERT_TRUE(q.ok()) << q.message;
    ASSERT_TRUE(ws.allocate(bytes));
  }
  StreamGate gate;
  ASSERT_TRUE(gate.close(stream));
  const Status s = via == Via::kWorkspace     ? entry(a, ws.get(), bytes, stream)
                   : via == Via::kMallocAsync ? entry(a, malloc_async, stream)
                                              : entry(a, stream);
  EXPECT_FALSE(gate.timed_out()) << "the call waited for its stream: hidden synchronization";
  // Read the output while the gate holds the call: an async copy into pinned memory on a second
  // stream, polled (a pageable cudaMemcpy can wait behind the host function).
  T* early = nullptr;
  ASSERT_TRUE(cuda_ok(cudaMallocHost(&early, n * sizeof(T)), "cudaMallocHost"));
  Stream reader;
  ASSERT_TRUE(reader.create());
  auto copied =
      cuda_ok(cudaMemcpyAsync(early, watched, n * sizeof(T), cudaMemcpyDeviceToHost, reader.get()),
              "cudaMemcpyAsync (early)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  cudaError_t q = cudaErrorNotReady;
  while (copied && (q = cudaStreamQuery(reader.get())) == cudaErrorNotReady &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  const bool read_early = copied && q == cudaSuccess;
  gate.open();
  // Wait before any assertion can leave the scope: the gate's callback reads `gate`.
  const auto synced = cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  ASSERT_TRUE(cuda_ok(cudaStreamSynchronize(reader.get()), "cudaStreamSynchronize (reader)"));
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(read_early) << "could not read the output while the call's stream was held";
  if (read_early)
    EXPECT_TRUE(std::all_of(early, early + n, [](const T& v) { return is_poison(v); }))
        << "output written before the stream reached the call (launched on another stream?)";
  cudaFreeHost(early);
  ASSERT_TRUE(synced);
  ASSERT_TRUE(no_pending_cuda_error());
  EXPECT_FALSE(gate.timed_out());
}

/// One call's look-back records never count in another's: the forced multi-block entry point
/// `via` on `args` (forward or backward) in one workspace, four times, `redraw()` putting new
/// inputs into the same buffers (and poisoning the outputs) before each run after the first and
/// `verify()` checking every output after each. `graph`: the call is captured into a CUDA graph
/// (which replays the call's tag, so there the records are zeroed first) and replayed, but for a
/// direct call on the same workspace as the third run.
template <class Args, class Redraw, class Verify>
void check_workspace_reuse(Via via, const Args& args, bool graph, const Redraw& redraw,
                           const Verify& verify) {
  Stream stream;
  ASSERT_TRUE(stream.create());
  size_t bytes = 0;
  ASSERT_TRUE(entry_small_tiles(via, args, nullptr, bytes, stream.get()).ok());
  DeviceBuffer<unsigned char> ws;
  ASSERT_TRUE(ws.allocate(bytes));
  ASSERT_TRUE(ws.poison());
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  struct Exec {
    cudaGraphExec_t e = nullptr;
    ~Exec() {
      if (e != nullptr) (void)cudaGraphExecDestroy(e);
    }
  } exec;
  if (graph) {
    ASSERT_TRUE(cuda_ok(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal),
                        "cudaStreamBeginCapture"));
    const Status st = entry_small_tiles(via, args, ws.get(), bytes, stream.get());
    cudaGraph_t g = nullptr;
    const cudaError_t e = cudaStreamEndCapture(stream.get(), &g);
    ASSERT_TRUE(st.ok()) << "captured call failed: " << st.message;
    ASSERT_TRUE(cuda_ok(e, "cudaStreamEndCapture"));
    const cudaError_t f = cudaGraphInstantiate(&exec.e, g, 0);
    (void)cudaGraphDestroy(g);
    ASSERT_TRUE(cuda_ok(f, "cudaGraphInstantiate"));
  }
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE("run " + std::to_string(k + 1));
    if (k > 0) ASSERT_NO_FATAL_FAILURE(redraw());
    if (graph && k != 2) {
      ASSERT_TRUE(cuda_ok(cudaGraphLaunch(exec.e, stream.get()), "cudaGraphLaunch"));
    } else {
      const Status st = entry_small_tiles(via, args, ws.get(), bytes, stream.get());
      ASSERT_TRUE(st.ok()) << st.message;
    }
    ASSERT_TRUE(cuda_ok(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize"));
    ASSERT_TRUE(no_pending_cuda_error());
    ASSERT_NO_FATAL_FAILURE(verify());
  }
  if (graph) {
    const cudaGraphExec_t e = exec.e;
    exec.e = nullptr;
    ASSERT_TRUE(cuda_ok(cudaGraphExecDestroy(e), "cudaGraphExecDestroy"));
  }
}

// ---------------------------------------------------------------------------------------------
// Error measure
//
// x is the exact answer (the recurrence in double on the stored inputs), y the scan's output,
// r = round_to_T(x), and m the same recurrence on magnitudes, m[t] = |a[t]| m[t-1] + |b[t]| with
// m[-1] = |h0|: the size of the terms that x sums, so |x[t]| <= m[t].
//
// Per case (all its sequences together, when there are at least kAggregateMin elements), the
// plain relative L2 error of the spec:
//   float, double:   ||y - x|| <= tol ||x||                 (tol: 1e-5, 1e-12)
//   half, bfloat16:  ||y - x|| <= 1.5 ||r - x||
// Per sequence, the same with the error that is inherent to the inputs allowed for:
//   float, double:   ||y - x|| <= tol ||m||
//   half, bfloat16:  ||y - x|| <= 1.5 ||r - x|| + 64 u_float ||m||
// The two differ only where x cancels (||x|| << ||m||): a one-step sequence a h0 + b = 1e-4 with
// |a h0| ~ 1 carries an error of a float ulp of 1 however it is computed, which is 1e-3 of the
// answer, and a half output near zero (a subnormal) cannot do better than that either. Any bug
// (a lost carry, a wrong order, an unrounded or twice-rounded store) shows in both measures.

/// Sums of squares for one sequence or a whole case.
struct ErrorSums {
  double diff2 = 0;   ///< sum (y - x)^2
  double ref2 = 0;    ///< sum x^2
  double round2 = 0;  ///< sum (r - x)^2 (16-bit types)
  double scale2 = 0;  ///< sum m^2
  int64_t n = 0;
  void merge(const ErrorSums& o) {
    diff2 += o.diff2;
    ref2 += o.ref2;
    round2 += o.round2;
    scale2 += o.scale2;
    n += o.n;
  }
  /// ||y - x|| / ||x||, or ||y - x|| when ||x|| == 0.
  double relative() const { return ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2); }
  /// ||r - x|| / ||x||, likewise.
  double rounding() const { return ref2 > 0 ? std::sqrt(round2 / ref2) : std::sqrt(round2); }
};

/// Cases with fewer elements are judged per sequence only: one cancelling element can be all
/// there is of them.
constexpr int64_t kAggregateMin = 4096;
/// Unit roundoff of float, the compute type of the 16-bit types.
constexpr double kFloatRoundoff = 0x1.0p-24;

/// The verdict on one sequence (or one vector of final states, or a whole case).
struct SequenceCheck {
  bool ok = true;
  std::string message;  ///< empty when ok
};

/// Checks n values `got[i]` (stored as T) against the exact `exact[i]`, with `scale[i]` the
/// magnitude recurrence m (see above). Fails on any non-finite value (poison never written, a
/// NaN produced) and on an error above the per-sequence bound; the message names the first bad
/// index with its value and expected value, and the worst index. Adds the sums to `total`.
template <class T>
SequenceCheck check_sequence(const T* got, const double* exact, const double* scale, int64_t n,
                             ErrorSums* total = nullptr) {
  ErrorSums e;
  e.n = n;
  int64_t worst = -1;
  double worst_abs = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double y = to_double(got[i]);
    if (!std::isfinite(y)) {
      std::ostringstream s;
      s << "element " << i << " of " << n << " is "
        << (is_poison(got[i]) ? "poison (never written)" : "not finite") << " (" << y
        << "); expected " << std::setprecision(10) << exact[i];
      if (total != nullptr) total->n += n;  // counted, but the case already failed
      return {false, s.str()};
    }
    const double d = y - exact[i];
    e.diff2 += d * d;
    e.ref2 += exact[i] * exact[i];
    e.scale2 += scale[i] * scale[i];
    if constexpr (kIs16Bit<T>) {
      const double r = to_double(from_double<T>(exact[i])) - exact[i];
      e.round2 += r * r;
    }
    if (std::abs(d) > worst_abs) {
      worst_abs = std::abs(d);
      worst = i;
    }
  }
  if (total != nullptr) total->merge(e);

  const double err = std::sqrt(e.diff2);
  const double norm_m = std::sqrt(e.scale2);
  double bound;
  if constexpr (kIs16Bit<T>)
    bound = kRoundingFactor * std::sqrt(e.round2) + 64 * kFloatRoundoff * norm_m;
  else
    bound = kRelTolerance<T> * (norm_m > 0 ? norm_m : 1.0);
  if (err <= bound) return {};

  // A first index whose own error is out of line with the same bound taken element by element.
  const double rms_m = n > 0 ? norm_m / std::sqrt(static_cast<double>(n)) : 0;
  int64_t first = -1;
  for (int64_t i = 0; i < n && first < 0; ++i) {
    const double a = std::abs(to_double(got[i]) - exact[i]);
    double b;
    if constexpr (kIs16Bit<T>)
      b = kRoundingFactor * std::abs(to_double(from_double<T>(exact[i])) - exact[i]) +
          64 * kFloatRoundoff * scale[i];
    else
      b = kRelTolerance<T> * std::max(scale[i], rms_m);
    if (a > b) first = i;
  }
  std::ostringstream s;
  s << std::setprecision(10) << "error ||y - x|| = " << err << " exceeds " << bound << " over " << n
    << " elements (relative L2 error " << e.relative();
  if constexpr (kIs16Bit<T>) s << "; rounding the exact answer gives " << e.rounding();
  s << "; ||x|| = " << std::sqrt(e.ref2) << ", ||m|| = " << norm_m << ")";
  if (first >= 0)
    s << "; first bad element " << first << ": got " << to_double(got[first]) << ", expected "
      << exact[first];
  if (worst >= 0)
    s << "; worst element " << worst << ": got " << to_double(got[worst]) << ", expected "
      << exact[worst];
  return {false, s.str()};
}

/// The spec's relative L2 bound over a whole case (see above); passes cases under
/// kAggregateMin elements.
template <class T>
SequenceCheck check_total(const ErrorSums& e) {
  if (e.n < kAggregateMin) return {};
  const double err = e.relative();
  const double limit = kIs16Bit<T> ? kRoundingFactor * e.rounding() : kRelTolerance<T>;
  if (err <= limit) return {};
  std::ostringstream s;
  s << std::setprecision(10) << "relative L2 error over all " << e.n << " elements " << err
    << " exceeds " << limit;
  if (kIs16Bit<T>) s << " (1.5 x the error " << e.rounding() << " of rounding the exact answer)";
  return {false, s.str()};
}

/// The exact answer x and the magnitude recurrence m of one sequence, from stored inputs.
class Reference {
 public:
  /// `gates` and `tokens` point at the sequence's n contiguous stored elements.
  template <class T>
  void run(const T* gates, const T* tokens, int64_t n, bool reverse, double h0) {
    a_.resize(n);
    b_.resize(n);
    x_.resize(n);
    m_.resize(n);
    for (int64_t t = 0; t < n; ++t) {
      a_[t] = to_double(gates[t]);
      b_[t] = to_double(tokens[t]);
    }
    reference::sequential_scan(a_.data(), b_.data(), n, reverse, h0, x_.data());
    for (int64_t t = 0; t < n; ++t) {
      a_[t] = std::abs(a_[t]);
      b_[t] = std::abs(b_[t]);
    }
    reference::sequential_scan(a_.data(), b_.data(), n, reverse, std::abs(h0), m_.data());
  }
  const double* exact() const { return x_.data(); }
  const double* scale() const { return m_.data(); }

 private:
  std::vector<double> a_, b_, x_, m_;
};

/// The exact gradients of one sequence's backward pass and their magnitude recurrences, from
/// stored inputs: the backward reference run in double on the stored gates a, states x and
/// upstream gradient g (with h0 and gT = dL/d(final state)), and the same loop on |a|, |x|, |g|,
/// |h0|, |gT|, which bounds each term: m_d[t] = |g[t]| + |a[t+1]| m_d[t+1] >= |d[t]|, so the
/// scales are m_d (grad_tokens), m_d[t] |x[t-1]| (grad_gates) and |a[0]| m_d[0] (dh0).
class BackwardReference {
 public:
  /// `gates`, `states` and `grad` point at the sequence's n contiguous stored elements.
  template <class T>
  void run(const T* gates, const T* states, const T* grad, int64_t n, bool reverse, double h0,
           double gT) {
    a_.resize(n);
    x_.resize(n);
    g_.resize(n);
    da_.resize(n);
    db_.resize(n);
    mda_.resize(n);
    mdb_.resize(n);
    for (int64_t t = 0; t < n; ++t) {
      a_[t] = to_double(gates[t]);
      x_[t] = to_double(states[t]);
      g_[t] = to_double(grad[t]);
    }
    reference::sequential_scan_backward(a_.data(), x_.data(), g_.data(), n, reverse, h0, gT,
                                        da_.data(), db_.data(), &dh0_);
    for (int64_t t = 0; t < n; ++t) {
      a_[t] = std::abs(a_[t]);
      x_[t] = std::abs(x_[t]);
      g_[t] = std::abs(g_[t]);
    }
    reference::sequential_scan_backward(a_.data(), x_.data(), g_.data(), n, reverse, std::abs(h0),
                                        std::abs(gT), mda_.data(), mdb_.data(), &mdh0_);
  }
  const double* grad_gates() const { return da_.data(); }
  const double* grad_gates_scale() const { return mda_.data(); }
  const double* grad_tokens() const { return db_.data(); }
  const double* grad_tokens_scale() const { return mdb_.data(); }
  double grad_initial_state() const { return dh0_; }
  double grad_initial_state_scale() const { return mdh0_; }

 private:
  std::vector<double> a_, x_, g_, da_, db_, mda_, mdb_;
  double dh0_ = 0, mdh0_ = 0;
};

/// Reports the first few failed checks with ADD_FAILURE and counts the rest, so that a broken
/// kernel yields a readable report rather than twelve thousand identical lines.
class FailureLog {
 public:
  explicit FailureLog(int max_reported = 5) : max_(max_reported) {}
  ~FailureLog() {
    if (count_ > max_) ADD_FAILURE() << "... and " << (count_ - max_) << " more failures";
  }
  void add(const std::string& where, const std::string& what) {
    if (++count_ <= max_) ADD_FAILURE() << where << ": " << what;
  }
  int count() const { return count_; }

 private:
  int max_;
  int count_ = 0;
};

}  // namespace ascan::test
