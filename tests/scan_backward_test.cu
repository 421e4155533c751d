// tests/scan_backward_test.cu: the backward pass on the GPU against the double reference.
//
// Typed over float, double, __half and __nv_bfloat16. Each case draws gates, tokens and h0,
// runs the forward recurrence in double and stores its outputs x rounded to T (the states the
// backward pass takes as given), draws the upstream gradient g and gT = dL/d(final state), then
// poisons every output (grad_gates, grad_tokens, grad_initial_state) and all padding, runs
// ascan::scan_backward and checks
//   - every element of grad_gates and grad_tokens of every sequence against
//     reference::sequential_scan_backward run in double on the STORED gates, states and gradient
//     (the "exact" grad_gates is d[t] * x[t-1] in double from stored inputs), relative L2 per
//     sequence with the forward tests' magnitude-aware measure (test_util.cuh); the magnitudes
//     are the same backward loop on |a|, |x|, |g| (BackwardReference);
//   - grad_initial_state as one vector over the sequences, and that no state cell between
//     sequences was written;
//   - that nothing outside the sequences was written (padding and the cells in front of a
//     misaligned pointer are still poison) and every input not aliased by an output is unchanged;
//   - that the runtime holds no pending error.
//
// The upstream gradient is drawn in (-s, s) with s = min(1, 4 / sqrt(T)): with gates near or
// equal to 1 the gradient d and the states x both grow like sqrt(T), and their product must stay
// inside half's range (65504) at T = 10^6.
//
// Tests named Small* keep every case under about 64K elements and between them reach every
// kernel path of the backward dispatch table (BackwardTuning: warp rows up to 32 vectors, block
// rows up to 256 vectors, chunked beyond; that is 128 / 1024 for float, 256 / 2048 for 16-bit,
// 64 / 512 for double), vector and scalar access, both directions, every allowed aliasing,
// misaligned and strided layouts and every combination of h0, gT and dh0; run them under
// compute-sanitizer with --gtest_filter='*Small*'.
#include <ascan/ascan.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {
namespace {

// ---------------------------------------------------------------------------------------------
// One case

/// The five sequence arrays of a backward call, as indices.
enum Array : int { kGates = 0, kStates, kGradOut, kGradGates, kGradTokens, kArrays };
const char* const kArrayNames[kArrays] = {"gates", "states", "grad_out", "grad_gates",
                                          "grad_tokens"};

/// Which outputs are written in place over which inputs (the aliasing ScanBackwardArgs allows).
enum class Alias {
  kNone,
  kGradGatesIsGradOut,   ///< grad_gates == grad_out
  kGradGatesIsStates,    ///< grad_gates == states
  kGradTokensIsGradOut,  ///< grad_tokens == grad_out
  kBoth,                 ///< grad_gates == states and grad_tokens == grad_out
};

const char* alias_name(Alias a) {
  switch (a) {
    case Alias::kNone:
      return "";
    case Alias::kGradGatesIsGradOut:
      return " grad_gates=grad_out";
    case Alias::kGradGatesIsStates:
      return " grad_gates=states";
    case Alias::kGradTokensIsGradOut:
      return " grad_tokens=grad_out";
    case Alias::kBoth:
      return " grad_gates=states,grad_tokens=grad_out";
  }
  return "?";
}

/// Where grad_initial_state lives.
enum class StateAlias {
  kNone,              ///< its own buffer
  kIsInitialState,    ///< grad_initial_state == initial_state
  kIsGradFinalState,  ///< grad_initial_state == grad_final_state
};

/// What one backward call looks like: sizes, layout, direction, aliasing, alignment and states.
struct Case {
  int64_t batch = 1;
  int64_t channels = 1;
  int64_t length = 1;
  int64_t channel_stride = -1;  ///< -1: length (packed)
  int64_t batch_stride = -1;    ///< -1: channels * channel_stride (packed)
  Gates gates = Gates::kUniform01;
  bool reverse = false;
  Alias alias = Alias::kNone;
  /// Elements between a cudaMalloc base (256-byte aligned) and the pointer passed, per Array; an
  /// output written in place takes its input's offset (its own entry is ignored).
  int64_t offsets[kArrays] = {0, 0, 0, 0, 0};
  bool initial_state = false;       ///< h0 given
  bool grad_final_state = false;    ///< gT given
  bool grad_initial_state = false;  ///< dh0 wanted
  StateAlias dh0_alias = StateAlias::kNone;
  StateLayout state_layout{};
  bool own_stream = false;    ///< a non-blocking stream instead of stream 0
  Via via = Via::kWorkspace;  ///< the entry point called

  int64_t cs() const { return channel_stride < 0 ? length : channel_stride; }
  int64_t bs() const { return batch_stride < 0 ? channels * cs() : batch_stride; }
  Shape shape() const { return Shape{batch, channels, length, bs(), cs(), 1}; }
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
  /// The buffer array `k` lives in: itself, or the input an output is written over.
  int home(int k) const {
    if (k == kGradGates) {
      if (alias == Alias::kGradGatesIsGradOut) return kGradOut;
      if (alias == Alias::kGradGatesIsStates || alias == Alias::kBoth) return kStates;
    }
    if (k == kGradTokens && (alias == Alias::kGradTokensIsGradOut || alias == Alias::kBoth))
      return kGradOut;
    return k;
  }
  int64_t offset(int k) const { return offsets[home(k)]; }
  /// True when some output is written into buffer `k`.
  bool written(int k) const { return home(kGradGates) == k || home(kGradTokens) == k; }
  double grad_scale() const {
    return std::min(1.0, 4.0 / std::sqrt(static_cast<double>(std::max<int64_t>(length, 1))));
  }

