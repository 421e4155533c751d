// tests/validate_fuzz_test.cpp: can_implement against an oracle on random argument sets.
//
// Each test draws ASCAN_FUZZ_CASES argument sets (default 131072; eight tests, so 2^20 in all)
// for one pass and one element type (validate_fuzz.hpp): sizes, strides and pointer values from
// small values, powers of two, values near INT64_MAX and negative ones. For every set:
//   - where the oracle decides the call (always, but for same-stride pairs too large to
//     enumerate), can_implement agrees exactly: success, or kInvalidArgument with a message;
//   - where can_implement accepts a call of small arrays, listing every element address finds
//     no output that repeats an element and no pair of arrays that shares one (beyond the
//     documented exact aliases).
// Plain C++ on the host: can_implement reads no memory, so the pointers are made-up values.
// A failure prints its seed; ASCAN_TEST_SEED=<seed> replays it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "validate_fuzz.hpp"

namespace ascan::fuzz {
namespace {

int64_t cases_per_test() {
  if (const char* env = std::getenv("ASCAN_FUZZ_CASES"); env != nullptr && *env != '\0')
    return std::strtoll(env, nullptr, 0);
  return 131072;
}

struct Tally {
  int64_t cases = 0, accepted = 0, refused = 0, undecided = 0, wild = 0;
  int64_t interleaved_accepted = 0;  ///< accepted with same-stride arrays whose intervals meet
  int64_t overlap_refused = 0;       ///< refused for same-stride arrays that share an element
  int64_t brute_forced = 0;          ///< accepted calls checked element by element
};

template <class T>
Status call(const Case& c) {
  return c.backward ? can_implement(backward_args<T>(c)) : can_implement(forward_args<T>(c));
}

template <class T>
void fuzz(bool backward, const char* name) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(name) + " [seed " + std::to_string(seed) +
               "; replay with ASCAN_TEST_SEED=" + std::to_string(seed) + "]");
  Gen gen(seed);
  Tally t;
  int failures = 0;
  const int64_t n = cases_per_test();
  for (int64_t i = 0; i < n && failures < 5; ++i) {
    const Case c = gen.next(backward, static_cast<int64_t>(sizeof(T)));
    const Verdict v = judge(c);
    const Status st = call<T>(c);
    ++t.cases;
    t.wild += gen.drew_wild() ? 1 : 0;
    if (st.message == nullptr || std::strlen(st.message) == 0) {
      ADD_FAILURE() << "case " << i << ": no message; " << describe(c);
      ++failures;
      continue;
    }
    if (st.ok())
      ++t.accepted;
    else
      ++t.refused;
    if (v.refuse || !v.undecided) {
      const bool want_ok = !v.refuse;
      if (st.ok() != want_ok || (!st.ok() && st.code != StatusCode::kInvalidArgument)) {
        ADD_FAILURE() << "case " << i << ": can_implement says \"" << st.message
                      << "\", the oracle " << (want_ok ? "accepts" : "refuses (" + v.why + ")")
                      << "\n  " << describe(c);
        ++failures;
        continue;
      }
      if (want_ok && v.interleaved) ++t.interleaved_accepted;
      if (!want_ok && v.overlapping) ++t.overlap_refused;
    } else {
      ++t.undecided;
    }
    if (st.ok() && c.shape.batch > 0 && c.shape.channels > 0 && c.shape.length > 0 &&
        static_cast<i128>(c.shape.batch) * c.shape.channels * c.shape.length <= 4096) {
      ++t.brute_forced;
      const std::string bad = brute_force_violation(c);
      if (!bad.empty()) {
        ADD_FAILURE() << "case " << i << ": " << bad << "\n  " << describe(c);
        ++failures;
      }
    }
  }
  std::cout << name << ": " << t.cases << " cases, " << t.accepted << " accepted ("
            << t.interleaved_accepted << " with interleaved same-stride arrays, " << t.brute_forced
            << " checked element by element), " << t.refused << " refused ("
            << t.overlap_refused << " for same-stride arrays sharing an element), "
            << t.undecided << " undecided by the oracle, " << t.wild << " with wild values\n";
  if (failures > 0 || n < 10000) return;
  // The draw covers what it is for: both verdicts, interleaving, wild values.
  EXPECT_GT(t.accepted, t.cases / 20);
  EXPECT_GT(t.refused, t.cases / 5);
  EXPECT_GT(t.interleaved_accepted, t.cases / 200);
  EXPECT_GT(t.overlap_refused, t.cases / 200);
  EXPECT_GT(t.wild, t.cases / 10);
  EXPECT_LT(t.undecided, t.cases / 100);
}

