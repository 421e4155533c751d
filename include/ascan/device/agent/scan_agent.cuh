// ascan/device/agent/scan_agent.cuh: one group of threads scanning one sequence, tile by tile.
//
// The forward scan and the backward pass are the same loop over tiles; they differ only in what
// a tile loads, which pairs (a, b) it scans, and what it stores. A Problem (forward_problem.cuh,
// backward_problem.cuh) supplies those; scan_tiles runs the loop:
//
//   for each tile, in scan order:
//     1. convert the tile's loaded elements to compute-type pairs (Problem::convert),
//     2. issue the next tile's loads (so they are in flight while this one is scanned),
//     3. fold each vector's pairs into one Affine pair (thread layer),
//     4. scan the group's pairs with the carried state (warp or block layer): the state entering
//        each vector, and the carry advanced past the tile,
//     5. run the recurrence over each vector and store what the Problem makes of it.
//
// A tile is kRuns runs of kLanes vectors (16 bytes each, or one element on the scalar path);
// lane r holds vector r of every run, so each warp-wide access is one contiguous stretch. Tiles
// sit on a grid anchored at the 16-byte boundary at or before the sequence's first element, so
// every vector access is aligned whatever the sequence's offset; grid positions outside the
// sequence hold the identity (1, 0) and are neither read nor written.
#pragma once

#include <cstdint>

#include "../../affine.cuh"
#include "../../thread/thread_scan.cuh"

namespace ascan {
namespace detail {

/// Elements per access: one 16-byte vector on the vector path, one element on the scalar path.
template <class T, bool kVector>
constexpr int kAccessItems = kVector ? static_cast<int>(16 / sizeof(T)) : 1;

/// Elements between the 16-byte boundary at or before `p` and `p`: the sequence's lead on the
/// tile grid.
template <class T>
__device__ __forceinline__ int64_t lead_of(const T* p) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) % 16 / sizeof(T));
}

/// Where one sequence of a (batch, channels) grid lives: the element offset of its first element
/// and the index of its initial and final states. `Params` is ScanParams or BackwardParams.
struct SequenceSite {
  int64_t offset;
  int64_t state;
};
template <class Params>
__device__ __forceinline__ SequenceSite locate_sequence(const Params& p, int64_t seq) {
  const int64_t bi = seq / p.channels;
  const int64_t ci = seq - bi * p.channels;
  return {bi * p.batch_stride + ci * p.channel_stride,
          bi * p.state_batch_stride + ci * p.state_channel_stride};
}

/// The positions of [v, v + kVec) that lie inside [lo, hi), one bit each (bit i: position
/// v + i): the 64-bit bounds are clamped to the vector once, so that each element of a vector at
/// a sequence's edge is tested with one bit of a register, not two 64-bit comparisons. Every
/// stream of a vector shares the mask. At a short sequence's edges those tests were most of a
/// one-block kernel's instructions (bench/RESULTS.md, "The launch-bound cells and the sequences'
/// edge vectors").
template <int kVec>
__device__ __forceinline__ uint32_t inside_mask(int64_t v, int64_t lo, int64_t hi) {
  static_assert(kVec >= 1 && kVec <= 16, "a vector of at most 16 elements");
  const int64_t from = lo - v, to = hi - v;  // inside: i in [from, to)
  const int first = from <= 0 ? 0 : from >= kVec ? kVec : static_cast<int>(from);
  const int last = to <= 0 ? 0 : to >= kVec ? kVec : static_cast<int>(to);
  return ((1u << last) - 1u) & ~((1u << first) - 1u);
}

/// The elements of [v, v + kVec) one by one: loaded where `inside` (inside_mask) has their bit,
/// `fill` elsewhere; stored where it has.
template <int kVec, class T>
__device__ __forceinline__ void load_elements(const T* p, int64_t v, uint32_t inside, T (&r)[kVec],
                                              T fill) {
  const T* q = p + v;
#pragma unroll
  for (int i = 0; i < kVec; ++i) r[i] = (inside >> i & 1u) ? q[i] : fill;
}
template <int kVec, class T>
__device__ __forceinline__ void store_elements(T* p, int64_t v, uint32_t inside,
                                               const T (&r)[kVec]) {
  T* q = p + v;
#pragma unroll
  for (int i = 0; i < kVec; ++i)
    if (inside >> i & 1u) q[i] = r[i];
}
/// The same, each element tested against [lo, hi) on its own.
template <int kVec, class T>
__device__ __forceinline__ void load_elements(const T* p, int64_t v, int64_t lo, int64_t hi,
                                              T (&r)[kVec], T fill) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) r[i] = (v + i >= lo && v + i < hi) ? p[v + i] : fill;
}
template <int kVec, class T>
__device__ __forceinline__ void store_elements(T* p, int64_t v, int64_t lo, int64_t hi,
                                               const T (&r)[kVec]) {
#pragma unroll
  for (int i = 0; i < kVec; ++i)
    if (v + i >= lo && v + i < hi) p[v + i] = r[i];
}