  std::string describe() const {
    std::ostringstream s;
    s << "T=" << length << " B=" << batch << " C=" << channels;
    if (channel_stride >= 0 || batch_stride >= 0)
      s << " strides(b=" << bs() << ",c=" << cs() << ")";
    s << " gates=" << gates_name(gates) << (reverse ? " reverse" : " forward") << alias_name(alias);
    bool any_offset = false;
    for (int k = 0; k < kArrays; ++k) any_offset = any_offset || offset(k) != 0;
    if (any_offset) {
      s << " offsets(";
      for (int k = 0; k < kArrays; ++k) s << (k ? "," : "") << offset(k);
      s << ")";
    }
    if (initial_state) s << " h0";
    if (grad_final_state) s << " gT";
    if (grad_initial_state) s << " dh0";
    if (dh0_alias == StateAlias::kIsInitialState) s << "(=h0)";
    if (dh0_alias == StateAlias::kIsGradFinalState) s << "(=gT)";
    if (state_layout.batch_stride >= 0 || state_layout.channel_stride >= 0)
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

/// The largest (B, C) with B * C <= 12288 sequences and about 512K elements (at least one
/// sequence), so that host time stays O(512K) per case whatever the length.
Case budget_case(int64_t length) {
  constexpr int64_t kElements = int64_t(1) << 19;
  const int64_t n = std::clamp<int64_t>(kElements / length, 1, 12288);
  const int64_t b = std::min<int64_t>(n, 8);
  return shape_case(length, b, n / b);
}

/// Sets h0, gT and dh0 from the three low bits of `combo`.
Case with_states(Case c, int combo) {
  c.initial_state = combo & 1;
  c.grad_final_state = combo & 2;
  c.grad_initial_state = combo & 4;
  return c;
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
  std::vector<T> host[3];            ///< gates, states, grad_out as uploaded
  std::vector<T> h0, gT;             ///< per state cell; poison between states
  DeviceBuffer<T> seq_d[kArrays];    ///< only those with c.home(k) == k are allocated
  DeviceBuffer<T> h0_d, gT_d, dh0_d;
  ScanBackwardArgs<T> args;
  mutable DeviceBuffer<unsigned char> workspace;  ///< Via::kWorkspace, kMultiBlock*

  const DeviceBuffer<T>& dh0_buffer() const {
    if (c.dh0_alias == StateAlias::kIsInitialState) return h0_d;
    if (c.dh0_alias == StateAlias::kIsGradFinalState) return gT_d;
    return dh0_d;
  }
};

/// Draws the host inputs of `r` (r.c is the case): gates, the states a forward scan would have
/// stored (the forward in double, rounded to T), grad_out, h0 and gT; poison in every cell that
/// belongs to no sequence.
template <class T>
void draw_inputs(Run<T>& r, Rng& rng) {
  const Case& c = r.c;
  const int64_t foot = c.footprint();
  const int64_t sfoot = c.state_footprint();
  const T poison = poison_value<T>();
  const double gs = c.grad_scale();
  r.in_sequence.assign(foot, 0);
  for (auto& h : r.host) h.assign(foot, poison);
  r.h0.assign(c.initial_state ? sfoot : 0, poison);
  r.gT.assign(c.grad_final_state ? sfoot : 0, poison);
  std::vector<double> a(c.length), b(c.length), x(c.length);
  for_each_sequence(c, [&](int64_t, int64_t, int64_t base, int64_t s) {
    std::fill_n(r.in_sequence.begin() + base, c.length, uint8_t{1});
    double h0 = 0.0;
    if (c.initial_state) {
      r.h0[s] = from_double<T>(rng.uniform(-1.0, 1.0));
      h0 = to_double(r.h0[s]);
    }
    if (c.grad_final_state) r.gT[s] = from_double<T>(gs * rng.uniform(-1.0, 1.0));
    for (int64_t t = 0; t < c.length; ++t) {
      const T at = from_double<T>(draw_gate(rng, c.gates));
      r.host[kGates][base + t] = at;
      a[t] = to_double(at);
      b[t] = to_double(from_double<T>(draw_token(rng)));
      r.host[kGradOut][base + t] = from_double<T>(gs * rng.uniform(-1.0, 1.0));
    }
    // The states a forward scan would have stored.
    reference::sequential_scan(a.data(), b.data(), c.length, c.reverse, h0, x.data());
    for (int64_t t = 0; t < c.length; ++t) r.host[kStates][base + t] = from_double<T>(x[t]);
  });
}

/// Draws inputs, uploads, poisons every output and padding cell, and fills in the args.
/// Synchronizes the device at the end.
template <class T>
void prepare(const Case& c, Rng& rng, Run<T>& r) {
  ASSERT_TRUE(c.dh0_alias == StateAlias::kNone || c.grad_initial_state);
  ASSERT_TRUE(c.dh0_alias != StateAlias::kIsInitialState || c.initial_state);
  ASSERT_TRUE(c.dh0_alias != StateAlias::kIsGradFinalState || c.grad_final_state);
  r.c = c;
  draw_inputs(r, rng);
  const int64_t foot = c.footprint();
  const int64_t sfoot = c.state_footprint();
  for (int k = 0; k < kArrays; ++k) {
    if (c.home(k) != k) continue;
    ASSERT_TRUE(r.seq_d[k].allocate(foot + c.offsets[k]));
    ASSERT_TRUE(r.seq_d[k].poison());
    if (k < 3) ASSERT_TRUE(r.seq_d[k].upload(r.host[k], c.offsets[k]));
  }
  ScanBackwardArgs<T>& a_ = r.args;
  const auto ptr = [&](int k) { return r.seq_d[c.home(k)].get() + c.offset(k); };
  a_.gates = ptr(kGates);
  a_.states = ptr(kStates);
  a_.grad_out = ptr(kGradOut);
  a_.grad_gates = ptr(kGradGates);
  a_.grad_tokens = ptr(kGradTokens);
  a_.shape = c.shape();
  a_.reverse = c.reverse;
  a_.state_layout = c.state_layout;
  if (c.initial_state) {
    ASSERT_TRUE(r.h0_d.allocate(sfoot));
    ASSERT_TRUE(r.h0_d.upload(r.h0));
    a_.initial_state = r.h0_d.get();
  }
  if (c.grad_final_state) {
    ASSERT_TRUE(r.gT_d.allocate(sfoot));
    ASSERT_TRUE(r.gT_d.upload(r.gT));
    a_.grad_final_state = r.gT_d.get();
  }
  if (c.grad_initial_state) {
    if (c.dh0_alias == StateAlias::kNone) {
      ASSERT_TRUE(r.dh0_d.allocate(sfoot));
      ASSERT_TRUE(r.dh0_d.poison());
    }
    a_.grad_initial_state = r.dh0_buffer().get();
  }
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after setup)"));
}

/// Poisons the outputs that have buffers of their own again (for a second run).
template <class T>
void repoison_outputs(Run<T>& r) {
  for (int k : {kGradGates, kGradTokens})
    if (r.c.home(k) == k) ASSERT_TRUE(r.seq_d[k].poison());
  if (r.c.grad_initial_state && r.c.dh0_alias == StateAlias::kNone) ASSERT_TRUE(r.dh0_d.poison());
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after poison)"));
}

/// Runs the backward pass on `stream` and waits for it.
template <class T>
void launch(const Run<T>& r, cudaStream_t stream) {
  ASSERT_TRUE(can_implement(r.args).ok()) << can_implement(r.args).message;
  const Status s = call_entry(r.args, r.c.via, stream, r.workspace);
  ASSERT_TRUE(s.ok()) << "scan_backward failed: " << s.message;
  ASSERT_TRUE(
      cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after scan_backward)"));
  ASSERT_TRUE(no_pending_cuda_error());
}

/// Counts cells of `got` (from `offset` on) that differ bitwise from `want`, reporting the first.
template <class T>
void expect_unchanged(const std::vector<T>& got, const std::vector<T>& want, int64_t offset,
                      const std::string& what) {
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i)
    if (!bitwise_equal(got[offset + i], want[i]) && bad++ == 0) first = static_cast<int64_t>(i);
  EXPECT_EQ(bad, 0) << what << " changed in " << bad << " cells; first at " << first << ": "
                    << (first >= 0 ? to_double(got[offset + first]) : 0.0) << " (was "
                    << (first >= 0 ? to_double(want[first]) : 0.0) << ")";
}

