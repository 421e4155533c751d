// tests/lookback_hook_test.cu: the look-back's rare branches, run on purpose.
//
// This file is compiled with ASCAN_TEST_WITHHOLD_GROUP_STATES=1 (tile_lookback.cuh's test hook):
// the groups of 32 tiles after a sequence's first publish their aggregate but never their state,
// as if every closing tile's look-back were slow. A tile of group m >= 34 then finds no state in
// its window of 32 earlier groups, walks back window by window to the first group's state and
// folds the aggregates of every later window (state_after_groups), branches that a normal run
// takes only when a look-back happens to outrun a whole window of closing tiles. The results must
// be what the normal path gives: right against the double reference, bitwise the same run to run.
//
// Typed over float, double, __half and __nv_bfloat16; forward, reverse and the backward pass on
// the forced multi-block path (SmallLookback's tiles, test_util.cuh), two sequences of 40 groups
// and a few tiles more, with an initial state, a final state or the gradients of both. The gates
// are exactly 1 (a running sum), so the state a walk-back finds reaches every later output
// undamped: gates below 1 would shrink it past what any check can see within a group or two.
#include <ascan/ascan.cuh>

#if !ASCAN_TEST_WITHHOLD_GROUP_STATES
#error \
    "lookback_hook_test.cu is built with ASCAN_TEST_WITHHOLD_GROUP_STATES=1 (tests/CMakeLists.txt)"
#endif

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {
namespace {

template <class T>
class LookbackHookTest : public RequiresGpu<> {};
using HookTypes = ::testing::Types<float, double, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(LookbackHookTest, HookTypes);

constexpr int64_t kGroups = 40;  // groups per sequence: past the first window by six
constexpr int64_t kSequences = 2;

/// Elements per tile of the forced multi-block path (SmallLookback's main policy).
template <class T, bool kBackward>
constexpr int64_t tile_elements() {
  constexpr auto p = SmallLookback<sizeof(T), kBackward>::kPolicy;
  return int64_t(p.threads) * p.items;
}

/// n gates of exactly 1.
template <class T>
std::vector<T> gates_of_one(int64_t n) {
  return std::vector<T>(static_cast<size_t>(n), from_double<T>(1.0));
}

/// Draws n values uniform in [lo, hi), stored in T.
template <class T>
std::vector<T> draw(Rng& rng, int64_t n, double lo, double hi) {
  std::vector<T> v(n);
  for (T& x : v) x = from_double<T>(rng.uniform(lo, hi));
  return v;
}

TYPED_TEST(LookbackHookTest, ForwardWalksBackAndFolds) {
  using T = TypeParam;
  const int64_t length = kGroups * detail::kTilesPerGroup * tile_elements<T, false>() + 123;
  const int64_t n = kSequences * length;
  for (bool reverse : {false, true}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(
        std::string("T=") + std::to_string(length) + (reverse ? " reverse" : " forward"), seed));
    Rng rng(seed);
    const std::vector<T> gates = gates_of_one<T>(n), tokens = draw<T>(rng, n, -1.0, 1.0),
                         h0 = draw<T>(rng, kSequences, -1.0, 1.0);
    DeviceBuffer<T> gates_d, tokens_d, out_d, h0_d, fin_d;
    ASSERT_TRUE(gates_d.allocate(n) && tokens_d.allocate(n) && out_d.allocate(n));
    ASSERT_TRUE(h0_d.allocate(kSequences) && fin_d.allocate(kSequences));
    ASSERT_TRUE(gates_d.upload(gates) && tokens_d.upload(tokens) && h0_d.upload(h0));
    ScanArgs<T> a;
    a.gates = gates_d.get();
    a.tokens = tokens_d.get();
    a.out = out_d.get();
    a.shape = time_contiguous(1, kSequences, length);
    a.reverse = reverse;
    a.initial_state = h0_d.get();
    a.final_state = fin_d.get();
    std::vector<T> first_out, first_fin;
    for (int run = 0; run < 2; ++run) {
      ASSERT_TRUE(out_d.poison() && fin_d.poison());
      DeviceBuffer<unsigned char> workspace;
      const Status st = call_entry(a, Via::kMultiBlock, cudaStream_t{0}, workspace);
      ASSERT_TRUE(st.ok()) << st.message;
      ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after scan)"));
      ASSERT_TRUE(no_pending_cuda_error());
      std::vector<T> out, fin;
      ASSERT_TRUE(out_d.download(out) && fin_d.download(fin));
      if (run == 1) {
        int64_t differ = 0;
        for (int64_t i = 0; i < n; ++i) differ += !bitwise_equal(out[i], first_out[i]);
        for (int64_t s = 0; s < kSequences; ++s) differ += !bitwise_equal(fin[s], first_fin[s]);
        EXPECT_EQ(differ, 0) << "a second run differs bitwise in " << differ << " values";
        break;
      }
      FailureLog log;
      Reference ref;
      for (int64_t s = 0; s < kSequences; ++s) {
        const int64_t base = s * length;
        ref.run(gates.data() + base, tokens.data() + base, length, reverse, to_double(h0[s]));
        const SequenceCheck k = check_sequence(out.data() + base, ref.exact(), ref.scale(), length);
        if (!k.ok) log.add("sequence " + std::to_string(s), k.message);
        const T last = out[base + (reverse ? 0 : length - 1)];
        if (!bitwise_equal(fin[s], last))
          log.add("sequence " + std::to_string(s), "final state differs from the last output");
      }
      first_out = std::move(out);
      first_fin = std::move(fin);
    }
  }
}

