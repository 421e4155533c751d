// tests/layout_test.cu: layouts other than time-contiguous, per-array strides, broadcast inputs
// and packed variable-length sequences, forward and backward, on the GPU against the double
// reference.
//
// Typed over float, double, __half and __nv_bfloat16. A case places each sequence array of a call
// (forward: gates, tokens, out; backward: gates, states, grad_out, grad_gates, grad_tokens) in a
// buffer at an offset with strides (layout_util.cuh's ArrayView): several arrays may share a
// buffer (the two halves of a fused projection, an output written in place over an input), an
// input may have stride 0 (broadcast), and the shape may be packed (cu_seqlens). Every buffer is
// mirrored on the host cell by cell; cells that belong to no input hold poison (test_util.cuh).
// After the call every cell of every buffer is checked:
//   - cells of an output view against the reference run in double on the stored inputs, one
//     sequence at a time (relative L2 per sequence and per case, the tolerances of scan_test.cu
//     and scan_backward_test.cu); where an input holds a NaN or an Inf, the outputs whose exact
//     answer is not finite must be non-finite, and every other output exact as usual, so that a
//     NaN in one sequence shows in no other;
//   - every other cell (padding, guard cells after the last view, the other half of a fused
//     tensor, inputs) bitwise unchanged;
//   - the final states (forward) or the gradients of h0 (backward) per sequence, (B, C) or
//     (N, C) dense with guard cells after them; an empty packed sequence's final state is its
//     initial state (0 without one) exactly, and its grad_initial_state its grad_final_state;
//   - that the runtime holds no pending error.
// Some tests also run the same inputs in a second layout (time-contiguous against channel-last,
// or each packed sequence alone) and compare the two outputs; others run a call repeatedly and
// require bitwise identical results.
//
// The calls go through the public entry points only (two-phase workspace, malloc_async, plain),
// so this file instantiates no kernel the library would not.
#include <ascan/ascan.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "layout_util.cuh"
#include "test_util.cuh"

namespace ascan::test {
namespace {

// ---------------------------------------------------------------------------------------------
// One case

/// The sequence arrays of a call, as indices. Forward: gates, tokens, out. Backward: gates,
/// states, grad_out, grad_gates, grad_tokens.
enum : int { kGates = 0, kTokens = 1, kOut = 2 };
enum : int { kStates = 1, kGradOut = 2, kGradGates = 3, kGradTokens = 4 };
constexpr int kMaxArrays = 5;
const char* const kForwardNames[] = {"gates", "tokens", "out"};
const char* const kBackwardNames[] = {"gates", "states", "grad_out", "grad_gates", "grad_tokens"};

/// Spare poison cells after the last cell any view of a buffer reaches (and after the states):
/// a write past a view lands there.
constexpr int64_t kGuard = 5;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A value put into one input cell after the inputs are drawn (a NaN or an Inf).
struct Poke {
  int array;
  int64_t b, c, t;
  double value;
};

/// What one call looks like: sizes, where each array lives, direction, packing, states.
struct Case {
  bool backward = false;
  int64_t batch = 1;
  int64_t channels = 1;
  int64_t length = 1;  ///< packed: the total length
  Strides shape_strides{};
  ArrayView arrays[kMaxArrays];
  bool reverse = false;
  Gates gates = Gates::kUniform01;
  bool edge_gates = false;  ///< gates from draw_edge_gate instead
  /// When gate_hi > gate_lo: gates uniform in [gate_lo, gate_hi) instead.
  double gate_lo = 0, gate_hi = 0;
  bool packed = false;
  bool offsets64 = false;
  std::vector<int64_t> lengths;  ///< packed: one per sequence
  bool initial_state = false;
  bool final_state = false;         ///< forward
  bool grad_final_state = false;    ///< backward
  bool grad_initial_state = false;  ///< backward
  std::vector<Poke> pokes;
  Via via = Via::kWorkspace;
  bool own_stream = false;  ///< a non-blocking stream instead of stream 0
  std::string label;

  int count() const { return backward ? 5 : 3; }
  bool is_output(int k) const { return backward ? k >= kGradGates : k == kOut; }
  const char* name(int k) const { return backward ? kBackwardNames[k] : kForwardNames[k]; }
  int buffers() const {
    int n = 0;
    for (int k = 0; k < count(); ++k) n = std::max(n, arrays[k].buffer + 1);
    return n;
  }
  /// Sequences (and state rows * channels): B * C, or N * C packed.
  int64_t sequences() const {
    return packed ? static_cast<int64_t>(lengths.size()) * channels : batch * channels;
  }
  Shape shape() const { return shape_with(batch, channels, length, shape_strides); }
  bool has_state_out() const { return backward ? grad_initial_state : final_state; }
  double grad_scale() const {
    int64_t longest = packed ? 1 : length;
    for (int64_t n : lengths) longest = std::max(longest, n);
    return std::min(1.0, 4.0 / std::sqrt(static_cast<double>(std::max<int64_t>(longest, 1))));
  }

  std::string describe() const {
    std::ostringstream s;
    s << (backward ? "backward " : "forward ") << label << ": B=" << batch << " C=" << channels
      << " T=" << length << " strides(b=" << shape_strides.batch_stride
      << ",c=" << shape_strides.channel_stride << ",t=" << shape_strides.time_stride << ")";
    for (int k = 0; k < count(); ++k) {
      const ArrayView& v = arrays[k];
      if (v.buffer == k && v.offset == 0 && !v.own_strides) continue;
      s << " " << name(k) << "@buf" << v.buffer << "+" << v.offset;
      if (v.own_strides)
        s << "(b=" << v.strides.batch_stride << ",c=" << v.strides.channel_stride
          << ",t=" << v.strides.time_stride << ")";
    }
    if (packed) {
      s << " packed(" << (offsets64 ? "int64" : "int32") << ", N=" << lengths.size() << ": ";
      for (size_t i = 0; i < lengths.size() && i < 12; ++i) s << (i ? "," : "") << lengths[i];
      if (lengths.size() > 12) s << ",...";
      s << ")";
    }
    if (gate_hi > gate_lo)
      s << " gates=U(" << gate_lo << "," << gate_hi << ")";
    else
      s << " gates=" << (edge_gates ? "Edge" : gates_name(gates));
    s << (reverse ? " reverse" : " forward");
    if (initial_state) s << " h0";
    if (final_state) s << " final";
    if (grad_final_state) s << " gT";
    if (grad_initial_state) s << " dh0";
    if (!pokes.empty()) s << " " << pokes.size() << " non-finite inputs";
    if (own_stream) s << " own-stream";
    if (via != Via::kWorkspace) s << " via " << via_name(via);
    return s.str();
  }
};

/// Every array in a buffer of its own, under the shape's strides `s`.
Case make_case(bool backward, int64_t batch, int64_t channels, int64_t length, const Strides& s,
               const std::string& label) {
  Case c;
  c.backward = backward;
  c.batch = batch;
  c.channels = channels;
  c.length = length;
  c.shape_strides = s;
  for (int k = 0; k < kMaxArrays; ++k) c.arrays[k] = ArrayView{k, 0, s, false};
  c.label = label;
  return c;
}

/// (B, T, C), channels fastest.
Case channel_last_case(bool backward, int64_t batch, int64_t length, int64_t channels) {
  Case c = make_case(backward, batch, channels, length,
                     strides_of(channel_last(batch, length, channels)), "channel-last");
  return c;
}

/// (B, C, T), time fastest.
Case time_contiguous_case(bool backward, int64_t batch, int64_t channels, int64_t length) {
  return make_case(backward, batch, channels, length,
                   strides_of(time_contiguous(batch, channels, length)), "time-contiguous");
}

/// Packed sequences of `lengths` in the (total_T, C) layout (channel_last) or (C, total_T).
Case packed_case(bool backward, int64_t channels, const std::vector<int64_t>& lengths,
                 bool channel_last_layout, bool offsets64) {
  int64_t total = 0;
  for (int64_t n : lengths) total += n;
  Case c = channel_last_layout ? channel_last_case(backward, 1, total, channels)
                               : time_contiguous_case(backward, 1, channels, total);
  c.label = std::string("packed ") + c.label;
  c.packed = true;
  c.offsets64 = offsets64;
  c.lengths = lengths;
  return c;
}

/// The same sizes, direction, states and entry point as `c` (not the layout or the pokes), every
/// array in a buffer of its own under the shape strides `s`.
Case relayout(const Case& c, const Strides& s, const std::string& label) {
  Case r = make_case(c.backward, c.batch, c.channels, c.length, s, label);
  r.reverse = c.reverse;
  r.gates = c.gates;
  r.edge_gates = c.edge_gates;
  r.gate_lo = c.gate_lo;
  r.gate_hi = c.gate_hi;
  r.initial_state = c.initial_state;
  r.final_state = c.final_state;
  r.grad_final_state = c.grad_final_state;
  r.grad_initial_state = c.grad_initial_state;
  r.via = c.via;
  r.own_stream = c.own_stream;
  return r;
}

/// Sets the states from the low bits of `combo`: forward h0 (1), final (2); backward h0 (1),
/// gT (2), dh0 (4).
Case with_states(Case c, int combo) {
  c.initial_state = combo & 1;
  if (c.backward) {
    c.grad_final_state = combo & 2;
    c.grad_initial_state = combo & 4;
  } else {
    c.final_state = combo & 2;
  }
  return c;
}

/// Array `k` gets strides of its own (and a buffer and an offset).
void own_view(Case& c, int k, int buffer, int64_t offset, const Strides& s) {
  c.arrays[k] = ArrayView{buffer, offset, s, true};
}

/// One sequence: batch b, channel c, times [t0, t0 + len). Its state row is its index in
/// sequences_of (b * C + c, or n * C + c packed).
struct Seq {
  int64_t b, c, t0, len;
};

std::vector<Seq> sequences_of(const Case& c) {
  std::vector<Seq> seqs;
  if (c.packed) {
    const std::vector<int64_t> cu = cu_seqlens(c.lengths);
    for (size_t n = 0; n < c.lengths.size(); ++n)
      for (int64_t ch = 0; ch < c.channels; ++ch) seqs.push_back({0, ch, cu[n], c.lengths[n]});
  } else {
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t ch = 0; ch < c.channels; ++ch) seqs.push_back({b, ch, 0, c.length});
  }
  return seqs;
}

// ---------------------------------------------------------------------------------------------
// Host mirrors and device buffers

/// A case's buffers on the host (as uploaded) and on the device, its states and its arguments.
template <class T>
struct Run {
  Case c;
  std::vector<Seq> seqs;
  std::vector<std::vector<T>> image;         ///< per buffer: every cell as uploaded
  std::vector<std::vector<uint8_t>> output;  ///< per buffer: 1 where an output view has a cell
  std::vector<DeviceBuffer<T>> dev;          ///< per buffer
  std::vector<T> h0, gT;  ///< per state row, kGuard poison cells after (empty when not given)
  DeviceBuffer<T> h0_d, gT_d, state_out_d;  ///< state_out: final_state or grad_initial_state
  DeviceBuffer<int32_t> cu32_d;
  DeviceBuffer<int64_t> cu64_d;
  ScanArgs<T> fwd;
  ScanBackwardArgs<T> bwd;
  mutable DeviceBuffer<unsigned char> workspace;

