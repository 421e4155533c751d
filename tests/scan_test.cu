// tests/scan_test.cu: the forward scan on the GPU against the double reference.
//
// Typed over float, double, __half and __nv_bfloat16. Each case draws fresh inputs (its seed is
// in every failure message), poisons the output and all padding, scans, and then checks
//   - every element of every sequence against the reference run in double on the stored inputs
//     (relative L2 per sequence; see test_util.cuh for the tolerances),
//   - that nothing outside the sequences was written (padding and the bytes in front of a
//     misaligned pointer are still poison) and the inputs are unchanged,
//   - the final states, and that the runtime holds no pending error.
//
// Tests named Small* keep every case under about 64K elements and between them reach every
// kernel path (warp, block and chunked rows, the multi-block path with small tiles, vector and
// scalar access, both directions, in place, misaligned, strided, states); run them under
// compute-sanitizer with --gtest_filter='*Small*'.
#include <ascan/ascan.cuh>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {
namespace {

// ---------------------------------------------------------------------------------------------
// One case

/// What one scan call looks like: sizes, layout, direction, aliasing, alignment and states.
struct Case {
  int64_t batch = 1;
  int64_t channels = 1;
  int64_t length = 1;
  int64_t channel_stride = -1;  ///< -1: length (packed)
  int64_t batch_stride = -1;    ///< -1: channels * channel_stride (packed)
  Gates gates = Gates::kUniform01;
  bool reverse = false;
  bool in_place = false;  ///< out == tokens
  // Elements between a cudaMalloc base (256-byte aligned) and the pointer passed.
  int64_t gates_offset = 0;
  int64_t tokens_offset = 0;
  int64_t out_offset = 0;  ///< ignored in place
  bool initial_state = false;
  bool final_state = false;
  StateLayout state_layout{};
  bool own_stream = false;    ///< a non-blocking stream instead of stream 0
  Via via = Via::kWorkspace;  ///< the entry point called

  int64_t cs() const { return channel_stride < 0 ? length : channel_stride; }
  int64_t bs() const { return batch_stride < 0 ? channels * cs() : batch_stride; }
  Shape shape() const { return Shape{batch, channels, length, bs(), cs(), 1}; }
  /// Elements from the first to one past the last element of the view.
  int64_t footprint() const {
    if (batch == 0 || channels == 0 || length == 0) return 0;
    return (batch - 1) * bs() + (channels - 1) * cs() + length;
  }
  StateLayout states() const {
    if (state_layout.batch_stride < 0 && state_layout.channel_stride < 0)
      return StateLayout{channels, 1};
    return state_layout;
  }
  int64_t state_footprint() const {
    if (batch == 0 || channels == 0) return 0;
    const StateLayout s = states();
    return (batch - 1) * s.batch_stride + (channels - 1) * s.channel_stride + 1;
  }

  std::string describe() const {
    std::ostringstream s;
    s << "T=" << length << " B=" << batch << " C=" << channels;
    if (channel_stride >= 0 || batch_stride >= 0)
      s << " strides(b=" << bs() << ",c=" << cs() << ")";
    s << " gates=" << gates_name(gates) << (reverse ? " reverse" : " forward");
    if (in_place) s << " in-place";
    if (gates_offset || tokens_offset || (out_offset && !in_place))
      s << " offsets(g=" << gates_offset << ",x=" << tokens_offset << ",o=" << out_offset << ")";
    if (initial_state) s << " h0";
    if (final_state) s << " final";
    if ((initial_state || final_state) &&
        (state_layout.batch_stride >= 0 || state_layout.channel_stride >= 0))
      s << " state-strides(b=" << states().batch_stride << ",c=" << states().channel_stride << ")";
    if (own_stream) s << " own-stream";
    if (via != Via::kWorkspace) s << " via " << via_name(via);
    return s.str();
  }
};

Case shape_case(int64_t length, int64_t batch, int64_t channels) {
  Case c;
  c.length = length;
  c.batch = batch;
  c.channels = channels;
  return c;
}

/// The largest (B, C) with B * C <= 12288 sequences and about 2M elements (at least one
/// sequence), so that host time stays O(2M) per case whatever the length.
Case budget_case(int64_t length) {
  constexpr int64_t kElements = int64_t(1) << 21;
  const int64_t n = std::clamp<int64_t>(kElements / length, 1, 12288);
  const int64_t b = std::min<int64_t>(n, 8);
  return shape_case(length, b, n / b);
}

template <class F>
void for_each_sequence(const Case& c, F&& f) {
  const int64_t bs = c.bs(), cs = c.cs();
  const StateLayout st = c.states();
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t ch = 0; ch < c.channels; ++ch)
      f(b, ch, b * bs + ch * cs, b * st.batch_stride + ch * st.channel_stride);
}

/// A case's host inputs and device buffers. Host arrays cover the view's footprint; cells that
/// belong to no sequence hold poison, on the device as on the host.
template <class T>
struct Run {
  Case c;
  std::vector<uint8_t> in_sequence;  ///< per footprint cell
  std::vector<T> gates, tokens, h0;  ///< host copies of what was uploaded
  DeviceBuffer<T> gates_d, tokens_d, out_d, h0_d, final_d;
  ScanArgs<T> args;
  mutable DeviceBuffer<unsigned char> workspace;  ///< Via::kWorkspace, kMultiBlock*
  int64_t out_offset() const { return c.in_place ? c.tokens_offset : c.out_offset; }
  const DeviceBuffer<T>& out_buffer() const { return c.in_place ? tokens_d : out_d; }
};

/// Draws inputs, uploads them, poisons every output and padding cell, and fills in the args.
/// Synchronizes the device at the end, so a non-blocking stream sees all of it.
template <class T>
void prepare(const Case& c, Rng& rng, Run<T>& r) {
  r.c = c;
  const int64_t foot = c.footprint();
  const T poison = poison_value<T>();
  r.in_sequence.assign(foot, 0);
  r.gates.assign(foot, poison);
  r.tokens.assign(foot, poison);
  for_each_sequence(c, [&](int64_t, int64_t, int64_t base, int64_t) {
    std::fill_n(r.in_sequence.begin() + base, c.length, uint8_t{1});
    for (int64_t t = 0; t < c.length; ++t) {
      r.gates[base + t] = from_double<T>(draw_gate(rng, c.gates));
      r.tokens[base + t] = from_double<T>(draw_token(rng));
    }
  });

  ASSERT_TRUE(r.gates_d.allocate(foot + c.gates_offset));
  ASSERT_TRUE(r.gates_d.poison());
  ASSERT_TRUE(r.gates_d.upload(r.gates, c.gates_offset));
  ASSERT_TRUE(r.tokens_d.allocate(foot + c.tokens_offset));
  ASSERT_TRUE(r.tokens_d.poison());
  ASSERT_TRUE(r.tokens_d.upload(r.tokens, c.tokens_offset));
  if (!c.in_place) {
    ASSERT_TRUE(r.out_d.allocate(foot + c.out_offset));
    ASSERT_TRUE(r.out_d.poison());
  }

  ScanArgs<T>& a = r.args;
  a.gates = r.gates_d.get() + c.gates_offset;
  a.tokens = r.tokens_d.get() + c.tokens_offset;
  a.out = c.in_place ? r.tokens_d.get() + c.tokens_offset : r.out_d.get() + c.out_offset;
  a.shape = c.shape();
  a.reverse = c.reverse;
  a.state_layout = c.state_layout;

  const int64_t sfoot = c.state_footprint();
  if (c.initial_state) {
    r.h0.assign(sfoot, poison);
    for_each_sequence(c, [&](int64_t, int64_t, int64_t, int64_t s) {
      r.h0[s] = from_double<T>(rng.uniform(-1.0, 1.0));
    });
    ASSERT_TRUE(r.h0_d.allocate(sfoot));
    ASSERT_TRUE(r.h0_d.upload(r.h0));
    a.initial_state = r.h0_d.get();
  }
  if (c.final_state) {
    ASSERT_TRUE(r.final_d.allocate(sfoot));
    ASSERT_TRUE(r.final_d.poison());
    a.final_state = r.final_d.get();
  }
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after setup)"));
}

/// Scans on `stream` and waits for it.
template <class T>
void launch(const Run<T>& r, cudaStream_t stream) {
  ASSERT_TRUE(can_implement(r.args).ok()) << can_implement(r.args).message;
  const Status s = call_entry(r.args, r.c.via, stream, r.workspace);
  ASSERT_TRUE(s.ok()) << "scan failed: " << s.message;
  ASSERT_TRUE(cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after scan)"));
  ASSERT_TRUE(no_pending_cuda_error());
}