/// Loads the `kVec` elements [v, v + kVec) of a sequence whose grid position v lives at `p[v]`:
/// one 16-byte load when all of them lie inside [lo, hi), else guarded scalars; positions outside
/// [lo, hi) are not read and take `fill`. With kInside the caller knows that all of them do (the
/// vector path only): the 16-byte load, no test.
///
/// kMasked (vector path): the vector is tested through its inside_mask, one mask for every
/// stream of the vector. scan_tiles asks for it in one-tile kernels of up to 1024 elements, where
/// a short sequence's edges hold many of its vectors: on the H200 it took 11-28% off the time of
/// bf16 cells of 4096-16384 sequences of 100-300 elements. Where edges are rare the bounds test
/// stays: with the mask everywhere, the chunked f32 kernel lost a block per multiprocessor to
/// registers and the flat kernel's cells ran 3-8% slower (bench/RESULTS.md, "The launch-bound
/// cells and the sequences' edge vectors").
template <int kVec, bool kInside = false, bool kMasked = false, class T>
__device__ __forceinline__ void load_vector(const T* p, int64_t v, int64_t lo, int64_t hi,
                                            T (&r)[kVec], T fill) {
  static_assert(!kInside || kVec > 1, "kInside is for 16-byte vectors");
  static_assert(kVec == 1 || kVec * sizeof(T) == 16, "vectors are 16 bytes");
  if constexpr (kMasked && !kInside && kVec > 1) {
    const uint32_t inside = inside_mask<kVec>(v, lo, hi);
    if (inside == (1u << kVec) - 1u)
      *reinterpret_cast<uint4*>(r) = __ldg(reinterpret_cast<const uint4*>(p + v));
    else
      load_elements<kVec>(p, v, inside, r, fill);
  } else if (kInside || (kVec > 1 && v >= lo && v + kVec <= hi)) {
    *reinterpret_cast<uint4*>(r) = __ldg(reinterpret_cast<const uint4*>(p + v));
  } else {
    load_elements<kVec>(p, v, lo, hi, r, fill);
  }
}

/// One 16-byte vector stored at `p` (global, 16-byte aligned) with one instruction, no memory
/// order. The row kernels build their output vectors from narrowed words (memcpy into a uint4);
/// assigned through a cast pointer, those compiled to four 4-byte stores (sm_90 SASS: STG.E four
/// times where STG.E.128 was meant, whether the pointer was cast, assumed aligned or the vector
/// rebuilt with make_uint4), four L2 writes of the same sectors. __stwb keeps the vector but
/// compiles to a strong store (STG.E.128.STRONG.SM). PTX, as CCCL has no wrapper for a plain
/// vector store. store_vector below still assigns through a cast pointer, and many of its
/// 16-bit instantiations compile to the same four stores: switched to this one, the
/// time-contiguous kernels ran no faster (bench/RESULTS.md, "Whole-vector stores in the
/// time-contiguous kernels"), so they keep it.
__device__ __forceinline__ void store_vector_16(void* p, uint4 w) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w.x), "r"(w.y), "r"(w.z),
               "r"(w.w));
}

/// Stores the elements of [v, v + kVec) that lie inside [lo, hi) to `p[v]` (kInside and
/// kMasked: as load_vector's).
template <int kVec, bool kInside = false, bool kMasked = false, class T>
__device__ __forceinline__ void store_vector(T* p, int64_t v, int64_t lo, int64_t hi,
                                             const T (&r)[kVec]) {
  static_assert(!kInside || kVec > 1, "kInside is for 16-byte vectors");
  static_assert(kVec == 1 || kVec * sizeof(T) == 16, "vectors are 16 bytes");
  if constexpr (kMasked && !kInside && kVec > 1) {
    const uint32_t inside = inside_mask<kVec>(v, lo, hi);
    if (inside == (1u << kVec) - 1u)
      *reinterpret_cast<uint4*>(p + v) = *reinterpret_cast<const uint4*>(r);
    else
      store_elements<kVec>(p, v, inside, r);
  } else if (kInside || (kVec > 1 && v >= lo && v + kVec <= hi)) {
    *reinterpret_cast<uint4*>(p + v) = *reinterpret_cast<const uint4*>(r);
  } else {
    store_elements<kVec>(p, v, lo, hi, r);
  }
}