  int64_t cell(int k, const Seq& s, int64_t t) const { return c.arrays[k].at(s.b, s.c, s.t0 + t); }
  /// The values of array `k` along sequence `i`, read from `bufs` (the images or a download).
  std::vector<T> gather(const std::vector<std::vector<T>>& bufs, int k, size_t i) const {
    const Seq& s = seqs[i];
    const std::vector<T>& buf = bufs[c.arrays[k].buffer];
    std::vector<T> v(s.len);
    for (int64_t t = 0; t < s.len; ++t) v[t] = buf[cell(k, s, t)];
    return v;
  }
};

/// Uploads every buffer image and the input states; poisons the output states. Synchronizes.
template <class T>
void upload_all(Run<T>& r) {
  for (size_t i = 0; i < r.dev.size(); ++i) ASSERT_TRUE(r.dev[i].upload(r.image[i]));
  if (!r.h0.empty()) ASSERT_TRUE(r.h0_d.upload(r.h0));
  if (!r.gT.empty()) ASSERT_TRUE(r.gT_d.upload(r.gT));
  if (r.c.has_state_out()) ASSERT_TRUE(r.state_out_d.poison());
  ASSERT_TRUE(cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after upload)"));
}

/// Draws the inputs of `r` into the images: gates, then (forward) tokens or (backward) the states
/// a forward scan would have stored and the upstream gradient; then the pokes.
template <class T>
void draw_inputs(Run<T>& r, Rng& rng) {
  const Case& c = r.c;
  const int64_t rows = c.sequences();
  const T poison = poison_value<T>();
  for (size_t i = 0; i < r.seqs.size(); ++i)
    for (int64_t t = 0; t < r.seqs[i].len; ++t)
      r.image[c.arrays[kGates].buffer][r.cell(kGates, r.seqs[i], t)] =
          from_double<T>(c.gate_hi > c.gate_lo ? rng.uniform(c.gate_lo, c.gate_hi)
                         : c.edge_gates        ? draw_edge_gate(rng)
                                               : draw_gate(rng, c.gates));
  r.h0.clear();
  r.gT.clear();
  if (c.initial_state) {
    r.h0.assign(rows + kGuard, poison);
    for (int64_t i = 0; i < rows; ++i) r.h0[i] = from_double<T>(rng.uniform(-1.0, 1.0));
  }
  const double gs = c.grad_scale();
  if (c.backward && c.grad_final_state) {
    r.gT.assign(rows + kGuard, poison);
    for (int64_t i = 0; i < rows; ++i) r.gT[i] = from_double<T>(gs * rng.uniform(-1.0, 1.0));
  }
  if (!c.backward) {
    for (size_t i = 0; i < r.seqs.size(); ++i)
      for (int64_t t = 0; t < r.seqs[i].len; ++t)
        r.image[c.arrays[kTokens].buffer][r.cell(kTokens, r.seqs[i], t)] =
            from_double<T>(draw_token(rng));
  } else {
    // The states a forward scan of the stored gates (all drawn first: a broadcast gate cell
    // serves several sequences) and fresh tokens would have stored.
    std::vector<double> a, b, x;
    for (size_t i = 0; i < r.seqs.size(); ++i) {
      const Seq& s = r.seqs[i];
      const std::vector<T> g = r.gather(r.image, kGates, i);
      a.resize(s.len);
      b.resize(s.len);
      x.resize(s.len);
      for (int64_t t = 0; t < s.len; ++t) {
        a[t] = to_double(g[t]);
        b[t] = to_double(from_double<T>(draw_token(rng)));
      }
      const double h0 = c.initial_state ? to_double(r.h0[i]) : 0.0;
      reference::sequential_scan(a.data(), b.data(), s.len, c.reverse, h0, x.data());
      for (int64_t t = 0; t < s.len; ++t)
        r.image[c.arrays[kStates].buffer][r.cell(kStates, s, t)] = from_double<T>(x[t]);
      for (int64_t t = 0; t < s.len; ++t)
        r.image[c.arrays[kGradOut].buffer][r.cell(kGradOut, s, t)] =
            from_double<T>(gs * rng.uniform(-1.0, 1.0));
    }
  }
  for (const Poke& p : c.pokes)
    r.image[c.arrays[p.array].buffer][c.arrays[p.array].at(p.b, p.c, p.t)] =
        from_double<T>(p.value);
}

/// Fills in the arguments of `r` from its case and device buffers.
template <class T>
void bind_args(Run<T>& r) {
  const Case& c = r.c;
  const auto ptr = [&](int k) { return r.dev[c.arrays[k].buffer].get() + c.arrays[k].offset; };
  const auto own = [&](int k) {
    return c.arrays[k].own_strides ? std::optional<Strides>(c.arrays[k].strides) : std::nullopt;
  };
  Packed packed{};
  if (c.packed)
    packed = c.offsets64 ? ascan::packed(r.cu64_d.get(), static_cast<int64_t>(c.lengths.size()))
                         : ascan::packed(r.cu32_d.get(), static_cast<int64_t>(c.lengths.size()));
  if (!c.backward) {
    ScanArgs<T>& a = r.fwd;
    a = {};
    a.gates = ptr(kGates);
    a.tokens = ptr(kTokens);
    a.out = ptr(kOut);
    a.shape = c.shape();
    a.reverse = c.reverse;
    a.initial_state = c.initial_state ? r.h0_d.get() : nullptr;
    a.final_state = c.final_state ? r.state_out_d.get() : nullptr;
    a.gates_strides = own(kGates);
    a.tokens_strides = own(kTokens);
    a.out_strides = own(kOut);
    a.packed = packed;
  } else {
    ScanBackwardArgs<T>& a = r.bwd;
    a = {};
    a.gates = ptr(kGates);
    a.states = ptr(kStates);
    a.grad_out = ptr(kGradOut);
    a.grad_gates = ptr(kGradGates);
    a.grad_tokens = ptr(kGradTokens);
    a.shape = c.shape();
    a.reverse = c.reverse;
    a.initial_state = c.initial_state ? r.h0_d.get() : nullptr;
    a.grad_final_state = c.grad_final_state ? r.gT_d.get() : nullptr;
    a.grad_initial_state = c.grad_initial_state ? r.state_out_d.get() : nullptr;
    a.gates_strides = own(kGates);
    a.states_strides = own(kStates);
    a.grad_out_strides = own(kGradOut);
    a.grad_gates_strides = own(kGradGates);
    a.grad_tokens_strides = own(kGradTokens);
    a.packed = packed;
  }
}

/// Sizes and allocates the buffers, draws the inputs, marks the output cells, uploads, and fills
/// in the arguments. Synchronizes the device at the end.
template <class T>
void prepare(const Case& c, Rng& rng, Run<T>& r) {
  r.c = c;
  r.seqs = sequences_of(c);
  const int64_t batch = c.packed ? 1 : c.batch;
  const int nbuf = c.buffers();
  std::vector<int64_t> size(nbuf, 0);
  for (int k = 0; k < c.count(); ++k) {
    const ArrayView& v = c.arrays[k];
    if (!v.own_strides) {
      const Strides& s = c.shape_strides;
      ASSERT_TRUE(v.strides.batch_stride == s.batch_stride &&
                  v.strides.channel_stride == s.channel_stride &&
                  v.strides.time_stride == s.time_stride)
          << "test bug: " << c.name(k) << " has strides of its own but does not pass them";
    }
    ASSERT_GE(v.offset, 0);
    size[v.buffer] =
        std::max(size[v.buffer], v.offset + view_footprint(v.strides, batch, c.channels, c.length));
  }
  const T poison = poison_value<T>();
  r.image.assign(nbuf, {});
  r.output.assign(nbuf, {});
  r.dev.clear();
  r.dev.resize(nbuf);
  for (int i = 0; i < nbuf; ++i) {
    r.image[i].assign(size[i] + kGuard, poison);
    r.output[i].assign(size[i] + kGuard, 0);
  }
  draw_inputs(r, rng);
  for (int k = 0; k < c.count(); ++k) {
    if (!c.is_output(k)) continue;
    int64_t twice = 0;
    for (const Seq& s : r.seqs)
      for (int64_t t = 0; t < s.len; ++t) {
        uint8_t& m = r.output[c.arrays[k].buffer][r.cell(k, s, t)];
        twice += m;
        m = 1;
      }
    ASSERT_EQ(twice, 0) << "test bug: the output views of the case overlap";
  }
  for (int i = 0; i < nbuf; ++i) ASSERT_TRUE(r.dev[i].allocate(r.image[i].size()));
  const int64_t rows = c.sequences();
  if (c.initial_state) ASSERT_TRUE(r.h0_d.allocate(rows + kGuard));
  if (c.backward && c.grad_final_state) ASSERT_TRUE(r.gT_d.allocate(rows + kGuard));
  if (c.has_state_out()) ASSERT_TRUE(r.state_out_d.allocate(rows + kGuard));
  if (c.packed) {
    const std::vector<int64_t> cu = cu_seqlens(c.lengths);
    if (c.offsets64) {
      ASSERT_TRUE(r.cu64_d.allocate(cu.size()));
      ASSERT_TRUE(r.cu64_d.upload(cu));
    } else {
      const std::vector<int32_t> cu32(cu.begin(), cu.end());
      ASSERT_TRUE(r.cu32_d.allocate(cu32.size()));
      ASSERT_TRUE(r.cu32_d.upload(cu32));
    }
  }
  ASSERT_NO_FATAL_FAILURE(upload_all(r));
  bind_args(r);
}

/// Copies the inputs of `src` into `dst` (same channel count; the same number of steps in
/// sequence i of dst and sequence src_seq(i) of src), position by position, whatever the two
/// layouts; the input states likewise. Uploads.
template <class T>
void copy_inputs(Run<T>& dst, const Run<T>& src, const std::function<size_t(size_t)>& src_seq) {
  const int inputs = dst.c.backward ? 3 : 2;  // gates, tokens / gates, states, grad_out
  for (size_t i = 0; i < dst.seqs.size(); ++i) {
    const size_t j = src_seq(i);
    ASSERT_EQ(dst.seqs[i].len, src.seqs[j].len) << "test bug: sequences of different lengths";
    for (int k = 0; k < inputs; ++k)
      for (int64_t t = 0; t < dst.seqs[i].len; ++t)
        dst.image[dst.c.arrays[k].buffer][dst.cell(k, dst.seqs[i], t)] =
            src.image[src.c.arrays[k].buffer][src.cell(k, src.seqs[j], t)];
    if (!dst.h0.empty()) dst.h0[i] = src.h0[j];
    if (!dst.gT.empty()) dst.gT[i] = src.gT[j];
  }
  ASSERT_NO_FATAL_FAILURE(upload_all(dst));
}

/// Runs the call on `stream` and waits for it.
template <class T>
void launch(const Run<T>& r, cudaStream_t stream) {
  const Status v = r.c.backward ? can_implement(r.bwd) : can_implement(r.fwd);
  ASSERT_TRUE(v.ok()) << "can_implement: " << v.message;
  const Status s = r.c.backward ? call_public(r.bwd, r.c.via, stream, r.workspace)
                                : call_public(r.fwd, r.c.via, stream, r.workspace);
  ASSERT_TRUE(s.ok()) << (r.c.backward ? "scan_backward" : "scan") << " failed: " << s.message;
  ASSERT_TRUE(cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after the call)"));
  ASSERT_TRUE(no_pending_cuda_error());
}

/// What a call left: every buffer and the output states.
template <class T>
struct Result {
  std::vector<std::vector<T>> bufs;
  std::vector<T> state_out;
};

template <class T>
void download(const Run<T>& r, Result<T>& out) {
  out.bufs.assign(r.dev.size(), {});
  for (size_t i = 0; i < r.dev.size(); ++i) ASSERT_TRUE(r.dev[i].download(out.bufs[i]));
  out.state_out.clear();
  if (r.c.has_state_out()) ASSERT_TRUE(r.state_out_d.download(out.state_out));
}

/// The exact answers of one sequence, and their magnitudes: forward x (array kOut); backward
/// grad_gates and grad_tokens, and the final state or grad_initial_state.
struct Exact {
  std::vector<double> x[2], m[2];  ///< forward: [0] out; backward: [0] grad_gates, [1] tokens
  double state = 0, state_scale = 0;
};

template <class T>
Exact exact_of(const Run<T>& r, size_t i) {
  const Case& c = r.c;
  const Seq& s = r.seqs[i];
  Exact e;
  const double h0 = c.initial_state ? to_double(r.h0[i]) : 0.0;
  if (!c.backward) {
    e.state = h0;
    e.state_scale = std::abs(h0);
    if (s.len == 0) return e;
    const std::vector<T> g = r.gather(r.image, kGates, i), x = r.gather(r.image, kTokens, i);
    Reference ref;
    ref.run(g.data(), x.data(), s.len, c.reverse, h0);
    e.x[0].assign(ref.exact(), ref.exact() + s.len);
    e.m[0].assign(ref.scale(), ref.scale() + s.len);
    const int64_t last = c.reverse ? 0 : s.len - 1;
    e.state = e.x[0][last];
    e.state_scale = e.m[0][last];
    return e;
  }
  const double gT = c.grad_final_state ? to_double(r.gT[i]) : 0.0;
  e.state = gT;
  e.state_scale = std::abs(gT);
  if (s.len == 0) return e;
  const std::vector<T> a = r.gather(r.image, kGates, i), x = r.gather(r.image, kStates, i),
                       g = r.gather(r.image, kGradOut, i);
  BackwardReference ref;
  ref.run(a.data(), x.data(), g.data(), s.len, c.reverse, h0, gT);
  e.x[0].assign(ref.grad_gates(), ref.grad_gates() + s.len);
  e.m[0].assign(ref.grad_gates_scale(), ref.grad_gates_scale() + s.len);
  e.x[1].assign(ref.grad_tokens(), ref.grad_tokens() + s.len);
  e.m[1].assign(ref.grad_tokens_scale(), ref.grad_tokens_scale() + s.len);
  e.state = ref.grad_initial_state();
  e.state_scale = ref.grad_initial_state_scale();
  return e;
}

/// The arrays a sequence's outputs are in: forward {kOut}; backward {kGradGates, kGradTokens}.
std::vector<int> outputs_of(const Case& c) {
  return c.backward ? std::vector<int>{kGradGates, kGradTokens} : std::vector<int>{kOut};
}

std::string where_of(const Case& c, const Seq& s, size_t i) {
  std::ostringstream w;
  if (c.packed)
    w << "packed sequence " << i / c.channels << " (t0=" << s.t0 << ", len=" << s.len
      << "), channel " << s.c;
  else
    w << "sequence (b=" << s.b << ", c=" << s.c << ")";
  return w.str();
}

/// Checks everything the call of `r` must have done, and not done, from what it left in `got`.
template <class T>
void verify(const Run<T>& r, const Result<T>& got) {
  const Case& c = r.c;
  // Nothing written but the output views: padding, guard cells and inputs bitwise unchanged.
  for (size_t i = 0; i < r.image.size(); ++i) {
    int64_t bad = 0, first = -1;
    for (size_t j = 0; j < r.image[i].size(); ++j)
      if (!r.output[i][j] && !bitwise_equal(got.bufs[i][j], r.image[i][j]) && bad++ == 0)
        first = static_cast<int64_t>(j);
    EXPECT_EQ(bad, 0) << "buffer " << i << ": " << bad
                      << " cells outside the output views changed; first at element " << first
                      << ": " << (first >= 0 ? to_double(got.bufs[i][first]) : 0.0) << " (was "
                      << (first >= 0 ? to_double(r.image[i][first]) : 0.0) << ")";
  }
  // The input states are unchanged.
  const auto expect_state_unchanged = [&](const DeviceBuffer<T>& d, const std::vector<T>& want,
                                          const char* what) {
    if (want.empty()) return;
    std::vector<T> h;
    ASSERT_TRUE(d.download(h));
    int64_t bad = 0;
    for (size_t j = 0; j < want.size(); ++j) bad += !bitwise_equal(h[j], want[j]);
    EXPECT_EQ(bad, 0) << what << " changed in " << bad << " cells";
  };
  expect_state_unchanged(r.h0_d, r.h0, "initial_state");
  expect_state_unchanged(r.gT_d, r.gT, "grad_final_state");

  const std::vector<int> outs = outputs_of(c);
  ErrorSums totals[2];
  FailureLog log;
  std::vector<double> st_exact, st_scale;
  std::vector<T> st_got, st_last;
  bool all_equal_last = !c.backward;
  for (size_t i = 0; i < r.seqs.size(); ++i) {
    const Seq& s = r.seqs[i];
    const Exact e = exact_of(r, i);
    for (size_t o = 0; o < outs.size(); ++o) {
      if (s.len == 0) continue;
      const std::vector<T> y = r.gather(got.bufs, outs[o], i);
      const SequenceCheck k =
          check_values(y.data(), e.x[o].data(), e.m[o].data(), s.len, &totals[o]);
      if (!k.ok) log.add(where_of(c, s, i) + " " + c.name(outs[o]), k.message);
    }
    if (!c.has_state_out()) continue;
    const T v = got.state_out[i];
    if (s.len == 0) {
      // An empty sequence: its final state is h0 (its dh0 is gT), exactly; 0 when not given.
      if (is_poison(v) || to_double(v) != e.state)
        log.add(where_of(c, s, i), std::string(c.backward ? "grad_initial_state" : "final_state") +
                                       " of an empty sequence is " +
                                       (is_poison(v) ? "poison" : std::to_string(to_double(v))) +
                                       ", expected exactly " + std::to_string(e.state));
      continue;
    }
    st_exact.push_back(e.state);
    st_scale.push_back(e.state_scale);
    st_got.push_back(v);
    if (!c.backward) {
      const std::vector<T> y = r.gather(got.bufs, kOut, i);
      const T last = y[c.reverse ? 0 : s.len - 1];
      all_equal_last = all_equal_last && bitwise_equal(v, last);
    }
  }
  if (log.count() == 0)
    for (size_t o = 0; o < outs.size(); ++o) {
      const SequenceCheck k = check_total<T>(totals[o]);
      EXPECT_TRUE(k.ok) << c.name(outs[o]) << ": " << k.message;
    }
  if (c.has_state_out()) {
    // A final state is its sequence's stored last output (out[0] reversed), bitwise, on every
    // path (that output was checked above); the gradients of h0 are judged as one vector, like
    // a sequence.
    const char* what = c.backward ? "grad_initial_state" : "final_state";
    if (c.backward) {
      const SequenceCheck k = check_values(st_got.data(), st_exact.data(), st_scale.data(),
                                           static_cast<int64_t>(st_got.size()));
      EXPECT_TRUE(k.ok) << what << ": " << k.message;
    } else {
      EXPECT_TRUE(all_equal_last)
          << "a final state differs bitwise from its sequence's last output";
    }
    int64_t bad = 0;
    for (size_t j = r.seqs.size(); j < got.state_out.size(); ++j)
      bad += !is_poison(got.state_out[j]);
    EXPECT_EQ(bad, 0) << "the call wrote " << bad << " guard cells after " << what;
  }
}

template <class T>
void verify(const Run<T>& r) {
  Result<T> got;
  ASSERT_NO_FATAL_FAILURE(download(r, got));
  verify(r, got);
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

/// The outputs of two calls on the same inputs agree (check_pair): sequence i of `b` against
/// sequence a_seq(i) of `a`, every output array and the output states.
template <class T>
void expect_same_answers(const Run<T>& a, const Result<T>& got_a, const Run<T>& b,
                         const Result<T>& got_b, const std::function<size_t(size_t)>& a_seq) {
  const std::vector<int> outs = outputs_of(b.c);
  FailureLog log;
  std::vector<double> st_exact, st_scale;
  std::vector<T> st_a, st_b;
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const size_t j = a_seq(i);
    const Exact e = exact_of(b, i);
    for (size_t o = 0; o < outs.size(); ++o) {
      if (b.seqs[i].len == 0) continue;
      const std::vector<T> ya = a.gather(got_a.bufs, outs[o], j);
      const std::vector<T> yb = b.gather(got_b.bufs, outs[o], i);
      const SequenceCheck k =
          check_pair(ya.data(), yb.data(), e.x[o].data(), e.m[o].data(), b.seqs[i].len);
      if (!k.ok) log.add(where_of(b.c, b.seqs[i], i) + " " + b.c.name(outs[o]), k.message);
    }
    if (b.c.has_state_out()) {
      st_exact.push_back(e.state);
      st_scale.push_back(e.state_scale);
      st_a.push_back(got_a.state_out[j]);
      st_b.push_back(got_b.state_out[i]);
    }
  }
  if (b.c.has_state_out()) {
    const SequenceCheck k = check_pair(st_a.data(), st_b.data(), st_exact.data(), st_scale.data(),
                                       static_cast<int64_t>(st_a.size()));
    EXPECT_TRUE(k.ok) << "output states: " << k.message;
  }
}

/// Runs `c` and the same inputs under `relaid` (the same sizes in another layout): each right,
/// and the two in agreement.
template <class T>
void run_relayout(const Case& c, const Case& relaid) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(c.describe() + ", against " + relaid.describe(), seed));
  Rng rng(seed);
  Run<T> a, b;
  Result<T> got_a, got_b;
  ASSERT_NO_FATAL_FAILURE(prepare(c, rng, a));
  ASSERT_NO_FATAL_FAILURE(launch(a, cudaStream_t{0}));
  ASSERT_NO_FATAL_FAILURE(download(a, got_a));
  ASSERT_NO_FATAL_FAILURE(verify(a, got_a));
  ASSERT_NO_FATAL_FAILURE(prepare(relaid, rng, b));
  ASSERT_NO_FATAL_FAILURE(copy_inputs(b, a, [](size_t i) { return i; }));
  ASSERT_NO_FATAL_FAILURE(launch(b, cudaStream_t{0}));
  ASSERT_NO_FATAL_FAILURE(download(b, got_b));
  ASSERT_NO_FATAL_FAILURE(verify(b, got_b));
  expect_same_answers(a, got_a, b, got_b, [](size_t i) { return i; });
}

