// ascan/device/agent/forward_problem.cuh: what the forward scan loads, scans and stores.
//
//     x[t] = a[t] * x[t-1] + b[t],  x[-1] = h0      (x[t+1] and x[T] = h0 when reversed)
//
// Per element: the pair (a[t], b[t]); the recurrence's state is the output.
#pragma once

#include <cstdint>

#include "../../affine.cuh"
#include "scan_agent.cuh"

namespace ascan {
namespace detail {

/// The forward scan's arguments, flattened for the kernels: sizes in elements, offsets 64-bit.
template <class T>
struct ScanParams {
  const T* gates;
  const T* tokens;
  T* out;
  int64_t sequences;  ///< batch * channels
  int64_t channels;
  int64_t batch_stride;
  int64_t channel_stride;
  int64_t length;
  /// Span bound of every sequence on the tile grid: length plus the largest lead. Every group
  /// runs ceil(span_bound / tile) tiles, so groups that share shuffles stay in step.
  int64_t span_bound;
  const T* initial_state;  ///< nullable
  T* final_state;          ///< nullable
  int64_t state_batch_stride;
  int64_t state_channel_stride;
};

template <class T, bool kReverseScan, bool kVector>
struct ForwardProblem {
  using Params = ScanParams<T>;
  using Storage = T;
  using C = compute_t<T>;
  static constexpr bool kReverse = kReverseScan;
  static constexpr int kVec = kAccessItems<T, kVector>;
  /// The multi-block path's staged tile (LookbackHold::kStaged, lookback_staged_kernel), on the
  /// vector path (where gates, tokens and out share one 16-byte grid); 0 streams: not staged.
  /// Staged streams: gates and tokens, filled with the identity (1, 0) outside the sequence; the
  /// states go out over the tokens.
  static constexpr int kStagedStreams = kVector ? 2 : 0;
  static constexpr int kStagedOutputs = 1;
  /// The fills make every position outside the sequence the identity: no element needs a test.
  static constexpr bool kStagedReadTests = false;

  struct Loaded {
    alignas(16) T a[kVec];
    alignas(16) T b[kVec];
  };
  struct Work {
    C a[kVec];
    C b[kVec];  ///< tokens in; states out
  };

  const T* a;  // grid position v lives at a[v]
  const T* b;
  T* x;
  int64_t lo, hi;  // the sequence's grid positions

  /// kInside: the vector is known to lie inside the sequence; kMasked: tested through its
  /// inside_mask (load_vector's, both).
  template <bool kInside = false, bool kMasked = false>
  __device__ __forceinline__ void load(Loaded& r, int64_t v) const {
    load_vector<kVec, kInside, kMasked>(a, v, lo, hi, r.a, to_storage<T>(C(1)));
    load_vector<kVec, kInside, kMasked>(b, v, lo, hi, r.b, to_storage<T>(C(0)));
  }
  /// load and store for a sequence's edge tiles in the staged multi-block kernel (vector path;
  /// load_vector_at_edge).
  __device__ __forceinline__ void load_at_edge(Loaded& r, int64_t v) const {
    load_vector_at_edge<kVec>(a, v, lo, hi, r.a, to_storage<T>(C(1)));
    load_vector_at_edge<kVec>(b, v, lo, hi, r.b, to_storage<T>(C(0)));
  }
  /// Loads the elements again (the multi-block path's LookbackHold::kReload): only this tile
  /// writes its positions, and it has not yet.
  __device__ __forceinline__ void reload(Loaded& r, int64_t v) const { load(r, v); }
  template <bool kMasked = false>
  __device__ __forceinline__ void convert(const Loaded& r, int64_t, Work& w) const {
    widen(r.a, w.a);
    widen(r.b, w.b);
  }
  /// The states of a scanned vector, rounded to the storage type.
  __device__ __forceinline__ void narrow(const Work& w, T (&y)[kVec]) const {
#pragma unroll
    for (int i = 0; i < kVec; ++i) y[i] = to_storage<T>(w.b[i]);
  }
  template <bool kInside = false, bool kMasked = false>
  __device__ __forceinline__ void store(const Work& w, int64_t v) const {
    alignas(16) T y[kVec];
    narrow(w, y);
    store_vector<kVec, kInside, kMasked>(x, v, lo, hi, y);
  }

  __device__ __forceinline__ void store_at_edge(const Work& w, int64_t v) const {
    alignas(16) T y[kVec];
    narrow(w, y);
    store_vector_at_edge<kVec>(x, v, lo, hi, y);
  }

  __device__ __forceinline__ const T* staged_input(int s) const { return s == 0 ? a : b; }
  __device__ __forceinline__ C staged_fill(int s) const { return s == 0 ? C(1) : C(0); }
  __device__ __forceinline__ T* staged_output(int) const { return x; }
  __host__ __device__ static constexpr int staged_output_slot(int) { return 1; }

