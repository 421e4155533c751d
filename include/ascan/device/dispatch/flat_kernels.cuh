// ascan/device/dispatch/flat_kernels.cuh: the flat kernel, many short sequences to a block
// (device/agent/flat_tiles.cuh), and the host rule that takes it.
//
// A block scans a range of whole sequences, so no state crosses from one block to another: no
// look-back, no scratch memory, and bitwise the same result run after run. The range is walked
// in tiles of FlatPolicy::tile() elements, the next tile's loads in flight while the current one
// is scanned (as the chunked kernel does), with about FlatPolicy::max_tiles_per_block tiles a block
// at most: fewer where the call is small, so that the grid still fills the GPU, and as many as
// end the grid on a full wave of resident blocks (flat_sequences_per_block).
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "../agent/flat_tiles.cuh"
#include "../status.cuh"
#include "scan_kernels.cuh"
#include "tuning.cuh"

namespace ascan {
namespace detail {

/// Where a thread's vectors of a flat range's tiles lie: tile k in scan order, run j of it, on
/// the vector grid (each warp-wide access one contiguous stretch).
template <int kThreads, int kItems, int kVec, bool kReverse>
struct FlatWalk {
  static constexpr int kRuns = kItems / kVec;
  static constexpr int64_t kRun = int64_t(kThreads) * kVec;
  static constexpr int64_t kTile = kRun * kRuns;
  int64_t origin, tiles;
  int32_t n, lead_in;  // the range's elements; the grid's start less the range's (-(kVec - 1)..0)
  int rank;

  __device__ __forceinline__ FlatWalk(const FlatRange& r, int rank_)
      : origin(r.lo - r.lo % kVec),
        tiles(ceil_div(r.hi - (r.lo - r.lo % kVec), kTile)),
        n(static_cast<int32_t>(r.hi - r.lo)),  // the host keeps ranges under 2^31
        lead_in(static_cast<int32_t>((r.lo - r.lo % kVec) - r.lo)),
        rank(rank_) {}
  __device__ __forceinline__ int64_t position(int64_t k, int j) const {
    return origin + (kReverse ? tiles - 1 - k : k) * kTile + j * kRun + int64_t(rank) * kVec;
  }
  /// The same vector's place from the range's first element.
  __device__ __forceinline__ int32_t relative(int64_t k, int j) const {
    return static_cast<int32_t>((kReverse ? tiles - 1 - k : k) * kTile + j * kRun + rank * kVec) +
           lead_in;
  }
};

/// Walks a flat range of `problem` tile by tile in scan order, the next tile's loads in flight
/// while the current one is worked: on_tile(work, marks, k) gets tile k's pairs and marks, run by
/// run, once the next tile's loads have gone out.
template <class Problem, class Walk, class OnTile>
__device__ __forceinline__ void walk_flat_tiles(const Problem& problem,
                                                const typename Problem::Params& p, const Walk& w,
                                                const FastDivisor& length, OnTile&& on_tile) {
  constexpr int kRuns = Walk::kRuns;
  typename Problem::Loaded loaded[kRuns];
#pragma unroll
  for (int j = 0; j < kRuns; ++j) problem.load(loaded[j], w.position(0, j));
#pragma unroll 1
  for (int64_t k = 0; k < w.tiles; ++k) {
    typename Problem::Work work[kRuns];
    typename Problem::Marks marks[kRuns];
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      marks[j] = problem.marks(w.relative(k, j), w.n, length);
      problem.convert(loaded[j], w.position(k, j), marks[j], p, work[j]);
    }
    if (k + 1 < w.tiles) {  // the next tile's loads go out before this one is worked
#pragma unroll
      for (int j = 0; j < kRuns; ++j) problem.load(loaded[j], w.position(k + 1, j));
    }
    on_tile(work, marks, k);
  }
}

/// A tile's scan from `carry` (the state before it; after it on return) and its stores.
template <class Problem, class Walk, class Scan, class Work, class Marks>
__device__ __forceinline__ void scan_flat_tile(const Problem& problem,
                                               const typename Problem::Params& p, const Walk& w,
                                               Scan& scan, Work (&work)[Walk::kRuns],
                                               const Marks (&marks)[Walk::kRuns], int64_t k,
                                               typename Problem::C& carry) {
  using C = typename Problem::C;
  constexpr int kRuns = Walk::kRuns;
  Segment<C> aggregate[kRuns];
#pragma unroll
  for (int j = 0; j < kRuns; ++j)
    aggregate[j] = segment_reduce<Problem::kReverse>(work[j].a, work[j].b, marks[j].first);
  C incoming[kRuns];
  scan.scan_state(aggregate, incoming, carry);
#pragma unroll
  for (int j = 0; j < kRuns; ++j) {
    segment_scan<Problem::kReverse>(incoming[j], work[j].a, work[j].b, marks[j].first);
    problem.store(work[j], w.position(k, j), marks[j], p);
  }
}

/// Flat kernel: range `range` of whole sequences (Problem::range: `per_block` of them, or those
/// of a packed window; grid-stride over `ranges` ranges), walked tile by tile in scan order; a
/// thread holds kItems / kVec vectors of each tile, striped across the block.
template <class Problem, int kThreads, int kItems, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, launch_min_blocks(kThreads, kMinBlocks))
    flat_kernel(const typename Problem::Params p, const int64_t per_block, const int64_t ranges,
                const FastDivisor length) {
  using C = typename Problem::C;
  constexpr int kVec = Problem::kVec;
  static_assert(kItems % kVec == 0, "items per thread are whole vectors");
  using Walk = FlatWalk<kThreads, kItems, kVec, Problem::kReverse>;
  using Scan = SegmentBlockScan<C, kThreads, Problem::kReverse, Walk::kRuns>;
  __shared__ typename Scan::TempStorage storage;
  Scan scan(storage);
  const int rank = static_cast<int>(threadIdx.x);

  for (int64_t range = blockIdx.x; range < ranges; range += gridDim.x) {
    const FlatRange r = Problem::range(p, range, per_block);
    const Problem problem = Problem::at(p, r);
    problem.template empties<kThreads>(p, rank);
    if (r.hi <= r.lo) continue;  // the same for the whole block
    const Walk w(r, rank);
    C carry = C(0);  // the range's first element in scan order starts a sequence
    walk_flat_tiles(problem, p, w, length, [&](auto& work, const auto& marks, int64_t k) {
      scan_flat_tile(problem, p, w, scan, work, marks, k, carry);
    });
  }
}