/// Counts cells of `got` that differ bitwise from `want`, reporting the first.
template <class T>
void expect_unchanged(const std::vector<T>& got, const std::vector<T>& want, int64_t offset,
                      const char* what) {
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i)
    if (!bitwise_equal(got[offset + i], want[i]) && bad++ == 0) first = static_cast<int64_t>(i);
  EXPECT_EQ(bad, 0) << what << " changed in " << bad << " cells; first at " << first << ": "
                    << to_double(got[offset + first]) << " (was " << to_double(want[first]) << ")";
}

/// Checks everything a scan of `r` must have done, and not done.
template <class T>
void verify(const Run<T>& r) {
  const Case& c = r.c;
  const int64_t foot = c.footprint();
  const int64_t off = r.out_offset();

  std::vector<T> out;
  ASSERT_TRUE(r.out_buffer().download(out));

  // Nothing written outside the sequences: not in front of the pointer, not in the padding.
  {
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < off; ++i)
      if (!is_poison(out[i]) && bad++ == 0) first = i - off;
    for (int64_t i = 0; i < foot; ++i)
      if (!r.in_sequence[i] && !is_poison(out[off + i]) && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0) << "the scan wrote " << bad << " cells outside the sequences; first at "
                      << first << " elements from out";
  }
  // The inputs are unchanged (tokens are the output in place).
  {
    std::vector<T> g;
    ASSERT_TRUE(r.gates_d.download(g));
    expect_unchanged(g, r.gates, c.gates_offset, "gates");
    if (!c.in_place) {
      std::vector<T> x;
      ASSERT_TRUE(r.tokens_d.download(x));
      expect_unchanged(x, r.tokens, c.tokens_offset, "tokens");
    }
    if (c.initial_state) {
      std::vector<T> h;
      ASSERT_TRUE(r.h0_d.download(h));
      expect_unchanged(h, r.h0, 0, "initial_state");
    }
  }

  std::vector<T> fin;
  if (c.final_state) ASSERT_TRUE(r.final_d.download(fin));
  Reference ref;
  ErrorSums total;
  std::vector<T> fin_got, fin_last;
  std::vector<uint8_t> state_used(fin.size(), 0);
  FailureLog log;
  for_each_sequence(c, [&](int64_t bi, int64_t ci, int64_t base, int64_t s) {
    const double h0 = c.initial_state ? to_double(r.h0[s]) : 0.0;
    ref.run(r.gates.data() + base, r.tokens.data() + base, c.length, c.reverse, h0);
    const SequenceCheck k =
        check_sequence(out.data() + off + base, ref.exact(), ref.scale(), c.length, &total);
    if (!k.ok) {
      std::ostringstream where;
      where << "sequence (b=" << bi << ", c=" << ci << ")";
      log.add(where.str(), k.message);
    }
    if (c.final_state) {
      const int64_t last = c.reverse ? 0 : c.length - 1;
      fin_got.push_back(fin[s]);
      fin_last.push_back(out[off + base + last]);
      state_used[s] = 1;
    }
  });
  if (log.count() == 0) {
    const SequenceCheck k = check_total<T>(total);
    EXPECT_TRUE(k.ok) << k.message;
  }

  if (c.final_state) {
    // Each final state is its sequence's stored last output (out[0] reversed), bitwise, on every
    // path: a stream scanned in chunks resumes from exactly what it stored. That output was
    // checked against the reference above.
    int64_t differ = 0, first = -1;
    for (size_t i = 0; i < fin_got.size(); ++i)
      if (!bitwise_equal(fin_got[i], fin_last[i]) && differ++ == 0) first = int64_t(i);
    EXPECT_EQ(differ, 0) << differ << " final states differ bitwise from their sequence's last "
                         << "output; the first, of sequence " << first << ": "
                         << (first < 0 ? 0.0 : to_double(fin_got[size_t(first)])) << " against "
                         << (first < 0 ? 0.0 : to_double(fin_last[size_t(first)]));
    int64_t bad = 0;
    for (size_t i = 0; i < fin.size(); ++i) bad += !state_used[i] && !is_poison(fin[i]);
    EXPECT_EQ(bad, 0) << "the scan wrote " << bad << " cells of final_state between states";
  }
}

/// Prepares, scans and verifies one case with a fresh seed.
template <class T>
void run_case(const Case& c) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(c.describe(), seed));
  Rng rng(seed);
  Run<T> r;
  ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
  Stream stream;
  if (c.own_stream) ASSERT_TRUE(stream.create());
  ASSERT_NO_FATAL_FAILURE(launch(r, stream.get()));
  ASSERT_NO_FATAL_FAILURE(verify(r));
}

template <class T>
void run_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    run_case<T>(c);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---------------------------------------------------------------------------------------------
// Case lists

/// 5000: a length between the tables' rows, where the row rule (select_row) walks smaller tiles.
constexpr int64_t kLengths[] = {1,    2,    31,   32,    33,    127,   128,    1000,
                                2047, 4096, 5000, 65535, 65536, 65537, 1000003};
constexpr int64_t kSmallLengths[] = {1, 2, 31, 32, 33, 127, 128, 1000, 2047, 4096};

/// Every length, each with one sequence, six, and as many as the element budget allows.
std::vector<Case> length_cases(bool reverse) {
  std::vector<Case> cases;
  for (int64_t t : kLengths) {
    for (Case c : {shape_case(t, 1, 1), shape_case(t, 2, 3), budget_case(t)}) {
      if (t > 100000 && c.batch * c.channels == 6) continue;  // budget_case covers it
      c.reverse = reverse;
      c.own_stream = reverse;
      cases.push_back(c);
    }
  }
  return cases;
}

template <class T>
class ScanTest : public RequiresGpu<> {};

using ScanTypes = ::testing::Types<float, double, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(ScanTest, ScanTypes);  // ctest names them ScanTest.<Test><float> etc.

// ---------------------------------------------------------------------------------------------
// Small shapes: each case under ~64K elements; together every path.

TYPED_TEST(ScanTest, SmallLengths) {
  std::vector<Case> cases;
  for (bool reverse : {false, true})
    for (int64_t t : kSmallLengths) {
      std::vector<Case> shapes = {shape_case(t, 1, 1), shape_case(t, 2, 3)};
      if (t <= 128) shapes.push_back(shape_case(t, 8, 64));  // many sequences per block
      for (Case c : shapes) {
        c.reverse = reverse;
        cases.push_back(c);
      }
    }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, SmallLongSequence) {
  // Past one tile of every type, so the chunked kernel runs (its carry, its prefetch).
  std::vector<Case> cases;
  for (int64_t t : {8193, 65537})
    for (bool reverse : {false, true}) {
      Case c = shape_case(t, 1, 1);
      c.reverse = reverse;
      cases.push_back(c);
      c.in_place = true;
      c.tokens_offset = 1;
      c.own_stream = true;
      cases.push_back(c);
      c.in_place = false;
      c.tokens_offset = 0;
      c.gates_offset = c.out_offset = 3;
      c.initial_state = c.final_state = true;
      cases.push_back(c);
    }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, SmallGateDistributions) {
  std::vector<Case> cases;
  for (Gates g : kAllGates)
    for (bool reverse : {false, true})
      for (Case c : {shape_case(33, 8, 32), shape_case(1000, 2, 3), shape_case(4096, 1, 3)}) {
        c.gates = g;
        c.reverse = reverse;
        c.initial_state = true;
        cases.push_back(c);
      }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, SmallInPlace) {
  std::vector<Case> cases;
  for (bool reverse : {false, true})
    for (int64_t t : {1, 33, 1000, 4096}) {
      Case c = shape_case(t, 2, 3);
      c.in_place = true;
      c.reverse = reverse;
      cases.push_back(c);
      c.tokens_offset = 1;  // in place and misaligned
      c.gates_offset = 1;
      cases.push_back(c);
    }
  run_cases<TypeParam>(cases);
}

/// Offsets (gates, tokens, out) in elements from an aligned base: all three alike (the vector
/// path with a lead), each alone (the scalar path), all different.
constexpr int64_t kOffsets[][3] = {{1, 1, 1}, {1, 0, 0}, {0, 1, 0},
                                   {0, 0, 1}, {3, 5, 7}, {8, 8, 8}};