/// Downloads every sequence buffer of `r` (empty vectors for the unallocated ones).
template <class T>
void download_all(const Run<T>& r, std::vector<T> (&buf)[kArrays]) {
  for (int k = 0; k < kArrays; ++k)
    if (r.c.home(k) == k) ASSERT_TRUE(r.seq_d[k].download(buf[k]));
}

/// Checks everything a backward pass of `r` must have done, and not done.
template <class T>
void verify(const Run<T>& r) {
  const Case& c = r.c;
  const int64_t foot = c.footprint();
  std::vector<T> buf[kArrays];
  ASSERT_NO_FATAL_FAILURE(download_all(r, buf));

  // Inputs not written over are unchanged (with their padding and the cells in front); in the
  // buffers that hold an output, nothing outside the sequences was written.
  for (int k = 0; k < kArrays; ++k) {
    if (c.home(k) != k) continue;
    const int64_t off = c.offsets[k];
    if (k < 3 && !c.written(k)) {
      std::vector<T> want(off, poison_value<T>());
      want.insert(want.end(), r.host[k].begin(), r.host[k].end());
      expect_unchanged(buf[k], want, 0, kArrayNames[k]);
      continue;
    }
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < off; ++i)
      if (!is_poison(buf[k][i]) && bad++ == 0) first = i - off;
    for (int64_t i = 0; i < foot; ++i)
      if (!r.in_sequence[i] && !is_poison(buf[k][off + i]) && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0) << "scan_backward wrote " << bad << " cells outside the sequences of the "
                      << kArrayNames[k] << " buffer; first at " << first
                      << " elements from its pointer";
  }

  // State buffers: inputs unchanged unless dh0 is written over them.
  std::vector<T> h0_got, gT_got, dh0_got;
  if (c.initial_state) ASSERT_TRUE(r.h0_d.download(h0_got));
  if (c.grad_final_state) ASSERT_TRUE(r.gT_d.download(gT_got));
  if (c.grad_initial_state) ASSERT_TRUE(r.dh0_buffer().download(dh0_got));
  if (c.initial_state && c.dh0_alias != StateAlias::kIsInitialState)
    expect_unchanged(h0_got, r.h0, 0, "initial_state");
  if (c.grad_final_state && c.dh0_alias != StateAlias::kIsGradFinalState)
    expect_unchanged(gT_got, r.gT, 0, "grad_final_state");

  const T* da = buf[c.home(kGradGates)].data() + c.offset(kGradGates);
  const T* db = buf[c.home(kGradTokens)].data() + c.offset(kGradTokens);
  BackwardReference ref;
  ErrorSums total_da, total_db;
  std::vector<double> dh0_exact, dh0_scale;
  std::vector<T> dh0_vec;
  std::vector<uint8_t> state_used(dh0_got.size(), 0);
  FailureLog log;
  for_each_sequence(c, [&](int64_t bi, int64_t ci, int64_t base, int64_t s) {
    const double h0 = c.initial_state ? to_double(r.h0[s]) : 0.0;
    const double gT = c.grad_final_state ? to_double(r.gT[s]) : 0.0;
    ref.run(r.host[kGates].data() + base, r.host[kStates].data() + base,
            r.host[kGradOut].data() + base, c.length, c.reverse, h0, gT);
    const SequenceCheck ka =
        check_sequence(da + base, ref.grad_gates(), ref.grad_gates_scale(), c.length, &total_da);
    const SequenceCheck kb =
        check_sequence(db + base, ref.grad_tokens(), ref.grad_tokens_scale(), c.length, &total_db);
    if (!ka.ok || !kb.ok) {
      std::ostringstream where;
      where << "sequence (b=" << bi << ", c=" << ci << ")";
      if (!ka.ok) log.add(where.str() + " grad_gates", ka.message);
      if (!kb.ok) log.add(where.str() + " grad_tokens", kb.message);
    }
    if (c.grad_initial_state) {
      dh0_exact.push_back(ref.grad_initial_state());
      dh0_scale.push_back(ref.grad_initial_state_scale());
      dh0_vec.push_back(dh0_got[s]);
      state_used[s] = 1;
    }
  });
  if (log.count() == 0) {
    const SequenceCheck ka = check_total<T>(total_da);
    EXPECT_TRUE(ka.ok) << "grad_gates: " << ka.message;
    const SequenceCheck kb = check_total<T>(total_db);
    EXPECT_TRUE(kb.ok) << "grad_tokens: " << kb.message;
  }
  if (c.grad_initial_state) {
    const SequenceCheck k = check_sequence(dh0_vec.data(), dh0_exact.data(), dh0_scale.data(),
                                           static_cast<int64_t>(dh0_vec.size()));
    EXPECT_TRUE(k.ok) << "grad_initial_state: " << k.message;
    int64_t bad = 0;
    for (size_t i = 0; i < dh0_got.size(); ++i) bad += !state_used[i] && !is_poison(dh0_got[i]);
    EXPECT_EQ(bad, 0) << "scan_backward wrote " << bad
                      << " cells of grad_initial_state between states";
  }
}

