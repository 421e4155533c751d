// Packed offsets that do not ascend, or leave [0, total]: the library cannot check them without
// reading device memory, so it promises only that no access leaves the arrays and the call
// completes (README, "Packed sequences"). Each call here runs with guard zones of poison around
// every array and state buffer; the call must succeed, leave no CUDA error, and not touch a
// guard. Both layouts ((C, total): the flat kernel; (total, C): the row path), both passes, both
// offset types, int32 and int64. Run under compute-sanitizer memcheck by the GPU round.
#include <gtest/gtest.h>
#include <ascan/ascan.cuh>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {
namespace {

constexpr int64_t kGuard = 4096;  // elements of poison before and after every buffer
constexpr uint32_t kPoisonBits = 0x7fbadbadu;

/// One device buffer of `n` floats inside two guard zones.
struct Guarded {
  float* base = nullptr;
  int64_t n = 0;
  ~Guarded() { cudaFree(base); }
  bool make(int64_t count, const std::vector<float>& init) {
    n = count;
    if (cudaMalloc(&base, sizeof(float) * size_t(n + 2 * kGuard)) != cudaSuccess) return false;
    std::vector<float> h(size_t(n + 2 * kGuard));
    float poison;
    std::memcpy(&poison, &kPoisonBits, sizeof poison);
    for (float& x : h) x = poison;
    for (int64_t i = 0; i < n && i < int64_t(init.size()); ++i)
      h[size_t(kGuard + i)] = init[size_t(i)];
    return cudaMemcpy(base, h.data(), sizeof(float) * h.size(), cudaMemcpyHostToDevice) ==
           cudaSuccess;
  }
  float* data() const { return base + kGuard; }
  /// Guard elements no longer poison.
  int64_t touched_guards() const {
    std::vector<uint32_t> h(size_t(n + 2 * kGuard));
    if (cudaMemcpy(h.data(), base, sizeof(uint32_t) * h.size(), cudaMemcpyDeviceToHost) !=
        cudaSuccess)
      return -1;
    int64_t bad = 0;
    for (int64_t i = 0; i < kGuard; ++i) bad += h[size_t(i)] != kPoisonBits;
    for (int64_t i = kGuard + n; i < n + 2 * kGuard; ++i) bad += h[size_t(i)] != kPoisonBits;
    return bad;
  }
};

template <class Offset>
void run_case(bool backward, bool channel_last_layout, const std::vector<Offset>& offsets,
              int64_t total, int64_t channels, bool pass_states = true) {
  const int64_t count = int64_t(offsets.size()) - 1;
  SCOPED_TRACE(std::string(backward ? "backward" : "forward") +
               (channel_last_layout ? ", (total, C)" : ", (C, total)") + ", " +
               std::to_string(sizeof(Offset) * 8) + "-bit offsets, total " + std::to_string(total) +
               ", C " + std::to_string(channels) + (pass_states ? ", states" : ", no states"));
  const int64_t elems = total * channels, states = count * channels;
  std::vector<float> gate_init, value_init, state_init;
  for (int64_t i = 0; i < elems; ++i) {
    gate_init.push_back(0.5f + 0.4f * float((i * 7919) % 100) / 100.0f);
    value_init.push_back(float((i * 104729) % 200) / 100.0f - 1.0f);
  }
  for (int64_t i = 0; i < states; ++i) state_init.push_back(float(i % 13) / 13.0f);
  Guarded g, a, b, o, o2, h0, s2, s3;
  ASSERT_TRUE(g.make(elems, gate_init) && a.make(elems, value_init) && b.make(elems, value_init) &&
              o.make(elems, {}) && o2.make(elems, {}) && h0.make(states, state_init) &&
              s2.make(states, state_init) && s3.make(states, {}));
  Offset* doff = nullptr;
  ASSERT_TRUE(cuda_ok(cudaMalloc(&doff, sizeof(Offset) * offsets.size()), "cudaMalloc offsets"));
  ASSERT_TRUE(cuda_ok(
      cudaMemcpy(doff, offsets.data(), sizeof(Offset) * offsets.size(), cudaMemcpyHostToDevice),
      "cudaMemcpy offsets"));
  const Shape shape =
      channel_last_layout ? channel_last(1, total, channels) : time_contiguous(1, channels, total);
  Status st_call;
  size_t bytes = 0;
  void* ws = nullptr;
  for (int pass = 0; pass < 2; ++pass) {  // a size query, then the call
    if (backward) {
      ScanBackwardArgs<float> args;
      args.shape = shape;
      args.gates = g.data();
      args.states = a.data();
      args.grad_out = b.data();
      args.grad_gates = o.data();
      args.grad_tokens = o2.data();
      if (pass_states) {
        args.initial_state = h0.data();
        args.grad_final_state = s2.data();
        args.grad_initial_state = s3.data();
      }
      args.packed = packed(doff, count);
      st_call = scan_backward(args, ws, bytes);
    } else {
      ScanArgs<float> args;
      args.shape = shape;
      args.gates = g.data();
      args.tokens = a.data();
      args.out = o.data();
      if (pass_states) {
        args.initial_state = h0.data();
        args.final_state = s3.data();
      }
      args.packed = packed(doff, count);
      st_call = scan(args, ws, bytes);
    }
    ASSERT_TRUE(st_call.ok()) << st_call.message;
    if (pass == 0) ASSERT_TRUE(cuda_ok(cudaMalloc(&ws, bytes), "cudaMalloc workspace"));
  }
  EXPECT_TRUE(cuda_ok(cudaDeviceSynchronize(), "the call"));
  EXPECT_TRUE(cuda_ok(cudaGetLastError(), "the runtime's last error"));
  for (const Guarded* x : {&g, &a, &b, &o, &o2, &h0, &s2, &s3})
    EXPECT_EQ(x->touched_guards(), 0) << "a guard zone was written";
  cudaFree(ws);
  cudaFree(doff);
}

class PackedOffsetsTest : public RequiresGpu<> {};

TEST_F(PackedOffsetsTest, NotAscendingStaysInBounds) {
  const int64_t total = 3000;
  // descending, past the end, negative, repeated, then back to the start
  const std::vector<int64_t> wild = {0, 50, 20, 2999, 5000, -5, 7, 7, 1000, 3, 3000};
  for (bool backward : {false, true})
    for (bool cl : {false, true})
      for (int64_t ch : {1, 8, 33, 64})
        for (bool states : {true, false}) {  // channel-last without states: the dense row kernel
          run_case<int64_t>(backward, cl, wild, total, ch, states);
          if (HasFatalFailure()) return;
          run_case<int32_t>(backward, cl, std::vector<int32_t>(wild.begin(), wild.end()), total, ch,
                            states);
          if (HasFatalFailure()) return;
        }
}

TEST_F(PackedOffsetsTest, AllOffsetsOutOfRange) {
  for (bool backward : {false, true})
    for (bool cl : {false, true}) {
      run_case<int64_t>(backward, cl, {-7, -7, 1 << 30, -1, 1 << 30}, 700, 5);
      if (HasFatalFailure()) return;
      run_case<int64_t>(backward, cl, {-7, -7, 1 << 30, -1, 1 << 30}, 700, 8, false);
      if (HasFatalFailure()) return;
    }
}

}  // namespace
}  // namespace ascan::test