TYPED_TEST(ScanTest, SmallMisaligned) {
  std::vector<Case> cases;
  for (bool reverse : {false, true})
    for (int64_t t : {1, 31, 33, 1000, 4096})
      for (const auto& o : kOffsets) {
        Case c = shape_case(t, 2, 3);
        c.gates_offset = o[0];
        c.tokens_offset = o[1];
        c.out_offset = o[2];
        c.reverse = reverse;
        cases.push_back(c);
      }
  // Aligned pointers, but rows that start at every misalignment (odd channel stride).
  for (bool rev : {false, true}) {
    Case c = shape_case(1001, 2, 5);
    c.channel_stride = 1003;
    c.reverse = rev;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, SmallStrided) {
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    std::vector<Case> dir;
    Case c = shape_case(100, 3, 5);  // padding after each sequence and after each batch
    c.channel_stride = 107;
    c.batch_stride = 5 * 107 + 13;
    dir.push_back(c);
    c = shape_case(1000, 2, 3);  // padding that keeps rows 16-byte aligned
    c.channel_stride = 1024;
    c.batch_stride = 3 * 1024 + 64;
    dir.push_back(c);
    c = shape_case(33, 4, 16);  // only the batch padded
    c.batch_stride = 16 * 33 + 1;
    dir.push_back(c);
    c = shape_case(200, 3, 4);  // channels outside batch: memory (C, B, T), padded
    c.batch_stride = 205;
    c.channel_stride = 3 * 205;
    dir.push_back(c);
    c = shape_case(4096, 2, 2);  // rows at odd offsets
    c.channel_stride = 4097;
    c.batch_stride = 2 * 4097 + 5;
    dir.push_back(c);
    for (Case& k : dir) k.reverse = reverse;
    cases.insert(cases.end(), dir.begin(), dir.end());
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, SmallSizeOneDimsIgnoreStrides) {
  // A dimension of size 1 never steps, so its stride means nothing (PyTorch hands out such
  // views, e.g. after unsqueeze): zero or tiny strides there are valid.
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    Case c = shape_case(500, 1, 3);
    c.batch_stride = 0;
    c.reverse = reverse;
    cases.push_back(c);
    c = shape_case(500, 3, 1);
    c.channel_stride = 0;
    c.batch_stride = 500;  // packed; the default (channels * channel_stride) would be 0
    c.reverse = reverse;
    cases.push_back(c);
    c = shape_case(500, 1, 1);
    c.channel_stride = 1;
    c.batch_stride = 7;
    c.reverse = reverse;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, SmallStates) {
  std::vector<Case> cases;
  for (bool reverse : {false, true})
    for (int64_t t : {1, 33, 4096})
      for (int which = 0; which < 3; ++which)  // h0 only, final only, both
        for (bool custom : {false, true}) {
          Case c = shape_case(t, 2, 3);
          c.reverse = reverse;
          c.initial_state = which != 1;
          c.final_state = which != 0;
          if (custom) c.state_layout = StateLayout{2 * 3 + 1, 2};
          cases.push_back(c);
        }
  Case c = shape_case(1000, 3, 4);  // states with the (C, B) order and in place
  c.initial_state = c.final_state = true;
  c.state_layout = StateLayout{1, 3};
  c.in_place = true;
  cases.push_back(c);
  c.reverse = true;
  c.own_stream = true;
  cases.push_back(c);
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, SmallManySequences) {
  // More sequences than 65535: a grid that used y or z for sequences would miss some.
  std::vector<Case> cases = {shape_case(1, 1, 66000), shape_case(1, 3, 22000)};
  cases[1].reverse = true;
  run_cases<TypeParam>(cases);
}

/// An empty shape succeeds, and neither reads nor writes: poisoned buffers stay poisoned, and
/// null pointers are fine.
TYPED_TEST(ScanTest, SmallEmpty) {
  using T = TypeParam;
  constexpr size_t kCells = 64;
  DeviceBuffer<T> gates, tokens, out, h0, fin;
  for (DeviceBuffer<T>* b : {&gates, &tokens, &out, &h0, &fin}) {
    ASSERT_TRUE(b->allocate(kCells));
    ASSERT_TRUE(b->poison());
  }
  Stream stream;
  ASSERT_TRUE(stream.create());
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  const Shape shapes[] = {time_contiguous(0, 3, 10), time_contiguous(2, 0, 10),
                          time_contiguous(2, 3, 0), time_contiguous(0, 0, 0), Shape{}};
  for (const Shape& shape : shapes)
    for (bool null_pointers : {false, true})
      for (bool reverse : {false, true}) {
        std::ostringstream what;
        what << "B=" << shape.batch << " C=" << shape.channels << " T=" << shape.length
             << (null_pointers ? " null pointers" : " real pointers")
             << (reverse ? " reverse" : " forward");
        SCOPED_TRACE(what.str());
        ScanArgs<T> a;
        a.shape = shape;
        a.reverse = reverse;
        if (!null_pointers) {
          a.gates = gates.get();
          a.tokens = tokens.get();
          a.out = out.get();
          a.initial_state = h0.get();
          a.final_state = fin.get();
        }
        EXPECT_TRUE(can_implement(a).ok()) << can_implement(a).message;
        const cudaStream_t st = reverse ? stream.get() : cudaStream_t{0};
        const Status s = scan(a, st);
        EXPECT_TRUE(s.ok()) << s.message;
        size_t bytes = 0;  // the two-phase entry: at least 1 byte, and nothing done
        EXPECT_TRUE(scan(a, nullptr, bytes, st).ok());
        EXPECT_GE(bytes, 1u);
        EXPECT_TRUE(scan(a, malloc_async, st).ok());
      }
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  ASSERT_TRUE(no_pending_cuda_error());
  for (DeviceBuffer<T>* b : {&gates, &tokens, &out, &h0, &fin}) {
    std::vector<T> host;
    ASSERT_TRUE(b->download(host));
    EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](const T& v) { return is_poison(v); }))
        << "an empty scan wrote memory";
  }
}

// ---------------------------------------------------------------------------------------------
// Full sizes

