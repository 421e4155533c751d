// ascan/device/dispatch/row_dispatch.cuh: the row path's dispatch, run_rows: which of its
// kernels (row_kernels.cuh's row_kernel walking or looking back, dense_rows.cuh's
// dense_row_kernel) and which workspace a row-path call takes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../status.cuh"
#include "dense_rows.cuh"
#include "dispatch.cuh"
#include "row_kernels.cuh"

namespace ascan {
namespace detail {

#if defined(__CUDACC__)

/// The dense row kernel's short 256-thread tile (dense_rows.cuh): 8 rows a thread (backward,
/// three arrays in: 4, and 5 for 16-bit types), 8 lanes of 16 bytes along channels: 256-byte rows
/// halve the chains and 6 or 4 rows forward were slower (bench/RESULTS.md, "Channel-last and
/// packed layouts: the row path"). Backward, 5 rows (160-row tiles) against 4: in the tile probe
/// bf16 0.03-0.09 of the copy faster on five of ten shapes (few chains most) and up to 0.03 slower
/// on four; f32 slower on seven of ten shapes (up to 0.07), so f32 keeps 4 ("Few chains"). Which
/// calls take it, and the other shapes below, is dense_tile's choice ("Block shapes": since the
/// look-back's 6 rounds and record prefetch, 128-thread blocks win wherever chains are many).
constexpr int kDenseThreads = 256, kDenseLanes = 8;
template <class T, bool kBackward>
constexpr int kDenseRows = kBackward ? (sizeof(T) == 2 ? 5 : 4) : 8;

/// The tall tiles: 12 rows a thread forward (384-row tiles), 8 backward (256), 96 KiB of staged
/// rows a block, two blocks per multiprocessor where the short ones fit three. A chain (a
/// sequence's slab of channels) of many tiles waits on its look-back's front, which moves a few
/// tiles per L2 round trip whatever their height, so fewer, taller tiles move it further; where a
/// call is short the short tiles' third block per multiprocessor wins. On the H200
/// (bench/RESULTS.md, "Tall tiles"; bench/results/dense_rows_tall_cadcbc2.txt,
/// dense_rows_walk_cadcbc2.txt), of a same-traffic copy: backward, 8 rows against the short tile,
/// bf16 0.03-0.10 faster on every shape of 2048 positions or more and on the packed batches
/// (log-uniform 0.65 -> 0.77, skewed 0.57 -> 0.66), slower at 128-1024 positions; forward, 12
/// rows against 8 at 2^15-2^18 positions, bf16 0.02-0.06 faster with 4-48 chains, slower at 1024-
/// 3000 positions (up to 0.06) and on the packed batches (f32 0.82 -> 0.76). Rows of 16 (one
/// block per multiprocessor) forward, or 9 and 10 backward, were slower.
template <bool kBackward>
constexpr int kDenseTallRows = kBackward ? 8 : 12;
/// Positions from which a call on 256-thread blocks takes the tall tiles (dense calls).
template <bool kBackward>
constexpr int64_t kDenseTallLength = kBackward ? 2048 : 4096;
/// Packed calls (one chain per slab over every row): narrow blocks (below) in f32 and double; in
/// 16-bit types the half-slab tile (below), forward and backward.
template <class T>
constexpr bool kDensePackedNarrow = sizeof(T) != 2;

/// The narrow blocks: 128 threads (16 row groups), 8 rows a thread (128-row tiles, 32 KiB staged
/// forward, 48 backward) or more from kDenseNarrowTallLength positions (kDenseNarrowTallRows:
/// 256-row tiles forward, 64 KiB; 192-row backward, 72 KiB), three to six blocks per
/// multiprocessor. Against 256-thread blocks on dense calls with many
/// chains (bench/results/dense_rows_threads_b33a32d.txt, H200, of a same-traffic copy): bf16
/// forward (8, 128, 1536) 0.57 -> 0.67, (64, 300, 768) 0.59 -> 0.72, (16, 2048, 2048) 0.82 ->
/// 0.86, (8, 65536, 1536) 0.90 -> 0.94 (12 rows); bf16 backward 0.60-0.84 -> 0.63-0.90; f32
/// backward 0.70-0.90 -> 0.77-0.93, and in the probe faster than walking on every shape walking
/// took (in the benchmark f32 (8, 128, 1536) backward 0.3-0.6 us slower than walking,
/// bench/RESULTS.md "Block shapes"); f32 forward 0.77 -> 0.84 at (8, 128, 1536), 0.94-0.95 ->
/// 0.96-0.97 on the long shapes, 0.01-0.02 slower at 512-2048 positions with 1024 chains. A block's
/// look-back has half the lanes a channel (16-bit types: 2), so with few chains, whose tiles wait
/// on deep look-backs, 16-bit calls crawl (bench/results/dense_rows_chains_b33a32d.txt: bf16 (1,
/// 2^20, 256) forward 0.73 on 256 x 12, 0.20 on 128 x 12; even at 32 chains 0.88 against 0.82) and
/// keep 256-thread blocks under kDenseNarrowChainsPerSm chains per multiprocessor (64 chains: 0.89
/// against 0.88 forward, 0.88 against 0.90 backward; 128: 0.89 against 0.95, 0.86 against 0.92);
/// f32 and double (4 and 8 lanes a channel) take them at any count (f32 (1, 2^20, 256) backward
/// 0.76 -> 0.93).
///
/// The narrow tall tiles forward are 16 rows a thread (256-row tiles, 64 KiB staged, three blocks
/// a multiprocessor), from 2048 positions in f32 and double, 4096 in 16-bit types; backward 12.
/// Against 12 rows (bench --ascan_tune_rows, H200, lowest of three runs of a same-traffic copy,
/// bench/results/tune_rows_6f3021d_run*.json.gz): f32 (1, 2^20, 256) 0.887 -> 0.921, (16, 2048,
/// 2048) 0.912 -> 0.921 (0.894 on 8 rows, which it took), (8, 65536, 1536) 0.952 -> 0.959, the
/// packed batches 0.843 / 0.816 -> 0.860 / 0.850, (8, 8192, 1536) and (4, 4096, 4096) within
/// 0.007 (0.944 / 0.942); bf16 (8, 65536, 1536) 0.928 -> 0.943, (8, 8192, 1536) 0.873 -> 0.879;
/// at 1024 positions 8 rows stay ahead (f32 0.863 against 0.818), and bf16 (16, 2048, 2048)
/// keeps 8 (0.847 against 0.825). Double takes f32's rule, unmeasured.
constexpr int kDenseNarrowThreads = 128, kDenseNarrowRows = 8;
template <bool kBackward>
constexpr int kDenseNarrowTallRows = kBackward ? 12 : 16;
template <class T, bool kBackward>
constexpr int64_t kDenseNarrowTallLength = kBackward ? (sizeof(T) == 2 ? 8192 : 2048)
                                                     : (sizeof(T) == 2 ? 4096 : 2048);
constexpr double kDenseNarrowChainsPerSm = 0.45;

/// The half-slab tile: 128 threads in 4 lanes of 16 bytes along channels (64-byte slabs), 16
/// rows a thread forward (512-row tiles, 64 KiB staged) and 12 backward (384-row tiles, 72 KiB),
/// which packed 16-bit calls take. A packed call's chains are its slabs, so few (a 256-channel
/// bf16 batch has 4 of 128 bytes), and each tile waits on a deep look-back; half slabs double the
/// chains and the look-back lanes a channel (4 in 128 threads, where 128-byte slabs of 16-bit
/// values give 2, and 4 in 256 threads). Measured (bench --ascan_tune_rows, of a same-traffic
/// copy) on an H100: forward, lowest of three runs, bf16 0.849 on 256 x 8 -> 0.899 on the
/// log-uniform batch (2^22 tokens, 1024 channels), 0.771 -> 0.857 on the skewed one (256
/// channels), 0.829 there on 128 x 8 in 4 lanes
/// (bench/results/tune_packed_rows_a48133d_h100_run*.json.gz); on the H200 the library's rows,
/// 256 x 8 then half slabs (two builds, two machine starts: bench/RESULTS.md, "The layouts' rows
/// at a2a3058"), went 0.714 -> 0.742 (log-uniform) and 0.594 -> 0.673 (skewed). Backward, since
/// the whole-vector output stores (f386540), 128 x 12 in 4 lanes against the 256 x 8 tall tile
/// the packed 16-bit calls took before, lowest of two runs: log-uniform 0.852 -> 0.912, skewed
/// 0.822 -> 0.902, ahead of every other shape on both batches
/// (bench/results/tune_rows_bf16_786f154_h100_run*.json.gz; before those stores every half-slab
/// shape was slower backward, 0.68-0.77 against 0.81 skewed); on the H200 the library's rows,
/// 256 x 8 tall then half slabs (two builds, two machine starts: bench/RESULTS.md, "The layouts'
/// rows at ba78d21"), went 0.795 -> 0.884 (log-uniform) and 0.689 -> 0.823 (skewed). Dense calls,
/// whose chains are
/// many, keep their tiles (the 4-lane shapes up to 0.1 slower both ways; dense (1, 2^20, 256)
/// bf16 backward 0.911 against 0.934).
constexpr int kDenseHalfLanes = 4;
template <bool kBackward>
constexpr int kDenseHalfRows = kBackward ? 12 : 16;

/// The dense row kernel's block shapes: threads x rows a thread (DenseShape).
enum class DenseTile {
  kShort,       ///< 256 x kDenseRows
  kTall,        ///< 256 x kDenseTallRows
  kNarrow,      ///< 128 x kDenseNarrowRows
  kNarrowTall,  ///< 128 x kDenseNarrowTallRows
  kHalfSlab,    ///< 128 x kDenseHalfRows in kDenseHalfLanes lanes (packed 16-bit calls)
};

/// A DenseTile's block: threads, rows a thread, 16-byte lanes along channels, and the staged bytes
/// of its dynamic shared memory. The one place a tile's numbers are spelled: run_rows' fits check
/// and launch and the workspace (dense_scratch_bytes) all read them here.
template <class T, bool kBackward, DenseTile kTile>
struct DenseShape {
  static constexpr bool kWide = kTile == DenseTile::kShort || kTile == DenseTile::kTall;
  static constexpr bool kHalf = kTile == DenseTile::kHalfSlab;
  static constexpr int kThreads = kWide ? kDenseThreads : kDenseNarrowThreads;
  static constexpr int kRows = kTile == DenseTile::kShort        ? kDenseRows<T, kBackward>
                               : kTile == DenseTile::kTall       ? kDenseTallRows<kBackward>
                               : kTile == DenseTile::kNarrow     ? kDenseNarrowRows
                               : kTile == DenseTile::kNarrowTall ? kDenseNarrowTallRows<kBackward>
                                                                 : kDenseHalfRows<kBackward>;
  static constexpr int kLanes = kHalf ? kDenseHalfLanes : kDenseLanes;
  static constexpr int kShared = kDenseStageBytes<kBackward, kThreads, kRows>;
  /// The tile a call falls back to where this one does not fit the device (dense_fits): the
  /// short tile of the same block size; the half-slab tile's, the 256-thread short tile.
  static constexpr DenseTile kFallback = kWide || kHalf ? DenseTile::kShort : DenseTile::kNarrow;
};

/// Whether a call of this type and direction, packed (the dense kernel's packed form) or not, may
/// take `tile`: every choice of dense_tile and its fallback, and a little more (packed f32 and
/// double backward, which dense_tile gives the short narrow tile, may take the tall one). run_rows
/// instantiates the kernels of these only.
template <class T, bool kBackward, bool kPacked>
constexpr bool dense_reachable(DenseTile tile) {
  const bool narrow = tile == DenseTile::kNarrow || tile == DenseTile::kNarrowTall;
  if (tile == DenseTile::kHalfSlab) return kPacked && sizeof(T) == 2;
  if (kPacked && !kDensePackedNarrow<T>) return tile == DenseTile::kShort;
  return narrow || (!kPacked && sizeof(T) == 2);
}

/// Calls `f` with `tile` as a std::integral_constant, and returns what it returns.
template <class F>
decltype(auto) with_dense_tile(DenseTile tile, F&& f) {
  using D = DenseTile;
  switch (tile) {
    case D::kTall:
      return f(std::integral_constant<D, D::kTall>{});
    case D::kNarrow:
      return f(std::integral_constant<D, D::kNarrow>{});
    case D::kNarrowTall:
      return f(std::integral_constant<D, D::kNarrowTall>{});
    case D::kHalfSlab:
      return f(std::integral_constant<D, D::kHalfSlab>{});
    case D::kShort:
    default:
      return f(std::integral_constant<D, D::kShort>{});
  }
}

/// The shape a dense row kernel call takes (run_rows takes the short tile of the same block size
/// instead where the one picked does not fit the device, dense_fits). Packed calls (one chain
/// per slab, so few): f32 and double narrow blocks, tall forward and 8 rows backward (the
/// benchmark's packed batches, bench/results/dense_rows_packed_c10b8ee.txt: forward 0.82 / 0.79
/// -> 0.85 / 0.82 of the copy, log-uniform / skewed, on 12 rows, 16 rows since; backward 0.76 /
/// 0.73 -> 0.88 / 0.86; 12 rows backward 0.79 / 0.81); 16-bit the half-slab tile both ways (narrow
/// blocks in 128-byte slabs: 0.13-0.73 against 0.60-0.78 on 256 threads). Dense calls:
/// narrow blocks (tall from kDenseNarrowTallLength positions) unless 16-bit with fewer than
/// kDenseNarrowChainsPerSm chains (batch times 128-byte slabs of channels) per multiprocessor
/// (`sms`: the device's count); those take 256 threads, tall from kDenseTallLength positions.
template <class T, bool kBackward>
constexpr DenseTile dense_tile(int64_t batch, int64_t length, int64_t channels, bool packed,
                               int sms) {
  if (packed) {
    if (kDensePackedNarrow<T>) return kBackward ? DenseTile::kNarrow : DenseTile::kNarrowTall;
    return DenseTile::kHalfSlab;
  }
  const int64_t width = int64_t(kDenseLanes) * (16 / int64_t(sizeof(T)));
  const double chains = double(batch) * double(ceil_div(channels, width));
  if (sizeof(T) != 2 || chains >= kDenseNarrowChainsPerSm * double(sms))
    return length >= kDenseNarrowTallLength<T, kBackward> ? DenseTile::kNarrowTall
                                                          : DenseTile::kNarrow;
  return length >= kDenseTallLength<kBackward> ? DenseTile::kTall : DenseTile::kShort;
}

/// Whether the current device holds a block of `kKernel` with `kSharedBytes` of dynamic shared
/// memory: those and its static shared memory within the device's opt-in allowance per block
/// (227 KiB on sm_90 and sm_100, 163 on sm_80, 99 on sm_86, sm_89 and sm_120, where the 16-bit
/// tall tiles, with their 4 KiB of static shared memory, do not fit). Asked once per device and
/// kernel, then remembered.
template <auto kKernel, int kSharedBytes>
cudaError_t dense_fits(bool& fits) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  struct Fits {};
  int answer = 0;
  e = remembered_per_device<Fits>(device, answer, [device](int& yes) {
    int allowance = 0;
    cudaError_t err =
        cudaDeviceGetAttribute(&allowance, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    cudaFuncAttributes attributes{};
    if (err == cudaSuccess) err = cudaFuncGetAttributes(&attributes, kKernel);
    if (err == cudaSuccess)
      yes = size_t(kSharedBytes) + attributes.sharedSizeBytes <= size_t(allowance) ? 1 : 0;
    return err;
  });
  fits = answer > 0;
  return e;
}

/// Look-back records of a dense call in blocks of kThreads x kRows (kLanes 16-byte lanes along
/// channels): every (sequence, slab, tile of the sequence); for a packed call (one batch) and
/// kDensePremark, each tile's start bits after them. False where the tiles are too many for one
/// grid.
template <class T, bool kBackward, int kThreads, int kRows, int kLanes = kDenseLanes>
bool dense_block_scratch_bytes(int64_t batch, int64_t length, int64_t channels, bool packed,
                               size_t& bytes) {
  constexpr int64_t kWidth = int64_t(kLanes) * (16 / int64_t(sizeof(T)));
  constexpr int kTileRows = kDenseTileRows<kThreads, kRows, kLanes>;
  const int64_t tiles = ceil_div(length, int64_t(kTileRows));
  const double grid = double(batch) * double(ceil_div(channels, kWidth)) * double(tiles);
  if (grid > double(kMaxTiles)) return false;
  bytes = RowStates<compute_t<T>>::bytes(int64_t(grid), kWidth);
  if (packed && kDensePremark<kBackward>)
    bytes += size_t(tiles) * sizeof(uint32_t) * kDenseMarkWords<kTileRows>;
  return true;
}
/// The same of a DenseTile.
template <class T, bool kBackward, DenseTile kTile>
bool dense_scratch_bytes_of(int64_t batch, int64_t length, int64_t channels, bool packed,
                            size_t& bytes) {
  using Shape = DenseShape<T, kBackward, kTile>;
  return dense_block_scratch_bytes<T, kBackward, Shape::kThreads, Shape::kRows, Shape::kLanes>(
      batch, length, channels, packed, bytes);
}
/// A dense call's workspace: the largest of its tile shapes' (the size a query reports does not
/// depend on the device the rule would ask).
template <class T, bool kBackward>
bool dense_scratch_bytes(int64_t batch, int64_t length, int64_t channels, bool packed,
                         size_t& bytes) {
  using D = DenseTile;
  size_t each[5] = {};
  if (!dense_scratch_bytes_of<T, kBackward, D::kShort>(batch, length, channels, packed, each[0]) ||
      !dense_scratch_bytes_of<T, kBackward, D::kTall>(batch, length, channels, packed, each[1]) ||
      !dense_scratch_bytes_of<T, kBackward, D::kNarrow>(batch, length, channels, packed, each[2]) ||
      !dense_scratch_bytes_of<T, kBackward, D::kNarrowTall>(batch, length, channels, packed,
                                                            each[3]) ||
      !dense_scratch_bytes_of<T, kBackward, D::kHalfSlab>(batch, length, channels, packed, each[4]))
    return false;
  bytes = 0;
  for (size_t b : each) bytes = b > bytes ? b : bytes;
  return true;
}

/// The dense row kernel's view of a call on the row path (RowParams' backward inputs are
/// {gates, states, grad_out}; the dense kernel's {gates, grad_out, states}).
template <class T, bool kBackward>
DenseRowParams<T> dense_params(const RowParams<T>& p) {
  DenseRowParams<T> d{};
  constexpr int kFrom[3] = {0, kBackward ? 2 : 1, 1};
  for (int k = 0; k < (kBackward ? 3 : 2); ++k) {
    d.in[k] = p.in[kFrom[k]].ptr;
    d.in_batch[k] = p.in[kFrom[k]].batch_stride;
    d.in_time[k] = p.in[kFrom[k]].time_stride;
  }
  for (int k = 0; k < (kBackward ? 2 : 1); ++k) {
    d.out[k] = p.out[k].ptr;
    d.out_batch[k] = p.out[k].batch_stride;
    d.out_time[k] = p.out[k].time_stride;
  }
  const bool packed = p.offsets32 != nullptr || p.offsets64 != nullptr;
  d.batch = packed ? 1 : p.segments;  // packed: one batch of every row
  d.length = packed ? p.rows : p.length;
  d.offsets32 = p.offsets32;
  d.offsets64 = p.offsets64;
  d.count = packed ? p.segments : 0;
  d.channels = p.channels;
  d.state_in = p.state_in;
  d.state_in2 = p.state_in2;
  d.state_out = p.state_out;
  d.state_batch_stride = p.state_batch_stride;
  d.state_channel_stride = p.state_channel_stride;
  return d;
}

/// Runs a validated, non-empty call on the row path (`desc`: rows in descending order). `path`
/// picks the mode: kOneBlock walks (one block per chain), kMultiBlock looks back (with a
/// workspace; without one every call walks), kAuto decides: a dense call on the vector path, and
/// a packed call on it without states (no h0, final state or their gradients), look back; any
/// other call as row_walks says. Those that look back on the vector path take the dense row
/// kernel (the packed one as one batch of every row, resets at the sequence starts), in the
/// shape dense_tile picks; any other row_kernel.
template <class T, bool kBackward>
Status run_rows(RowParams<T> p, bool desc, bool vector, Path path, const Scratch& scratch,
                cudaStream_t stream) {
  size_t bytes = 0;
  if (!row_scratch_bytes<T, kBackward>(p.channels, p.rows, bytes))
    return Status::not_supported("ascan: too many tiles for one grid");
  const bool packed = p.offsets32 != nullptr || p.offsets64 != nullptr;
  const bool states = p.state_in != nullptr || p.state_in2 != nullptr || p.state_out != nullptr;
  // a packed call on the vector path without states: the dense kernel's packed form
  const bool lean = packed && vector && !states;
  if (!packed || lean) {
    size_t dense = 0;
    if (!dense_scratch_bytes<T, kBackward>(packed ? 1 : p.segments, packed ? p.rows : p.length,
                                           p.channels, packed, dense))
      return Status::not_supported("ascan: too many tiles for one grid");
    bytes = dense > bytes ? dense : bytes;
  }
  constexpr int kVec = 16 / sizeof(T);
  // without a workspace every call walks
  bool walk = scratch.mode == Scratch::kNone || path == Path::kOneBlock;
  // a dense call on the vector path never walks by choice: the dense kernel was faster than
  // walking on every shape measured, forward, and backward in its narrow blocks (dense_tile);
  // the rest (packed with states, off the vector grid) decide by row_walks
  if (!walk && path == Path::kAuto && !lean && (packed || !vector)) {
    const Status st =
        vector ? row_walks<T, kBackward, kVec>(p, walk) : row_walks<T, kBackward, 1>(p, walk);
    if (!st.ok()) return st;
  }
  const bool dense = (!packed || lean) && vector && !walk;
  // the block shape: the rule (a 16-bit dense call asks the multiprocessor count), then whether
  // it fits the device (else the short tile); neither asked by a size query, whose answer does
  // not depend on them
  DenseTile tile = DenseTile::kShort;
  if (dense && scratch.mode != Scratch::kQuery) {
    int sms = 0;
    if (sizeof(T) == 2 && !packed) {
      if (const Status st = current_multiprocessors(sms); !st.ok()) return st;
    }
    tile = dense_tile<T, kBackward>(p.segments, p.length, p.channels, packed, sms);
    // the tiles that have a fallback only (the tall and half-slab ones): the short ones are what
    // a call falls back to
    const auto fits = [&](auto kind, auto packed_form, bool& yes) -> cudaError_t {
      constexpr DenseTile kTile = decltype(kind)::value;
      constexpr bool kPacked = decltype(packed_form)::value;
      using Shape = DenseShape<T, kBackward, kTile>;
      yes = true;
      if constexpr (Shape::kFallback != kTile && dense_reachable<T, kBackward, kPacked>(kTile))
        return dense_fits<&dense_row_kernel<T, kBackward, false, Shape::kThreads, Shape::kRows,
                                            Shape::kLanes, kPacked>,
                          Shape::kShared>(yes);
      return cudaSuccess;
    };
    bool yes = true;
    const cudaError_t e = with_dense_tile(tile, [&](auto kind) {
      return packed ? fits(kind, std::true_type{}, yes) : fits(kind, std::false_type{}, yes);
    });
    if (e != cudaSuccess) {
      clear_our_error(e);
      return Status::cuda_error(e);
    }
    if (!yes)
      tile = with_dense_tile(tile, [](auto kind) {
        return DenseShape<T, kBackward, decltype(kind)::value>::kFallback;
      });
  }
  // a walking call needs no workspace (with_scratch allocates none and a query answers 1 byte)
  return with_scratch(scratch, walk ? 0 : bytes, stream, [&](void* workspace) {
    if (dense) {
      const DenseRowParams<T> d = dense_params<T, kBackward>(p);
      const auto launch = [&](auto kind, auto packed_form) -> cudaError_t {
        constexpr DenseTile kTile = decltype(kind)::value;
        constexpr bool kPacked = decltype(packed_form)::value;
        using Shape = DenseShape<T, kBackward, kTile>;
        if constexpr (dense_reachable<T, kBackward, kPacked>(kTile)) {
          return desc ? launch_dense_rows<T, kBackward, true, Shape::kThreads, Shape::kRows,
                                          Shape::kLanes, kPacked>(d, workspace, stream)
                      : launch_dense_rows<T, kBackward, false, Shape::kThreads, Shape::kRows,
                                          Shape::kLanes, kPacked>(d, workspace, stream);
        } else {
          return cudaErrorInvalidValue;  // dense_tile never gives this call the tile
        }
      };
      return with_dense_tile(tile, [&](auto kind) {
        return lean ? launch(kind, std::true_type{}) : launch(kind, std::false_type{});
      });
    }
    if (walk) {
      if (desc)
        return vector ? launch_rows<T, kBackward, true, kVec, true>(p, nullptr, stream)
                      : launch_rows<T, kBackward, true, 1, true>(p, nullptr, stream);
      return vector ? launch_rows<T, kBackward, false, kVec, true>(p, nullptr, stream)
                    : launch_rows<T, kBackward, false, 1, true>(p, nullptr, stream);
    }
    if (desc)
      return vector ? launch_rows<T, kBackward, true, kVec, false>(p, workspace, stream)
                    : launch_rows<T, kBackward, true, 1, false>(p, workspace, stream);
    return vector ? launch_rows<T, kBackward, false, kVec, false>(p, workspace, stream)
                  : launch_rows<T, kBackward, false, 1, false>(p, workspace, stream);
  });
}

#endif  // __CUDACC__

}  // namespace detail
}  // namespace ascan
