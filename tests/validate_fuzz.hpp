// tests/validate_fuzz.hpp: random argument sets for can_implement, and an oracle that judges them.
//
// A Case is one call described by integers: sizes, strides, fake pointer values (never read or
// written: can_implement touches no memory), state layout, packed sequences. Gen draws them from
// small values, powers of two, values near INT64_MAX and negative ones, with layouts that
// interleave, alias and overlap often. judge() restates the contract that validate.cuh documents
// in 128-bit arithmetic (no overflow anywhere), deciding whether two arrays share an element by
// enumeration, not by validate.cuh's algorithm:
//   - two arrays with the same sizes and strides (in any dimension order): exactly, by
//     enumerating all but one coordinate difference and solving for the last; undecided when
//     that enumeration is too long (a few huge sizes);
//   - other arrays: by their byte intervals, the conservative rule the header documents.
// shares_element() is the brute force: it lists every element address of two small arrays.
// Plain C++17 (plus __int128) on the host; no GPU, no CUDA runtime call.
#pragma once

#include <ascan/device/scan_args.cuh>
#include <ascan/device/validate.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace ascan::fuzz {

__extension__ typedef __int128 i128;

constexpr i128 kI64Max = INT64_MAX;
constexpr i128 kAddressMax = static_cast<i128>(static_cast<uint64_t>(UINTPTR_MAX));

/// a * b for two 64-bit values (up to 2^126 in magnitude) clamped to 2^120, so that a sum of three
/// such terms cannot overflow 128 bits; every bound it is compared with is far below the clamp.
inline i128 clamped_product(i128 a, i128 b) {
  const i128 limit = i128(1) << 120, p = a * b;
  return p > limit ? limit : (p < -limit ? -limit : p);
}

/// A seed from ASCAN_TEST_SEED when set (to replay a failure), else a fresh one.
inline uint64_t fresh_seed() {
  if (const char* env = std::getenv("ASCAN_TEST_SEED"); env != nullptr && *env != '\0')
    return std::strtoull(env, nullptr, 0);
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
}

/// A (B, C, T) sequence array: its address (0: null) and its own strides when it has them.
struct Array {
  uint64_t addr = 0;
  bool own = false;
  Strides strides{};
};

/// One call of can_implement.
struct Case {
  bool backward = false;
  int64_t bytes = 4;  ///< sizeof(T); the four types have alignof(T) == sizeof(T)
  Shape shape{};
  /// forward: gates, tokens, out; backward: gates, states, grad_out, grad_gates, grad_tokens
  Array seq[5];
  /// forward: initial_state, final_state; backward: initial_state, grad_final_state,
  /// grad_initial_state (0: null)
  uint64_t state[3] = {0, 0, 0};
  StateLayout state_layout{};
  uint64_t offsets32 = 0, offsets64 = 0;
  int64_t count = 0;

  int seq_count() const { return backward ? 5 : 3; }
  bool seq_output(int i) const { return backward ? i >= 3 : i == 2; }
  int state_count() const { return backward ? 3 : 2; }
  int state_written() const { return backward ? 2 : 1; }
  bool packed_active() const { return offsets32 != 0 || offsets64 != 0 || count != 0; }
  Strides strides(int i) const {
    return seq[i].own ? seq[i].strides
                      : Strides{shape.batch_stride, shape.channel_stride, shape.time_stride};
  }
};

inline std::string describe(const Case& c) {
  static const char* kSeq[2][5] = {{"gates", "tokens", "out", "", ""},
                                   {"gates", "states", "grad_out", "grad_gates", "grad_tokens"}};
  static const char* kState[2][3] = {{"initial_state", "final_state", ""},
                                     {"initial_state", "grad_final_state", "grad_initial_state"}};
  const int b = c.backward ? 1 : 0;
  std::ostringstream o;
  o << (c.backward ? "backward" : "forward") << " sizeof " << c.bytes << "; shape (B "
    << c.shape.batch << ", C " << c.shape.channels << ", T " << c.shape.length << ") strides ("
    << c.shape.batch_stride << ", " << c.shape.channel_stride << ", " << c.shape.time_stride
    << ")";
  for (int i = 0; i < c.seq_count(); ++i) {
    o << "; " << kSeq[b][i] << " 0x" << std::hex << c.seq[i].addr << std::dec;
    if (c.seq[i].own)
      o << " own (" << c.seq[i].strides.batch_stride << ", " << c.seq[i].strides.channel_stride
        << ", " << c.seq[i].strides.time_stride << ")";
  }
  for (int i = 0; i < c.state_count(); ++i)
    if (c.state[i] != 0) o << "; " << kState[b][i] << " 0x" << std::hex << c.state[i] << std::dec;
  o << "; state layout (" << c.state_layout.batch_stride << ", " << c.state_layout.channel_stride
    << ")";
  if (c.packed_active())
    o << "; packed count " << c.count << " offsets32 0x" << std::hex << c.offsets32
      << " offsets64 0x" << c.offsets64 << std::dec;
  return o.str();
}