/// The rare edge of a sequence, out of line: the elements of [v, v + kVec) that lie inside
/// [lo, hi), `fill` elsewhere (load), or stored where inside (store). Called only for a vector
/// that straddles lo or hi (vector path).
template <int kVec, class T>
__device__ __noinline__ uint4 load_straddling(const T* p, int64_t v, int64_t lo, int64_t hi,
                                              T fill) {
  alignas(16) T r[kVec];
  load_elements<kVec>(p, v, lo, hi, r, fill);
  return *reinterpret_cast<const uint4*>(r);
}
template <int kVec, class T>
__device__ __noinline__ void store_straddling(T* p, int64_t v, int64_t lo, int64_t hi, uint4 y) {
  alignas(16) T r[kVec];
  *reinterpret_cast<uint4*>(r) = y;
  store_elements<kVec>(p, v, lo, hi, r);
}

/// load_vector and store_vector (vector path) for code that only a sequence's edge tiles run
/// (the multi-block staged kernel): inside, the 16-byte access; outside, the fill or nothing;
/// a vector that straddles an edge out of line. Such code is cold in the instruction cache when
/// it runs, and under full memory load every miss waits as long as a load: unrolled inline, the
/// guarded code makes the edge tiles live 4-5 us longer than the others on the H200
/// (bench/RESULTS.md, "Few long sequences").
template <int kVec, class T>
__device__ __forceinline__ void load_vector_at_edge(const T* p, int64_t v, int64_t lo, int64_t hi,
                                                    T (&r)[kVec], T fill) {
  static_assert(kVec > 1 && kVec * sizeof(T) == 16, "vectors are 16 bytes");
  if (v >= lo && v + kVec <= hi) {
    *reinterpret_cast<uint4*>(r) = __ldg(reinterpret_cast<const uint4*>(p + v));
  } else if (v + kVec <= lo || v >= hi) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) r[i] = fill;
  } else {
    *reinterpret_cast<uint4*>(r) = load_straddling<kVec>(p, v, lo, hi, fill);
  }
}
template <int kVec, class T>
__device__ __forceinline__ void store_vector_at_edge(T* p, int64_t v, int64_t lo, int64_t hi,
                                                     const T (&r)[kVec]) {
  static_assert(kVec > 1 && kVec * sizeof(T) == 16, "vectors are 16 bytes");
  if (v >= lo && v + kVec <= hi)
    *reinterpret_cast<uint4*>(p + v) = *reinterpret_cast<const uint4*>(r);
  else if (v + kVec > lo && v < hi)
    store_straddling<kVec>(p, v, lo, hi, *reinterpret_cast<const uint4*>(r));
}

/// The thread layer of a tile, run by run: a thread holds kRuns vectors (one per run) at grid
/// positions at(j). Shared by the one-block loop below and lookback_kernel.
template <bool kMasked = false, class Problem, int kRuns, class At>
__device__ __forceinline__ void load_runs(const Problem& problem,
                                          typename Problem::Loaded (&loaded)[kRuns], const At& at) {
#pragma unroll
  for (int j = 0; j < kRuns; ++j) problem.template load<false, kMasked>(loaded[j], at(j));
}
template <bool kMasked = false, class Problem, int kRuns, class At>
__device__ __forceinline__ void convert_runs(const Problem& problem,
                                             const typename Problem::Loaded (&loaded)[kRuns],
                                             const At& at, typename Problem::Work (&work)[kRuns]) {
#pragma unroll
  for (int j = 0; j < kRuns; ++j) problem.template convert<kMasked>(loaded[j], at(j), work[j]);
}
/// Folds each run's pairs into one Affine pair.
template <class Problem, int kRuns, class C = typename Problem::C>
__device__ __forceinline__ void reduce_runs(const typename Problem::Work (&work)[kRuns],
                                            Affine<C> (&aggregate)[kRuns]) {
#pragma unroll
  for (int j = 0; j < kRuns; ++j)
    aggregate[j] = thread_reduce<Problem::kReverse>(work[j].a, work[j].b);
}
/// Runs the recurrence over each run from the state entering it and stores what the Problem
/// makes of the results.
template <bool kMasked = false, class Problem, int kRuns, class At, class C = typename Problem::C>
__device__ __forceinline__ void scan_runs(const Problem& problem,
                                          typename Problem::Work (&work)[kRuns],
                                          const C (&incoming)[kRuns], const At& at) {
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    thread_scan<Problem::kReverse>(incoming[j], work[j].a, work[j].b);
    problem.template store<false, kMasked>(work[j], at(j));
  }
}