TEST(ValidateFuzz, ForwardFloat) { fuzz<float>(false, "forward float"); }
TEST(ValidateFuzz, ForwardDouble) { fuzz<double>(false, "forward double"); }
TEST(ValidateFuzz, ForwardHalf) { fuzz<__half>(false, "forward half"); }
TEST(ValidateFuzz, ForwardBfloat16) { fuzz<__nv_bfloat16>(false, "forward bfloat16"); }
TEST(ValidateFuzz, BackwardFloat) { fuzz<float>(true, "backward float"); }
TEST(ValidateFuzz, BackwardDouble) { fuzz<double>(true, "backward double"); }
TEST(ValidateFuzz, BackwardHalf) { fuzz<__half>(true, "backward half"); }
TEST(ValidateFuzz, BackwardBfloat16) { fuzz<__nv_bfloat16>(true, "backward bfloat16"); }

// ---------------------------------------------------------------------------------------------
// The pieces, at their edges.

TEST(CheckedArithmetic, AgreesWith128Bits) {
  const int64_t kEdges[] = {0,
                            1,
                            2,
                            3,
                            -1,
                            -2,
                            -3,
                            INT64_MAX,
                            INT64_MAX - 1,
                            INT64_MAX / 2,
                            INT64_MAX / 2 + 1,
                            INT64_MIN,
                            INT64_MIN + 1,
                            INT64_MIN / 2,
                            INT64_MIN / 2 - 1,
                            int64_t{1} << 31,
                            int64_t{1} << 32,
                            -(int64_t{1} << 31),
                            -(int64_t{1} << 32),
                            int64_t{1} << 62,
                            -(int64_t{1} << 62),
                            3037000499,  // floor(sqrt(INT64_MAX))
                            3037000500,
                            -3037000499,
                            -3037000500};
  std::mt19937_64 rng(fresh_seed());
  std::vector<int64_t> values(std::begin(kEdges), std::end(kEdges));
  for (int i = 0; i < 2000; ++i) values.push_back(static_cast<int64_t>(rng() >> (rng() % 64)));
  for (int i = 0; i < 2000; ++i) values.push_back(-static_cast<int64_t>(rng() >> (1 + rng() % 63)));
  int failures = 0;
  for (size_t i = 0; i < values.size() && failures < 10; ++i)
    for (size_t j = 0; j < values.size() && failures < 10; ++j) {
      const int64_t a = values[i], b = values[j];
      const i128 p = static_cast<i128>(a) * b, q = static_cast<i128>(a) + b;
      int64_t r = 42;
      const bool p_fits = p <= kI64Max && p >= -kI64Max - 1;
      if (detail::mul_ok(a, b, r) != p_fits || (p_fits && r != static_cast<int64_t>(p)) ||
          (!p_fits && r != 42)) {
        ADD_FAILURE() << "mul_ok(" << a << ", " << b << ")";
        ++failures;
      }
      const int64_t saturated = p_fits ? static_cast<int64_t>(p) : (p > 0 ? INT64_MAX : INT64_MIN);
      if (detail::saturating_mul(a, b) != saturated) {
        ADD_FAILURE() << "saturating_mul(" << a << ", " << b << ")";
        ++failures;
      }
      r = 42;
      const bool q_fits = q <= kI64Max && q >= -kI64Max - 1;
      if (detail::add_ok(a, b, r) != q_fits || (q_fits && r != static_cast<int64_t>(q)) ||
          (!q_fits && r != 42)) {
        ADD_FAILURE() << "add_ok(" << a << ", " << b << ")";
        ++failures;
      }
    }
}