/// Runs the packed case `c`, then each of its non-empty sequences alone ((1, C, len) in the same
/// layout, with the same inputs and states): each call right, and the two answers in agreement.
template <class T>
void run_packed_against_alone(const Case& c) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(c.describe() + ", against each sequence alone", seed));
  Rng rng(seed);
  Run<T> all;
  Result<T> got_all;
  ASSERT_NO_FATAL_FAILURE(prepare(c, rng, all));
  ASSERT_NO_FATAL_FAILURE(launch(all, cudaStream_t{0}));
  ASSERT_NO_FATAL_FAILURE(download(all, got_all));
  ASSERT_NO_FATAL_FAILURE(verify(all, got_all));
  const bool channel_last_layout = c.shape_strides.channel_stride == 1;
  for (size_t n = 0; n < c.lengths.size(); ++n) {
    const int64_t len = c.lengths[n];
    if (len == 0) continue;
    SCOPED_TRACE("sequence " + std::to_string(n) + " alone");
    const Strides s = channel_last_layout ? strides_of(channel_last(1, len, c.channels))
                                          : strides_of(time_contiguous(1, c.channels, len));
    Case one = relayout(c, s, channel_last_layout ? "channel-last" : "time-contiguous");
    one.length = len;
    Run<T> r;
    Result<T> got;
    ASSERT_NO_FATAL_FAILURE(prepare(one, rng, r));
    const size_t first = n * static_cast<size_t>(c.channels);
    ASSERT_NO_FATAL_FAILURE(copy_inputs(r, all, [first](size_t i) { return first + i; }));
    ASSERT_NO_FATAL_FAILURE(launch(r, cudaStream_t{0}));
    ASSERT_NO_FATAL_FAILURE(download(r, got));
    ASSERT_NO_FATAL_FAILURE(verify(r, got));
    expect_same_answers(all, got_all, r, got, [first](size_t i) { return first + i; });
  }
}