/// Whether a call's sequences lie back to back in every array (element (s, t) of each array at
/// s * length + t from its pointer) and its states at one stride per sequence: the layouts the
/// flat kernel reads. `state_stride` gets that stride.
template <class Params>
bool flat_layout(const Params& p, int64_t& state_stride) {
  const int64_t batch = p.sequences / p.channels;
  // x == n * m without forming a product that may overflow (strides can be anything valid)
  const auto is_product = [](int64_t x, int64_t n, int64_t m) {
    int64_t product = 0;
    return !__builtin_mul_overflow(n, m, &product) && product == x;
  };
  const bool dense = (p.channels == 1 || p.channel_stride == p.length) &&
                     (batch == 1 || is_product(p.batch_stride, p.channels, p.length));
  const bool states = p.channels == 1 || batch == 1 ||
                      is_product(p.state_batch_stride, p.channels, p.state_channel_stride);
  state_stride = p.channels == 1 ? p.state_batch_stride : p.state_channel_stride;
  return dense && states && p.length <= (int64_t{1} << 24);
}

/// Whether the library takes the flat kernel for a call of `sequences` sequences of `length`
/// elements on `sms` multiprocessors (one block per sequence otherwise; the multi-block path is
/// planned first): sequences no longer than F.max_length, at least F.min_sequences_per_sm of them
/// per multiprocessor (F.tiny_min_sequences_per_sm where they are at most F.tiny_length long,
/// F.band_min_sequences_per_sm where their length lies in the band and fills less than
/// F.band_max_fill of `one_block_span`, the elements one block per sequence's tiles would cover:
/// covered_span). There one block per sequence launches blocks that each hold only a few tiles'
/// work, or tiles largely idle, and their launch and ramp-up, not the memory, set the pace.
inline bool flat_pays(int64_t sequences, int64_t length, int sms, const FlatPolicy& F,
                      int64_t one_block_span) {
  const bool band = length >= F.band_min_length && length <= F.band_max_length &&
                    double(length) < F.band_max_fill * double(one_block_span);
  const double per_sm = length <= F.tiny_length ? F.tiny_min_sequences_per_sm
                        : band                  ? F.band_min_sequences_per_sm
                                                : F.min_sequences_per_sm;
  return length <= F.max_length && double(sequences) >= per_sm * double(sms > 0 ? sms : 1);
}