/// Prepares, runs and verifies one case with a fresh seed.
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

/// 1500, 2500 and 5000: lengths between the table's rows, where the row rule (select_row) walks
/// smaller tiles.
constexpr int64_t kLengths[] = {1,    2,    31,   32,   33,    127,   128,   1000,   1500,
                                2047, 2500, 4096, 5000, 65535, 65536, 65537, 1000003};
/// The forward suite's small lengths and the edges of every row of BackwardTuning for 2-, 4- and
/// 8-byte types (tiles of 8, 16, 32, 64, 128, 256 vectors of 8, 4 or 2 elements).
constexpr int64_t kSmallLengths[] = {1,   2,   15,   16,   17,   31,   32,   33,   63,
                                     64,  65,  127,  128,  129,  255,  256,  257,  511,
                                     512, 513, 1000, 1024, 1025, 2047, 2048, 2049, 4096};

/// Every length, each with one sequence, six, and as many as the element budget allows; the
/// cases cycle through the eight combinations of h0, gT and dh0.
std::vector<Case> length_cases(bool reverse) {
  std::vector<Case> cases;
  int combo = reverse ? 3 : 0;
  for (int64_t t : kLengths) {
    for (Case c : {shape_case(t, 1, 1), shape_case(t, 2, 3), budget_case(t)}) {
      if (t > 100000 && c.batch * c.channels == 6) continue;  // budget_case covers it
      c = with_states(c, combo++);
      c.reverse = reverse;
      c.own_stream = reverse;
      cases.push_back(c);
    }
  }
  return cases;
}

template <class T>
class ScanBackwardTest : public RequiresGpu<> {};

using ScanTypes = ::testing::Types<float, double, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(ScanBackwardTest, ScanTypes);

// ---------------------------------------------------------------------------------------------
// Small shapes: each case under ~64K elements; together every path.