/// `runs` calls of `c` (the first on stream 0, the others on a non-blocking stream, every output
/// restored to its state before the call in between) leave bitwise identical buffers and output
/// states, and the last one is right.
template <class T>
void check_deterministic(const Case& c, int runs) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(c.describe(), seed));
  Rng rng(seed);
  Run<T> r;
  ASSERT_NO_FATAL_FAILURE(prepare(c, rng, r));
  ASSERT_NO_FATAL_FAILURE(launch(r, cudaStream_t{0}));
  Result<T> first;
  ASSERT_NO_FATAL_FAILURE(download(r, first));
  Stream stream;
  ASSERT_TRUE(stream.create());
  Result<T> again;
  for (int k = 1; k < runs; ++k) {
    ASSERT_NO_FATAL_FAILURE(upload_all(r));
    ASSERT_NO_FATAL_FAILURE(launch(r, stream.get()));
    ASSERT_NO_FATAL_FAILURE(download(r, again));
    const std::string what = "run " + std::to_string(k + 1) + " against the first";
    for (size_t i = 0; i < first.bufs.size(); ++i) {
      int64_t bad = 0, at = -1;
      for (size_t j = 0; j < first.bufs[i].size(); ++j)
        if (!bitwise_equal(first.bufs[i][j], again.bufs[i][j]) && bad++ == 0)
          at = static_cast<int64_t>(j);
      EXPECT_EQ(bad, 0) << what << ": buffer " << i << " differs in " << bad << " cells; first at "
                        << at;
    }
    int64_t bad = 0;
    for (size_t j = 0; j < first.state_out.size(); ++j)
      bad += !bitwise_equal(first.state_out[j], again.state_out[j]);
    EXPECT_EQ(bad, 0) << what << ": the output states differ in " << bad << " cells";
  }
  ASSERT_NO_FATAL_FAILURE(verify(r, again));
}

// ---------------------------------------------------------------------------------------------
// Case lists

constexpr int64_t kChannels[] = {1, 3, 7, 8, 31, 33, 1536, 4097};
constexpr int64_t kTimes[] = {1, 2, 5, 100, 1000, 70000};
/// Elements of a case, at most (B * T * C).
constexpr int64_t kBudget = int64_t(1) << 22;

/// Every channel count with every length the budget allows (70000 steps for C <= 33 only), the
/// batch as large as 2M elements allow (up to 64 for the shortest sequences, 3 otherwise); the
/// cases cycle through the gate distributions and the state combinations.
std::vector<Case> channel_last_cases(bool backward, bool reverse) {
  std::vector<Case> cases;
  int i = reverse ? 1 : 0;
  for (int64_t ch : kChannels)
    for (int64_t t : kTimes) {
      if ((t == 70000 && ch > 33) || t * ch > kBudget) continue;
      if (backward && t == 2) continue;  // the backward pass's host reference is the dearer one
      const int64_t b = std::clamp<int64_t>((int64_t(1) << 21) / (t * ch), 1, t <= 5 ? 64 : 3);
      Case c = with_states(channel_last_case(backward, b, t, ch), i % (backward ? 8 : 4));
      c.reverse = reverse;
      c.gates = kAllGates[i % 5];
      c.own_stream = i % 3 == 2;
      ++i;
      cases.push_back(c);
    }
  return cases;
}

/// (B, T, C) shapes for the tests of one feature: few and many channels, short and long rows.
const std::tuple<int64_t, int64_t, int64_t> kFeatureShapes[] = {
    {2, 1000, 33}, {1, 70000, 4}, {3, 100, 1536}, {2, 5, 4097}};

/// Packed sequence lengths: empty sequences (leading, inside, trailing), length 1, a long one
/// among short ones, one sequence alone.
const std::vector<int64_t> kMixedLengths = {5, 0, 1, 3000, 0, 1, 17, 1, 250};
const std::vector<int64_t> kLengthSets[] = {
    kMixedLengths,       {70000}, {0, 0, 1, 2}, {100, 1, 0}, std::vector<int64_t>(40, 1),
    {3, 200000, 0, 7, 1}};

/// Packed cases: both offset types, both layouts, every length set (the long ones with few
/// channels), 1536 channels on shorter sequences; states in every combination.
std::vector<Case> packed_cases(bool backward, bool reverse) {
  std::vector<Case> cases;
  int i = reverse ? 2 : 0;
  for (bool offsets64 : {false, true})
    for (bool cl : {true, false}) {
      for (const std::vector<int64_t>& lengths : kLengthSets) {
        int64_t total = 0;
        for (int64_t n : lengths) total += n;
        for (int64_t ch : {1, 8, 33}) {
          if (total * ch > 2000000) continue;
          Case c = with_states(packed_case(backward, ch, lengths, cl, offsets64),
                               i % 3 == 0 ? (backward ? 7 : 3) : i % (backward ? 8 : 4));
          c.reverse = reverse;
          c.gates = kAllGates[i % 5];
          c.own_stream = i % 4 == 1;
          ++i;
          cases.push_back(c);
        }
      }
      Case c = with_states(packed_case(backward, 1536, {5, 0, 1, 300, 0, 1, 17}, cl, offsets64),
                           backward ? 7 : 3);
      c.reverse = reverse;
      cases.push_back(c);
    }
  return cases;
}

/// Packed channel-last calls without states on the vector path: the dense row kernel's packed
/// form (one chain per slab over every row, a reset at each sequence start). Whole and partial
/// slabs of channels; empty sequences at either end and between, one-row sequences (hundreds
/// starting in one tile), lengths on and off the tile sizes, one sequence across hundreds of
/// tiles; both offset types, every kind of gate, and non-finite inputs next to the boundaries
/// (a NaN gate where a sequence starts, an Inf token where one ends) that must stay in their
/// sequence.
std::vector<Case> packed_lean_cases(bool backward, bool reverse) {
  const std::vector<int64_t> kSets[] = {kMixedLengths,
                                        {70000},
                                        std::vector<int64_t>(600, 1),
                                        {3, 200000, 0, 7, 1},
                                        {0, 0, 300, 0, 5000, 0, 0},
                                        {257, 255, 1, 256, 511, 513, 128, 129, 0, 127}};
  std::vector<Case> cases;
  int i = reverse ? 1 : 0;
  for (const std::vector<int64_t>& lengths : kSets) {
    int64_t total = 0;
    for (int64_t n : lengths) total += n;
    for (int64_t ch : {8, 64, 1000, 1536}) {
      if (total * ch > 4000000) continue;
      Case c = packed_case(backward, ch, lengths, true, i % 2 == 1);
      c.reverse = reverse;
      c.gates = kAllGates[i % 5];
      c.own_stream = i % 4 == 1;
      ++i;
      cases.push_back(c);
    }
  }
  const std::vector<int64_t> cu = cu_seqlens(kMixedLengths);
  Case c = packed_case(backward, 64, kMixedLengths, true, reverse);
  const int kIn = backward ? int(kGradOut) : int(kTokens);
  c.pokes = {{kGates, 0, 5, cu[3], kNaN},      // the first of the long sequence
             {kIn, 0, 9, cu[3] - 1, kInf},     // the last of the one before
             {kIn, 0, 2, cu[3] + 1000, kNaN},  // inside it
             {kGates, 0, 7, cu[7], -kInf},     // a one-row sequence
             {kIn, 0, 60, cu[9] - 1, kNaN}};   // the last row
  c.reverse = reverse;
  c.label += ", non-finite at the boundaries";
  cases.push_back(c);
  return cases;
}

template <class T>
class LayoutTest : public RequiresGpu<> {};

using LayoutTypes = ::testing::Types<float, double, __half, __nv_bfloat16>;
TYPED_TEST_SUITE(LayoutTest, LayoutTypes);  // ctest names them LayoutTest.<Test><float> etc.

// ---------------------------------------------------------------------------------------------
// Forward

TYPED_TEST(LayoutTest, ChannelLastForward) {
  run_cases<TypeParam>(channel_last_cases(false, false));
}

TYPED_TEST(LayoutTest, ChannelLastReverse) {
  run_cases<TypeParam>(channel_last_cases(false, true));
}

