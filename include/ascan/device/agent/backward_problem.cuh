// ascan/device/agent/backward_problem.cuh: what the backward pass loads, scans and stores.
//
// For a forward scan x[t] = a[t] x[t-1] + b[t] (x[-1] = h0), upstream gradient g[t] = dL/dx[t]
// and gT = dL/d(final state x[T-1]):
//
//     d[t]     = a[t+1] d[t+1] + g[t],   d[T-1] = g[T-1] + gT     (a reverse scan)
//     dL/db[t] = d[t]
//     dL/da[t] = d[t] x[t-1],            x[-1] = h0
//     dL/dh0   = a[0] d[0]
//
// so the pass is a scan of the pairs (a[t+1], g[t]) in the opposite direction, from the carry
// gT, fused with one multiply: it reads a, x, g and writes da, db in one pass over memory. For a
// reverse forward scan every index is mirrored: pairs (a[t-1], g[t]), dL/da[t] = d[t] x[t+1]
// with x[T] = h0, dL/dh0 = a[T-1] d[T-1]. The shifted gate and state of a vector's edge element
// belong to the neighbouring vector: a shuffle from the next or previous lane fetches them, and
// only the lanes at the end of a warp (whose neighbour sits in another warp, run or tile) read
// them from memory, as one scalar each (a scalar read per lane would double the traffic between
// L2 and the multiprocessors: each touches a whole sector).
#pragma once

#include <cstdint>

#include "../../affine.cuh"
#include "scan_agent.cuh"

namespace ascan {
namespace detail {

/// The backward pass's arguments, flattened for the kernels: sizes in elements, offsets 64-bit.
template <class T>
struct BackwardParams {
  const T* gates;
  const T* states;    ///< the forward's outputs x
  const T* grad_out;  ///< g = dL/dx
  T* grad_gates;
  T* grad_tokens;
  int64_t sequences;
  int64_t channels;
  int64_t batch_stride;
  int64_t channel_stride;
  int64_t length;
  int64_t span_bound;         ///< as ScanParams::span_bound
  const T* initial_state;     ///< h0, nullable
  const T* grad_final_state;  ///< gT, nullable
  T* grad_initial_state;      ///< dL/dh0, nullable
  int64_t state_batch_stride;
  int64_t state_channel_stride;
};

/// `kForwardReverse`: the direction of the forward scan being differentiated; the gradient scan
/// runs the other way.
template <class T, bool kForwardReverse, bool kVector>
struct BackwardProblem {
  using Params = BackwardParams<T>;
  using Storage = T;
  using C = compute_t<T>;
  static constexpr bool kReverse = !kForwardReverse;
  static constexpr int kVec = kAccessItems<T, kVector>;
  /// The multi-block path's staged tile (LookbackHold::kStaged, lookback_staged_kernel), on the
  /// vector path; 0 streams: not staged. Staged streams: gates, states and upstream gradients
  /// (filled with 1, h0 and 0 outside the sequence); dL/da goes out over the states, dL/db over
  /// the gradients.
  static constexpr int kStagedStreams = kVector ? 3 : 0;
  static constexpr int kStagedOutputs = 2;
  /// The fills alone do not make every position outside the sequence the identity: the one just
  /// past its last element in scan order (before the forward's first step) pairs with that
  /// element's gate. So the view tests each element where a stretch reaches outside the
  /// sequence (StagedView::read<false>).
  static constexpr bool kStagedReadTests = true;
  // Offset of the gate paired with position t (t+1, or t-1 mirrored) and of the state that
  // multiplies d[t] (t-1, or t+1 mirrored).
  static constexpr int kGateShift = kForwardReverse ? -1 : 1;
  static constexpr int kStateShift = -kGateShift;

  struct Loaded {
    alignas(16) T a[kVec];
    alignas(16) T x[kVec];
    alignas(16) T g[kVec];
    C a_edge;  ///< lanes at a warp's edge: the neighbour's gate, read from memory
    C x_edge;  ///< lanes at a warp's edge: the neighbour's state, read from memory
  };
  struct Work {
    C a[kVec];  ///< shifted gates
    C b[kVec];  ///< upstream gradient in; d out
    C x[kVec];  ///< shifted states
  };

  const T* a;  // grid position v lives at a[v]
  const T* x;
  const T* g;
  T* da;
  T* db;
  int64_t lo, hi;  // the sequence's grid positions
  C h0;
  int width;       // lanes that exchange edges by shuffle: min(group, warp)
  bool high_edge;  // this lane's next neighbour is outside its shuffle width
  bool low_edge;   // this lane's previous neighbour is outside its shuffle width