template <class T>
T* fake(uint64_t addr) {  // an address as a pointer; never dereferenced, no pointer arithmetic
  return reinterpret_cast<T*>(static_cast<uintptr_t>(addr));
}

template <class T>
ScanArgs<T> forward_args(const Case& c) {
  ScanArgs<T> a;
  a.gates = fake<const T>(c.seq[0].addr);
  a.tokens = fake<const T>(c.seq[1].addr);
  a.out = fake<T>(c.seq[2].addr);
  a.shape = c.shape;
  a.initial_state = fake<const T>(c.state[0]);
  a.final_state = fake<T>(c.state[1]);
  a.state_layout = c.state_layout;
  if (c.seq[0].own) a.gates_strides = c.seq[0].strides;
  if (c.seq[1].own) a.tokens_strides = c.seq[1].strides;
  if (c.seq[2].own) a.out_strides = c.seq[2].strides;
  a.packed = Packed{fake<const int32_t>(c.offsets32), fake<const int64_t>(c.offsets64), c.count};
  return a;
}

template <class T>
ScanBackwardArgs<T> backward_args(const Case& c) {
  ScanBackwardArgs<T> a;
  a.gates = fake<const T>(c.seq[0].addr);
  a.states = fake<const T>(c.seq[1].addr);
  a.grad_out = fake<const T>(c.seq[2].addr);
  a.grad_gates = fake<T>(c.seq[3].addr);
  a.grad_tokens = fake<T>(c.seq[4].addr);
  a.shape = c.shape;
  a.initial_state = fake<const T>(c.state[0]);
  a.grad_final_state = fake<const T>(c.state[1]);
  a.grad_initial_state = fake<T>(c.state[2]);
  a.state_layout = c.state_layout;
  std::optional<Strides>* own[5] = {&a.gates_strides, &a.states_strides, &a.grad_out_strides,
                                    &a.grad_gates_strides, &a.grad_tokens_strides};
  for (int i = 0; i < 5; ++i)
    if (c.seq[i].own) *own[i] = c.seq[i].strides;
  a.packed = Packed{fake<const int32_t>(c.offsets32), fake<const int64_t>(c.offsets64), c.count};
  return a;
}

// ---------------------------------------------------------------------------------------------
// The oracle

/// A view in 128-bit arithmetic: up to three (size, stride) dims, its address, the bytes it spans.
struct OView {
  bool present = false;
  i128 addr = 0, lo = 0, hi = 0;
  int nd = 0;
  i128 size[3] = {0, 0, 0}, stride[3] = {0, 0, 0};
  int64_t elem = 1;  ///< bytes per element

  /// The number of positions, or more than `limit` (without overflow) when it is larger.
  i128 positions(i128 limit) const {
    i128 p = 1;
    for (int k = 0; k < nd; ++k) {
      if (size[k] > limit) return limit + 1;
      p *= size[k];
      if (p > limit) return limit + 1;
    }
    return p;
  }
};

/// The dims of more than one position, sorted: the set of offsets as a canonical list.
struct Lay {
  int n = 0;
  i128 size[3] = {0, 0, 0}, stride[3] = {0, 0, 0};
};

inline Lay lay_of(const OView& v) {
  Lay l;
  for (int k = 0; k < v.nd; ++k)
    if (v.size[k] > 1) {
      l.size[l.n] = v.size[k];
      l.stride[l.n] = v.stride[k];
      ++l.n;
    }
  for (int i = 0; i < l.n; ++i)  // ascending stride, then size
    for (int j = i + 1; j < l.n; ++j)
      if (l.stride[j] < l.stride[i] || (l.stride[j] == l.stride[i] && l.size[j] < l.size[i])) {
        std::swap(l.stride[i], l.stride[j]);
        std::swap(l.size[i], l.size[j]);
      }
  return l;
}

inline bool lay_same(const Lay& x, const Lay& y) {
  if (x.n != y.n) return false;
  for (int k = 0; k < x.n; ++k)
    if (x.size[k] != y.size[k] || x.stride[k] != y.stride[k]) return false;
  return true;
}

/// The documented rule for outputs: by ascending stride, each dim of more than one position steps
/// over all the positions below it.
inline bool lay_nested(const Lay& l) {
  i128 below = 0;
  for (int k = 0; k < l.n; ++k) {
    if (l.stride[k] <= below) return false;
    below += (l.size[k] - 1) * l.stride[k];
  }
  return true;
}