/// A channel-last scan and the time-contiguous scan of the same tensor transposed agree.
TYPED_TEST(LayoutTest, ChannelLastMatchesTimeContiguous) {
  int i = 0;
  for (auto [b, t, ch] : {std::tuple<int64_t, int64_t, int64_t>{2, 1000, 3},
                          {2, 100, 33},
                          {1, 100, 1536},
                          {1, 70000, 8},
                          {3, 5, 4097}}) {
    Case c = with_states(channel_last_case(false, b, t, ch), i % 2 ? 3 : 2);
    c.reverse = i % 2 == 1;
    c.gates = Gates::kNearOne;
    ++i;
    run_relayout<TypeParam>(c, relayout(c, time_contiguous_strides(ch, t), "time-contiguous"));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// Rows wider than the channels: padding after each row (and each batch), a slice of a wider
/// tensor (at an odd column), padded inputs with a dense output. The padding stays poison.
std::vector<Case> padded_cases(bool backward) {
  std::vector<Case> cases;
  Case c = make_case(backward, 2, 100, 1000, Strides{1000 * 128 + 5, 1, 128}, "rows of 128");
  cases.push_back(c);
  c = make_case(backward, 2, 100, 500, Strides{500 * 160, 1, 160}, "columns [17, 117) of 160");
  for (ArrayView& v : c.arrays) v.offset = 17;
  cases.push_back(c);
  cases.push_back(make_case(backward, 1, 3, 70000, Strides{70000 * 4, 1, 4}, "rows of 4"));
  cases.push_back(make_case(backward, 3, 1536, 100, Strides{100 * 1600, 1, 1600}, "rows of 1600"));
  // Padded inputs, dense outputs (the shape's strides), or the other way round.
  c = channel_last_case(backward, 2, 1000, 100);
  c.label = "padded inputs, dense outputs";
  for (int k = 0; k < c.count(); ++k)
    if (!c.is_output(k)) own_view(c, k, k, 3, Strides{1000 * 128, 1, 128});
  cases.push_back(c);
  c = channel_last_case(backward, 2, 1000, 100);
  c.label = "dense inputs, padded outputs";
  for (int k = 0; k < c.count(); ++k)
    if (c.is_output(k)) own_view(c, k, k, 0, Strides{1000 * 104 + 7, 1, 104});
  cases.push_back(c);
  int i = 0;
  for (Case& k : cases) {
    k = with_states(k, backward ? 7 - i % 2 : 3 - i % 2);
    k.reverse = i % 2 == 1;
    ++i;
  }
  return cases;
}

TYPED_TEST(LayoutTest, PaddedRows) { run_cases<TypeParam>(padded_cases(false)); }

/// Per-array strides: gates and tokens the two halves of one (B, T, 2C) tensor (or of a
/// (B, 2C, T) one), out dense; and every array given strides of its own that differ from the
/// shape's (which then describe no array).
TYPED_TEST(LayoutTest, FusedProjection) {
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : {std::tuple<int64_t, int64_t, int64_t>{2, 100, 3},
                          {2, 1000, 64},
                          {1, 1000, 1536},
                          {1, 70000, 4}}) {
    const Strides fused{t * 2 * ch, 1, 2 * ch};
    Case c = channel_last_case(false, b, t, ch);
    c.label = "halves of (B, T, 2C)";
    own_view(c, kGates, 0, 0, fused);
    own_view(c, kTokens, 0, ch, fused);
    c = with_states(c, i % 4);
    c.reverse = i % 2 == 1;
    ++i;
    cases.push_back(c);
  }
  Case c = time_contiguous_case(false, 2, 5, 1000);
  c.label = "halves of (B, 2C, T)";
  own_view(c, kGates, 0, 0, Strides{2 * 5 * 1000, 1000, 1});
  own_view(c, kTokens, 0, 5 * 1000, Strides{2 * 5 * 1000, 1000, 1});
  cases.push_back(with_states(c, 3));
  // The shape's strides (time-contiguous, padded) describe none of the arrays.
  c = make_case(false, 2, 33, 1000, Strides{33 * 1024, 1024, 1}, "own strides override");
  own_view(c, kGates, 0, 0, Strides{1000 * 33, 1, 33});
  own_view(c, kTokens, 1, 1, Strides{1000 * 33, 1, 33});
  own_view(c, kOut, 2, 0, Strides{1000 * 40, 1, 40});
  c = with_states(c, 3);
  cases.push_back(c);
  c.reverse = true;
  cases.push_back(c);
  run_cases<TypeParam>(cases);
}

/// Out in place over the tokens half of a fused (B, T, 2C) tensor: out interleaves with gates
/// (the other half) but shares no element with it.
TYPED_TEST(LayoutTest, InPlaceOverFusedTokensHalf) {
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : {std::tuple<int64_t, int64_t, int64_t>{2, 100, 3},
                          {2, 1000, 64},
                          {1, 1000, 1536},
                          {1, 70000, 4}}) {
    const Strides fused{t * 2 * ch, 1, 2 * ch};
    Case c = channel_last_case(false, b, t, ch);
    c.label = "out in place over the tokens half of (B, T, 2C)";
    own_view(c, kGates, 0, 0, fused);
    own_view(c, kTokens, 0, ch, fused);
    c.arrays[kOut] = c.arrays[kTokens];
    c = with_states(c, 3 - i % 2);
    c.reverse = i % 2 == 0;
    ++i;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

/// Gates constant over time are drawn in [0.99, 0.999): a memory of 100 to 1000 steps, across
/// tiles and blocks. Closer to 1 the float answer itself degrades beyond the suite's tolerance: a
/// tiled scan forms a^k for k up to a tile's length, and with a constant a = 1 - 2^-20 the
/// rounding errors of those products all lean one way (a float model of 4096-step tiles at
/// T = 200000: relative L2 error 6e-5; the sequential float loop 4e-6), where gates drawn anew
/// at every step average them out.
constexpr double kConstantGateLo = 0.99, kConstantGateHi = 0.999;

/// Broadcast gates: constant over time (time_stride 0), shared by the batch (batch_stride 0),
/// one per channel (both); under channel-last and time-contiguous tokens.
std::vector<Case> broadcast_cases(bool backward) {
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : kFeatureShapes) {
    if (b == 1) b = 2;  // a batch to broadcast over
    for (int mode = 0; mode < 3; ++mode) {
      Case c = channel_last_case(backward, b, t, ch);
      const Strides g = mode == 0   ? Strides{ch, 1, 0}
                        : mode == 1 ? Strides{0, 1, ch}
                                    : Strides{0, 1, 0};
      c.label = mode == 0 ? "gates constant over time"
                          : (mode == 1 ? "gates shared by the batch" : "one gate per channel");
      own_view(c, kGates, kGates, 0, g);
      if (mode == 1) {
        c.gates = Gates::kNearOne;
      } else {  // see kConstantGateLo
        c.gate_lo = kConstantGateLo;
        c.gate_hi = kConstantGateHi;
      }
      c = with_states(c, (backward ? 7 : 3) - i % 2);
      c.reverse = i % 2 == 1;
      ++i;
      cases.push_back(c);
    }
  }
  for (int mode = 0; mode < 2; ++mode) {
    Case c = time_contiguous_case(backward, 2, 3, 1000);
    c.label = mode == 0 ? "gates constant over time" : "gates shared by the batch";
    own_view(c, kGates, kGates, 0, mode == 0 ? Strides{3, 1, 0} : Strides{0, 1000, 1});
    c.gates = Gates::kNearOne;
    c = with_states(c, backward ? 7 : 3);
    c.reverse = mode == 1;
    cases.push_back(c);
  }
  return cases;
}

TYPED_TEST(LayoutTest, BroadcastGates) { run_cases<TypeParam>(broadcast_cases(false)); }

/// Layouts neither time- nor channel-contiguous, and orders other than (B, ...): (C, T, B) with
/// time_stride = B, (T, B, C), a padded (T, C, B), every other column of a (B, T, 2C) tensor.
std::vector<Case> general_stride_cases(bool backward) {
  std::vector<Case> cases;
  constexpr int64_t B = 3, C = 5, T = 1000;
  cases.push_back(make_case(backward, B, C, T, Strides{1, T * B, B}, "(C, T, B)"));
  cases.push_back(make_case(backward, B, C, T, Strides{C, 1, B * C}, "(T, B, C)"));
  cases.push_back(
      make_case(backward, B, C, T, Strides{1, B + 1, C * (B + 1) + 2}, "(T, C, B) padded"));
  cases.push_back(make_case(backward, B, C, T, Strides{T * 2 * C, 2, 2 * C}, "every other column"));
  cases.push_back(make_case(backward, 2, 64, 5000, Strides{1, 5000 * 2, 2}, "(C, T, B)"));
  cases.push_back(make_case(backward, 4, 2, 70000, Strides{2, 1, 8}, "(T, B, C)"));
  int i = 0;
  for (Case& k : cases) {
    k = with_states(k, (backward ? 7 : 3) - i % 3);
    k.reverse = i % 2 == 1;
    ++i;
  }
  // Mixed: inputs (C, T, B), out channel-last.
  Case c = channel_last_case(backward, B, T, C);
  c.label = "(C, T, B) inputs, channel-last outputs";
  for (int k = 0; k < c.count(); ++k)
    if (!c.is_output(k)) own_view(c, k, k, 0, Strides{1, T * B, B});
  cases.push_back(with_states(c, backward ? 7 : 3));
  return cases;
}

TYPED_TEST(LayoutTest, GeneralStrides) { run_cases<TypeParam>(general_stride_cases(false)); }

/// Channel-last with pointers one element (or a few) off their buffers' alignment: all alike
/// (a common lead) or each its own.
TYPED_TEST(LayoutTest, Misaligned) {
  constexpr int64_t kOffsets[][3] = {{1, 1, 1}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {3, 5, 7}};
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : kFeatureShapes)
    for (const auto& o : kOffsets) {
      Case c = with_states(channel_last_case(false, b, t, ch), i % 4);
      for (int k = 0; k < 3; ++k) c.arrays[k].offset = o[k];
      c.reverse = i % 2 == 1;
      ++i;
      cases.push_back(c);
    }
  run_cases<TypeParam>(cases);
}

/// Channel-last in place (out == tokens): dense, misaligned, padded rows, packed.
TYPED_TEST(LayoutTest, InPlace) {
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : kFeatureShapes) {
    Case c = with_states(channel_last_case(false, b, t, ch), 3 - i % 2);
    c.arrays[kOut] = c.arrays[kTokens];
    c.reverse = i % 2 == 1;
    ++i;
    cases.push_back(c);
  }
  Case c = with_states(channel_last_case(false, 2, 1000, 33), 3);
  c.arrays[kTokens].offset = c.arrays[kGates].offset = 1;
  c.arrays[kOut] = c.arrays[kTokens];
  cases.push_back(c);
  c.reverse = true;
  cases.push_back(c);
  c = with_states(make_case(false, 2, 100, 1000, Strides{1000 * 128, 1, 128}, "rows of 128"), 3);
  c.arrays[kOut] = c.arrays[kTokens];
  cases.push_back(c);
  c = with_states(packed_case(false, 8, kMixedLengths, true, false), 3);
  c.arrays[kOut] = c.arrays[kTokens];
  cases.push_back(c);
  c.reverse = true;
  cases.push_back(c);
  run_cases<TypeParam>(cases);
}

/// Gates of 0, 1, -1, above 1 in magnitude (growth) and of both signs, mixed, on every path:
/// checked against the double reference within the bound every case meets (sequence_bound).
std::vector<Case> edge_gate_cases(bool backward) {
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : {std::tuple<int64_t, int64_t, int64_t>{2, 1000, 33},
                          {1, 5000, 8},
                          {4, 100, 1536},
                          {1, 70000, 3}})
    for (bool reverse : {false, true}) {
      Case c = with_states(channel_last_case(backward, b, t, ch), backward ? 7 - i % 2 : 3);
      c.edge_gates = true;
      c.reverse = reverse;
      ++i;
      cases.push_back(c);
    }
  for (bool reverse : {false, true}) {
    Case c = with_states(packed_case(backward, 8, kMixedLengths, reverse, reverse), 7);
    c.edge_gates = true;
    c.reverse = reverse;
    cases.push_back(c);
    // Time-contiguous: many short sequences, one block per sequence, the multi-block path forced
    // (Path::kMultiBlock) on two sequences of many tiles.
    for (auto [b, ch, t] : {std::tuple<int64_t, int64_t, int64_t>{1, 512, 300}, {2, 3, 1000}}) {
      c = with_states(time_contiguous_case(backward, b, ch, t), backward ? 7 : 3);
      c.edge_gates = true;
      c.reverse = reverse;
      cases.push_back(c);
    }
    c = with_states(time_contiguous_case(backward, 1, 2, 70000), backward ? 7 : 3);
    c.edge_gates = true;
    c.via = Via::kRowLookBack;
    c.reverse = reverse;
    cases.push_back(c);
  }
  return cases;
}

TYPED_TEST(LayoutTest, EdgeGates) { run_cases<TypeParam>(edge_gate_cases(false)); }