TYPED_TEST(ScanBackwardTest, SmallLengths) {
  std::vector<Case> cases;
  int combo = 0;
  for (bool reverse : {false, true})
    for (int64_t t : kSmallLengths) {
      std::vector<Case> shapes = {shape_case(t, 1, 1), shape_case(t, 2, 3)};
      if (t <= 256) shapes.push_back(shape_case(t, 8, 64));  // many sequences per block
      for (Case c : shapes) {
        c = with_states(c, combo++ % 8);
        c.reverse = reverse;
        cases.push_back(c);
      }
    }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, SmallLongSequence) {
  // Many tiles of every type: the chunked kernel's carry and prefetch, and the edge gate and
  // state a tile's first and last vectors take from the neighbouring tile.
  std::vector<Case> cases;
  for (int64_t t : {8193, 65537})
    for (bool reverse : {false, true}) {
      Case c = shape_case(t, 1, 1);
      c.reverse = reverse;
      cases.push_back(c);
      c.alias = Alias::kBoth;
      c.offsets[kStates] = c.offsets[kGradOut] = c.offsets[kGates] = 1;
      c.own_stream = true;
      cases.push_back(c);
      c.alias = Alias::kNone;
      for (int64_t& o : c.offsets) o = 3;
      c = with_states(c, 7);
      cases.push_back(c);
    }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, SmallGateDistributions) {
  std::vector<Case> cases;
  for (Gates g : kAllGates)
    for (bool reverse : {false, true})
      for (Case c : {shape_case(33, 8, 32), shape_case(1000, 2, 3), shape_case(4096, 1, 3)}) {
        c = with_states(c, 7);
        c.gates = g;
        c.reverse = reverse;
        cases.push_back(c);
      }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, SmallStates) {
  // Every combination of h0, gT and dh0, in the default and a padded state layout.
  std::vector<Case> cases;
  for (bool reverse : {false, true})
    for (int64_t t : {1, 33, 4096})
      for (int combo = 0; combo < 8; ++combo)
        for (bool custom : {false, true}) {
          Case c = with_states(shape_case(t, 2, 3), combo);
          c.reverse = reverse;
          if (custom) c.state_layout = StateLayout{2 * 3 + 1, 2};
          cases.push_back(c);
        }
  // dh0 written over h0 or gT; states in the (C, B) order.
  for (bool reverse : {false, true})
    for (StateAlias sa : {StateAlias::kIsInitialState, StateAlias::kIsGradFinalState})
      for (int64_t t : {1, 1000}) {
        Case c = with_states(shape_case(t, 3, 4), 7);
        c.dh0_alias = sa;
        c.reverse = reverse;
        c.own_stream = reverse;
        cases.push_back(c);
        c.state_layout = StateLayout{1, 3};
        cases.push_back(c);
      }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, SmallInPlace) {
  std::vector<Case> cases;
  for (Alias alias : {Alias::kGradGatesIsGradOut, Alias::kGradGatesIsStates,
                      Alias::kGradTokensIsGradOut, Alias::kBoth})
    for (bool reverse : {false, true})
      for (int64_t t : {1, 2, 33, 1000, 4096}) {
        Case c = with_states(shape_case(t, 2, 3), t == 1000 ? 0 : 7);
        c.alias = alias;
        c.reverse = reverse;
        cases.push_back(c);
        for (int64_t& o : c.offsets) o = 1;  // in place and misaligned (the vector path's lead)
        cases.push_back(c);
      }
  run_cases<TypeParam>(cases);
}

/// Offsets (gates, states, grad_out, grad_gates, grad_tokens) in elements from an aligned base:
/// all alike (the vector path with a lead), each alone (the scalar path), all different, and a
/// whole vector of 16-bit elements (aligned for half, misaligned by 16 bytes of 32 for double).
constexpr int64_t kOffsets[][kArrays] = {{1, 1, 1, 1, 1}, {1, 0, 0, 0, 0}, {0, 1, 0, 0, 0},
                                         {0, 0, 1, 0, 0}, {0, 0, 0, 1, 0}, {0, 0, 0, 0, 1},
                                         {3, 5, 7, 2, 1}, {8, 8, 8, 8, 8}};

Case with_offsets(Case c, const int64_t (&o)[kArrays]) {
  for (int k = 0; k < kArrays; ++k) c.offsets[k] = o[k];
  return c;
}

TYPED_TEST(ScanBackwardTest, SmallMisaligned) {
  std::vector<Case> cases;
  int combo = 0;
  for (bool reverse : {false, true})
    for (int64_t t : {1, 31, 33, 1000, 4096})
      for (const auto& o : kOffsets) {
        Case c = with_offsets(with_states(shape_case(t, 2, 3), combo++ % 8), o);
        c.reverse = reverse;
        cases.push_back(c);
      }
  // Aligned pointers, but rows that start at every misalignment (odd channel stride).
  for (bool rev : {false, true}) {
    Case c = with_states(shape_case(1001, 2, 5), 7);
    c.channel_stride = 1003;
    c.reverse = rev;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

std::vector<Case> small_strided_cases(bool reverse) {
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
  int combo = reverse ? 5 : 1;
  for (Case& k : dir) {
    k = with_states(k, combo++ % 8);
    k.reverse = reverse;
  }
  return dir;
}

TYPED_TEST(ScanBackwardTest, SmallStrided) {
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    std::vector<Case> dir = small_strided_cases(reverse);
    cases.insert(cases.end(), dir.begin(), dir.end());
    // Strided and in place: the padding of the aliased inputs must survive too.
    Case c = dir[0];
    c.alias = Alias::kBoth;
    cases.push_back(c);
    c = dir[3];
    c.alias = Alias::kGradGatesIsGradOut;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, SmallSizeOneDimsIgnoreStrides) {
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    Case c = with_states(shape_case(500, 1, 3), 7);
    c.batch_stride = 0;
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(shape_case(500, 3, 1), 7);
    c.channel_stride = 0;
    c.batch_stride = 500;
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

TYPED_TEST(ScanBackwardTest, SmallManySequences) {
  // More sequences than 65535: a grid that used y or z for sequences would miss some.
  std::vector<Case> cases = {with_states(shape_case(1, 1, 66000), 7),
                             with_states(shape_case(1, 3, 22000), 4)};
  cases[1].reverse = true;
  run_cases<TypeParam>(cases);
}

/// An empty shape succeeds, and neither reads nor writes: poisoned buffers stay poisoned, and
/// null pointers are fine.
TYPED_TEST(ScanBackwardTest, SmallEmpty) {
  using T = TypeParam;
  constexpr size_t kCells = 64;
  DeviceBuffer<T> bufs[8];
  for (DeviceBuffer<T>& b : bufs) {
    ASSERT_TRUE(b.allocate(kCells));
    ASSERT_TRUE(b.poison());
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
        ScanBackwardArgs<T> a;
        a.shape = shape;
        a.reverse = reverse;
        if (!null_pointers) {
          a.gates = bufs[0].get();
          a.states = bufs[1].get();
          a.grad_out = bufs[2].get();
          a.grad_gates = bufs[3].get();
          a.grad_tokens = bufs[4].get();
          a.initial_state = bufs[5].get();
          a.grad_final_state = bufs[6].get();
          a.grad_initial_state = bufs[7].get();
        }
        EXPECT_TRUE(can_implement(a).ok()) << can_implement(a).message;
        const Status s = scan_backward(a, reverse ? stream.get() : cudaStream_t{0});
        EXPECT_TRUE(s.ok()) << s.message;
      }
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  ASSERT_TRUE(no_pending_cuda_error());
  for (DeviceBuffer<T>& b : bufs) {
    std::vector<T> host;
    ASSERT_TRUE(b.download(host));
    EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](const T& v) { return is_poison(v); }))
        << "an empty backward pass wrote memory";
  }
}