enum class Tri { kNo, kYes, kUnknown };

/// Whether k = sum d_i * stride_i with |d_i| < size_i: all but the largest dim enumerated, the
/// largest solved by division. kUnknown past `budget` combinations.
inline Tri in_difference_set(const Lay& l, i128 k, i128 budget = 20000) {
  if (l.n == 0) return k == 0 ? Tri::kYes : Tri::kNo;
  int free = 0;
  for (int i = 1; i < l.n; ++i)
    if (l.size[i] > l.size[free]) free = i;
  int other[2] = {-1, -1}, m = 0;
  for (int i = 0; i < l.n; ++i)
    if (i != free) other[m++] = i;
  i128 combos = 1;
  for (int i = 0; i < m; ++i) {
    if (l.size[other[i]] > budget) return Tri::kUnknown;
    combos *= 2 * l.size[other[i]] - 1;
    if (combos > budget) return Tri::kUnknown;
  }
  const auto solves = [&](i128 rest) {
    const i128 s = l.stride[free];
    if (s == 0) return rest == 0;
    if (rest % s != 0) return false;
    const i128 d = rest / s;
    return d < l.size[free] && -d < l.size[free];
  };
  const i128 r0 = m > 0 ? l.size[other[0]] - 1 : 0, r1 = m > 1 ? l.size[other[1]] - 1 : 0;
  for (i128 d0 = -r0; d0 <= r0; ++d0)
    for (i128 d1 = -r1; d1 <= r1; ++d1) {
      i128 rest = k;
      if (m > 0) rest -= d0 * l.stride[other[0]];
      if (m > 1) rest -= d1 * l.stride[other[1]];
      if (solves(rest)) return Tri::kYes;
    }
  return Tri::kNo;
}

/// Whether x and y, of the same offsets, share a byte: some offsets o1, o2 with
/// |elem * (o1 - o2) - (y.lo - x.lo)| < elem.
inline Tri same_layout_overlap(const Lay& l, const OView& x, const OView& y) {
  const i128 e = x.elem, delta = y.lo - x.lo;
  i128 q = delta / e, r = delta % e;
  if (r < 0) {
    r += e;
    --q;
  }
  const Tri a = in_difference_set(l, q);
  if (a == Tri::kYes || r == 0) return a;
  const Tri b = in_difference_set(l, q + 1);
  if (b == Tri::kYes) return b;
  return a == Tri::kUnknown || b == Tri::kUnknown ? Tri::kUnknown : Tri::kNo;
}

/// Every element address of a view (of at most `limit` positions), sorted.
inline bool addresses(const OView& v, std::vector<i128>& out, i128 limit) {
  out.clear();
  if (v.positions(limit) > limit) return false;
  const i128 n0 = v.nd > 0 ? v.size[0] : 1, n1 = v.nd > 1 ? v.size[1] : 1,
             n2 = v.nd > 2 ? v.size[2] : 1;
  for (i128 a = 0; a < n0; ++a)
    for (i128 b = 0; b < n1; ++b)
      for (i128 c = 0; c < n2; ++c)
        out.push_back(v.addr + v.elem * ((v.nd > 0 ? a * v.stride[0] : 0) +
                                         (v.nd > 1 ? b * v.stride[1] : 0) +
                                         (v.nd > 2 ? c * v.stride[2] : 0)));
  std::sort(out.begin(), out.end());
  return true;
}

/// Brute force: whether two views share a byte, by listing their elements (kUnknown when either
/// has more than `limit` positions).
inline Tri shares_element(const OView& x, const OView& y, i128 limit = 4096) {
  static thread_local std::vector<i128> ax, ay;
  if (!addresses(x, ax, limit) || !addresses(y, ay, limit)) return Tri::kUnknown;
  for (const i128 a : ax) {  // some b with [a, a + ex) and [b, b + ey) meeting: a - ey < b < a + ex
    const auto it = std::upper_bound(ay.begin(), ay.end(), a - y.elem);
    if (it != ay.end() && *it < a + x.elem) return Tri::kYes;
  }
  return Tri::kNo;
}

/// Brute force: whether a view repeats an element.
inline Tri repeats_element(const OView& v, i128 limit = 4096) {
  static thread_local std::vector<i128> a;
  if (!addresses(v, a, limit)) return Tri::kUnknown;
  return std::adjacent_find(a.begin(), a.end()) != a.end() ? Tri::kYes : Tri::kNo;
}

/// The oracle's verdict. `refuse`: some rule certainly refuses the call; otherwise `undecided`
/// when some rule could not be decided (the call may go either way), else it must be accepted.
struct Verdict {
  bool refuse = false;
  bool undecided = false;
  bool interleaved = false;  ///< some same-layout pair's intervals meet, sharing no element
  bool overlapping = false;  ///< some same-layout pair shares an element, pointers apart
  std::string why;
};