// Shape's counts and the layout helpers saturate where the product leaves int64_t (they
// overflowed: undefined behaviour, and a wrapped stride); such a shape is then refused.
TEST(ShapeCounts, SaturateInsteadOfOverflowing) {
  EXPECT_EQ((Shape{2, 3, 5}.sequences()), 6);
  EXPECT_EQ((Shape{2, 3, 5}.elements()), 30);
  EXPECT_EQ((Shape{INT64_MAX, 2, 1}.sequences()), INT64_MAX);
  EXPECT_EQ((Shape{int64_t{1} << 32, int64_t{1} << 32, 1}.sequences()), INT64_MAX);
  EXPECT_EQ((Shape{1 << 20, 1 << 20, int64_t{1} << 30}.elements()), INT64_MAX);
  EXPECT_EQ((Shape{INT64_MAX, INT64_MAX, 0}.elements()), 0);
  const int64_t big = (int64_t{1} << 32) + 1, wide = int64_t{1} << 32;  // big * wide wraps to 2^32
  EXPECT_EQ(time_contiguous(2, big, wide).batch_stride, INT64_MAX);
  EXPECT_EQ(channel_last(2, wide, big).batch_stride, INT64_MAX);
  ScanArgs<float> a;
  a.gates = fake<const float>(0x10000);
  a.tokens = fake<const float>(0x20000);
  a.out = fake<float>(0x30000);
  a.shape = time_contiguous(2, big, wide);
  EXPECT_EQ(can_implement(a).code, StatusCode::kInvalidArgument);
  a.shape = time_contiguous(1, 1, INT64_MAX);
  EXPECT_EQ(can_implement(a).code, StatusCode::kInvalidArgument);
}

/// A forward call of `s` with gates at 0x100000 and out `apart` elements after it, both with
/// strides `st`; tokens far away.
Status forward_apart(const Shape& s, const Strides& st, int64_t apart) {
  ScanArgs<float> a;
  a.shape = s;
  a.gates = fake<const float>(0x100000);
  a.gates_strides = st;
  a.tokens = fake<const float>(0x10000000);
  a.out = fake<float>(0x100000 + 4 * static_cast<uint64_t>(apart));
  a.out_strides = st;
  return can_implement(a);
}

// Interleaved views of one layout are judged exactly, whatever the time stride.
TEST(ValidateOverlap, InterleavedAnyTimeStride) {
  const Shape s = channel_last(2, 5, 3);
  // time-interleaved: rows of 6, gates in the even rows' first half... every other time step
  EXPECT_TRUE(forward_apart(s, Strides{60, 1, 6}, 3).ok());   // the other half of each row
  EXPECT_FALSE(forward_apart(s, Strides{60, 1, 6}, 2).ok());  // shares a column
  EXPECT_TRUE(forward_apart(s, Strides{60, 1, 12}, 6).ok());  // the odd rows
  EXPECT_FALSE(forward_apart(s, Strides{60, 1, 12}, 12).ok());
  EXPECT_TRUE(forward_apart(s, Strides{60, 1, 12}, 54).ok());  // past the last row of batch 0,
                                                               // before batch 1's first
  EXPECT_FALSE(forward_apart(s, Strides{60, 1, 12}, 60).ok());
  // (B, 2C, T): the channel halves; then a time stride of 2 with the odd time steps
  const Shape t = time_contiguous(2, 3, 5);
  EXPECT_TRUE(forward_apart(t, Strides{30, 5, 1}, 15).ok());
  EXPECT_FALSE(forward_apart(t, Strides{30, 5, 1}, 14).ok());
  EXPECT_TRUE(forward_apart(t, Strides{60, 10, 2}, 1).ok());
  EXPECT_FALSE(forward_apart(t, Strides{60, 10, 2}, 2).ok());
  // a batch stride of 0 is not allowed on an output, so no interleaving through it
  EXPECT_FALSE(forward_apart(t, Strides{0, 5, 1}, 1000).ok());
}

