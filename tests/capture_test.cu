// tests/capture_test.cu: calls captured into a CUDA graph in global capture mode as the first
// calls of the process, with every cache of the library cold.
//
// A library's first call does work its later calls skip: it asks the runtime about its kernels
// (staging support, occupancy, the shared-memory allowance) and the device (peak bandwidth), and
// the runtime loads the kernels' modules lazily. In global capture mode
// (cudaStreamCaptureModeGlobal) any call that may synchronize or allocate outside the graph fails
// and invalidates the capture, so a user who captures a model's first step would see our first call
// fail there. Here each test captures calls that nothing in the process ran before: ctest runs each
// test in a process of its own (gtest_discover_tests), and run whole, the executable's tests each
// take a dtype and pass that no test before them took (only the device's peak bandwidth, asked
// once per device, is then known after the first). The size queries run inside the capture too;
// the graph is then replayed twice, on fresh inputs each
// time, and every output is checked against the double reference. Shapes: few long sequences (the
// multi-block path, whose graph zeroes its look-back records first), many sequences (one block
// each) and channel-last rows.
#include <ascan/ascan.cuh>

#include <cstdint>
#include <string>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {
namespace {

class CaptureColdTest : public RequiresGpu<> {};

/// The shapes of every captured graph: the multi-block path, one block per sequence, the rows.
const Shape kShapes[] = {time_contiguous(1, 2, 1 << 20), time_contiguous(4, 64, 3000),
                         channel_last(2, 1000, 64)};

/// One call's host inputs, device buffers and arguments, forward or backward.
template <class T, bool kBackward>
struct Call {
  Shape shape;
  std::vector<T> in[3];  // gates, tokens (forward) or gates, states, grad_out (backward)
  DeviceBuffer<T> in_d[3], out_d[2];
  std::conditional_t<kBackward, ScanBackwardArgs<T>, ScanArgs<T>> args;

  static constexpr int kInputs = kBackward ? 3 : 2;
  static constexpr int kOutputs = kBackward ? 2 : 1;