/// One pair of arrays that may not share an element (unless `alias` and they are one exactly).
struct Rule {
  const OView* x;
  const OView* y;
  bool alias;  ///< x and y are exactly one array (then allowed)
  const char* what;
};

/// The documented decision for a pair: no when the byte intervals do not meet; when they do,
/// exact for the same nested set of offsets, yes (conservative) otherwise.
inline Tri decide(const OView& x, const OView& y, Verdict& v) {
  if (!(x.lo < y.hi && y.lo < x.hi)) return Tri::kNo;
  const Lay lx = lay_of(x), ly = lay_of(y);
  if (!lay_same(lx, ly) || !lay_nested(lx)) return Tri::kYes;
  const Tri t = same_layout_overlap(lx, x, y);
  if (t == Tri::kNo) v.interleaved = true;
  if (t == Tri::kYes && x.addr != y.addr) v.overlapping = true;
  return t;
}

/// A view of `nd` dims, or false when its extent leaves int64_t (in elements or bytes) or its
/// end passes the top of the address space.
inline bool make_oview(uint64_t addr, int nd, const i128* size, const i128* stride, int64_t elem,
                       OView& v) {
  v = OView{};
  v.present = true;
  v.addr = addr;
  v.nd = nd;
  v.elem = elem;
  i128 extent = 1;
  for (int k = 0; k < nd; ++k) {
    v.size[k] = size[k];
    v.stride[k] = stride[k];
    extent += clamped_product(size[k] - 1, stride[k]);
  }
  if (extent > kI64Max || extent * elem > kI64Max) return false;
  v.lo = addr;
  v.hi = v.lo + extent * elem;
  return v.hi <= kAddressMax;
}

inline bool same_strides_used(const Shape& s, const Strides& a, const Strides& b) {
  return (s.batch <= 1 || a.batch_stride == b.batch_stride) &&
         (s.channels <= 1 || a.channel_stride == b.channel_stride) &&
         (s.length <= 1 || a.time_stride == b.time_stride);
}