/// NaNs and Infs in some inputs stay in their own sequence (and channel, and packed sequence):
/// the outputs after them in scan order are non-finite, every other output exact. On every path:
/// the row path's kernels and, time-contiguous, one block per sequence and the multi-block path.
TYPED_TEST(LayoutTest, NonFiniteStaysInItsSequence) {
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    Case c = with_states(channel_last_case(false, 2, 1000, 33), 3);
    c.pokes = {{kTokens, 0, 5, 400, kNaN},
               {kGates, 1, 6, 700, kInf},
               {kGates, 1, 32, 10, kNaN},
               {kTokens, 0, 0, 999, -kInf},
               {kTokens, 1, 7, 0, kNaN}};
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(channel_last_case(false, 1, 100, 1536), 2);
    c.pokes = {{kTokens, 0, 777, 50, kNaN}, {kGates, 0, 778, 60, -kInf}};
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(channel_last_case(false, 1, 70000, 8), 3);  // across the blocks of a row
    c.pokes = {{kTokens, 0, 3, 40000, kNaN}, {kGates, 0, 4, 123, kInf}};
    c.reverse = reverse;
    cases.push_back(c);
    // Time-contiguous: one block per sequence; the multi-block path forced (Path::kMultiBlock)
    // on two sequences of many tiles; the library's own multi-block choice on 10^6 steps.
    c = with_states(time_contiguous_case(false, 2, 3, 1000), 3);
    c.pokes = {{kTokens, 0, 1, 400, kNaN},
               {kGates, 1, 2, 700, kInf},
               {kTokens, 0, 0, 999, -kInf},
               {kTokens, 1, 0, 0, kNaN}};
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(time_contiguous_case(false, 1, 2, 70000), 3);
    c.pokes = {{kTokens, 0, 1, 40000, kNaN}, {kGates, 0, 0, 123, kInf}};
    c.via = Via::kRowLookBack;
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(time_contiguous_case(false, 1, 1, 1000003), 3);
    c.pokes = {{kTokens, 0, 0, 500001, kNaN}};
    c.reverse = reverse;
    cases.push_back(c);
    // Packed: a NaN inside the long sequence must not reach its neighbours.
    const std::vector<int64_t> cu = cu_seqlens(kMixedLengths);
    for (bool cl : {true, false}) {
      c = with_states(packed_case(false, 8, kMixedLengths, cl, !cl), 3);
      c.pokes = {{kTokens, 0, 2, cu[3] + 100, kNaN},
                 {kGates, 0, 5, cu[2] + 0, kNaN},
                 {kTokens, 0, 1, cu[6] + 16, kInf}};
      c.reverse = reverse;
      cases.push_back(c);
    }
  }
  run_cases<TypeParam>(cases);
}

/// The edge cases of a path for many short time-contiguous sequences (`via`: the flat or the
/// serial kernel forced), appended to `cases`: in place, gates at the edges of their range, and
/// non-finite inputs at a sequence's first and last steps and inside it, in sequences that share
/// a tile, a vector or a block with their neighbours (T = 5, 7 and 33); states `combo`.
void many_sequence_edge_cases(std::vector<Case>& cases, bool backward, bool reverse, int combo,
                              Via via) {
  Case c = with_states(time_contiguous_case(backward, 1, 300, 33), combo);
  if (backward) {
    c.arrays[kGradGates] = c.arrays[kStates];
    c.arrays[kGradTokens] = c.arrays[kGradOut];
  } else {
    c.arrays[kOut] = c.arrays[kTokens];
  }
  c.label = "in place";
  c.reverse = reverse;
  c.via = via;
  cases.push_back(c);
  c = with_states(time_contiguous_case(backward, 2, 150, 13), combo);
  c.edge_gates = true;
  c.reverse = reverse;
  c.via = via;
  cases.push_back(c);
  for (int64_t t : {5, 7, 33}) {
    c = with_states(time_contiguous_case(backward, 2, 40, t), combo);
    const int b_in = backward ? int(kGradOut) : int(kTokens);  // the sequence's b: tokens, or g
    c.pokes = {{b_in, 0, 3, 0, kNaN},
               {kGates, 0, 9, t - 1, kInf},
               {b_in, 1, 20, t / 2, -kInf},
               {kGates, 1, 21, 0, kNaN},
               {b_in, 1, 39, t - 1, kNaN}};
    c.reverse = reverse;
    c.via = via;
    cases.push_back(c);
  }
}

/// The flat kernel forced (Via::kFlat) on time-contiguous calls: lengths from 1 to past a tile
/// (4096 elements in 16-bit, 2048 in float), sequence counts from 1 to a few thousand, so that
/// ranges hold one sequence, part of a tile or several tiles; every combination of states; both
/// directions; a lead common to every array (vector path) and leads that differ (scalar path);
/// in place; gates of every kind and non-finite inputs that must stay in their sequence.
std::vector<Case> flat_cases(bool backward) {
  constexpr std::tuple<int64_t, int64_t, int64_t> kShapes[] = {
      {1, 1, 1},     {3, 5, 1},    {2, 37, 7},   {1, 1000, 33}, {4, 64, 100}, {1, 100, 300},
      {2, 17, 1000}, {1, 3, 2047}, {1, 2, 5000}, {3, 1, 4100},  {1, 4096, 3}, {5, 7, 129}};
  const int states = backward ? 8 : 4;
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, ch, t] : kShapes)
    for (bool reverse : {false, true}) {
      Case c = with_states(time_contiguous_case(backward, b, ch, t), i++ % states);
      c.reverse = reverse;
      c.via = Via::kFlat;
      cases.push_back(c);
    }
  const int n = backward ? 5 : 3;
  for (auto [b, ch, t] :
       {std::tuple<int64_t, int64_t, int64_t>{2, 37, 7}, {1, 100, 300}, {1, 3, 2047}})
    for (int lead : {3, -1}) {  // every array 3 elements on; each a different lead
      Case c = with_states(time_contiguous_case(backward, b, ch, t), states - 1 - i++ % 2);
      for (int k = 0; k < n; ++k) c.arrays[k].offset = lead > 0 ? lead : k + 1;
      c.reverse = i % 2 == 0;
      c.via = Via::kFlat;
      cases.push_back(c);
    }
  for (bool reverse : {false, true}) {
    many_sequence_edge_cases(cases, backward, reverse, states - 1, Via::kFlat);
    for (Gates g : {Gates::kZero, Gates::kOne, Gates::kNegative}) {
      Case c = with_states(time_contiguous_case(backward, 1, 64, 100), states - 1);
      c.gates = g;
      c.reverse = reverse;
      c.via = Via::kFlat;
      cases.push_back(c);
    }
  }
  return cases;
}

TYPED_TEST(LayoutTest, FlatTiles) { run_cases<TypeParam>(flat_cases(false)); }
TYPED_TEST(LayoutTest, BackwardFlatTiles) { run_cases<TypeParam>(flat_cases(true)); }

/// The flat kernel forced, run after run: bitwise the same outputs and states.
TYPED_TEST(LayoutTest, FlatDeterministic) {
  for (bool backward : {false, true}) {
    Case c = with_states(time_contiguous_case(backward, 3, 1000, 77), backward ? 7 : 3);
    c.gates = Gates::kNearOne;
    c.via = Via::kFlat;
    check_deterministic<TypeParam>(c, 3);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// The serial kernel forced (Via::kSerial) on time-contiguous calls of `bytes`-byte elements:
/// lengths from 1 to the longest it takes (496 bytes a sequence), sequence counts from 1 to a few
/// thousand, so that blocks hold one sequence, a few, or all 32 and a part; every combination of
/// states; both directions; arrays on the 16-byte grid, all one element off it, and each at its
/// own lead (staged and stored at different offsets); in place; gates of every kind; non-finite
/// inputs that must stay in their sequence. Also the library's own choice where its rule takes
/// the kernel (40000 sequences of 33 on a GPU of up to 156 multiprocessors), through every entry
/// point.
std::vector<Case> serial_cases(bool backward, int bytes) {
  const int64_t longest = 496 / bytes;
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {
      {1, 1, 1},  {3, 5, 1},           {2, 37, 7},           {1, 1000, 33},        {4, 64, 24},
      {1, 3, 2},  {5, 7, longest},     {1, 33, longest - 1}, {2, 40, longest / 2}, {1, 4096, 3},
      {1, 31, 5}, {3, 11, longest / 3}};
  const int states = backward ? 8 : 4;
  const int n = backward ? 5 : 3;
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, ch, t] : shapes)
    for (int lead : {0, 1, -1}) {  // on the grid, all one element off it, each its own lead
      Case c = with_states(time_contiguous_case(backward, b, ch, t), i % states);
      for (int k = 0; k < n && lead != 0; ++k) c.arrays[k].offset = lead > 0 ? lead : k + 1;
      c.reverse = i % 2 == 1;
      c.gates = kAllGates[i % 5];
      c.via = Via::kSerial;
      ++i;
      cases.push_back(c);
    }
  for (bool reverse : {false, true}) {
    many_sequence_edge_cases(cases, backward, reverse, states - 1, Via::kSerial);
    for (Via via : {Via::kWorkspace, Via::kPlain, Via::kMallocAsync}) {
      Case c = with_states(time_contiguous_case(backward, 1, 40000, 33), i++ % states);
      c.reverse = reverse;
      c.via = via;
      cases.push_back(c);
    }
  }
  return cases;
}

TYPED_TEST(LayoutTest, SerialKernel) {
  run_cases<TypeParam>(serial_cases(false, int(sizeof(TypeParam))));
}
TYPED_TEST(LayoutTest, BackwardSerialKernel) {
  run_cases<TypeParam>(serial_cases(true, int(sizeof(TypeParam))));
}