/// Sequences per block. Blocks of equal work retire in waves of F.blocks_per_sm per
/// multiprocessor, and a last wave only partly filled leaves multiprocessors idle for a whole
/// block's time (up to F.max_tiles_per_block tiles). So the count is chosen, among those that
/// spread the call evenly over the fewest whole waves that keep blocks within
/// F.max_tiles_per_block tiles and over up to three waves more, as the one whose waves walk the
/// fewest tiles one after another, the larger on a tie. A block takes at least a tile's worth of
/// sequences (a call that small is launch-bound: fewer would only leave lanes idle).
inline int64_t flat_sequences_per_block(int64_t sequences, int64_t length, const FlatPolicy& F,
                                        int sms) {
  const int64_t tile = F.tile();
  const int64_t resident = int64_t(sms > 0 ? sms : 1) * F.blocks_per_sm;
  const int64_t least = tile / length > 1 ? tile / length : 1;
  const double tiles = double(sequences) * double(length) / double(tile);  // no overflow
  const double fewest = std::ceil(tiles / (double(resident) * F.max_tiles_per_block));
  int64_t best = least;
  double best_cost = -1;
  for (int extra = 0; extra < 4; ++extra) {
    const double waves = (fewest > 1 ? fewest : 1) + extra;
    int64_t per_block =
        static_cast<int64_t>(std::ceil(double(sequences) / (double(resident) * waves)));
    if (per_block < least) per_block = least;
    const double blocks = std::ceil(double(sequences) / double(per_block));
    // the slowest wave: whole waves of blocks, each walking its range's tiles one after another
    const double cost = std::ceil(blocks / double(resident)) *
                        std::ceil(double(per_block) * double(length) / double(tile));
    if (best_cost < 0 || cost < best_cost || (cost == best_cost && per_block > best)) {
      best = per_block;
      best_cost = cost;
    }
  }
  // a range's elements are counted in int32 (flat_layout bounds the length by 2^24)
  const int64_t most = (int64_t{1} << 30) / length;
  return best < most ? best : (most > 1 ? most : 1);
}

/// Launches the flat kernel of `Problem` with policy F = Flat::kPolicy on `sms` multiprocessors.
template <class Problem, class Flat>
cudaError_t launch_flat(const typename Problem::Params& p, int sms, cudaStream_t stream) {
  constexpr FlatPolicy F = Flat::kPolicy;
  constexpr int kMinBlocks = Problem::kVec > 1 ? F.min_blocks : 1;
  const int64_t per_block = flat_sequences_per_block(p.sequences, p.length, F, sms);
  const int64_t ranges = ceil_div(p.sequences, per_block);
  constexpr int64_t kMaxGrid = 2147483647;  // the grid-stride loop covers the rest
  return launch_kernel(&flat_kernel<Problem, F.threads, F.items, kMinBlocks>,
                       ranges < kMaxGrid ? ranges : kMaxGrid, F.threads, 0, stream, p, per_block,
                       ranges, FastDivisor::of(static_cast<uint32_t>(p.length)));
}

/// Launches the flat kernel of packed `Problem` (FlatPackedForward, FlatPackedBackward) with
/// policy F = Flat::kPolicy on `sms` multiprocessors: windows of as many tiles (1 to
/// F.max_tiles_per_block) as spread the call over the resident blocks, each channel's length cut
/// into length / window + 1 windows (the last holds the sequences that start at its end: empty
/// ones).
template <class Problem, class Flat>
cudaError_t launch_flat_packed(typename Problem::Params p, int sms, cudaStream_t stream) {
  constexpr FlatPolicy F = Flat::kPolicy;
  constexpr int kMinBlocks = Problem::kVec > 1 ? F.min_blocks : 1;
  const double tiles = double(p.channels) * double(p.length) / double(F.tile());
  const double resident = double(sms > 0 ? sms : 1) * F.blocks_per_sm;
  int64_t per_window = tiles / resident < double(F.max_tiles_per_block)
                           ? static_cast<int64_t>(tiles / resident)
                           : F.max_tiles_per_block;
  if (per_window < 1) per_window = 1;
  p.window = per_window * F.tile();
  p.windows = p.length / p.window + 1;
  const int64_t ranges = p.channels * p.windows;
  constexpr int64_t kMaxGrid = 2147483647;  // the grid-stride loop covers the rest
  return launch_kernel(&flat_kernel<Problem, F.threads, F.items, kMinBlocks>,
                       ranges < kMaxGrid ? ranges : kMaxGrid, F.threads, 0, stream, p, int64_t{0},
                       ranges, FastDivisor::of(1));
}

/// launch_flat for `Problem<T, reverse, vector>` on a device of `sms` multiprocessors.
template <template <class, bool, bool> class Problem, class T, class Flat>
cudaError_t launch_flat(bool reverse, bool vector,
                        const typename Problem<T, false, false>::Params& p, int sms,
                        cudaStream_t stream) {
  if (reverse)
    return vector ? launch_flat<Problem<T, true, true>, Flat>(p, sms, stream)
                  : launch_flat<Problem<T, true, false>, Flat>(p, sms, stream);
  return vector ? launch_flat<Problem<T, false, true>, Flat>(p, sms, stream)
                : launch_flat<Problem<T, false, false>, Flat>(p, sms, stream);
}

}  // namespace detail
}  // namespace ascan