/// The contract of can_implement (validate.cuh, scan_args.cuh), restated.
inline Verdict judge(const Case& c) {
  Verdict v;
  const auto refuse = [&](const char* why) {
    v.refuse = true;
    v.why = why;
    return v;
  };
  const Shape& s = c.shape;
  const int64_t e = c.bytes;
  if (s.batch < 0 || s.channels < 0 || s.length < 0) return refuse("negative size");
  OView offsets;  // not present: no bytes
  if (c.packed_active()) {
    if (s.batch != 1) return refuse("packed: batch != 1");
    if (c.count < 0) return refuse("packed: negative count");
    if (c.offsets32 != 0 && c.offsets64 != 0) return refuse("packed: two offsets pointers");
    if (c.count > 0 && c.offsets32 == 0 && c.offsets64 == 0) return refuse("packed: null offsets");
    if (c.count == 0 && s.length > 0 && s.channels > 0) return refuse("packed: count 0");
    if (c.offsets32 % 4 != 0 || c.offsets64 % 8 != 0) return refuse("packed: misaligned offsets");
    if (c.count > 0) {
      const bool wide = c.offsets64 != 0;
      const i128 n = static_cast<i128>(c.count) + 1, one = 1;
      if (!make_oview(wide ? c.offsets64 : c.offsets32, 1, &n, &one, wide ? 8 : 4, offsets))
        return refuse("packed: offsets past 64 bits");
    }
  }
  if (s.batch == 0 || s.channels == 0 || s.length == 0) return v;  // empty: accepted

  OView seq[5];
  for (int i = 0; i < c.seq_count(); ++i)
    if (c.seq[i].addr == 0) return refuse("null sequence array");
  if (static_cast<i128>(s.batch) * s.channels > kI64Max ||
      static_cast<i128>(s.batch) * s.channels * s.length > kI64Max)
    return refuse("element count past int64");
  const i128 sizes[3] = {s.batch, s.channels, s.length};
  for (int i = 0; i < c.seq_count(); ++i) {
    const Strides st = c.strides(i);
    if (st.batch_stride < 0 || st.channel_stride < 0 || st.time_stride < 0)
      return refuse("negative stride");
    if (c.seq[i].addr % static_cast<uint64_t>(e) != 0) return refuse("misaligned array");
    const i128 strides[3] = {st.batch_stride, st.channel_stride, st.time_stride};
    if (!make_oview(c.seq[i].addr, 3, sizes, strides, e, seq[i]))
      return refuse("array extent past 64 bits");
    if (c.seq_output(i) && !lay_nested(lay_of(seq[i]))) return refuse("output not nested");
  }
  const auto alias = [&](int i, int j) {
    return c.seq[i].addr == c.seq[j].addr && same_strides_used(s, c.strides(i), c.strides(j));
  };
  std::vector<Rule> rules;
  std::vector<const OView*> outputs;
  if (!c.backward) {
    rules.push_back({&seq[2], &seq[0], false, "out / gates"});
    rules.push_back({&seq[2], &seq[1], alias(2, 1), "out / tokens"});
    outputs.push_back(&seq[2]);
  } else {
    rules.push_back({&seq[3], &seq[0], false, "grad_gates / gates"});
    rules.push_back({&seq[4], &seq[0], false, "grad_tokens / gates"});
    rules.push_back({&seq[3], &seq[4], false, "grad_gates / grad_tokens"});
    rules.push_back({&seq[3], &seq[2], alias(3, 2), "grad_gates / grad_out"});
    rules.push_back({&seq[3], &seq[1], alias(3, 1), "grad_gates / states"});
    rules.push_back({&seq[4], &seq[2], alias(4, 2), "grad_tokens / grad_out"});
    rules.push_back({&seq[4], &seq[1], false, "grad_tokens / states"});
    outputs.push_back(&seq[3]);
    outputs.push_back(&seq[4]);
  }

  OView st[3];
  bool any_state = false;
  for (int i = 0; i < c.state_count(); ++i) any_state = any_state || c.state[i] != 0;
  if (any_state) {
    for (int i = 0; i < c.state_count(); ++i)
      if (c.state[i] % static_cast<uint64_t>(e) != 0) return refuse("misaligned state");
    StateLayout l = c.state_layout;
    if (l.batch_stride < 0 && l.channel_stride < 0)
      l = StateLayout{s.channels, 1};
    else if (l.batch_stride < 0 || l.channel_stride < 0)
      return refuse("negative state stride");
    const i128 ssize[2] = {c.packed_active() ? c.count : s.batch, s.channels};
    const i128 sstride[2] = {l.batch_stride, l.channel_stride};
    for (int i = 0; i < c.state_count(); ++i)
      if (c.state[i] != 0 && !make_oview(c.state[i], 2, ssize, sstride, e, st[i]))
        return refuse("state extent past 64 bits");
    const int w = c.state_written();
    if (c.state[w] != 0) {
      if (!lay_nested(lay_of(st[w]))) return refuse("written states not nested");
      outputs.push_back(&st[w]);
    }
    if (!c.backward) {
      if (c.state[1] != 0) {
        for (int j = 0; j < 3; ++j) rules.push_back({&st[1], &seq[j], false, "final_state / seq"});
        if (c.state[0] != 0)
          rules.push_back({&st[1], &st[0], c.state[0] == c.state[1], "final / initial"});
      }
      if (c.state[0] != 0) rules.push_back({&st[0], &seq[2], false, "initial_state / out"});
    } else {
      for (int i = 0; i < 2; ++i)
        if (c.state[i] != 0) {
          rules.push_back({&st[i], &seq[3], false, "h0 or gT / grad_gates"});
          rules.push_back({&st[i], &seq[4], false, "h0 or gT / grad_tokens"});
        }
      if (c.state[2] != 0) {
        for (int j = 0; j < 5; ++j) rules.push_back({&st[2], &seq[j], false, "dh0 / seq"});
        for (int i = 0; i < 2; ++i)
          if (c.state[i] != 0)
            rules.push_back({&st[2], &st[i], c.state[i] == c.state[2], "dh0 / h0 or gT"});
      }
    }
  }
  // The packed offsets may not meet an output (by byte intervals: their element types differ).
  if (offsets.present)
    for (const OView* o : outputs)
      if (offsets.lo < o->hi && o->lo < offsets.hi) return refuse("offsets meet an output");
  for (const Rule& r : rules) {
    if (r.alias) continue;
    const Tri t = decide(*r.x, *r.y, v);
    if (t == Tri::kYes) return refuse(r.what);
    if (t == Tri::kUnknown) v.undecided = true;
  }
  if (v.undecided) v.why = "undecided";
  return v;
}