  /// kMasked: as load_vector's (kInside is the forward problem's alone).
  template <bool kInside = false, bool kMasked = false>
  __device__ __forceinline__ void load(Loaded& r, int64_t v) const {
    static_assert(!kInside, "the backward problem reads its edge neighbours");
    reload<kMasked>(r, v);
    // Forward: a[v + kVec] and x[v - 1]; mirrored: a[v - 1] and x[v + kVec]. Positions outside
    // the sequence read as reload's fills: gate 1, state h0.
    const int64_t ae = kForwardReverse ? v - 1 : v + kVec;
    const int64_t xe = kForwardReverse ? v + kVec : v - 1;
    if (kForwardReverse ? low_edge : high_edge)
      r.a_edge = ae >= lo && ae < hi ? to_compute<C>(a[ae]) : C(1);
    if (kForwardReverse ? high_edge : low_edge)
      r.x_edge = xe >= lo && xe < hi ? to_compute<C>(x[xe]) : h0;
  }

  /// The elements at positions v .. v+kVec-1 without the edge elements: load's first half, and
  /// alone the multi-block path's LookbackHold::kReload, which keeps the edge elements load read
  /// (a neighbouring tile may have written its gradients over those since, where grad_gates is
  /// states; never over this tile's own positions). h0 converts back exactly: it came from T.
  template <bool kMasked = false>
  __device__ __forceinline__ void reload(Loaded& r, int64_t v) const {
    load_vector<kVec, false, kMasked>(a, v, lo, hi, r.a, to_storage<T>(C(1)));
    load_vector<kVec, false, kMasked>(x, v, lo, hi, r.x, to_storage<T>(h0));
    load_vector<kVec, false, kMasked>(g, v, lo, hi, r.g, to_storage<T>(C(0)));
  }

  /// A vector's shifted gates and states (w.a, w.x) from its widened gates `a` and states `x`
  /// and the two neighbours one position past it, on the side each is shifted from.
  static __device__ __forceinline__ void shift(const C (&a)[kVec], const C (&x)[kVec], C a_edge,
                                               C x_edge, Work& w) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      const int ia = i + kGateShift;
      const int ix = i + kStateShift;
      w.a[i] = ia >= 0 && ia < kVec ? a[ia] : a_edge;
      w.x[i] = ix >= 0 && ix < kVec ? x[ix] : x_edge;
    }
  }

  template <bool kMasked = false>
  __device__ __forceinline__ void convert(const Loaded& r, int64_t v, Work& w) const {
    // The neighbours' edge elements, by shuffle; lanes at the edge keep what they read.
    C a[kVec], x[kVec];
    widen(r.a, a);
    widen(r.x, x);
    widen(r.g, w.b);
    const C a_low = a[0], a_high = a[kVec - 1];
    const C x_low = x[0], x_high = x[kVec - 1];
    C a_edge, x_edge;
    if constexpr (kForwardReverse) {
      a_edge = __shfl_up_sync(0xffffffffu, a_high, 1, width);
      x_edge = __shfl_down_sync(0xffffffffu, x_low, 1, width);
      if (low_edge) a_edge = r.a_edge;
      if (high_edge) x_edge = r.x_edge;
    } else {
      a_edge = __shfl_down_sync(0xffffffffu, a_low, 1, width);
      x_edge = __shfl_up_sync(0xffffffffu, x_high, 1, width);
      if (high_edge) a_edge = r.a_edge;
      if (low_edge) x_edge = r.x_edge;
    }
    shift(a, x, a_edge, x_edge, w);
    // Positions outside the sequence: the identity (1, 0).
    if constexpr (kMasked && kVec > 1) {
      const uint32_t inside = inside_mask<kVec>(v, lo, hi);
      if (inside != (1u << kVec) - 1u) {
#pragma unroll
        for (int i = 0; i < kVec; ++i)
          if (!(inside >> i & 1u)) w.a[i] = C(1);
      }
    } else if (!(v >= lo && v + kVec <= hi)) {
#pragma unroll
      for (int i = 0; i < kVec; ++i)
        if (v + i < lo || v + i >= hi) w.a[i] = C(1);
    }
  }