  ::testing::AssertionResult allocate(const Shape& sh) {
    shape = sh;
    const int64_t n = sh.elements();
    for (int i = 0; i < kInputs; ++i)
      if (auto r = in_d[i].allocate(n); !r) return r;
    for (int i = 0; i < kOutputs; ++i)
      if (auto r = out_d[i].allocate(n); !r) return r;
    args.shape = sh;
    args.gates = in_d[0].get();
    if constexpr (kBackward) {
      args.states = in_d[1].get();
      args.grad_out = in_d[2].get();
      args.grad_gates = out_d[0].get();
      args.grad_tokens = out_d[1].get();
    } else {
      args.tokens = in_d[1].get();
      args.out = out_d[0].get();
    }
    return ::testing::AssertionSuccess();
  }
  /// Fresh inputs, uploaded, and poisoned outputs (before the graph's launch, on stream 0).
  ::testing::AssertionResult redraw(Rng& rng) {
    const int64_t n = shape.elements();
    for (int i = 0; i < kInputs; ++i) {
      in[i].resize(n);
      for (T& x : in[i]) x = from_double<T>(i == 0 ? rng.uniform(0.99, 1.0) : rng.uniform(-1, 1));
      if (auto r = in_d[i].upload(in[i]); !r) return r;
    }
    for (int i = 0; i < kOutputs; ++i)
      if (auto r = out_d[i].poison(); !r) return r;
    return cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (inputs)");
  }
  /// Every output against the double reference.
  void verify(const std::string& what) const {
    const Shape& sh = shape;
    std::vector<T> got[2];
    for (int i = 0; i < kOutputs; ++i) ASSERT_TRUE(out_d[i].download(got[i]));
    FailureLog log;
    std::vector<T> seq[3], y[2];
    for (int64_t s = 0; s < sh.sequences(); ++s) {
      for (auto* v : {&seq[0], &seq[1], &seq[2], &y[0], &y[1]}) v->resize(sh.length);
      for (int64_t t = 0; t < sh.length; ++t) {
        for (int i = 0; i < kInputs; ++i) seq[i][t] = in[i][element_offset(sh, s, t)];
        for (int i = 0; i < kOutputs; ++i) y[i][t] = got[i][element_offset(sh, s, t)];
      }
      const std::string where = what + " sequence " + std::to_string(s);
      if constexpr (kBackward) {
        BackwardReference ref;
        ref.run(seq[0].data(), seq[1].data(), seq[2].data(), sh.length, false, 0.0, 0.0);
        SequenceCheck k =
            check_sequence(y[0].data(), ref.grad_gates(), ref.grad_gates_scale(), sh.length);
        if (!k.ok) log.add(where + " grad_gates", k.message);
        k = check_sequence(y[1].data(), ref.grad_tokens(), ref.grad_tokens_scale(), sh.length);
        if (!k.ok) log.add(where + " grad_tokens", k.message);
      } else {
        Reference ref;
        ref.run(seq[0].data(), seq[1].data(), sh.length, false, 0.0);
        const SequenceCheck k = check_sequence(y[0].data(), ref.exact(), ref.scale(), sh.length);
        if (!k.ok) log.add(where, k.message);
      }
    }
  }
};

template <class Args>
Status call(const Args& a, Via via, void* workspace, size_t capacity, cudaStream_t stream) {
  if (via == Via::kPlain) return entry(a, stream);
  if (via == Via::kMallocAsync) return entry(a, malloc_async, stream);
  size_t bytes = 0;
  if (Status q = entry(a, nullptr, bytes, stream); !q.ok()) return q;
  if (bytes > capacity)
    return Status::invalid("test: the workspace allocated up front is too small");
  return entry(a, workspace, bytes, stream);
}

/// Captures the calls on kShapes in global mode on a fresh stream, then replays the graph twice
/// on fresh inputs and checks every output each time.
template <class T, bool kBackward>
void capture_cold(Via via) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(std::string(kBackward ? "backward" : "forward") + " via " + via_name(via) +
                             ", captured in global mode, caches cold",
                         seed));
  Rng rng(seed);
  constexpr int kCalls = sizeof(kShapes) / sizeof(kShapes[0]);
  Call<T, kBackward> calls[kCalls];
  for (int i = 0; i < kCalls; ++i) ASSERT_TRUE(calls[i].allocate(kShapes[i]));
  // The two-phase calls' workspace, allocated before the capture (cudaMalloc may not run inside
  // it); the size queries run inside, as the first thing the library does.
  DeviceBuffer<unsigned char> workspace[kCalls];
  constexpr size_t kCapacity = size_t{64} << 20;
  if (via == Via::kWorkspace)
    for (auto& w : workspace) ASSERT_TRUE(w.allocate(kCapacity));
  Stream stream;
  ASSERT_TRUE(stream.create());
  ASSERT_TRUE(cuda_ok(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal),
                      "cudaStreamBeginCapture"));
  Status st[kCalls];
  for (int i = 0; i < kCalls; ++i)
    st[i] = call(calls[i].args, via, workspace[i].get(), kCapacity, stream.get());
  cudaGraph_t graph = nullptr;
  const auto ended = cuda_ok(cudaStreamEndCapture(stream.get(), &graph), "cudaStreamEndCapture");
  for (int i = 0; i < kCalls; ++i) EXPECT_TRUE(st[i].ok()) << "call " << i << ": " << st[i].message;
  ASSERT_TRUE(ended);
  cudaGraphExec_t exec = nullptr;
  const auto made = cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  cudaGraphDestroy(graph);
  ASSERT_TRUE(made);
  for (int replay = 0; replay < 2; ++replay) {
    for (auto& c : calls) ASSERT_TRUE(c.redraw(rng));
    ASSERT_TRUE(cuda_ok(cudaGraphLaunch(exec, stream.get()), "cudaGraphLaunch"));
    ASSERT_TRUE(cuda_ok(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize"));
    ASSERT_TRUE(no_pending_cuda_error());
    for (int i = 0; i < kCalls; ++i)
      ASSERT_NO_FATAL_FAILURE(
          calls[i].verify("replay " + std::to_string(replay) + ", call " + std::to_string(i)));
  }
  cudaGraphExecDestroy(exec);
}

// In this order, each the first use of its dtype and pass in the process.
TEST_F(CaptureColdTest, FloatForwardWorkspace) { capture_cold<float, false>(Via::kWorkspace); }
TEST_F(CaptureColdTest, Bfloat16BackwardMallocAsync) {
  capture_cold<__nv_bfloat16, true>(Via::kMallocAsync);
}
TEST_F(CaptureColdTest, HalfForwardPlain) { capture_cold<__half, false>(Via::kPlain); }
TEST_F(CaptureColdTest, DoubleBackwardWorkspace) { capture_cold<double, true>(Via::kWorkspace); }
TEST_F(CaptureColdTest, Bfloat16ForwardMallocAsync) {
  capture_cold<__nv_bfloat16, false>(Via::kMallocAsync);
}
TEST_F(CaptureColdTest, FloatBackwardPlain) { capture_cold<float, true>(Via::kPlain); }

}  // namespace
}  // namespace ascan::test