/// Brute force on an accepted call of small arrays: no output repeats an element and no pair
/// that must be apart shares one. Returns "" or what is wrong.
inline std::string brute_force_violation(const Case& c) {
  const Shape& s = c.shape;
  if (s.batch <= 0 || s.channels <= 0 || s.length <= 0) return "";
  const int64_t e = c.bytes;
  OView seq[5], st[3];
  const i128 sizes[3] = {s.batch, s.channels, s.length};
  for (int i = 0; i < c.seq_count(); ++i) {
    const Strides t = c.strides(i);
    const i128 strides[3] = {t.batch_stride, t.channel_stride, t.time_stride};
    if (!make_oview(c.seq[i].addr, 3, sizes, strides, e, seq[i])) return "accepted: extent";
  }
  StateLayout l = c.state_layout;
  if (l.batch_stride < 0 && l.channel_stride < 0) l = StateLayout{s.channels, 1};
  const i128 ssize[2] = {c.packed_active() ? c.count : s.batch, s.channels};
  const i128 sstride[2] = {l.batch_stride, l.channel_stride};
  for (int i = 0; i < c.state_count(); ++i)
    if (c.state[i] != 0 && !make_oview(c.state[i], 2, ssize, sstride, e, st[i]))
      return "accepted: state extent";
  for (int i = 0; i < c.seq_count(); ++i)
    if (c.seq_output(i) && repeats_element(seq[i]) == Tri::kYes)
      return "accepted: an output repeats an element";
  if (c.state[c.state_written()] != 0 && repeats_element(st[c.state_written()]) == Tri::kYes)
    return "accepted: written states repeat an element";
  const auto apart = [&](const OView& x, const OView& y, bool alias) {
    return alias || shares_element(x, y) != Tri::kYes;
  };
  const auto alias = [&](int i, int j) {
    return c.seq[i].addr == c.seq[j].addr && same_strides_used(s, c.strides(i), c.strides(j));
  };
  if (!c.backward) {
    if (!apart(seq[2], seq[0], false)) return "accepted: out shares an element with gates";
    if (!apart(seq[2], seq[1], alias(2, 1))) return "accepted: out partly overlaps tokens";
    if (c.state[1] != 0) {
      for (int j = 0; j < 3; ++j)
        if (!apart(st[1], seq[j], false)) return "accepted: final_state shares an element";
      if (c.state[0] != 0 && !apart(st[1], st[0], c.state[0] == c.state[1]))
        return "accepted: final_state partly overlaps initial_state";
    }
    if (c.state[0] != 0 && !apart(st[0], seq[2], false))
      return "accepted: initial_state shares an element with out";
  } else {
    if (!apart(seq[3], seq[0], false) || !apart(seq[4], seq[0], false))
      return "accepted: a gradient shares an element with gates";
    if (!apart(seq[3], seq[4], false)) return "accepted: grad_gates / grad_tokens";
    if (!apart(seq[3], seq[2], alias(3, 2))) return "accepted: grad_gates / grad_out";
    if (!apart(seq[3], seq[1], alias(3, 1))) return "accepted: grad_gates / states";
    if (!apart(seq[4], seq[2], alias(4, 2))) return "accepted: grad_tokens / grad_out";
    if (!apart(seq[4], seq[1], false)) return "accepted: grad_tokens / states";
    for (int i = 0; i < 2; ++i)
      if (c.state[i] != 0 && (!apart(st[i], seq[3], false) || !apart(st[i], seq[4], false)))
        return "accepted: h0 or gT shares an element with a gradient";
    if (c.state[2] != 0) {
      for (int j = 0; j < 5; ++j)
        if (!apart(st[2], seq[j], false)) return "accepted: dh0 shares an element";
      for (int i = 0; i < 2; ++i)
        if (c.state[i] != 0 && !apart(st[2], st[i], c.state[i] == c.state[2]))
          return "accepted: dh0 partly overlaps h0 or gT";
    }
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// The generator

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  uint64_t below(uint64_t n) { return rng_() % n; }
  bool chance(int percent) { return below(100) < static_cast<uint64_t>(percent); }

  /// Small values, powers of two (and their neighbours), values near INT64_MAX (and its
  /// fractions), negative ones.
  int64_t wild() {
    const int64_t j = static_cast<int64_t>(below(4));
    switch (below(9)) {
      case 0:
        return static_cast<int64_t>(below(9));
      case 1:
        return int64_t{1} << below(63);
      case 2:
        return (int64_t{1} << (1 + below(62))) + (j - 2);
      case 3:
        return INT64_MAX - j;
      case 4: {
        static const int64_t kDiv[] = {2, 3, 4, 8, 16, 1024};
        return INT64_MAX / kDiv[below(6)] + (j - 2);
      }
      case 5:
        return -1 - j;
      case 6:
        return INT64_MIN + j;
      case 7:
        return -(int64_t{1} << below(63));
      default:
        return (int64_t{1} << 31) + (j - 2);
    }
  }

  int64_t size() {
    const uint64_t u = below(100);
    if (u < 2) return 0;
    if (u < 82) return 1 + static_cast<int64_t>(below(4));
    if (u < 92) return 5 + static_cast<int64_t>(below(12));
    wild_ = true;
    return wild();
  }

  /// A stride for a dim: mostly nested over `below` elements, sometimes anything.
  int64_t pad() { return chance(65) ? 0 : (chance(90) ? static_cast<int64_t>(below(5)) : wild_pick()); }

  int64_t wild_pick() {
    wild_ = true;
    return wild();
  }

  static int64_t clamp64(i128 v) {
    if (v > kI64Max) return INT64_MAX;
    if (v < -kI64Max - 1) return INT64_MIN;
    return static_cast<int64_t>(v);
  }

  /// Strides for sizes (B, C, T): a nested layout in a random dim order (time-contiguous,
  /// channel-last, padded, ...), small random strides, broadcasts, or wild ones.
  Strides strides(const Shape& s, bool input) {
    const int64_t n[3] = {s.batch, s.channels, s.length};
    int64_t st[3] = {0, 0, 0};
    const uint64_t mode = below(100);
    if (mode < 65) {  // nested, dims in a random order
      int order[3] = {0, 1, 2};
      for (int i = 2; i > 0; --i) std::swap(order[i], order[below(static_cast<uint64_t>(i) + 1)]);
      i128 extent = 1;
      for (int k = 0; k < 3; ++k) {
        const int d = order[k];
        const i128 stride = (k == 0 && chance(85) ? 1 : extent + pad());
        st[d] = clamp64(stride);
        extent = static_cast<i128>(st[d]) * (n[d] > 0 ? n[d] - 1 : 0) + extent;
        if (extent > kI64Max || extent < 0) extent = kI64Max;
      }
    } else if (mode < 85) {
      for (int64_t& v : st) v = static_cast<int64_t>(below(9));
    } else {
      for (int64_t& v : st) v = chance(50) ? static_cast<int64_t>(below(9)) : wild_pick();
    }
    if (input && chance(8)) st[below(3)] = 0;  // a broadcast
    if (chance(2)) st[below(3)] = -1 - static_cast<int64_t>(below(3));
    return Strides{st[0], st[1], st[2]};
  }

  /// Elements from the first to one past the last element of `st` over `s` (saturated).
  static i128 extent(const Shape& s, const Strides& st) {
    const auto term = [](int64_t n, int64_t stride) {
      return clamped_product(n > 0 ? n - 1 : 0, stride);
    };
    const i128 e = 1 + term(s.batch, st.batch_stride) + term(s.channels, st.channel_stride) +
                   term(s.length, st.time_stride);
    return e < 1 ? 1 : e;
  }

  /// An address `elements` elements of `bytes` past `base` (wrapping like the unsigned integer
  /// it is).
  static uint64_t at(uint64_t base, i128 elements, int64_t bytes) {
    const i128 m = (elements % (i128(1) << 64)) * bytes;
    return base + static_cast<uint64_t>(m);
  }

  /// Misaligns, nulls or moves an address now and then.
  uint64_t perturb(uint64_t a, int64_t bytes) {
    const uint64_t u = below(1000);
    if (u < 8) return 0;
    if (u < 20 && bytes > 1) return a + 1 + below(static_cast<uint64_t>(bytes) - 1);
    if (u < 30) return static_cast<uint64_t>(wild_pick()) & ~uint64_t(15);
    return a;
  }

  Case next(bool backward, int64_t bytes) {
    wild_ = false;
    Case c;
    c.backward = backward;
    c.bytes = bytes;
    Shape& s = c.shape;
    s.batch = size();
    s.channels = size();
    s.length = size();
    const bool packed = chance(15);
    if (packed && chance(85)) s.batch = 1;
    const Strides shape_strides = strides(s, false);
    s.batch_stride = shape_strides.batch_stride;
    s.channel_stride = shape_strides.channel_stride;
    s.time_stride = shape_strides.time_stride;

    // Where the arrays go: one region, its base low, high, a power of two or near the top.
    uint64_t base = 0x10000000;
    switch (below(12)) {
      case 0:
        base = 16 * below(4);
        break;
      case 1:
        base = uint64_t{1} << (4 + below(60));
        break;
      case 2:
        base = static_cast<uint64_t>(UINTPTR_MAX) - 16 * (1 + below(1 << 12)) + 1;
        break;
      default:
        break;
    }
    const int n = c.seq_count();
    i128 offset[5] = {0, 0, 0, 0, 0}, ext[5] = {1, 1, 1, 1, 1}, slot = 0;
    for (int i = 0; i < n; ++i) {
      Array& a = c.seq[i];
      if (chance(35)) {
        a.own = true;
        const uint64_t m = below(10);
        a.strides = m < 4 ? Strides{s.batch_stride, s.channel_stride, s.time_stride}
                          : strides(s, !c.seq_output(i));
      }
      const Strides st = c.strides(i);
      ext[i] = extent(s, st);
      const i128 span = ext[i] > (i128(1) << 40) ? (i128(1) << 40) : ext[i];
      const int prev = i > 0 ? static_cast<int>(below(static_cast<uint64_t>(i))) : 0;
      const uint64_t m = below(100);
      if (i == 0 || m < 30) {  // a region of its own
        offset[i] = slot;
      } else if (m < 50) {  // the same pointer as an earlier array
        offset[i] = offset[prev];
      } else if (m < 85) {  // an earlier array moved by whole strides (interleaving), or not
        const int64_t dims[3] = {st.batch_stride, st.channel_stride, st.time_stride};
        const int64_t step = dims[below(3)];
        const i128 k = 1 + static_cast<i128>(below(3));
        offset[i] = offset[prev] + k * step + (chance(75) ? 0 : static_cast<i128>(below(5)) - 2);
      } else if (m < 97) {
        offset[i] = offset[prev] + static_cast<i128>(below(static_cast<uint64_t>(span) * 2 + 1));
      } else {
        offset[i] = wild_pick();
      }
      slot = std::max(slot, offset[i] + span + static_cast<i128>(below(3)));
      a.addr = perturb(at(base, offset[i], bytes), bytes);
    }

    if (chance(40)) {  // states
      const uint64_t m = below(100);
      const int64_t C = s.channels;
      if (m < 40) {
        c.state_layout = StateLayout{};
      } else if (m < 60) {
        c.state_layout = StateLayout{C, 1};
      } else if (m < 75) {
        const int64_t k = 2 + static_cast<int64_t>(below(2));
        const int64_t B = std::max<int64_t>(s.batch, 1);
        c.state_layout = chance(50) ? StateLayout{clamp64(i128(C) * k), k}  // interleaved
                                    : StateLayout{k, clamp64(i128(B) * k)};
      } else if (m < 88) {
        c.state_layout = StateLayout{static_cast<int64_t>(below(6)), static_cast<int64_t>(below(4))};
      } else if (m < 96) {
        c.state_layout = StateLayout{chance(50) ? wild_pick() : C, chance(50) ? wild_pick() : 1};
      } else {
        c.state_layout = StateLayout{-1 - static_cast<int64_t>(below(2)), chance(50) ? 1 : -1};
      }
      const i128 sext = static_cast<i128>(std::min<int64_t>(std::max<int64_t>(s.batch, 1), 1 << 20)) *
                        std::min<int64_t>(std::max<int64_t>(s.channels, 1), 1 << 20) * 4;
      const i128 sspan = sext > (i128(1) << 20) ? (i128(1) << 20) : sext;
      i128 soff[3] = {0, 0, 0};
      for (int i = 0; i < c.state_count(); ++i) {
        if (chance(45)) continue;  // null
        const uint64_t u = below(100);
        if (u < 45) {
          soff[i] = slot + static_cast<i128>(i) * sspan;
        } else if (u < 65) {  // inside or next to a sequence array
          const int j = static_cast<int>(below(static_cast<uint64_t>(n)));
          const i128 e = ext[j] > (i128(1) << 40) ? (i128(1) << 40) : ext[j];
          soff[i] = offset[j] + static_cast<i128>(below(static_cast<uint64_t>(e) + 2)) - 1;
        } else if (u < 90 && i > 0) {  // the same as, or next to, an earlier state
          soff[i] = soff[below(static_cast<uint64_t>(i))] + (chance(50) ? 0 : 1 + below(2));
        } else if (u < 97) {
          soff[i] = slot + static_cast<i128>(below(8));
        } else {
          soff[i] = wild_pick();
        }
        c.state[i] = perturb(at(base, soff[i], bytes), bytes);
      }
    }

    if (packed) {
      c.count = chance(85) ? static_cast<int64_t>(below(6)) : wild_pick();
      const uint64_t u = below(100);
      uint64_t where = at(base, slot + 64, bytes);
      if (chance(20)) {  // inside an output
        const int j = backward ? 3 + static_cast<int>(below(2)) : 2;
        where = at(base, offset[j] + static_cast<i128>(below(4)), bytes);
      }
      where &= ~uint64_t(7);
      if (chance(3)) where += 2;
      if (chance(2)) where = static_cast<uint64_t>(wild_pick());
      if (u < 45) {
        c.offsets32 = where;
      } else if (u < 90) {
        c.offsets64 = where;
      } else if (u < 94) {
        c.offsets32 = where;
        c.offsets64 = where + 64;
      }
    }
    return c;
  }

  /// Whether the last case drew a value out of the small ones.
  bool drew_wild() const { return wild_; }

 private:
  std::mt19937_64 rng_;
  bool wild_ = false;
};

}  // namespace ascan::fuzz