  /// The gradients of a scanned vector: dL/da = d x (shifted state), dL/db = d.
  __device__ __forceinline__ void gradients(const Work& w, T (&ya)[kVec], T (&yb)[kVec]) const {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      ya[i] = to_storage<T>(w.b[i] * w.x[i]);
      yb[i] = to_storage<T>(w.b[i]);
    }
  }
  template <bool kInside = false, bool kMasked = false>
  __device__ __forceinline__ void store(const Work& w, int64_t v) const {
    static_assert(!kInside, "as load's");
    alignas(16) T ya[kVec];
    alignas(16) T yb[kVec];
    gradients(w, ya, yb);
    store_vector<kVec, false, kMasked>(da, v, lo, hi, ya);
    store_vector<kVec, false, kMasked>(db, v, lo, hi, yb);
  }

  __device__ __forceinline__ const T* staged_input(int s) const {
    return s == 0 ? a : s == 1 ? x : g;
  }
  __device__ __forceinline__ C staged_fill(int s) const {
    return s == 0 ? C(1) : s == 1 ? h0 : C(0);
  }
  __device__ __forceinline__ T* staged_output(int o) const { return o == 0 ? da : db; }
  __host__ __device__ static constexpr int staged_output_slot(int o) { return 1 + o; }

  /// One thread's kVectors consecutive staged vectors, the stretch [f0, f0 + kVectors * kVec) of
  /// its warp's kWarpSpan elements. read(j) gives vector j's pairs (shifted gate, gradient) and
  /// shifted states: inside the stretch from shared memory, past its ends the outer neighbours that
  /// staged_view read; kInside: the warp's stretch lies inside the sequence, no element needs a
  /// test (run on every tile, the tests would be a third of the 16-bit kernel's instructions;
  /// bench/RESULTS.md, "Few long sequences"). write(j) puts dL/da over vector j's states and dL/db
  /// over its gradients; in scan order that comes after the last read of each.
  template <int kVectors>
  struct StagedView {
    const BackwardProblem& problem;
    const uint4* va;  // this thread's first vector of each stream
    uint4* vx;
    uint4* vg;
    const T* ea;  // the warp's stretch of gates and states, by element
    const T* ex;
    int64_t origin;  // grid position of the warp's first element
    int f0;
    C gate_edge, state_edge;

    /// The forward's final state has no counterpart here.
    __device__ __forceinline__ void finish(const Params&) const {}

    template <bool kInside>
    __device__ __forceinline__ void read(int j, Work& w) const {
      const int e0 = f0 + j * kVec;
      alignas(16) T av[kVec], xv[kVec], gv[kVec];
      *reinterpret_cast<uint4*>(av) = va[j];
      *reinterpret_cast<uint4*>(xv) = vx[j];
      *reinterpret_cast<uint4*>(gv) = vg[j];
      const C a_next = kGateShift > 0
                           ? (j + 1 < kVectors ? to_compute<C>(ea[e0 + kVec]) : gate_edge)
                           : (j > 0 ? to_compute<C>(ea[e0 - 1]) : gate_edge);
      const C x_next = kStateShift > 0
                           ? (j + 1 < kVectors ? to_compute<C>(ex[e0 + kVec]) : state_edge)
                           : (j > 0 ? to_compute<C>(ex[e0 - 1]) : state_edge);
      C af[kVec], xf[kVec];
      widen(av, af);
      widen(xv, xf);
      widen(gv, w.b);
      shift(af, xf, a_next, x_next, w);
      if constexpr (!kInside) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const int64_t v = origin + e0 + i;
          if (v < problem.lo || v >= problem.hi) w.a[i] = C(1);  // the identity
        }
      }
    }
    __device__ __forceinline__ void write(int j, const Work& w) const {
      alignas(16) T ya[kVec], yb[kVec];
      problem.gradients(w, ya, yb);
      vx[j] = *reinterpret_cast<const uint4*>(ya);
      vg[j] = *reinterpret_cast<const uint4*>(yb);
    }
  };
  /// The thread's outer neighbours, the gate and the state one position past its stretch, where
  /// they lie outside its warp's stretch (lane 0 or 31, by direction): read from memory, as the
  /// identity's gate 1 and h0 outside the sequence. Call it at the kernel's start, so that the
  /// loads travel with the bulk copies instead of adding a round trip after them (2-3 us per tile
  /// under load; bench/RESULTS.md, "Few long sequences"). Reading that early is safe: no gradient
  /// may overlap the gates (can_implement), and where grad_gates is states, the state neighbour
  /// belongs to this tile, whose gradients are written after the block's first barrier, or to the
  /// next tile in scan order, which writes them only after this tile has published its aggregate.
  struct StagedEdges {
    C gate, state;
  };
  /// Where the thread at `lane` finds its outer neighbours, as offsets into its warp's stretch:
  /// the gate and the state one position beyond its kVectors vectors on the side each is shifted
  /// from (after the last for a positive shift, before the first for a negative one).
  template <int kVectors>
  struct EdgeAt {
    int gate, state;
    __device__ __forceinline__ explicit EdgeAt(int lane) {
      constexpr int kSpan = kVectors * kVec;
      const int f0 = lane * kSpan;
      gate = kGateShift > 0 ? f0 + kSpan : f0 - 1;
      state = kStateShift > 0 ? f0 + kSpan : f0 - 1;
    }
  };
  template <int kVectors, int kWarpSpan>
  __device__ __forceinline__ StagedEdges staged_edges(int64_t origin, int lane) const {
    const EdgeAt<kVectors> at(lane);
    const auto outer = [&](int e) {
      return (e < 0 || e >= kWarpSpan) && origin + e >= lo && origin + e < hi;
    };
    StagedEdges e{C(1), h0};
    if (outer(at.gate)) e.gate = to_compute<C>(a[origin + at.gate]);
    if (outer(at.state)) e.state = to_compute<C>(x[origin + at.state]);
    return e;
  }
  /// The view of the thread at `lane` of a warp whose staged stretch of kWarpSpan elements,
  /// from grid position `origin`, lies at slots[s] for stream s, once it has landed; `edges`
  /// from staged_edges.
  template <int kVectors, int kWarpSpan>
  __device__ __forceinline__ StagedView<kVectors> staged_view(uint4* const (&slots)[3],
                                                              int64_t origin, int lane,
                                                              const StagedEdges& edges) const {
    const int first = lane * kVectors, f0 = first * kVec;
    const T* ea = reinterpret_cast<const T*>(slots[0]);
    const T* ex = reinterpret_cast<const T*>(slots[1]);
    const EdgeAt<kVectors> at(lane);
    const auto inner = [](int e) { return e >= 0 && e < kWarpSpan; };
    const C gate_edge = inner(at.gate) ? to_compute<C>(ea[at.gate]) : edges.gate;
    const C state_edge = inner(at.state) ? to_compute<C>(ex[at.state]) : edges.state;
    return {*this, slots[0] + first, slots[1] + first, slots[2] + first, ea, ex, origin,
            f0,    gate_edge,        state_edge};
  }

  int64_t offset;  // element offset of the sequence's first element
  int64_t state;   // index of the sequence's states and their gradients
  bool active;

  /// The problem of sequence `seq` for a group of kLanes threads, this one at `rank` (which
  /// lanes exchange edges by shuffle); inactive groups get an empty sequence at offset 0.
  template <int kLanes>
  static __device__ __forceinline__ BackwardProblem at(const Params& p, int64_t seq, bool active,
                                                       int rank) {
    const SequenceSite site = locate_sequence(p, active ? seq : 0);
    // All five arrays share their misalignment on the vector path: one lead for all.
    const int64_t lead = kVector ? lead_of(p.gates + site.offset) : 0;
    const int64_t base = site.offset - lead;
    constexpr int kWidth = kLanes < kWarpThreads ? kLanes : kWarpThreads;
    const int lane = rank % kWidth;
    return {
        p.gates + base,
        p.states + base,
        p.grad_out + base,
        p.grad_gates + base,
        p.grad_tokens + base,
        lead,
        active ? lead + p.length : lead,
        active && p.initial_state != nullptr ? to_compute<C>(p.initial_state[site.state]) : C(0),
        kWidth,
        lane == kWidth - 1,
        lane == 0,
        site.offset,
        site.state,
        active};
  }
  /// The carry before the first element in scan order: dL/d(final state), or 0.
  __device__ __forceinline__ C initial_carry(const Params& p) const {
    return active && p.grad_final_state != nullptr ? to_compute<C>(p.grad_final_state[state])
                                                   : C(0);
  }
  /// The forward's final state has no counterpart here: nothing to take per stored vector.
  __device__ __forceinline__ bool holds_last(int64_t, int64_t) const { return false; }
  template <int64_t, int>
  __device__ __forceinline__ void finish_stored(const Params&, int64_t) const {}
  /// Takes the carry after the last element in scan order, d at the forward's first step (d[0],
  /// or d[T-1] mirrored): dL/dh0 = a[0] d[0] (one thread, active sequences only).
  __device__ __forceinline__ void finish(const Params& p, C carry) const {
    if (p.grad_initial_state == nullptr) return;
    const T first_gate = p.gates[offset + (kForwardReverse ? p.length - 1 : 0)];
    p.grad_initial_state[state] = to_storage<T>(to_compute<C>(first_gate) * carry);
  }
};

}  // namespace detail
}  // namespace ascan