// The rows the row rule (select_row) gives lengths between the table's: 2000 sequences (enough
// for the 64-thread rows on up to 166 multiprocessors, 132 on the H200) of lengths whose table
// rows leave many lanes idle, forward and reverse, with and without states.
TYPED_TEST(ScanTest, RowRuleRows) {
  std::vector<Case> cases;
  int k = 0;
  for (int64_t t : {1100, 1500, 2500, 3500, 5000, 6500}) {
    Case c = shape_case(t, 4, 500);
    c.reverse = k % 2 == 1;
    c.initial_state = k % 3 != 0;
    c.final_state = k % 3 != 1;
    ++k;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, LengthsForward) { run_cases<TypeParam>(length_cases(false)); }

TYPED_TEST(ScanTest, LengthsReverse) { run_cases<TypeParam>(length_cases(true)); }

TYPED_TEST(ScanTest, GateDistributions) {
  std::vector<Case> cases;
  for (Gates g : kAllGates)
    for (bool reverse : {false, true})
      for (Case c :
           {shape_case(128, 8, 1536), shape_case(65537, 2, 3), shape_case(1000003, 1, 1)}) {
        c.gates = g;
        c.reverse = reverse;
        cases.push_back(c);
      }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, InPlace) {
  std::vector<Case> cases = {shape_case(128, 8, 1536), shape_case(65537, 2, 3),
                             shape_case(65537, 2, 3), shape_case(1000003, 1, 2)};
  cases[1].reverse = cases[3].reverse = true;
  cases[2].tokens_offset = cases[2].gates_offset = 5;
  for (Case& c : cases) c.in_place = true;
  cases[3].own_stream = true;
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, Misaligned) {
  std::vector<Case> cases;
  bool reverse = false;
  for (const auto& o : kOffsets)
    for (Case c : {shape_case(65537, 2, 3), shape_case(1000003, 1, 1), shape_case(1000, 8, 64)}) {
      c.gates_offset = o[0];
      c.tokens_offset = o[1];
      c.out_offset = o[2];
      c.reverse = reverse = !reverse;
      cases.push_back(c);
    }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, Strided) {
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    std::vector<Case> dir;
    Case c = shape_case(65537, 2, 3);
    c.channel_stride = 65537 + 3;
    c.batch_stride = 3 * c.channel_stride + 11;
    dir.push_back(c);
    c = shape_case(1000003, 1, 2);
    c.channel_stride = 1000003 + 13;
    dir.push_back(c);
    c = shape_case(4099, 3, 4);  // (C, B, T) order
    c.batch_stride = 4100;
    c.channel_stride = 3 * 4100;
    dir.push_back(c);
    c = shape_case(128, 8, 1536);  // many short padded rows
    c.channel_stride = 136;
    c.batch_stride = 1536 * 136 + 8;
    dir.push_back(c);
    for (Case& k : dir) k.reverse = reverse;
    cases.insert(cases.end(), dir.begin(), dir.end());
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, States) {
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    std::vector<Case> dir;
    Case c = shape_case(1000003, 1, 1);
    c.initial_state = c.final_state = true;
    dir.push_back(c);
    c = shape_case(65537, 2, 3);
    c.initial_state = c.final_state = true;
    c.state_layout = StateLayout{2 * 3 + 1, 2};
    dir.push_back(c);
    c = shape_case(32, 8, 1536);
    c.initial_state = c.final_state = true;
    c.state_layout = StateLayout{2 * 1536 + 5, 2};
    c.in_place = true;
    c.own_stream = true;
    dir.push_back(c);
    for (Case& k : dir) k.reverse = reverse;
    cases.insert(cases.end(), dir.begin(), dir.end());
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, ManySequences) {
  std::vector<Case> cases = {shape_case(1, 4, 70000), shape_case(33, 2, 40000),
                             shape_case(2, 1, 100000)};
  cases[1].reverse = true;
  cases[2].final_state = true;
  run_cases<TypeParam>(cases);
}

/// Stream order, and no hidden synchronization, through each public entry point (two-phase
/// workspace, malloc_async, none): with the stream held at a host-side gate, scan() returns at
/// once and nothing has been written; once the gate opens, the results are right. The shapes
/// take one block per sequence and, with a workspace, the multi-block path.
TYPED_TEST(ScanTest, StreamOrdered) {
  using T = TypeParam;
  for (Via via : {Via::kWorkspace, Via::kMallocAsync, Via::kPlain})
    for (Case c : {shape_case(4096, 2, 3), shape_case(1000003, 1, 1)}) {
      c.via = via;
      c.own_stream = true;
      c.final_state = true;
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed_note(c.describe(), seed));
      Rng rng(seed);
      Run<T> r;
      ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
      Stream stream;
      ASSERT_TRUE(stream.create());
      {
        // Warm up the same path into a scratch output.
        DeviceBuffer<T> scratch;
        ASSERT_TRUE(scratch.allocate(r.out_buffer().size()));
        ScanArgs<T> warm = r.args;
        warm.out = scratch.get() + (r.args.out - r.out_buffer().get());
        warm.final_state = nullptr;
        if (c.in_place) warm.tokens = r.args.tokens;
        DeviceBuffer<unsigned char> ws;
        const Status w = call_entry(warm, via, stream.get(), ws);
        ASSERT_TRUE(w.ok()) << w.message;
        ASSERT_TRUE(
            cuda_ok(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize (warm-up)"));
      }
      ASSERT_NO_FATAL_FAILURE(
          check_gated_call(r.args, via, stream.get(), r.out_d.get(), r.out_d.size()));
      ASSERT_NO_FATAL_FAILURE(verify(r));
    }
}

// ---------------------------------------------------------------------------------------------
// Chained scans: the streaming-inference use. A scan of the first `first` steps (in scan order)
// of every sequence writes its final state; a second scan of the rest starts from that state.
// The concatenation must be one scan of the whole sequence:
//   - the first part and the carried state are checked against the reference of the whole
//     sequence (with h0 when the case has one);
//   - the second part against the reference of the second part started from the carried state
//     as stored (for 16-bit types storing it rounds it, and the rounding, up to half an ulp of
//     the state, stays in the second part for as long as the gates remember; that is inherent to
//     storing the state in T, not an error of the scan);
//   - for float and double also the whole concatenation against the whole-sequence reference;
//   - the second scan's final state, and nothing written outside the sequences.
// Both calls are enqueued back to back on one stream with no synchronization between them.

/// Runs case `c` as two chained scans, the first covering `first` steps (1 <= first < length).
template <class T>
void run_chained(const Case& c, int64_t first) {
  const uint64_t seed = fresh_seed();
  std::ostringstream what;
  what << c.describe() << " chained at " << first;
  SCOPED_TRACE(seed_note(what.str(), seed));
  ASSERT_TRUE(first >= 1 && first < c.length);
  ASSERT_TRUE(c.final_state && !c.in_place);
  Rng rng(seed);
  Run<T> r;
  ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
  DeviceBuffer<T> mid;
  const int64_t sfoot = c.state_footprint();
  ASSERT_TRUE(mid.allocate(sfoot));
  ASSERT_TRUE(mid.poison());
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after poison)"));

  // Memory offsets of the two parts within each sequence: forward [0, first) then
  // [first, length); reversed, the scan runs from the end, so the first part is the tail.
  const int64_t second = c.length - first;
  const int64_t off1 = c.reverse ? second : 0;
  const int64_t off2 = c.reverse ? 0 : first;
  ScanArgs<T> a1 = r.args, a2 = r.args;
  a1.gates += off1;
  a1.tokens += off1;
  a1.out += off1;
  a1.shape.length = first;
  a1.final_state = mid.get();
  a2.gates += off2;
  a2.tokens += off2;
  a2.out += off2;
  a2.shape.length = second;
  a2.initial_state = mid.get();

  Stream stream;
  if (c.own_stream) ASSERT_TRUE(stream.create());
  const Status s1 = scan(a1, stream.get());
  ASSERT_TRUE(s1.ok()) << "first scan: " << s1.message;
  const Status s2 = scan(a2, stream.get());
  ASSERT_TRUE(s2.ok()) << "second scan: " << s2.message;
  ASSERT_TRUE(cuda_ok(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize (chained)"));
  ASSERT_TRUE(no_pending_cuda_error());

  const int64_t foot = c.footprint();
  const int64_t off = c.out_offset;
  std::vector<T> out, mid_got, fin;
  ASSERT_TRUE(r.out_d.download(out));
  ASSERT_TRUE(mid.download(mid_got));
  ASSERT_TRUE(r.final_d.download(fin));
  {
    int64_t bad = 0;
    for (int64_t i = 0; i < off; ++i) bad += !is_poison(out[i]);
    for (int64_t i = 0; i < foot; ++i) bad += !r.in_sequence[i] && !is_poison(out[off + i]);
    EXPECT_EQ(bad, 0) << "the chained scans wrote " << bad << " cells outside the sequences";
    std::vector<T> g, x;
    ASSERT_TRUE(r.gates_d.download(g));
    expect_unchanged(g, r.gates, c.gates_offset, "gates");
    ASSERT_TRUE(r.tokens_d.download(x));
    expect_unchanged(x, r.tokens, c.tokens_offset, "tokens");
  }

  Reference whole, part;
  ErrorSums total, total_whole;
  std::vector<double> mid_exact, mid_scale, fin_exact, fin_scale;
  std::vector<T> mid_vec, fin_vec;
  std::vector<uint8_t> state_used(sfoot, 0);
  FailureLog log;
  for_each_sequence(c, [&](int64_t bi, int64_t ci, int64_t base, int64_t s) {
    std::ostringstream where;
    where << "sequence (b=" << bi << ", c=" << ci << ")";
    const double h0 = c.initial_state ? to_double(r.h0[s]) : 0.0;
    const T* y = out.data() + off + base;
    whole.run(r.gates.data() + base, r.tokens.data() + base, c.length, c.reverse, h0);
    // The first part against the whole sequence's reference.
    SequenceCheck k =
        check_sequence(y + off1, whole.exact() + off1, whole.scale() + off1, first, &total);
    if (!k.ok) log.add(where.str() + " first part", k.message);
    const int64_t boundary = c.reverse ? second : first - 1;  // the first part's last step
    mid_exact.push_back(whole.exact()[boundary]);
    mid_scale.push_back(whole.scale()[boundary]);
    mid_vec.push_back(mid_got[s]);
    state_used[s] = 1;
    // The second part, from the carried state as stored.
    part.run(r.gates.data() + base + off2, r.tokens.data() + base + off2, second, c.reverse,
             to_double(mid_got[s]));
    k = check_sequence(y + off2, part.exact(), part.scale(), second, &total);
    if (!k.ok) log.add(where.str() + " second part", k.message);
    const int64_t last = c.reverse ? 0 : second - 1;
    fin_exact.push_back(part.exact()[last]);
    fin_scale.push_back(part.scale()[last]);
    fin_vec.push_back(fin[s]);
    if constexpr (!kIs16Bit<T>) {
      // 32- and 64-bit: the carried state's rounding is far inside the tolerance, so the
      // concatenation is checked as one scan of the whole sequence too.
      k = check_sequence(y, whole.exact(), whole.scale(), c.length, &total_whole);
      if (!k.ok) log.add(where.str() + " whole sequence", k.message);
    }
  });
  if (log.count() == 0) {
    SequenceCheck k = check_total<T>(total);
    EXPECT_TRUE(k.ok) << k.message;
    if constexpr (!kIs16Bit<T>) {
      k = check_total<T>(total_whole);
      EXPECT_TRUE(k.ok) << "whole sequences: " << k.message;
    }
  }
  const int64_t nseq = static_cast<int64_t>(mid_vec.size());
  SequenceCheck k = check_sequence(mid_vec.data(), mid_exact.data(), mid_scale.data(), nseq);
  EXPECT_TRUE(k.ok) << "carried state (first scan's final_state): " << k.message;
  k = check_sequence(fin_vec.data(), fin_exact.data(), fin_scale.data(), nseq);
  EXPECT_TRUE(k.ok) << "second scan's final_state: " << k.message;
  int64_t bad = 0;
  for (int64_t i = 0; i < sfoot; ++i)
    bad += !state_used[i] && (!is_poison(mid_got[i]) || !is_poison(fin[i]));
  EXPECT_EQ(bad, 0) << "the chained scans wrote " << bad << " state cells between states";
}

struct ChainedCase {
  Case c;
  int64_t first;
};

template <class T>
void run_chained_cases(const std::vector<ChainedCase>& cases) {
  for (const ChainedCase& k : cases) {
    run_chained<T>(k.c, k.first);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// Each (length, B, C, first) forward and reverse, with and without h0, gates with long memory
/// (so that the carried state matters) and a cumulative sum.
std::vector<ChainedCase> chained_cases(
    std::initializer_list<std::tuple<int64_t, int64_t, int64_t, int64_t>> shapes) {
  std::vector<ChainedCase> cases;
  int i = 0;
  for (const auto& [t, b, ch, first] : shapes)
    for (bool reverse : {false, true})
      for (bool h0 : {false, true}) {
        Case c = shape_case(t, b, ch);
        c.reverse = reverse;
        c.initial_state = h0;
        c.final_state = true;
        c.gates = (i++ % 3 == 2) ? Gates::kOne : Gates::kNearOne;
        c.own_stream = reverse;
        cases.push_back({c, first});
      }
  return cases;
}

TYPED_TEST(ScanTest, SmallChained) {
  std::vector<ChainedCase> cases = chained_cases({{2, 4, 5, 1},
                                                  {33, 8, 64, 10},
                                                  {1000, 2, 3, 999},
                                                  {1000, 2, 3, 1},
                                                  {2 * 4096 + 1, 1, 3, 3001}});
  // Misaligned pointers and a padded layout with a custom state layout.
  Case c = shape_case(4096, 2, 2);
  c.channel_stride = 4097;
  c.batch_stride = 2 * 4097 + 5;
  c.gates_offset = c.tokens_offset = c.out_offset = 1;
  c.initial_state = c.final_state = true;
  c.state_layout = StateLayout{5, 2};
  c.gates = Gates::kNearOne;
  cases.push_back({c, 2047});
  c.reverse = true;
  cases.push_back({c, 2049});
  run_chained_cases<TypeParam>(cases);
}

TYPED_TEST(ScanTest, Chained) {
  run_chained_cases<TypeParam>(chained_cases({{2 * 4096 + 1, 2, 32, 3001},
                                              {1000003, 1, 1, 400001},
                                              {65537, 2, 3, 65536},
                                              {33, 8, 1536, 10}}));
}

/// `runs` runs of each case (the first on stream 0, the others on a non-blocking stream) give
/// bitwise identical outputs and final states, and the last one is right.
template <class T>
void check_deterministic(const std::vector<Case>& cases, int runs) {
  for (Case c : cases) {
    c.final_state = true;
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(c.describe(), seed));
    Rng rng(seed);
    Run<T> r;
    ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
    ASSERT_NO_FATAL_FAILURE(launch(r, cudaStream_t{0}));
    std::vector<T> first, fin1;
    ASSERT_TRUE(r.out_buffer().download(first));
    ASSERT_TRUE(r.final_d.download(fin1));
    Stream stream;
    ASSERT_TRUE(stream.create());
    for (int k = 1; k < runs; ++k) {
      if (c.in_place) {  // the tokens again, then poison around them as prepare left it
        ASSERT_TRUE(r.tokens_d.upload(r.tokens, c.tokens_offset));
      } else {
        ASSERT_TRUE(r.out_d.poison());
      }
      ASSERT_TRUE(r.final_d.poison());
      ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
      ASSERT_NO_FATAL_FAILURE(launch(r, stream.get()));
      std::vector<T> again, fin;
      ASSERT_TRUE(r.out_buffer().download(again));
      ASSERT_TRUE(r.final_d.download(fin));
      std::ostringstream what;
      what << "run " << k + 1 << " of " << runs << " against the first";
      expect_unchanged(again, first, 0, ("out, " + what.str()).c_str());
      expect_unchanged(fin, fin1, 0, ("final_state, " + what.str()).c_str());
    }
    ASSERT_NO_FATAL_FAILURE(verify(r));
  }
}

/// Runs of the same call give bitwise identical results (every path, the multi-block one many
/// times: its look-back finds different predecessors done from run to run).
TYPED_TEST(ScanTest, Deterministic) {
  std::vector<Case> cases;
  for (Case c : {shape_case(1000003, 1, 1), shape_case(65537, 2, 3), shape_case(65537, 1, 16),
                 shape_case(3000, 8, 1536)}) {
    c.gates = Gates::kNearOne;
    c.initial_state = true;
    cases.push_back(c);
  }
  cases[2].reverse = true;
  Case forced = cases[0];  // about 2000 tiles of 512 floats
  forced.via = Via::kMultiBlock;
  cases.push_back(forced);
  forced.reverse = true;
  cases.push_back(forced);
  check_deterministic<TypeParam>(cases, 5);
}

TYPED_TEST(ScanTest, SmallDeterministic) {
  std::vector<Case> cases;
  for (Case c : {shape_case(140009, 1, 1), shape_case(4099, 1, 16)}) {  // 140009: two groups
    c.gates = Gates::kNearOne;
    c.initial_state = true;
    c.via = Via::kMultiBlock;
    cases.push_back(c);
  }
  cases[1].reverse = true;
  check_deterministic<TypeParam>(cases, 4);
}

// ---------------------------------------------------------------------------------------------
// Where the pair formulation and the sequential loop differ: an overflowing gate product

/// Where a prefix product of gates overflows the compute type while the state stays finite (here
/// kRise gates of 4 (double: 2^64) over zero tokens from a zero initial state: the loop's state
/// stays 0, the product reaches 2^1200 (2^38400)), the scan, which composes products of gates, may
/// give NaN (Inf * 0) where the loop gives 0, and a zero gate after it does not clear it (0 * Inf =
/// NaN), where the loop restarts from the token. README, "Precision", documents this. Pinned on
/// every path (one block per sequence, the warp kernels, the multi-block path forced, the
/// channel-last rows; forward and reverse): until the prefix product overflows every output is the
/// loop's, exactly 0; from there each output is the loop's value or NaN, and the sequence's last
/// output is NaN; the other sequences of the call (ordinary gates) are right and finite.
TYPED_TEST(ScanTest, OverflowingGateProduct) {
  using T = TypeParam;
  constexpr bool kDouble = std::is_same_v<T, double>;
  // Gates of kRiseGate at steps [0, kRise) in scan order, then a zero. Every stretch of the rise
  // that the scan's composition tree can multiply out overflows, in double as in float, once it
  // spans more than a few dozen gates (kRise / 10 in float, kRise / 38 in double).
  constexpr int64_t kRise = 600;
  constexpr double kRiseGate = kDouble ? 18446744073709551616.0 : 4.0;  // 2^64 : 2^2
  // The first step whose prefix product kRiseGate^(t+1) leaves the compute type (float: 2^128;
  // double: 2^1024).
  constexpr int64_t kFirstOverflow = kDouble ? 15 : 63;
  struct Call {
    Shape shape;
    Via via;
  };
  const Call calls[] = {{time_contiguous(1, 3, 4096), Via::kWorkspace},
                        {time_contiguous(1, 3, 4096), Via::kPlain},
                        {time_contiguous(2, 200, 700), Via::kWorkspace},
                        {time_contiguous(1, 2, 70000), Via::kMultiBlock},
                        {channel_last(2, 3000, 64), Via::kWorkspace},
                        {channel_last(1, 5000, 3), Via::kWorkspace}};
  for (const Call& call : calls)
    for (bool reverse : {false, true}) {
      const Shape& sh = call.shape;
      const uint64_t seed = fresh_seed();
      std::ostringstream what;
      what << "(" << sh.batch << ", " << sh.channels << ", " << sh.length << ") strides ("
           << sh.batch_stride << ", " << sh.channel_stride << ", " << sh.time_stride << ")"
           << (reverse ? " reverse" : "") << " via " << via_name(call.via);
      SCOPED_TRACE(seed_note(what.str(), seed));
      Rng rng(seed);
      const int64_t n = sh.elements(), length = sh.length;
      const auto at = [&](int64_t s, int64_t t) { return element_offset(sh, s, t); };
      std::vector<T> gates(n), tokens(n);
      for (int64_t s = 0; s < sh.sequences(); ++s)
        for (int64_t t = 0; t < length; ++t) {
          const int64_t step = reverse ? length - 1 - t : t;  // position in scan order
          const bool rising = s == 0 && step < kRise;
          gates[at(s, t)] = from_double<T>(rising                    ? kRiseGate
                                           : s == 0 && step == kRise ? 0.0
                                                                     : rng.uniform(0.0, 1.0));
          tokens[at(s, t)] = from_double<T>(rising ? 0.0 : draw_token(rng));
        }
      DeviceBuffer<T> gates_d, tokens_d, out_d;
      ASSERT_TRUE(gates_d.allocate(n) && tokens_d.allocate(n) && out_d.allocate(n));
      ASSERT_TRUE(gates_d.upload(gates) && tokens_d.upload(tokens) && out_d.poison());
      ScanArgs<T> a;
      a.gates = gates_d.get();
      a.tokens = tokens_d.get();
      a.out = out_d.get();
      a.shape = sh;
      a.reverse = reverse;
      DeviceBuffer<unsigned char> workspace;
      const Status st = call_entry(a, call.via, cudaStream_t{0}, workspace);
      ASSERT_TRUE(st.ok()) << st.message;
      ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after scan)"));
      ASSERT_TRUE(no_pending_cuda_error());
      std::vector<T> out;
      ASSERT_TRUE(out_d.download(out));

      FailureLog log;
      Reference ref;
      std::vector<T> g(length), b(length), y(length);
      for (int64_t s = 0; s < sh.sequences(); ++s) {
        for (int64_t t = 0; t < length; ++t) {
          g[t] = gates[at(s, t)];
          b[t] = tokens[at(s, t)];
          y[t] = out[at(s, t)];
        }
        ref.run(g.data(), b.data(), length, reverse, 0.0);
        std::ostringstream where;
        where << "sequence " << s;
        if (s != 0) {
          const SequenceCheck k = check_sequence(y.data(), ref.exact(), ref.scale(), length);
          if (!k.ok) log.add(where.str(), k.message);
          continue;
        }
        int64_t wrong = 0, first_wrong = -1;
        for (int64_t step = 0; step < length; ++step) {
          const int64_t t = reverse ? length - 1 - step : step;
          const double got = to_double(y[t]), want = ref.exact()[t];
          const double tolerance = 1e-2 * (std::abs(want) + 1.0);  // 16-bit rounding, loosely
          // (the poison the outputs start as is a NaN too: an output never written is wrong)
          const bool ok =
              !is_poison(y[t]) &&
              (step < kFirstOverflow ? got == 0.0 && want == 0.0
                                     : std::isnan(got) || std::abs(got - want) <= tolerance);
          if (!ok && wrong++ == 0) first_wrong = step;
        }
        if (wrong > 0)
          log.add(where.str(), std::to_string(wrong) +
                                   " outputs unwritten, or neither the loop's value nor a NaN "
                                   "after the overflow (or not 0 before it); the first at step " +
                                   std::to_string(first_wrong));
        const T last = y[reverse ? 0 : length - 1];
        if (is_poison(last))
          log.add(where.str(), "the last output was never written");
        else if (!std::isnan(to_double(last)))
          log.add(where.str(), "the last output is " + std::to_string(to_double(last)) +
                                   ", not the NaN that 0 * Inf in the gate product gives");
      }
    }
}

// ---------------------------------------------------------------------------------------------
// Few long sequences: the multi-block path

/// Lengths around the small multi-block tile (512 floats, 1024 or 3072 16-bit elements, 256
/// doubles) and odd primes, on the forced multi-block path, one of them past two groups of tiles;
/// with states, misaligned, strided, in place, on the scalar path; every gate distribution.
TYPED_TEST(ScanTest, SmallMultiBlock) {
  std::vector<Case> cases;
  int i = 0;
  for (bool reverse : {false, true})
    for (int64_t t :
         {1, 31, 33, 255, 256, 257, 1023, 1024, 1025, 3071, 3073, 4099, 10007, 40009, 140009})
      for (int64_t ch : {1, 3, 16}) {
        if ((t * ch > 70000 && ch > 1) || (ch == 3 && t > 2000)) continue;
        Case c = shape_case(t, ch == 3 ? 2 : 1, ch);
        c.reverse = reverse;
        c.via = Via::kMultiBlock;
        c.gates = kAllGates[i % 5];
        c.initial_state = i % 2 == 0;
        c.final_state = i % 3 != 1;
        c.own_stream = i % 4 == 3;
        ++i;
        cases.push_back(c);
      }
  Case c = shape_case(5000, 2, 2);  // padded, misaligned by one element, custom state layout
  c.channel_stride = 5003;
  c.batch_stride = 2 * 5003 + 7;
  c.gates_offset = c.tokens_offset = c.out_offset = 1;
  c.initial_state = c.final_state = true;
  c.state_layout = StateLayout{5, 2};
  c.via = Via::kMultiBlock;
  c.gates = Gates::kNearOne;
  cases.push_back(c);
  c.reverse = true;
  cases.push_back(c);
  c.out_offset = 2;  // out misaligned unlike the inputs: the scalar path
  cases.push_back(c);
  c = shape_case(7001, 1, 3);  // in place
  c.in_place = true;
  c.via = Via::kMultiBlock;
  c.initial_state = c.final_state = true;
  cases.push_back(c);
  // The other kernel shapes the library can take: its short-tile policy (16-bit: the register
  // kernel) and the kernel that holds tiles in registers (off sm_90). The last case per via is
  // on the scalar path, where both run the register kernel with reloads, as kMultiBlock does
  // there (another tile for 16-bit short).
  for (Via via : {Via::kMultiBlockShort, Via::kMultiBlockRegisters}) {
    for (bool reverse : {false, true})
      for (int64_t t : {1, 33, 1025, 3079, 10007, 100003})  // 100003: past two groups of tiles
        for (int64_t ch : {1, 16}) {
          if (t * ch > 200000) continue;
          c = shape_case(t, 1, ch);
          c.reverse = reverse;
          c.via = via;
          c.gates = kAllGates[i % 5];
          c.initial_state = i % 2 == 0;
          c.final_state = i % 3 != 1;
          ++i;
          cases.push_back(c);
        }
    c = shape_case(5000, 1, 2);
    c.out_offset = 1;
    c.via = via;
    c.initial_state = c.final_state = true;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

/// CUB's two-phase rule: the size query launches nothing and reports at least one byte, the
/// same for any pointers of a shape; a workspace one byte short is refused with nothing written
/// and no CUDA error left; a workspace of exactly the reported size works, whatever it held.
TYPED_TEST(ScanTest, SmallWorkspaceRules) {
  using T = TypeParam;
  for (auto [ch, t] : {std::pair<int64_t, int64_t>{3, 20011}, {12288, 64}}) {
    Case c = shape_case(t, 1, ch);  // few long sequences (multi-block), then many short ones
    c.initial_state = c.final_state = true;
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(c.describe(), seed));
    Rng rng(seed);
    Run<T> r;
    ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
    size_t bytes = 0;
    ASSERT_TRUE(scan(r.args, nullptr, bytes).ok());
    ASSERT_GE(bytes, 1u);
    // Other pointers of the same shape (misaligned: another lead), only queried, never run. They
    // lie in an allocation of their own: the call's arrays shifted by one element may reach into
    // the allocation after them (cudaMalloc packs allocations; the double (1, 12288, 64) arrays
    // are 3 x 2 MiB), where the validator rightly finds them overlapping h0 or the final state.
    const Shape& s = r.args.shape;
    const size_t extent =
        size_t((s.batch - 1) * s.batch_stride + (s.channels - 1) * s.channel_stride +
               (s.length - 1) * s.time_stride + 1);
    DeviceBuffer<T> spare;
    ASSERT_TRUE(spare.allocate(3 * extent + 3));
    T* const base = spare.get();
    ScanArgs<T> shifted = r.args;
    shifted.gates = base + 1;
    shifted.tokens = base + extent + 2;
    shifted.out = r.args.out == r.args.tokens ? base + extent + 2 : base + 2 * extent + 3;
    size_t shifted_bytes = 0;
    ASSERT_TRUE(scan(shifted, nullptr, shifted_bytes).ok());
    EXPECT_EQ(shifted_bytes, bytes) << "the size depends on the pointers";
    ASSERT_TRUE(no_pending_cuda_error());

    if (bytes > 1) {  // a workspace one byte short: refused, nothing written
      DeviceBuffer<unsigned char> small;
      ASSERT_TRUE(small.allocate(bytes - 1));
      ASSERT_TRUE(small.poison());
      size_t short_bytes = bytes - 1;
      const Status st = scan(r.args, small.get(), short_bytes);
      EXPECT_EQ(st.code, StatusCode::kInvalidArgument) << st.message;
      EXPECT_NE(std::string(st.message).find("workspace"), std::string::npos) << st.message;
      ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
      ASSERT_TRUE(no_pending_cuda_error());
      std::vector<T> out, fin;
      ASSERT_TRUE(r.out_d.download(out));
      ASSERT_TRUE(r.final_d.download(fin));
      EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](const T& v) { return is_poison(v); }))
          << "a refused call wrote out";
      EXPECT_TRUE(std::all_of(fin.begin(), fin.end(), [](const T& v) { return is_poison(v); }))
          << "a refused call wrote final_state";
      std::vector<unsigned char> ws;
      ASSERT_TRUE(small.download(ws));
      EXPECT_TRUE(std::all_of(ws.begin(), ws.end(), [](unsigned char v) { return v == 0xFF; }))
          << "a refused call wrote its workspace";
    }
    // Exactly the reported size, filled with garbage, twice in a row (the second run must not
    // trip over the first one's tile states).
    DeviceBuffer<unsigned char> ws;
    ASSERT_TRUE(ws.allocate(bytes));
    ASSERT_TRUE(ws.poison());
    ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
    for (int k = 0; k < 2; ++k) {
      const Status st = scan(r.args, ws.get(), bytes);
      ASSERT_TRUE(st.ok()) << st.message;
    }
    ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
    ASSERT_TRUE(no_pending_cuda_error());
    ASSERT_NO_FATAL_FAILURE(verify(r));

    // A workspace at any alignment (the records are aligned up inside it): exactly the reported
    // size at offsets 1 and 16 of a poisoned buffer 128 bytes longer, outputs poisoned first;
    // nothing outside [offset, offset + bytes) is written.
    for (size_t offset : {size_t{1}, size_t{16}}) {
      SCOPED_TRACE("workspace at offset " + std::to_string(offset));
      DeviceBuffer<unsigned char> big;
      ASSERT_TRUE(big.allocate(bytes + 128));
      ASSERT_TRUE(big.poison());
      ASSERT_TRUE(r.out_d.poison());
      ASSERT_TRUE(r.final_d.poison());
      ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
      const Status st = scan(r.args, big.get() + offset, bytes);
      ASSERT_TRUE(st.ok()) << st.message;
      ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
      ASSERT_NO_FATAL_FAILURE(verify(r));
      std::vector<unsigned char> all;
      ASSERT_TRUE(big.download(all));
      const auto poisoned = [](unsigned char v) { return v == 0xFF; };
      EXPECT_TRUE(std::all_of(all.begin(), all.begin() + offset, poisoned))
          << "wrote before the workspace";
      EXPECT_TRUE(std::all_of(all.begin() + offset + bytes, all.end(), poisoned))
          << "wrote past the workspace";
    }
  }
}

/// New inputs in the buffers of `r` (same shape, same pointers), outputs poisoned again.
template <class T>
void redraw(Run<T>& r, Rng& rng) {
  const Case& c = r.c;
  ASSERT_FALSE(c.in_place);
  for_each_sequence(c, [&](int64_t, int64_t, int64_t base, int64_t s) {
    for (int64_t t = 0; t < c.length; ++t) {
      r.gates[base + t] = from_double<T>(draw_gate(rng, c.gates));
      r.tokens[base + t] = from_double<T>(draw_token(rng));
    }
    if (c.initial_state) r.h0[s] = from_double<T>(rng.uniform(-1.0, 1.0));
  });
  ASSERT_TRUE(r.gates_d.upload(r.gates, c.gates_offset));
  ASSERT_TRUE(r.tokens_d.upload(r.tokens, c.tokens_offset));
  if (c.initial_state) ASSERT_TRUE(r.h0_d.upload(r.h0));
  ASSERT_TRUE(r.out_d.poison());
  if (c.final_state) ASSERT_TRUE(r.final_d.poison());
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after redraw)"));
}