// The backward's fused-projection gradient: grad_gates and grad_tokens the two channel halves of
// one (B, T, 2C) buffer (channel-last), or of one (B, 2C, T) buffer.
TEST(ValidateOverlap, GradientHalvesOfOneBuffer) {
  for (const bool channel_last_layout : {true, false}) {
    constexpr int64_t B = 2, T = 7, C = 4;
    ScanBackwardArgs<float> a;
    a.shape = channel_last_layout ? channel_last(B, T, C) : time_contiguous(B, C, T);
    const Strides fused = channel_last_layout ? Strides{T * 2 * C, 1, 2 * C}
                                              : Strides{2 * C * T, T, 1};
    const uint64_t half = 4 * static_cast<uint64_t>(channel_last_layout ? C : C * T);
    a.gates = fake<const float>(0x100000);
    a.states = fake<const float>(0x200000);
    a.grad_out = fake<const float>(0x300000);
    a.grad_gates = fake<float>(0x400000);
    a.grad_tokens = fake<float>(0x400000 + half);
    a.grad_gates_strides = fused;
    a.grad_tokens_strides = fused;
    EXPECT_TRUE(can_implement(a).ok()) << can_implement(a).message;
    a.grad_tokens = fake<float>(0x400000 + half - 4);
    EXPECT_EQ(can_implement(a).code, StatusCode::kInvalidArgument);
    // different strides: the byte intervals decide (conservative, documented)
    a.grad_tokens = fake<float>(0x400000 + half);
    a.grad_tokens_strides = Strides{fused.batch_stride, fused.channel_stride + 0,
                                    fused.time_stride};
    a.grad_tokens_strides->batch_stride += 1;
    EXPECT_EQ(can_implement(a).code, StatusCode::kInvalidArgument);
  }
}

// ---------------------------------------------------------------------------------------------
// The oracle itself, on calls whose answer is known by hand.

Case interleaved_forward(int64_t odd_offset) {
  // gates in the even batches of a (2B, C, T) buffer, out in the odd ones (or moved by
  // `odd_offset` elements), tokens elsewhere.
  Case c;
  c.bytes = 4;
  c.shape = time_contiguous(3, 4, 5);
  c.shape.batch_stride = 2 * 4 * 5;
  c.seq[0].addr = 0x10000;
  c.seq[1].addr = 0x20000;
  c.seq[2].addr = 0x10000 + 4 * static_cast<uint64_t>(odd_offset);
  return c;
}

TEST(ValidateFuzzOracle, KnownAnswers) {
  EXPECT_FALSE(judge(interleaved_forward(20)).refuse);
  EXPECT_FALSE(judge(interleaved_forward(20)).undecided);
  EXPECT_TRUE(judge(interleaved_forward(19)).refuse);
  EXPECT_TRUE(judge(interleaved_forward(21)).refuse);
  EXPECT_TRUE(judge(interleaved_forward(0)).refuse);
  EXPECT_TRUE(judge(interleaved_forward(80)).refuse);  // onto the last batch of gates
  EXPECT_FALSE(judge(interleaved_forward(100)).refuse);  // past it
  EXPECT_EQ(brute_force_violation(interleaved_forward(20)), "");
  EXPECT_NE(brute_force_violation(interleaved_forward(19)), "");
  // The in-place alias: the same pointer, the same strides.
  Case in_place = interleaved_forward(20);
  in_place.seq[2].addr = in_place.seq[1].addr;
  EXPECT_FALSE(judge(in_place).refuse);
  in_place.seq[2].own = true;
  in_place.seq[2].strides = Strides{40, 5, 1};
  in_place.seq[1].own = true;
  in_place.seq[1].strides = Strides{20, 5, 1};
  EXPECT_TRUE(judge(in_place).refuse);
}

TEST(ValidateFuzzOracle, DifferenceSet) {
  OView v;
  const i128 size[3] = {3, 4, 5}, stride[3] = {40, 5, 1};
  ASSERT_TRUE(make_oview(0x1000, 3, size, stride, 4, v));
  const Lay l = lay_of(v);
  EXPECT_EQ(in_difference_set(l, 0), Tri::kYes);
  EXPECT_EQ(in_difference_set(l, 19), Tri::kYes);
  EXPECT_EQ(in_difference_set(l, 20), Tri::kNo);
  EXPECT_EQ(in_difference_set(l, -39), Tri::kYes);  // -40 + 1
  EXPECT_EQ(in_difference_set(l, -20), Tri::kNo);
  EXPECT_EQ(in_difference_set(l, 40 + 19), Tri::kYes);
  EXPECT_EQ(in_difference_set(l, 80 + 19), Tri::kYes);
  EXPECT_EQ(in_difference_set(l, 120), Tri::kNo);
}

}  // namespace
}  // namespace ascan::fuzz