  /// One thread's kVectors consecutive staged vectors: read(j) converts vector j (inside the
  /// sequence or not: the same code), write(j) puts its states over its tokens.
  template <int kVectors>
  struct StagedView {
    const ForwardProblem& problem;
    const uint4* gates;  // this thread's first vector of each stream
    uint4* tokens;
    int64_t origin;  // grid position of its first element

    template <bool /*kInside*/>
    __device__ __forceinline__ void read(int j, Work& w) const {
      Loaded loaded;
      *reinterpret_cast<uint4*>(loaded.a) = gates[j];
      *reinterpret_cast<uint4*>(loaded.b) = tokens[j];
      problem.convert(loaded, origin + int64_t(j) * kVec, w);
    }
    __device__ __forceinline__ void write(int j, const Work& w) const {
      alignas(16) T y[kVec];
      problem.narrow(w, y);
      tokens[j] = *reinterpret_cast<const uint4*>(y);
    }
    /// In the sequence's last tile, after the writes: the thread whose staged vectors hold the
    /// sequence's last element in scan order writes it, as stored, as the final state (as
    /// finish_stored does for vectors stored from registers).
    __device__ __forceinline__ void finish(const Params& p) const {
      const auto i = static_cast<uint64_t>((kReverse ? problem.lo : problem.hi - 1) - origin);
      if (!problem.active || p.final_state == nullptr || i >= uint64_t{kVectors} * kVec) return;
      p.final_state[problem.state] = reinterpret_cast<const T*>(tokens)[i];
    }
  };
  /// What a thread reads besides its staged vectors (the backward pass's neighbours): nothing.
  struct StagedEdges {};
  template <int kVectors, int kWarpSpan>
  __device__ __forceinline__ StagedEdges staged_edges(int64_t, int) const {
    return {};
  }
  /// The view of the thread at `lane` of a warp whose staged stretch of kWarpSpan elements,
  /// from grid position `origin`, lies at slots[s] for stream s, once it has landed.
  template <int kVectors, int kWarpSpan>
  __device__ __forceinline__ StagedView<kVectors> staged_view(uint4* const (&slots)[2],
                                                              int64_t origin, int lane,
                                                              const StagedEdges&) const {
    const int first = lane * kVectors;
    return {*this, slots[0] + first, slots[1] + first, origin + int64_t(first) * kVec};
  }

  int64_t state;  // index of the sequence's initial and final states
  bool active;

  /// The problem of sequence `seq` for a group of kLanes threads; inactive groups get an empty
  /// sequence at offset 0.
  template <int kLanes>
  static __device__ __forceinline__ ForwardProblem at(const Params& p, int64_t seq, bool active,
                                                      int /*rank*/) {
    const SequenceSite site = locate_sequence(p, active ? seq : 0);
    // gates, tokens and out share their misalignment on the vector path: one lead for all.
    const int64_t lead = kVector ? lead_of(p.gates + site.offset) : 0;
    const int64_t base = site.offset - lead;
    return {p.gates + base, p.tokens + base, p.out + base, lead, active ? lead + p.length : lead,
            site.state,     active};
  }
  /// The state before the first element in scan order: h0, or 0.
  __device__ __forceinline__ C initial_carry(const Params& p) const {
    return active && p.initial_state != nullptr ? to_compute<C>(p.initial_state[state]) : C(0);
  }
  /// The carry after the last element in scan order (one thread, active sequences only): not
  /// used. The final state is the stored last state (finish_stored), not this carry, which the tile
  /// aggregates computed in another order and which may differ from it in the last bit.
  __device__ __forceinline__ void finish(const Params&, C) const {}
  /// Whether the tile of `span` grid positions from `origin` holds the sequence's last element in
  /// scan order (out[T-1], out[0] reversed). Not always the last tile a group walks: the groups
  /// that share shuffles walk as many tiles as the longest span among them.
  __device__ __forceinline__ bool holds_last(int64_t origin, int64_t span) const {
    return active &&
           static_cast<uint64_t>((kReverse ? lo : hi - 1) - origin) < static_cast<uint64_t>(span);
  }
  /// Called in the tile that holds_last by every thread after its stores; its vectors lie at grid
  /// positions first + j * kStride (j < kCount), kVec elements each. The thread that stored the
  /// sequence's last element in scan order reads it back and writes it, as stored, as the final
  /// state: a thread sees its own stores, so the final state is bitwise that output on every
  /// path, as a caller that chains calls over the chunks of a stream expects, and the tile's
  /// store loops carry nothing for it. Needs a sequence of at least one element (hi > lo): calls
  /// of length 0 return before any launch, and packed calls, whose sequences may be empty, take
  /// the row path.
  template <int64_t kStride, int kCount>
  __device__ __forceinline__ void finish_stored(const Params& p, int64_t first) const {
    static_assert(kStride % kVec == 0, "vectors on the vector grid");
    if (!active || p.final_state == nullptr) return;
    const int64_t last = kReverse ? lo : hi - 1;
    const int64_t i = last - first;
    if (i < 0 || i >= kStride * kCount || i % kStride >= kVec) return;
    p.final_state[state] = x[last];
  }
};

}  // namespace detail
}  // namespace ascan