/// One call's look-back records never count in another's. The same workspace serves four calls
/// on new inputs each, back to back; and a CUDA graph of the call, replayed with new inputs each
/// time, with a direct call on the same workspace between two replays (a graph replays the call's
/// tag, so there the records are zeroed first). Forward and reverse, every multi-block kernel
/// shape. Every output is checked. A call that took the records its predecessor left as its own
/// would fold the old inputs' aggregates into the new outputs.
TYPED_TEST(ScanTest, SmallWorkspaceReuse) {
  using T = TypeParam;
  for (Via via : {Via::kMultiBlock, Via::kMultiBlockShort, Via::kMultiBlockRegisters})
    for (bool reverse : {false, true})
      for (bool graph : {false, true}) {
        Case c = shape_case(140009, 1, 2);  // past two groups of tiles per sequence
        c.via = via;
        c.reverse = reverse;
        c.gates = Gates::kNearOne;
        c.initial_state = c.final_state = true;
        const uint64_t seed = fresh_seed();
        SCOPED_TRACE(seed_note(c.describe(), seed) + (graph ? ", graph replays" : ", calls"));
        Rng rng(seed);
        Run<T> r;
        ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
        ASSERT_NO_FATAL_FAILURE(check_workspace_reuse(
            via, r.args, graph, [&] { redraw(r, rng); }, [&] { verify(r); }));
      }
}