/// `runs` runs of each case (the first on stream 0, the others on a non-blocking stream) give
/// bitwise identical results, and the last one is right.
template <class T>
void check_deterministic(const std::vector<Case>& cases, int runs = 2) {
  for (const Case& c : cases) {
    const uint64_t seed = fresh_seed();
    SCOPED_TRACE(seed_note(c.describe(), seed));
    Rng rng(seed);
    Run<T> r;
    ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
    ASSERT_NO_FATAL_FAILURE(launch(r, cudaStream_t{0}));
    std::vector<T> da1, db1, dh1;
    ASSERT_TRUE(r.seq_d[kGradGates].download(da1));
    ASSERT_TRUE(r.seq_d[kGradTokens].download(db1));
    ASSERT_TRUE(r.dh0_d.download(dh1));
    Stream stream;
    ASSERT_TRUE(stream.create());
    for (int k = 1; k < runs; ++k) {
      ASSERT_NO_FATAL_FAILURE(repoison_outputs(r));
      ASSERT_NO_FATAL_FAILURE(launch(r, stream.get()));
      std::vector<T> da2, db2, dh2;
      ASSERT_TRUE(r.seq_d[kGradGates].download(da2));
      ASSERT_TRUE(r.seq_d[kGradTokens].download(db2));
      ASSERT_TRUE(r.dh0_d.download(dh2));
      const std::string what = ", run " + std::to_string(k + 1) + " against the first";
      expect_unchanged(da2, da1, 0, ("grad_gates" + what).c_str());
      expect_unchanged(db2, db1, 0, ("grad_tokens" + what).c_str());
      expect_unchanged(dh2, dh1, 0, ("grad_initial_state" + what).c_str());
    }
    ASSERT_NO_FATAL_FAILURE(verify(r));
  }
}

TYPED_TEST(ScanBackwardTest, SmallDeterministic) {
  std::vector<Case> cases = {shape_case(65537, 1, 1), shape_case(1000, 2, 3),
                             shape_case(33, 8, 64)};
  for (Case& c : cases) {
    c = with_states(c, 7);
    c.gates = Gates::kNearOne;
  }
  cases[1].reverse = true;
  for (Case c : {shape_case(40009, 1, 1), shape_case(4099, 1, 16)}) {  // many small tiles
    c = with_states(c, 7);
    c.gates = Gates::kNearOne;
    c.via = Via::kMultiBlock;
    c.reverse = c.channels == 16;
    cases.push_back(c);
  }
  check_deterministic<TypeParam>(cases, 4);
}

/// New inputs in the buffers of `r` (same shape, same pointers), outputs poisoned again.
template <class T>
void redraw(Run<T>& r, Rng& rng) {
  const Case& c = r.c;
  ASSERT_TRUE(c.alias == Alias::kNone);
  draw_inputs(r, rng);
  for (int k = 0; k < 3; ++k)
    if (c.home(k) == k) ASSERT_TRUE(r.seq_d[k].upload(r.host[k], c.offsets[k]));
  if (c.initial_state) ASSERT_TRUE(r.h0_d.upload(r.h0));
  if (c.grad_final_state) ASSERT_TRUE(r.gT_d.upload(r.gT));
  ASSERT_NO_FATAL_FAILURE(repoison_outputs(r));
}

/// One call's look-back records never count in another's (the forward test's twin). The same
/// workspace serves four calls on new inputs each; and a CUDA graph of the call, replayed with
/// new inputs, with a direct call on the same workspace between two replays. Forward and reverse,
/// every multi-block kernel shape, every output checked.
TYPED_TEST(ScanBackwardTest, SmallWorkspaceReuse) {
  using T = TypeParam;
  for (Via via : {Via::kMultiBlock, Via::kMultiBlockShort, Via::kMultiBlockRegisters})
    for (bool reverse : {false, true})
      for (bool graph : {false, true}) {
        Case c = with_states(shape_case(140009, 1, 2), 7);  // past two groups of tiles
        c.via = via;
        c.reverse = reverse;
        c.gates = Gates::kNearOne;
        const uint64_t seed = fresh_seed();
        SCOPED_TRACE(seed_note(c.describe(), seed) + (graph ? ", graph replays" : ", calls"));
        Rng rng(seed);
        Run<T> r;
        ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
        ASSERT_NO_FATAL_FAILURE(check_workspace_reuse(
            via, r.args, graph, [&] { redraw(r, rng); }, [&] { verify(r); }));
      }
}

// ---------------------------------------------------------------------------------------------
// Full sizes