TYPED_TEST(LookbackHookTest, BackwardWalksBackAndFolds) {
  using T = TypeParam;
  const int64_t length = kGroups * detail::kTilesPerGroup * tile_elements<T, true>() + 123;
  const int64_t n = kSequences * length;
  for (bool reverse : {false, true}) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(std::string("T=") + std::to_string(length) +
                               (reverse ? " reverse" : " forward") + ", backward",
                           seed));
    Rng rng(seed);
    const std::vector<T> gates = gates_of_one<T>(n), states = draw<T>(rng, n, -1.0, 1.0),
                         grad = draw<T>(rng, n, -1.0, 1.0),
                         h0 = draw<T>(rng, kSequences, -1.0, 1.0),
                         gT = draw<T>(rng, kSequences, -1.0, 1.0);
    DeviceBuffer<T> gates_d, states_d, grad_d, dg_d, dt_d, h0_d, gT_d, dh0_d;
    ASSERT_TRUE(gates_d.allocate(n) && states_d.allocate(n) && grad_d.allocate(n));
    ASSERT_TRUE(dg_d.allocate(n) && dt_d.allocate(n));
    ASSERT_TRUE(h0_d.allocate(kSequences) && gT_d.allocate(kSequences) &&
                dh0_d.allocate(kSequences));
    ASSERT_TRUE(gates_d.upload(gates) && states_d.upload(states) && grad_d.upload(grad));
    ASSERT_TRUE(h0_d.upload(h0) && gT_d.upload(gT));
    ScanBackwardArgs<T> a;
    a.gates = gates_d.get();
    a.states = states_d.get();
    a.grad_out = grad_d.get();
    a.grad_gates = dg_d.get();
    a.grad_tokens = dt_d.get();
    a.shape = time_contiguous(1, kSequences, length);
    a.reverse = reverse;
    a.initial_state = h0_d.get();
    a.grad_final_state = gT_d.get();
    a.grad_initial_state = dh0_d.get();
    std::vector<T> first_dg, first_dt, first_dh0;
    for (int run = 0; run < 2; ++run) {
      ASSERT_TRUE(dg_d.poison() && dt_d.poison() && dh0_d.poison());
      DeviceBuffer<unsigned char> workspace;
      const Status st = call_entry(a, Via::kMultiBlock, cudaStream_t{0}, workspace);
      ASSERT_TRUE(st.ok()) << st.message;
      ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after backward)"));
      ASSERT_TRUE(no_pending_cuda_error());
      std::vector<T> dg, dt, dh0;
      ASSERT_TRUE(dg_d.download(dg) && dt_d.download(dt) && dh0_d.download(dh0));
      if (run == 1) {
        int64_t differ = 0;
        for (int64_t i = 0; i < n; ++i)
          differ += !bitwise_equal(dg[i], first_dg[i]) + !bitwise_equal(dt[i], first_dt[i]);
        for (int64_t s = 0; s < kSequences; ++s) differ += !bitwise_equal(dh0[s], first_dh0[s]);
        EXPECT_EQ(differ, 0) << "a second run differs bitwise in " << differ << " values";
        break;
      }
      FailureLog log;
      BackwardReference ref;
      std::vector<double> dh0_exact, dh0_scale;
      std::vector<T> dh0_got;
      for (int64_t s = 0; s < kSequences; ++s) {
        const int64_t base = s * length;
        ref.run(gates.data() + base, states.data() + base, grad.data() + base, length, reverse,
                to_double(h0[s]), to_double(gT[s]));
        const std::string where = "sequence " + std::to_string(s);
        SequenceCheck k =
            check_sequence(dg.data() + base, ref.grad_gates(), ref.grad_gates_scale(), length);
        if (!k.ok) log.add(where + " grad_gates", k.message);
        k = check_sequence(dt.data() + base, ref.grad_tokens(), ref.grad_tokens_scale(), length);
        if (!k.ok) log.add(where + " grad_tokens", k.message);
        dh0_exact.push_back(ref.grad_initial_state());
        dh0_scale.push_back(ref.grad_initial_state_scale());
        dh0_got.push_back(dh0[s]);
      }
      const SequenceCheck k =
          check_sequence(dh0_got.data(), dh0_exact.data(), dh0_scale.data(), kSequences);
      if (!k.ok) log.add("grad_initial_state", k.message);
      first_dg = std::move(dg);
      first_dt = std::move(dt);
      first_dh0 = std::move(dh0);
    }
  }
}

}  // namespace
}  // namespace ascan::test