/// The serial kernel forced, run after run: bitwise the same outputs and states.
TYPED_TEST(LayoutTest, SerialDeterministic) {
  for (bool backward : {false, true}) {
    Case c = with_states(time_contiguous_case(backward, 3, 1000, 17), backward ? 7 : 3);
    c.gates = Gates::kNearOne;
    c.via = Via::kSerial;
    check_deterministic<TypeParam>(c, 3);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// Packed (C, total) calls on the flat kernels, both modes: windows of one staged tile joined by a
/// look-back (the library's choice with a workspace), and whole sequences a block (Path::kFlat,
/// or no workspace; windows of one to eight tiles). The long sequences cross many windows and
/// runs of empty and one-element sequences fill others; arrays off the 16-byte grid alike (the
/// vector path, one lead for all) or apart (the scalar path); rows padded past total; both
/// offset types; every combination of states.
std::vector<Case> packed_flat_cases(bool backward, bool reverse) {
  std::vector<Case> cases;
  int i = reverse ? 1 : 0;
  const std::vector<int64_t> runs = {0, 1, 1, 0, 0, 2, 1, 5000, 1, 0, 3, 9000, 0};
  std::vector<int64_t> ones(3000, 1);
  ones.push_back(20000);
  ones.push_back(0);
  for (const std::vector<int64_t>& lengths :
       {runs, ones, std::vector<int64_t>{70000}, std::vector<int64_t>{7, 300, 4096, 1, 513}})
    for (int64_t ch : {1, 7, 64, 300}) {
      int64_t total = 0;
      for (int64_t n : lengths) total += n;
      if (total * ch > 4000000) continue;
      for (int variant = 0; variant < 3; ++variant) {
        Case c = with_states(packed_case(backward, ch, lengths, false, i % 2 == 1),
                             i % (backward ? 8 : 4));
        c.reverse = reverse;
        c.gates = kAllGates[i % 5];
        c.own_stream = i % 3 == 2;
        // windows joined by a look-back (a workspace), or whole sequences a block (forced, or
        // no workspace)
        c.via = i % 4 == 1 ? Via::kFlat : i % 4 == 3 ? Via::kPlain : Via::kWorkspace;
        if (variant == 1) {  // every array one element off the grid: the vector path
          for (ArrayView& v : c.arrays) v.offset = 1;
          c.label += ", all 1 element off the grid";
        } else if (variant == 2) {  // padded rows, arrays apart: the scalar path
          const Strides padded{ch * (total + 5), total + 5, 1};
          c.shape_strides = padded;
          for (int k = 0; k < kMaxArrays; ++k) c.arrays[k] = ArrayView{k, k % 2, padded, false};
          c.label += ", rows of total + 5, arrays apart on the grid";
        }
        ++i;
        cases.push_back(c);
      }
    }
  return cases;
}

TYPED_TEST(LayoutTest, PackedFlat) { run_cases<TypeParam>(packed_flat_cases(false, false)); }
TYPED_TEST(LayoutTest, PackedFlatReverse) { run_cases<TypeParam>(packed_flat_cases(false, true)); }
TYPED_TEST(LayoutTest, BackwardPackedFlat) { run_cases<TypeParam>(packed_flat_cases(true, false)); }
TYPED_TEST(LayoutTest, BackwardPackedFlatReverse) {
  run_cases<TypeParam>(packed_flat_cases(true, true));
}

/// Blocks per multiprocessor of the library's packed window kernel for elements T, direction
/// kBackward, with states or without, on the vector path (the kernel launch_flat_windows takes
/// under FlatTuning), from its registers and shared memory; and the blocks its launch bounds ask.
template <class T, bool kBackward, bool kStates>
void window_residency(int& blocks, int& bound) {
  namespace d = ascan::detail;
  using Flat = d::FlatTuning<int(sizeof(T)), kBackward>;
  using Problem = std::conditional_t<kBackward, d::FlatWindowBackward<T, false, true>,
                                     d::FlatWindowForward<T, false, true>>;
  constexpr d::FlatPolicy F = Flat::kPolicy;
  constexpr int kBound = d::window_min_blocks(F, true, kStates);
  constexpr int kItems = d::kWindowThreadItems<Problem, Flat>;
  constexpr int kShared = d::kWindowShared<Problem, Flat, kStates>;
  bound = kBound;
  blocks = -1;
  const auto kernel = &d::flat_window_kernel<Problem, F.threads, kItems, kBound, kStates>;
  ASSERT_TRUE(cuda_ok(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, F.threads, size_t(kShared)),
      "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
}

/// The packed windows' residency on sm_90, where they were tuned: at least the blocks per
/// multiprocessor each kernel had when its window was measured (bench/RESULTS.md, "Packed
/// windows' sizes"). A change to a window kernel's registers or static shared memory that costs
/// it a block shows here before any timing does (an asynchronous halo of 80 bytes more a block
/// cost the f32 backward window, then bounded for seven, its seventh and 0.07-0.10 of the copy,
/// bench/RESULTS.md). The minimums are the residency measured on an H100 and an H200
/// (bench/results/gpu_tests_34c8cac_h100.log, gpu_tests_bc793a2.log), but for the f32 backward
/// window, since bounded for six: 80 registers a thread hold six blocks (the shared memory
/// would hold seven). The 16-bit forward window's shared memory (36 KiB of slots, about 1.1 KiB
/// static and the 1 KiB reserved a block) holds five blocks where its launch bounds ask registers
/// for six; the 16-bit backward window's holds six with no byte to spare; the f32 forward window,
/// bounded for four, holds five.
TEST(WindowResidency, Sm90) {
  if (device_count() == 0) GTEST_SKIP() << no_device_reason();
  cudaDeviceProp prop{};
  ASSERT_TRUE(cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"));
  if (prop.major != 9 || prop.minor != 0)
    GTEST_SKIP() << "the windows' residency is pinned for sm_90, where they were tuned (this is sm_"
                 << prop.major << prop.minor << ")";
  struct Row {
    const char* name;
    void (*get)(int&, int&);
    int blocks;  // at least
  };
  const Row rows[] = {
      {"f32 forward", &window_residency<float, false, false>, 5},
      {"f32 forward, states", &window_residency<float, false, true>, 4},
      {"f32 backward", &window_residency<float, true, false>, 6},
      {"f32 backward, states", &window_residency<float, true, true>, 6},
      {"bf16 forward", &window_residency<__nv_bfloat16, false, false>, 5},
      {"bf16 forward, states", &window_residency<__nv_bfloat16, false, true>, 5},
      {"bf16 backward", &window_residency<__nv_bfloat16, true, false>, 6},
      {"bf16 backward, states", &window_residency<__nv_bfloat16, true, true>, 5},
      {"f16 backward", &window_residency<__half, true, false>, 6},
  };
  for (const Row& r : rows) {
    int blocks = 0, bound = 0;
    r.get(blocks, bound);
    if (::testing::Test::HasFatalFailure()) return;
    std::printf("window residency %-22s %d blocks a multiprocessor (launch bounds ask %d)\n",
                r.name, blocks, bound);
    EXPECT_GE(blocks, r.blocks) << r.name;
  }
}

TYPED_TEST(LayoutTest, PackedForward) { run_cases<TypeParam>(packed_cases(false, false)); }

TYPED_TEST(LayoutTest, PackedReverse) { run_cases<TypeParam>(packed_cases(false, true)); }

TYPED_TEST(LayoutTest, PackedRowsWithoutStates) {
  run_cases<TypeParam>(packed_lean_cases(false, false));
}

TYPED_TEST(LayoutTest, PackedRowsWithoutStatesReverse) {
  run_cases<TypeParam>(packed_lean_cases(false, true));
}

/// A short packed batch without states, both directions and offset types: small enough for
/// compute-sanitizer (the GPU round runs memcheck and racecheck on it and its backward twin).
std::vector<Case> packed_lean_short_cases(bool backward) {
  std::vector<Case> cases;
  for (bool reverse : {false, true})
    for (bool offsets64 : {false, true}) {
      Case c = packed_case(backward, 64, kMixedLengths, true, offsets64);
      c.reverse = reverse;
      cases.push_back(c);
    }
  return cases;
}

TYPED_TEST(LayoutTest, PackedRowsWithoutStatesShort) {
  run_cases<TypeParam>(packed_lean_short_cases(false));
}

/// A packed batch agrees with scanning each of its sequences alone.
TYPED_TEST(LayoutTest, PackedMatchesEachSequenceAlone) {
  Case c = with_states(packed_case(false, 8, kMixedLengths, true, false), 3);
  run_packed_against_alone<TypeParam>(c);
  c = with_states(packed_case(false, 4, {3, 200000, 0, 7, 1}, false, true), 3);
  c.reverse = true;
  c.gates = Gates::kNearOne;
  run_packed_against_alone<TypeParam>(c);
  c = with_states(packed_case(false, 1536, {5, 0, 1, 300, 17}, true, true), 1);
  run_packed_against_alone<TypeParam>(c);
  c = packed_case(false, 64, kMixedLengths, true, false);  // no states: the dense row kernel
  c.gates = Gates::kNearOne;
  run_packed_against_alone<TypeParam>(c);
}

/// The three entry points (two-phase workspace, malloc_async, plain) on channel-last, fused,
/// broadcast and packed calls; few long sequences among them (the multi-block path).
std::vector<Case> entry_point_cases(bool backward) {
  std::vector<Case> cases;
  int i = 0;
  for (Via via : {Via::kWorkspace, Via::kMallocAsync, Via::kPlain}) {
    std::vector<Case> some;
    some.push_back(channel_last_case(backward, 1, 70000, 8));
    some.push_back(channel_last_case(backward, 4, 100, 1536));
    Case c = channel_last_case(backward, 1, 200000, 2);
    own_view(c, kGates, kGates, 0, Strides{2, 1, 0});  // constant gates over a long row
    c.gate_lo = kConstantGateLo;
    c.gate_hi = kConstantGateHi;
    some.push_back(c);
    some.push_back(packed_case(backward, 8, {3, 200000, 0, 7, 1}, true, true));
    some.push_back(packed_case(backward, 33, kMixedLengths, false, false));
    for (Case& k : some) {
      k = with_states(k, backward ? 7 : 3);
      k.via = via;
      k.reverse = i % 2 == 1;
      k.own_stream = i % 3 == 0;
      ++i;
      cases.push_back(k);
    }
  }
  return cases;
}

TYPED_TEST(LayoutTest, EntryPoints) { run_cases<TypeParam>(entry_point_cases(false)); }

/// Both modes of the row path forced on the same calls (walking: one block per chain of a
/// sequence's slab, carrying the state; looking back: one block per tile), whatever the
/// dispatch would pick for them: channel-last in both directions, padded rows (a batch stride
/// other than length times time stride), broadcast gates, packed sequences.
std::vector<Case> row_mode_cases(bool backward) {
  std::vector<Case> some;
  for (bool reverse : {false, true})
    for (const Case& c : channel_last_cases(backward, reverse))
      if (c.length != 2 && c.length != 1000) some.push_back(c);
  for (const Case& c : padded_cases(backward)) some.push_back(c);
  for (const Case& c : broadcast_cases(backward)) some.push_back(c);
  some.push_back(with_states(packed_case(backward, 33, kMixedLengths, false, true), 3));
  some.push_back(packed_case(backward, 8, {3, 200000, 0, 7, 1}, true, false));
  std::vector<Case> cases;
  for (Via via : {Via::kRowWalk, Via::kRowLookBack})
    for (Case c : some) {
      c.via = via;
      cases.push_back(c);
    }
  return cases;
}

/// Calls the dense row kernel takes in its tall tiles and narrow blocks (row_dispatch.cuh's
/// dense_tile): lengths at and around the tiles' multiples (128, 192, 256 and 384 rows) with few
/// chains and with 64, a slab left part empty (40 channels, 8), both directions, every state,
/// through the dispatch's own choice and with the look-back forced; packed batches with a long
/// sequence.
std::vector<Case> tall_tile_cases(bool backward) {
  std::vector<Case> cases;
  const std::vector<int64_t> lengths = backward
                                           ? std::vector<int64_t>{2048, 2049, 2303, 2560, 70001}
                                           : std::vector<int64_t>{4096, 4224, 4225, 4607, 70001};
  int i = 0;
  for (int64_t t : lengths)
    for (auto [b, ch] : {std::pair<int64_t, int64_t>{2, 40}, {1, 256}}) {
      if (t > 5000 && ch > 40) continue;
      Case c = with_states(channel_last_case(backward, b, t, ch), i % (backward ? 8 : 4));
      c.reverse = i % 2 == 1;
      c.gates = kAllGates[i % 5];
      c.via = i % 3 == 2 ? Via::kRowLookBack : Via::kWorkspace;
      ++i;
      cases.push_back(c);
    }
  // many chains (64 sequences of one slab): the narrow blocks, 8 rows and taller (forward 16 rows
  // from 2048 positions in f32 and double and 4096 in 16-bit, backward 12 from 2048 and 8192)
  for (int64_t t :
       backward ? std::vector<int64_t>{200, 2113, 8200} : std::vector<int64_t>{200, 2113, 4225}) {
    Case c = with_states(channel_last_case(backward, 64, t, 8), i % (backward ? 8 : 4));
    c.reverse = i % 2 == 1;
    c.gates = kAllGates[i % 5];
    ++i;
    cases.push_back(c);
  }
  cases.push_back(packed_case(backward, 16, {3, 5000, 0, 700, 1, 2305}, true, false));
  Case r = packed_case(backward, 64, {2, 3000, 257, 1}, true, true);
  r.reverse = true;
  cases.push_back(r);
  return cases;
}

TYPED_TEST(LayoutTest, TallTiles) { run_cases<TypeParam>(tall_tile_cases(false)); }
TYPED_TEST(LayoutTest, BackwardTallTiles) { run_cases<TypeParam>(tall_tile_cases(true)); }

TYPED_TEST(LayoutTest, RowModes) { run_cases<TypeParam>(row_mode_cases(false)); }
TYPED_TEST(LayoutTest, BackwardRowModes) { run_cases<TypeParam>(row_mode_cases(true)); }

/// Few channels and long rows (many blocks join along time), and a long packed sequence: runs
/// are bitwise identical.
TYPED_TEST(LayoutTest, Deterministic) {
  for (bool reverse : {false, true}) {
    Case c = with_states(channel_last_case(false, 1, 200000, 64), 3);
    c.gates = Gates::kNearOne;
    c.reverse = reverse;
    check_deterministic<TypeParam>(c, 3);
    if (::testing::Test::HasFatalFailure()) return;
  }
  Case c = with_states(packed_case(false, 16, {3, 200000, 0, 7, 1}, true, false), 3);
  c.gates = Gates::kNearOne;
  check_deterministic<TypeParam>(c, 3);
  if (::testing::Test::HasFatalFailure()) return;
  c = packed_case(false, 16, {3, 200000, 0, 7, 1}, true, false);  // the dense row kernel
  c.gates = Gates::kNearOne;
  check_deterministic<TypeParam>(c, 3);
}

// ---------------------------------------------------------------------------------------------
// Backward

TYPED_TEST(LayoutTest, BackwardChannelLastForward) {
  run_cases<TypeParam>(channel_last_cases(true, false));
}

TYPED_TEST(LayoutTest, BackwardChannelLastReverse) {
  run_cases<TypeParam>(channel_last_cases(true, true));
}

TYPED_TEST(LayoutTest, BackwardChannelLastMatchesTimeContiguous) {
  int i = 0;
  for (auto [b, t, ch] : {std::tuple<int64_t, int64_t, int64_t>{2, 1000, 3},
                          {2, 100, 33},
                          {1, 100, 1536},
                          {1, 70000, 8},
                          {3, 5, 4097}}) {
    Case c = with_states(channel_last_case(true, b, t, ch), 7 - i % 2);
    c.reverse = i % 2 == 1;
    c.gates = Gates::kNearOne;
    ++i;
    run_relayout<TypeParam>(c, relayout(c, time_contiguous_strides(ch, t), "time-contiguous"));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TYPED_TEST(LayoutTest, BackwardPaddedRows) { run_cases<TypeParam>(padded_cases(true)); }

/// Per-array strides in the backward pass: gates the first half of a fused (B, T, 2C) input,
/// the other arrays dense; or every array given strides other than the shape's.
TYPED_TEST(LayoutTest, BackwardFusedProjection) {
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : {std::tuple<int64_t, int64_t, int64_t>{2, 100, 3},
                          {2, 1000, 64},
                          {1, 1000, 1536},
                          {1, 70000, 4}}) {
    Case c = channel_last_case(true, b, t, ch);
    c.label = "gates a half of (B, T, 2C)";
    own_view(c, kGates, kGates, ch, Strides{t * 2 * ch, 1, 2 * ch});
    c = with_states(c, 7 - i % 4);
    c.reverse = i % 2 == 1;
    ++i;
    cases.push_back(c);
  }
  Case c = make_case(true, 2, 33, 1000, Strides{33 * 1024, 1024, 1}, "own strides override");
  own_view(c, kGates, 0, 0, Strides{1000 * 66, 1, 66});
  own_view(c, kStates, 1, 1, Strides{1000 * 33, 1, 33});
  own_view(c, kGradOut, 2, 0, Strides{33, 1, 66});  // (T, B, C)
  own_view(c, kGradGates, 3, 0, Strides{1000 * 40, 1, 40});
  own_view(c, kGradTokens, 4, 2, Strides{1000 * 33, 1, 33});
  c = with_states(c, 7);
  cases.push_back(c);
  c.reverse = true;
  cases.push_back(c);
  run_cases<TypeParam>(cases);
}

/// grad_gates and grad_tokens the two halves of one (B, T, 2C) gradient tensor (the gradient of
/// a fused projection): interleaved outputs that share no element.
TYPED_TEST(LayoutTest, BackwardFusedGradients) {
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : {std::tuple<int64_t, int64_t, int64_t>{2, 100, 3},
                          {2, 1000, 64},
                          {1, 1000, 1536},
                          {1, 70000, 4}}) {
    const Strides fused{t * 2 * ch, 1, 2 * ch};
    Case c = channel_last_case(true, b, t, ch);
    c.label = "gates and the gradients halves of (B, T, 2C) tensors";
    own_view(c, kGates, kGates, 0, fused);
    own_view(c, kGradGates, kGradGates, 0, fused);
    own_view(c, kGradTokens, kGradGates, ch, fused);
    c = with_states(c, 7 - i % 4);
    c.reverse = i % 2 == 1;
    ++i;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(LayoutTest, BackwardBroadcastGates) { run_cases<TypeParam>(broadcast_cases(true)); }

TYPED_TEST(LayoutTest, BackwardGeneralStrides) { run_cases<TypeParam>(general_stride_cases(true)); }

TYPED_TEST(LayoutTest, BackwardMisaligned) {
  constexpr int64_t kOffsets[][5] = {
      {1, 1, 1, 1, 1}, {1, 0, 0, 0, 0}, {0, 0, 0, 1, 0}, {3, 5, 7, 2, 1}};
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : kFeatureShapes)
    for (const auto& o : kOffsets) {
      Case c = with_states(channel_last_case(true, b, t, ch), i % 8);
      for (int k = 0; k < 5; ++k) c.arrays[k].offset = o[k];
      c.reverse = i % 2 == 1;
      ++i;
      cases.push_back(c);
    }
  run_cases<TypeParam>(cases);
}

/// Channel-last in place: grad_gates over states, grad_tokens over grad_out, both; packed too.
TYPED_TEST(LayoutTest, BackwardInPlace) {
  std::vector<Case> cases;
  int i = 0;
  for (auto [b, t, ch] : kFeatureShapes)
    for (int alias = 0; alias < 3; ++alias) {
      Case c = with_states(channel_last_case(true, b, t, ch), 7 - i % 2);
      if (alias != 1) c.arrays[kGradGates] = c.arrays[kStates];
      if (alias != 0) c.arrays[kGradTokens] = c.arrays[kGradOut];
      c.label = alias == 0 ? "grad_gates = states"
                           : (alias == 1 ? "grad_tokens = grad_out" : "both in place");
      c.reverse = i % 2 == 1;
      ++i;
      cases.push_back(c);
    }
  for (bool reverse : {false, true}) {
    Case c = with_states(packed_case(true, 8, kMixedLengths, !reverse, reverse), 7);
    c.arrays[kGradGates] = c.arrays[kStates];
    c.arrays[kGradTokens] = c.arrays[kGradOut];
    c.reverse = reverse;
    cases.push_back(c);
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(LayoutTest, BackwardEdgeGates) { run_cases<TypeParam>(edge_gate_cases(true)); }

/// NaNs and Infs in the upstream gradient (and a gate) stay in their own sequence: the gradients
/// before them (in the backward pass's order) are non-finite, every other one exact.
TYPED_TEST(LayoutTest, BackwardNonFiniteStaysInItsSequence) {
  std::vector<Case> cases;
  for (bool reverse : {false, true}) {
    Case c = with_states(channel_last_case(true, 2, 1000, 33), 7);
    c.pokes = {{kGradOut, 0, 5, 400, kNaN},
               {kGradOut, 1, 6, 700, kInf},
               {kGradOut, 0, 0, 999, -kInf},
               {kGradOut, 1, 7, 0, kNaN},
               {kGates, 1, 20, 500, kNaN}};
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(channel_last_case(true, 1, 100, 1536), 6);
    c.pokes = {{kGradOut, 0, 777, 50, kNaN}, {kGradOut, 0, 778, 60, -kInf}};
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(channel_last_case(true, 1, 70000, 8), 7);
    c.pokes = {{kGradOut, 0, 3, 40000, kNaN}, {kGradOut, 0, 4, 123, kInf}};
    c.reverse = reverse;
    cases.push_back(c);
    // Time-contiguous: one block per sequence; the multi-block path forced and chosen.
    c = with_states(time_contiguous_case(true, 2, 3, 1000), 7);
    c.pokes = {{kGradOut, 0, 1, 400, kNaN},
               {kGradOut, 1, 2, 700, kInf},
               {kGradOut, 1, 0, 0, kNaN},
               {kGates, 0, 2, 500, kNaN}};
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(time_contiguous_case(true, 1, 2, 70000), 7);
    c.pokes = {{kGradOut, 0, 1, 40000, kNaN}, {kGradOut, 0, 0, 123, kInf}};
    c.via = Via::kRowLookBack;
    c.reverse = reverse;
    cases.push_back(c);
    c = with_states(time_contiguous_case(true, 1, 1, 1000003), 7);
    c.pokes = {{kGradOut, 0, 0, 500001, kNaN}};
    c.reverse = reverse;
    cases.push_back(c);
    const std::vector<int64_t> cu = cu_seqlens(kMixedLengths);
    for (bool cl : {true, false}) {
      c = with_states(packed_case(true, 8, kMixedLengths, cl, !cl), 7);
      c.pokes = {{kGradOut, 0, 2, cu[3] + 100, kNaN},
                 {kGradOut, 0, 5, cu[2], kNaN},
                 {kGradOut, 0, 1, cu[6] + 16, kInf}};
      c.reverse = reverse;
      cases.push_back(c);
    }
  }
  run_cases<TypeParam>(cases);
}

TYPED_TEST(LayoutTest, BackwardPackedForward) { run_cases<TypeParam>(packed_cases(true, false)); }

TYPED_TEST(LayoutTest, BackwardPackedReverse) { run_cases<TypeParam>(packed_cases(true, true)); }

TYPED_TEST(LayoutTest, BackwardPackedRowsWithoutStates) {
  run_cases<TypeParam>(packed_lean_cases(true, false));
}

TYPED_TEST(LayoutTest, BackwardPackedRowsWithoutStatesReverse) {
  run_cases<TypeParam>(packed_lean_cases(true, true));
}

TYPED_TEST(LayoutTest, BackwardPackedRowsWithoutStatesShort) {
  run_cases<TypeParam>(packed_lean_short_cases(true));
}

TYPED_TEST(LayoutTest, BackwardPackedMatchesEachSequenceAlone) {
  Case c = with_states(packed_case(true, 8, kMixedLengths, true, false), 7);
  run_packed_against_alone<TypeParam>(c);
  c = with_states(packed_case(true, 4, {3, 200000, 0, 7, 1}, false, true), 7);
  c.reverse = true;
  c.gates = Gates::kNearOne;
  run_packed_against_alone<TypeParam>(c);
  c = with_states(packed_case(true, 1536, {5, 0, 1, 300, 17}, true, true), 6);
  run_packed_against_alone<TypeParam>(c);
  c = packed_case(true, 64, kMixedLengths, true, true);  // no states: the dense row kernel
  c.reverse = true;
  run_packed_against_alone<TypeParam>(c);
}

TYPED_TEST(LayoutTest, BackwardEntryPoints) { run_cases<TypeParam>(entry_point_cases(true)); }

TYPED_TEST(LayoutTest, BackwardDeterministic) {
  for (bool reverse : {false, true}) {
    Case c = with_states(channel_last_case(true, 1, 200000, 64), 7);
    c.gates = Gates::kNearOne;
    c.reverse = reverse;
    check_deterministic<TypeParam>(c, 3);
    if (::testing::Test::HasFatalFailure()) return;
  }
  Case c = with_states(packed_case(true, 16, {3, 200000, 0, 7, 1}, true, false), 7);
  c.gates = Gates::kNearOne;
  check_deterministic<TypeParam>(c, 3);
  if (::testing::Test::HasFatalFailure()) return;
  c = packed_case(true, 16, {3, 200000, 0, 7, 1}, true, false);  // the dense row kernel
  c.gates = Gates::kNearOne;
  check_deterministic<TypeParam>(c, 3);
}

}  // namespace
}  // namespace ascan::test