// The rows the row rule (select_row) gives lengths between the table's: 2000 sequences (enough
// for the 64-thread rows on up to 166 multiprocessors, 132 on the H200) of lengths whose table
// rows leave many lanes idle, forward and reverse, through the combinations of h0, gT and dh0.
TYPED_TEST(ScanBackwardTest, RowRuleRows) {
  std::vector<Case> cases;
  int combo = 0;
  for (int64_t t : {1100, 1500, 2500, 3500, 5000, 6500}) {
    Case c = with_states(shape_case(t, 4, 500), combo);
    c.reverse = combo % 2 == 1;
    combo += 3;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, LengthsForward) { run_cases<TypeParam>(length_cases(false)); }

TYPED_TEST(ScanBackwardTest, LengthsReverse) { run_cases<TypeParam>(length_cases(true)); }

TYPED_TEST(ScanBackwardTest, GateDistributions) {
  std::vector<Case> cases;
  for (Gates g : kAllGates)
    for (bool reverse : {false, true})
      for (Case c : {shape_case(128, 8, 192), shape_case(65537, 1, 3), shape_case(1000003, 1, 1)}) {
        c = with_states(c, 7);
        c.gates = g;
        c.reverse = reverse;
        cases.push_back(c);
      }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, InPlace) {
  std::vector<Case> cases;
  bool reverse = false;
  for (Alias alias : {Alias::kGradGatesIsGradOut, Alias::kGradGatesIsStates,
                      Alias::kGradTokensIsGradOut, Alias::kBoth})
    for (Case c : {shape_case(65537, 2, 3), shape_case(1000003, 1, 1), shape_case(128, 8, 192)}) {
      c = with_states(c, 7);
      c.alias = alias;
      c.reverse = reverse = !reverse;
      c.own_stream = reverse;
      cases.push_back(c);
    }
  // In place, misaligned alike (the vector path's lead), dh0 over h0 and over gT.
  Case c = with_states(shape_case(65537, 2, 3), 7);
  c.alias = Alias::kBoth;
  for (int64_t& o : c.offsets) o = 5;
  c.dh0_alias = StateAlias::kIsInitialState;
  cases.push_back(c);
  c.reverse = true;
  c.dh0_alias = StateAlias::kIsGradFinalState;
  cases.push_back(c);
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, Misaligned) {
  std::vector<Case> cases;
  bool reverse = false;
  constexpr int64_t kFew[][kArrays] = {
      {1, 1, 1, 1, 1}, {1, 0, 0, 0, 0}, {0, 0, 0, 1, 0}, {3, 5, 7, 2, 1}};
  for (const auto& o : kFew)
    for (Case c : {shape_case(65537, 2, 3), shape_case(1000003, 1, 1), shape_case(1000, 8, 64)}) {
      c = with_offsets(with_states(c, 7), o);
      c.reverse = reverse = !reverse;
      cases.push_back(c);
    }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, Strided) {
  std::vector<Case> cases;
  int combo = 0;
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
    c = shape_case(128, 8, 192);  // many short padded rows
    c.channel_stride = 136;
    c.batch_stride = 192 * 136 + 8;
    dir.push_back(c);
    for (Case& k : dir) {
      k = with_states(k, 3 + 4 * (combo++ % 2));
      k.reverse = reverse;
    }
    dir[1].alias = Alias::kBoth;
    cases.insert(cases.end(), dir.begin(), dir.end());
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, States) {
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    std::vector<Case> dir;
    dir.push_back(with_states(shape_case(1000003, 1, 1), 7));
    Case c = with_states(shape_case(65537, 2, 3), 7);
    c.state_layout = StateLayout{2 * 3 + 1, 2};
    dir.push_back(c);
    c = with_states(shape_case(32, 8, 1536), 7);
    c.state_layout = StateLayout{2 * 1536 + 5, 2};
    c.alias = Alias::kBoth;
    c.own_stream = true;
    dir.push_back(c);
    c = with_states(shape_case(4096, 4, 64), 6);  // gT and dh0 without h0
    c.dh0_alias = StateAlias::kIsGradFinalState;
    dir.push_back(c);
    for (Case& k : dir) k.reverse = reverse;
    cases.insert(cases.end(), dir.begin(), dir.end());
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(ScanBackwardTest, ManySequences) {
  std::vector<Case> cases = {with_states(shape_case(1, 4, 70000), 7),
                             with_states(shape_case(33, 2, 40000), 5),
                             with_states(shape_case(2, 1, 100000), 4)};
  cases[1].reverse = true;
  run_cases<TypeParam>(cases);
}

/// Stream order, and no hidden synchronization, through each public entry point (two-phase
/// workspace, malloc_async, none): with the stream held at a host-side gate, scan_backward()
/// returns at once and nothing has been written; once the gate opens, the results are right. The
/// shapes take one block per sequence and, with a workspace, the multi-block path.
TYPED_TEST(ScanBackwardTest, StreamOrdered) {
  using T = TypeParam;
  for (Via via : {Via::kWorkspace, Via::kMallocAsync, Via::kPlain})
    for (Case c :
         {with_states(shape_case(4096, 2, 3), 7), with_states(shape_case(1000003, 1, 1), 7)}) {
      c.own_stream = true;
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(seed_note(c.describe(), seed));
      Rng rng(seed);
      Run<T> r;
      ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
      Stream stream;
      ASSERT_TRUE(stream.create());
      {
        // Warm up the same path (a kernel's module loads at its first launch), then poison the
        // outputs again.
        DeviceBuffer<unsigned char> ws;
        const Status w = call_entry(r.args, via, stream.get(), ws);
        ASSERT_TRUE(w.ok()) << w.message;
        ASSERT_TRUE(
            cuda_ok(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize (warm-up)"));
        ASSERT_NO_FATAL_FAILURE(repoison_outputs(r));
      }
      const DeviceBuffer<T>& watched = r.seq_d[c.home(kGradTokens)];
      ASSERT_NO_FATAL_FAILURE(
          check_gated_call(r.args, via, stream.get(), watched.get(), watched.size()));
      ASSERT_NO_FATAL_FAILURE(verify(r));
    }
}

TYPED_TEST(ScanBackwardTest, Deterministic) {
  std::vector<Case> cases = {shape_case(1000003, 1, 1), shape_case(65537, 2, 3),
                             shape_case(65537, 1, 16)};
  for (Case& c : cases) {
    c = with_states(c, 7);
    c.gates = Gates::kNearOne;
  }
  cases[1].reverse = true;
  Case forced = cases[0];  // about 4000 tiles of 256 floats
  forced.via = Via::kMultiBlock;
  cases.push_back(forced);
  forced.reverse = true;
  cases.push_back(forced);
  check_deterministic<TypeParam>(cases, 5);
}

// ---------------------------------------------------------------------------------------------
// Few long sequences: the multi-block path

/// Lengths around the small multi-block tile (64 threads x 2 vectors) on the forced multi-block
/// path, every combination of states, every gate distribution, in place over each allowed input
/// (a tile overwrites states or grad_out that its neighbour tile reads at the edge), misaligned
/// and strided.
TYPED_TEST(ScanBackwardTest, SmallMultiBlock) {
  std::vector<Case> cases;
  int i = 0;
  for (bool reverse : {false, true})
    for (int64_t t : {1, 31, 33, 255, 256, 257, 1023, 1024, 1025, 4099, 10007, 40009})
      for (int64_t ch : {1, 3, 16}) {
        if (t * ch > 70000 || (ch == 3 && t > 2000)) continue;
        Case c = with_states(shape_case(t, ch == 3 ? 2 : 1, ch), i % 8);
        c.reverse = reverse;
        c.via = Via::kMultiBlock;
        c.gates = kAllGates[i % 5];
        c.own_stream = i % 4 == 3;
        ++i;
        cases.push_back(c);
      }
  for (Alias alias : {Alias::kGradGatesIsGradOut, Alias::kGradGatesIsStates,
                      Alias::kGradTokensIsGradOut, Alias::kBoth})
    for (bool reverse : {false, true}) {
      Case c = with_states(shape_case(10007, 1, 2), 7);
      c.alias = alias;
      c.reverse = reverse;
      c.via = Via::kMultiBlock;
      c.gates = Gates::kNearOne;
      cases.push_back(c);
    }
  for (const auto& o : kOffsets) {
    Case c = with_offsets(with_states(shape_case(5000, 1, 3), 7), o);
    c.via = Via::kMultiBlock;
    cases.push_back(c);
  }
  Case c = with_states(shape_case(4096, 2, 2), 7);  // rows at odd offsets
  c.channel_stride = 4097;
  c.batch_stride = 2 * 4097 + 5;
  c.via = Via::kMultiBlock;
  cases.push_back(c);
  c.reverse = true;
  cases.push_back(c);
  // The other kernel shapes the library can take: its short-tile policy (16-bit: the register
  // kernel; float's and double's is their main policy, here at another tile) and the kernel that
  // holds tiles in registers (off sm_90). The last case per via is on the scalar path, where both
  // run the register kernel with reloads, as kMultiBlock does there (another tile for short).
  for (Via via : {Via::kMultiBlockShort, Via::kMultiBlockRegisters}) {
    for (bool reverse : {false, true})
      for (int64_t t : {1, 33, 1025, 3079, 10007, 100003})  // 100003: past two groups of tiles
        for (int64_t ch : {1, 16}) {
          if (t * ch > 200000) continue;
          c = with_states(shape_case(t, 1, ch), i % 8);
          c.reverse = reverse;
          c.via = via;
          c.gates = kAllGates[i % 5];
          ++i;
          cases.push_back(c);
        }
    c = with_offsets(with_states(shape_case(5000, 1, 2), 7), kOffsets[6]);  // scalar path
    c.via = via;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

/// The library's own choice on shapes with too few sequences to fill the GPU: (1, 1, T) and
/// (1, 16, T) up to T = 2^24, odd lengths, gates near 1, exactly 1 and exactly 0, with states;
/// the plain and malloc_async entry points on the same kind of shape.
TYPED_TEST(ScanBackwardTest, MultiBlock) {
  using T = TypeParam;
  std::vector<Case> cases;
  const Gates gates[] = {Gates::kNearOne, Gates::kOne, Gates::kZero};
  int i = 0;
  for (auto [b, ch, t] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 2049},
                          {1, 1, 65537},
                          {1, 1, 1000003},
                          {1, 1, (int64_t(1) << 24) + 3},
                          {1, 16, 65537},
                          {1, 16, (int64_t(1) << 20) + 1},
                          {2, 4, 1000003},
                          {1, 128, 65537}})
    for (bool reverse : {false, true}) {
      Case c = with_states(shape_case(t, b, ch), i % 8);
      c.reverse = reverse;
      c.gates = gates[i % 3];
      c.own_stream = reverse;
      if (i % 5 == 4) c.alias = Alias::kBoth;
      ++i;
      cases.push_back(c);
    }
  if (sizeof(T) <= 4) {  // the issue's largest (1, 16, T); host time keeps it to float and 16-bit
    Case c = with_states(shape_case((int64_t(1) << 24) - 1, 1, 16), 7);
    c.gates = Gates::kNearOne;
    cases.push_back(c);
  }
  for (Via via : {Via::kPlain, Via::kMallocAsync})
    for (Case c : {shape_case(1000003, 1, 1), shape_case(65537, 1, 16)}) {
      c = with_states(c, 7);
      c.via = via;
      c.gates = Gates::kNearOne;
      c.reverse = via == Via::kPlain;
      c.own_stream = true;
      cases.push_back(c);
    }
  run_cases<T>(cases);
}

}  // namespace
}  // namespace ascan::test