/// Runs `problem` over its sequence with a group of kLanes threads, this one at `rank`; `group`
/// is a WarpScan or BlockScan over kRuns = kItems / Problem::kVec runs. Every group walks
/// ceil(p.span_bound / tile) tiles, or exactly one with kOneTile, so groups that share shuffles
/// stay in step (inactive groups included: their problem masks everything). `carry` enters as
/// the state before the first element in scan order and leaves as the state after the last.
template <class Problem, int kLanes, int kItems, bool kOneTile, class Group>
__device__ __forceinline__ void scan_tiles(const Problem& problem,
                                           const typename Problem::Params& p, int rank,
                                           Group& group, typename Problem::C& carry) {
  using C = typename Problem::C;
  constexpr bool kReverse = Problem::kReverse;
  constexpr int kVec = Problem::kVec;
  static_assert(kItems % kVec == 0, "items per thread are whole vectors");
  constexpr int kRuns = kItems / kVec;
  constexpr int64_t kRun = int64_t(kLanes) * kVec;
  constexpr int64_t kTile = kRun * kRuns;
  const int64_t tiles = kOneTile ? 1 : (p.span_bound + kTile - 1) / kTile;
  // Vectors tested through their inside_mask (load_vector's kMasked): one tile of at most 1024
  // elements, where a sequence's edges hold a large share of its vectors. Over 2048-element
  // tiles the mask measured 1-3% slower on the H200 (bf16 backward, 1500 and 2048 elements).
  constexpr bool kMasked = kOneTile && kTile <= 1024;

  // Grid position of this thread's vector in run j of the k-th tile in scan order.
  auto position = [&](int64_t k, int j) {
    return (kReverse ? tiles - 1 - k : k) * kTile + j * kRun + int64_t(rank) * kVec;
  };

  typename Problem::Loaded loaded[kRuns];
  load_runs<kMasked>(problem, loaded, [&](int j) { return position(0, j); });

#pragma unroll 1
  for (int64_t k = 0; k < tiles; ++k) {
    const auto at = [&](int j) { return position(k, j); };
    typename Problem::Work work[kRuns];
    convert_runs<kMasked>(problem, loaded, at, work);
    if (!kOneTile && k + 1 < tiles)  // the next tile's loads go out before this one's scan
      load_runs<kMasked>(problem, loaded, [&](int j) { return position(k + 1, j); });
    Affine<C> aggregate[kRuns];
    reduce_runs<Problem>(work, aggregate);
    C incoming[kRuns];
    group.scan_state(aggregate, incoming, carry);
    const int64_t origin = (kReverse ? tiles - 1 - k : k) * kTile;  // the tile's first position
    scan_runs<kMasked>(problem, work, incoming, at);
    // The tile that holds the sequence's last element in scan order: the final state.
    if (problem.holds_last(origin, kTile)) problem.template finish_stored<kRun, kRuns>(p, at(0));
  }
}

/// Scans sequence `seq` with a group of kLanes threads (this one at `rank`): the Problem built for
/// it (Problem::at), its initial carry, the tile walk, and the Problem's use of the final carry
/// (Problem::finish, by rank 0). With `active` false the group takes part in every shuffle and
/// barrier but reads and writes nothing.
template <class Problem, int kLanes, int kItems, bool kOneTile, class Group>
__device__ __forceinline__ void scan_sequence(const typename Problem::Params& p, int64_t seq,
                                              bool active, int rank, Group& group) {
  const Problem problem = Problem::template at<kLanes>(p, seq, active, rank);
  typename Problem::C carry = problem.initial_carry(p);
  scan_tiles<Problem, kLanes, kItems, kOneTile>(problem, p, rank, group, carry);
  if (active && rank == 0) problem.finish(p, carry);
}

}  // namespace detail
}  // namespace ascan