/// The library's own choice (the workspace entry point) on shapes with too few sequences to fill
/// the GPU: (1, 1, T) and (1, 16, T) up to T = 2^24, odd lengths, gates near 1, exactly 1 and
/// exactly 0, with states; and the plain and malloc_async entry points on the same kind of shape.
TYPED_TEST(ScanTest, MultiBlock) {
  using T = TypeParam;
  std::vector<Case> cases;
  const Gates gates[] = {Gates::kNearOne, Gates::kOne, Gates::kZero};
  int i = 0;
  for (auto [b, ch, t] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 4097},
                          {1, 1, 65537},
                          {1, 1, 1000003},
                          {1, 1, (int64_t(1) << 24) + 3},
                          {1, 16, 65537},
                          {1, 16, (int64_t(1) << 20) + 1},
                          {2, 4, 1000003},
                          {1, 128, 65537}})
    for (bool reverse : {false, true}) {
      Case c = shape_case(t, b, ch);
      c.reverse = reverse;
      c.gates = gates[i % 3];
      c.initial_state = c.final_state = i % 2 == 0;
      c.own_stream = reverse;
      ++i;
      cases.push_back(c);
    }
  if (sizeof(T) <= 4) {  // the issue's largest (1, 16, T); host time keeps it to float and 16-bit
    Case c = shape_case((int64_t(1) << 24) - 1, 1, 16);
    c.gates = Gates::kNearOne;
    c.initial_state = c.final_state = true;
    cases.push_back(c);
  }
  for (Via via : {Via::kPlain, Via::kMallocAsync})
    for (Case c : {shape_case(1000003, 1, 1), shape_case(65537, 1, 16)}) {
      c.via = via;
      c.initial_state = c.final_state = true;
      c.gates = Gates::kNearOne;
      c.reverse = via == Via::kPlain;
      c.own_stream = true;
      cases.push_back(c);
    }
  run_cases<T>(cases);
}

/// Offsets past 2^31 elements: batch_stride = 2^31 + 5, so any 32-bit index arithmetic lands
/// elsewhere. Only the sequences and one cell either side of each are copied back and checked.
TYPED_TEST(ScanTest, LargeOffsets) {
  using T = TypeParam;
  Case c = shape_case(1000, 2, 2);
  c.channel_stride = 1003;
  c.batch_stride = (int64_t(1) << 31) + 5;
  const int64_t foot = c.footprint();
  const size_t bytes = static_cast<size_t>(foot) * sizeof(T);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_TRUE(cuda_ok(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  if (free_bytes < 3 * bytes + (size_t(1) << 30))
    GTEST_SKIP() << "needs " << ((3 * bytes) >> 20) << " MiB of device memory, "
                 << (free_bytes >> 20) << " MiB free";

  DeviceBuffer<T> gates, tokens, out;
  for (DeviceBuffer<T>* b : {&gates, &tokens, &out}) {
    ASSERT_TRUE(b->allocate(foot));
    ASSERT_TRUE(b->poison());
  }
  for (bool reverse : {false, true}) {
    c.reverse = reverse;
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(c.describe(), seed));
    Rng rng(seed);
    ASSERT_TRUE(out.poison());
    std::vector<std::vector<T>> g, x;
    for_each_sequence(c, [&](int64_t, int64_t, int64_t base, int64_t) {
      g.emplace_back(c.length);
      x.emplace_back(c.length);
      for (int64_t t = 0; t < c.length; ++t) {
        g.back()[t] = from_double<T>(draw_gate(rng, c.gates));
        x.back()[t] = from_double<T>(draw_token(rng));
      }
      ASSERT_TRUE(gates.upload(g.back(), base));
      ASSERT_TRUE(tokens.upload(x.back(), base));
    });
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));

    ScanArgs<T> a;
    a.gates = gates.get();
    a.tokens = tokens.get();
    a.out = out.get();
    a.shape = c.shape();
    a.reverse = reverse;
    const Status s = scan(a, cudaStream_t{0});
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
    ASSERT_TRUE(no_pending_cuda_error());

    Reference ref;
    ErrorSums total;
    FailureLog log;
    for_each_sequence(c, [&](int64_t bi, int64_t ci, int64_t base, int64_t) {
      // One guard cell either side (there is always one: no two sequences touch).
      const int64_t lo = std::max<int64_t>(base - 1, 0);
      const int64_t hi = std::min<int64_t>(base + c.length + 1, foot);
      std::vector<T> got(hi - lo);
      ASSERT_TRUE(out.download(got.data(), got.size(), lo));
      if (lo < base) EXPECT_TRUE(is_poison(got.front())) << "wrote the cell before a sequence";
      if (hi > base + c.length) EXPECT_TRUE(is_poison(got.back())) << "wrote the cell after";
      const size_t k = static_cast<size_t>(bi * c.channels + ci);  // upload order
      ref.run(g[k].data(), x[k].data(), c.length, reverse, 0.0);
      const SequenceCheck r =
          check_sequence(got.data() + (base - lo), ref.exact(), ref.scale(), c.length, &total);
      if (!r.ok) {
        std::ostringstream where;
        where << "sequence (b=" << bi << ", c=" << ci << ") at element offset " << base;
        log.add(where.str(), r.message);
      }
    });
    const SequenceCheck t = check_total<T>(total);
    EXPECT_TRUE(t.ok) << t.message;
  }
}

// ---------------------------------------------------------------------------------------------
// One sequence of more than 2^31 elements

/// splitmix64's finaliser: a counter-based hash, the same on host and device.
__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/// Inputs as exact functions of (seed, index), bitwise the same on host and device (each is an
/// integer scaled by a power of two, so no rounding and no contraction can change it): gates
/// 1 - k 2^-20 with k in [0, 1024) (in (0.999, 1]: a memory of thousands of steps), tokens in
/// [-1, 1) on a 2^-23 grid.
__host__ __device__ inline float huge_gate(uint64_t seed, int64_t i) {
  const uint64_t h = mix64(seed + 2 * static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull);
  return 1.0f - static_cast<float>(h & 1023) * 0x1p-20f;
}
__host__ __device__ inline float huge_token(uint64_t seed, int64_t i) {
  const uint64_t h = mix64(seed + (2 * static_cast<uint64_t>(i) + 1) * 0x9e3779b97f4a7c15ull);
  return static_cast<float>(static_cast<int64_t>(h >> 40) - (int64_t(1) << 23)) * 0x1p-23f;
}
__global__ void fill_huge(float* gates, float* tokens, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    gates[i] = huge_gate(seed, i);
    tokens[i] = huge_token(seed, i);
  }
}

/// The double reference of the huge sequence at a few windows: the sequence is cut into one
/// chunk per host thread, each chunk folded into its affine map (and the map of the magnitude
/// recurrence) in parallel, and the state entering each chunk chained from h0; a window's values
/// then come from running the recurrence from the start of its chunk.
class HugeReference {
 public:
  HugeReference(uint64_t seed, int64_t n, bool reverse, double h0)
      : seed_(seed), n_(n), reverse_(reverse) {
    const int64_t parts = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
    chunk_ = (n + parts - 1) / parts;
    std::vector<Fold> folds(parts);
    std::vector<std::thread> threads;
    for (int64_t c = 0; c < parts; ++c)
      threads.emplace_back([&, c] {
        Fold f{1, 0, 1, 0};
        for (int64_t k = c * chunk_; k < std::min(n, (c + 1) * chunk_); ++k) step(f, k);
        folds[c] = f;
      });
    for (std::thread& t : threads) t.join();
    double x = h0, m = std::abs(h0);
    for (const Fold& f : folds) {
      entering_.push_back({x, m});
      x = f.a * x + f.b;
      m = f.ma * m + f.mb;
    }
    final_ = {x, m};
  }

  /// Exact values and magnitudes of memory elements [lo, hi).
  void window(int64_t lo, int64_t hi, std::vector<double>& exact,
              std::vector<double>& scale) const {
    exact.assign(hi - lo, 0);
    scale.assign(hi - lo, 0);
    const int64_t k0 = reverse_ ? n_ - hi : lo;  // the window in scan order: [k0, k0 + hi - lo)
    const int64_t c = k0 / chunk_;
    Fold f{0, entering_[c].first, 0, entering_[c].second};  // a constant map: the state
    for (int64_t k = c * chunk_; k < k0 + (hi - lo); ++k) {
      step(f, k);
      if (k >= k0) {
        const int64_t i = reverse_ ? n_ - 1 - k : k;
        exact[i - lo] = f.b;
        scale[i - lo] = f.mb;
      }
    }
  }
  std::pair<double, double> final_state() const { return final_; }

 private:
  struct Fold {
    double a, b, ma, mb;  // x -> a x + b, and the magnitude recurrence's map
  };
  void step(Fold& f, int64_t k) const {
    const int64_t i = reverse_ ? n_ - 1 - k : k;
    const double g = huge_gate(seed_, i), t = huge_token(seed_, i);
    f = {g * f.a, g * f.b + t, std::abs(g) * f.ma, std::abs(g) * f.mb + std::abs(t)};
  }
  uint64_t seed_;
  int64_t n_;
  bool reverse_;
  int64_t chunk_ = 1;
  std::vector<std::pair<double, double>> entering_;
  std::pair<double, double> final_;
};

class ScanHugeTest : public RequiresGpu<> {};

/// One float sequence of 2^31 + 17 elements, forward and reverse, with h0 and final state, on the
/// library's choice (the multi-block path) and on the plain entry point (one block walks it all):
/// checked at the start and from 4096 before element 2^31 to the end, with poison cells either
/// side of out untouched.
TEST_F(ScanHugeTest, OneSequenceOf2To31Plus17) {
  constexpr int64_t n = (int64_t(1) << 31) + 17;
  constexpr int64_t kGuard = 16;  // out starts 16 elements into its buffer (64 bytes: aligned)
  const size_t bytes = 3 * (static_cast<size_t>(n) + 2 * kGuard) * sizeof(float);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_TRUE(cuda_ok(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  if (free_bytes < bytes + (size_t(1) << 30))
    GTEST_SKIP() << "needs " << (bytes >> 20) << " MiB of device memory, " << (free_bytes >> 20)
                 << " MiB free";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note("T=2^31+17 float", seed));
  DeviceBuffer<float> gates, tokens, out, states;
  ASSERT_TRUE(gates.allocate(n));
  ASSERT_TRUE(tokens.allocate(n));
  ASSERT_TRUE(out.allocate(n + 2 * kGuard));
  ASSERT_TRUE(states.allocate(2));  // h0, final
  fill_huge<<<132 * 16, 256>>>(gates.get(), tokens.get(), n, seed);
  ASSERT_TRUE(cuda_ok(cudaGetLastError(), "fill_huge"));
  const float h0 = 0.5f;
  ASSERT_TRUE(states.upload(&h0, 1));

  for (bool reverse : {false, true}) {
    const HugeReference ref(seed, n, reverse, h0);
    for (Via via : {Via::kWorkspace, Via::kPlain}) {
      SCOPED_TRACE(std::string(reverse ? "reverse" : "forward") + " via " + via_name(via));
      ASSERT_TRUE(out.poison());
      ASSERT_TRUE(cuda_ok(cudaMemset(states.get() + 1, kPoisonByte, sizeof(float)), "cudaMemset"));
      ScanArgs<float> a;
      a.gates = gates.get();
      a.tokens = tokens.get();
      a.out = out.get() + kGuard;
      a.shape = time_contiguous(1, 1, n);
      a.reverse = reverse;
      a.initial_state = states.get();
      a.final_state = states.get() + 1;
      DeviceBuffer<unsigned char> workspace;
      const Status s = call_entry(a, via, cudaStream_t{0}, workspace);
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after scan)"));
      ASSERT_TRUE(no_pending_cuda_error());

      FailureLog log;
      // The start, and the last 4096 + 17 elements: across element 2^31 to the end.
      for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 4096}, {(int64_t(1) << 31) - 4096, n}}) {
        std::vector<float> got(hi - lo + 2);  // one guard cell either side
        ASSERT_TRUE(out.download(got.data(), got.size(), kGuard + lo - 1));
        if (lo == 0) EXPECT_TRUE(is_poison(got.front())) << "wrote the cell before out";
        if (hi == n) EXPECT_TRUE(is_poison(got.back())) << "wrote the cell after out";
        std::vector<double> exact, scale;
        ref.window(lo, hi, exact, scale);
        const SequenceCheck k = check_sequence(got.data() + 1, exact.data(), scale.data(), hi - lo);
        if (!k.ok) {
          std::ostringstream where;
          where << "window [" << lo << ", " << hi << ")";
          log.add(where.str(), k.message);
        }
      }
      float fin = 0;
      ASSERT_TRUE(states.download(&fin, 1, 1));
      const auto [fx, fm] = ref.final_state();
      const SequenceCheck k = check_sequence(&fin, &fx, &fm, 1);
      EXPECT_TRUE(k.ok) << "final_state: " << k.message;
    }
  }
}

}  // namespace
}  // namespace ascan::test
