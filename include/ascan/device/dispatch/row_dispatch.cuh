// ascan/device/dispatch/row_dispatch.cuh: the row path's dispatch, run_rows: which of its
// kernels (row_kernels.cuh's row_kernel walking or looking back, dense_rows.cuh's
// dense_row_kernel) and which workspace a row-path call takes.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
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

/// The dense row kernel's tile (dense_rows.cuh): 256 threads of 8 rows (backward, three arrays
/// in: 4, and 5 for 16-bit types), 8 lanes of 16 bytes along channels. Forward, against 128
/// threads (6 blocks per multiprocessor) and 256-byte rows, on the H200 the fastest or within
/// 0.02 of it on every shape measured but bf16 (8, 128, 1536) (bench/RESULTS.md, "Channel-last
/// and packed layouts: the row path"); 6 or 4 rows forward were slower on every shape but the
/// shortest. Backward, 5 rows (160-row tiles) against 4: in the tile probe bf16 0.03-0.09 of the
/// copy faster on five of ten shapes (few chains most) and up to 0.03 slower on four; in the
/// benchmark bf16 (1, 2^20, 256) 0.49 -> 0.66 (with 6 look-back rounds) but (4, 4096, 4096) 0.78
/// -> 0.74; f32 slower on seven of ten shapes (up to 0.07), so f32 keeps 4 (bench/RESULTS.md,
/// "Few chains"). Long calls take the tall tiles below (dense_tall).
constexpr int kDenseThreads = 256, kDenseLanes = 8;
template <class T, bool kBackward>
constexpr int kDenseRows = kBackward ? (sizeof(T) == 2 ? 5 : 4) : 8;

/// The tall tiles: 12 rows a thread forward (384-row tiles), 8 backward (256), 96 KiB of staged
/// rows a block, two blocks per multiprocessor where the short ones fit three. A chain (a
/// sequence's slab of channels) of many tiles waits on its look-back's front, which moves a few
/// tiles per L2 round trip whatever their height, so fewer, taller tiles move it further; where a
/// call is short, or its chains many, the short tiles' third block per multiprocessor wins. On the
/// H200 (bench/RESULTS.md, "Tall tiles"; bench/results/dense_rows_tall_cadcbc2.txt,
/// dense_rows_walk_cadcbc2.txt), of a same-traffic copy:
///  - backward, 8 rows against the short tile: f32 (8, 65536, 1536) 0.81 -> 0.89, (16, 2048,
///    2048) 0.83 -> 0.89, (4, 4096, 4096) 0.84 -> 0.89, (2, 2^18, 1024) 0.86 -> 0.93; bf16 0.03-
///    0.10 faster on every shape of 2048 positions or more, and on the packed batches (log-uniform
///    0.65 -> 0.77, skewed 0.57 -> 0.66); slower at 128-1024 positions (f32 (8, 128, 1536) 0.70 ->
///    0.63, (64, 300, 768) 0.71 -> 0.63) and on f32's skewed packed batch (0.71 -> 0.67);
///  - forward, 12 rows against 8 at 2^15-2^18 positions: f32 0.01-0.04 faster with 8-192 chains,
///    within 0.01 either way with 256-512; bf16 0.02-0.06 faster with 4-48 chains, within 0.005
///    with 64-96, 0.02-0.04 slower with 128-256; at 1024-3000 positions slower (up to 0.06), and
///    on the packed batches (f32 0.82 -> 0.76; packed calls keep 8).
/// Rows of 16 (one block per multiprocessor) forward, or 9 and 10 backward, were slower.
template <bool kBackward>
constexpr int kDenseTallRows = kBackward ? 8 : 12;
/// Positions from which a dense call takes the tall tiles.
template <bool kBackward>
constexpr int64_t kDenseTallLength = kBackward ? 2048 : 4096;
/// Forward: the most chains per multiprocessor with which a call takes the tall tiles (f32: 192
/// chains on 132 multiprocessors, bf16: 48; the element's bytes set the rows' work, double
/// taken as float).
template <class T>
constexpr double kDenseTallChainsPerSm = sizeof(T) == 2 ? 0.375 : 1.5;
/// Packed calls (one chain per slab over every row): the tall tiles backward in 16-bit types.
template <class T, bool kBackward>
constexpr bool kDensePackedTall = kBackward && sizeof(T) == 2;

/// Whether a dense row kernel call takes the tall tiles (kDenseTallRows): packed, as
/// kDensePackedTall; else backward from kDenseTallLength positions, forward from
/// kDenseTallLength positions where its chains (batch times 128-byte slabs of channels) are at
/// most kDenseTallChainsPerSm per multiprocessor (`sms`: the device's count; asked only for a
/// forward call that long). run_rows takes them where, besides, they fit the device
/// (dense_fits); else the short ones.
template <class T, bool kBackward>
constexpr bool dense_tall(int64_t batch, int64_t length, int64_t channels, bool packed, int sms) {
  if (packed) return kDensePackedTall<T, kBackward>;
  if (length < kDenseTallLength<kBackward>) return false;
  if constexpr (kBackward) return true;
  const int64_t width = int64_t(kDenseLanes) * (16 / int64_t(sizeof(T)));
  const double chains = double(batch) * double((channels + width - 1) / width);
  return chains <= kDenseTallChainsPerSm<T> * double(sms);
}

/// Whether the current device holds a block of `kKernel` with `kSharedBytes` of dynamic shared
/// memory: those and its static shared memory within the device's opt-in allowance per block
/// (227 KiB on sm_90 and sm_100, 163 on sm_80, 99 on sm_86, sm_89 and sm_120, where the 16-bit
/// tall tiles, with their 4 KiB of static shared memory, do not fit). Asked once per device and
/// kernel, then remembered.
template <auto kKernel, int kSharedBytes>
cudaError_t dense_fits(bool& fits) {
  constexpr int kDevices = 64;              // devices beyond these are asked on every call
  static std::atomic<int> known[kDevices];  // 0 not asked, 1 fits, -1 does not
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const int v = device < kDevices ? known[device].load(std::memory_order_acquire) : 0;
  if (v != 0) {
    fits = v > 0;
    return cudaSuccess;
  }
  int allowance = 0;
  e = cudaDeviceGetAttribute(&allowance, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e != cudaSuccess) return e;
  cudaFuncAttributes attributes{};
  if ((e = cudaFuncGetAttributes(&attributes, kKernel)) != cudaSuccess) return e;
  fits = size_t(kSharedBytes) + attributes.sharedSizeBytes <= size_t(allowance);
  if (device < kDevices) known[device].store(fits ? 1 : -1, std::memory_order_release);
  return cudaSuccess;
}

/// Look-back records of a dense call with tiles of kRows rows a thread: every (sequence, slab,
/// tile of the sequence); for a packed call (one batch) and kDensePremark, each tile's start
/// bits after them.
template <class T, bool kBackward, int kRows>
bool dense_scratch_bytes_of(int64_t batch, int64_t length, int64_t channels, bool packed,
                            size_t& bytes) {
  constexpr int64_t kWidth = int64_t(kDenseLanes) * (16 / int64_t(sizeof(T)));
  constexpr int kTileRows = kDenseTileRows<kDenseThreads, kRows, kDenseLanes>;
  const int64_t tiles = ceil_div(length, int64_t(kTileRows));
  const double grid = double(batch) * double(ceil_div(channels, kWidth)) * double(tiles);
  if (grid > double(kMaxTiles)) return false;
  bytes = RowStates<compute_t<T>>::bytes(int64_t(grid), kWidth);
  if (packed && kDensePremark<kBackward>)
    bytes += size_t(tiles) * sizeof(uint32_t) * kDenseMarkWords<kTileRows>;
  return true;
}
/// A dense call's workspace: the larger of its two tile heights' (the size a query reports
/// does not depend on the device the rule would ask).
template <class T, bool kBackward>
bool dense_scratch_bytes(int64_t batch, int64_t length, int64_t channels, bool packed,
                         size_t& bytes) {
  size_t tall = 0;
  if (!dense_scratch_bytes_of<T, kBackward, kDenseRows<T, kBackward>>(batch, length, channels,
                                                                      packed, bytes) ||
      !dense_scratch_bytes_of<T, kBackward, kDenseTallRows<kBackward>>(batch, length, channels,
                                                                       packed, tall))
    return false;
  bytes = tall > bytes ? tall : bytes;
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
/// workspace; without one every call walks), kAuto decides: a dense forward call on the vector
/// path, and a packed call on it without states (no h0, final state or their gradients), look
/// back, and so does a dense backward call on it of kDenseTallLength positions or more; any
/// other call as row_walks says. Those that look back on the vector path take the dense row
/// kernel (the packed one as one batch of every row, resets at the sequence starts), in the tile
/// dense_tall picks; any other row_kernel.
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
  // a dense call on the vector path long enough for the tall tiles (backward) never walks by
  // choice: they were faster than walking from 2048 positions (dense_tall); nor does a dense
  // forward call: the dense look-back was faster on every shape measured. The rest (backward:
  // where the chains fill the waves, walking still wins in f32) decide by row_walks
  const bool tall_backward =
      kBackward && !packed && vector && p.length >= kDenseTallLength<kBackward>;
  if (!walk && path == Path::kAuto && !lean && !tall_backward &&
      (kBackward || packed || !vector)) {
    const Status st =
        vector ? row_walks<T, kBackward, kVec>(p, walk) : row_walks<T, kBackward, 1>(p, walk);
    if (!st.ok()) return st;
  }
  const bool dense = (!packed || lean) && vector && !walk;
  // the tall tiles: the rule (a long forward call asks the multiprocessor count), then whether
  // they fit the device; neither asked by a size query, whose answer does not depend on them
  bool tall = false;
  if (dense && scratch.mode != Scratch::kQuery) {
    int sms = 0;
    if (!kBackward && !packed && p.length >= kDenseTallLength<kBackward>) {
      if (const Status st = current_multiprocessors(sms); !st.ok()) return st;
    }
    tall = dense_tall<T, kBackward>(p.segments, p.length, p.channels, packed, sms);
    if (tall) {
      constexpr int kRows = kDenseTallRows<kBackward>;
      constexpr int kShared = kDenseStageBytes<kBackward, kDenseThreads, kRows>;
      const cudaError_t e =
          packed ? dense_fits<&dense_row_kernel<T, kBackward, false, kDenseThreads, kRows,
                                                kDenseLanes, kDensePackedTall<T, kBackward>>,
                              kShared>(tall)
                 : dense_fits<&dense_row_kernel<T, kBackward, false, kDenseThreads, kRows,
                                                kDenseLanes, false>,
                              kShared>(tall);
      if (e != cudaSuccess) {
        clear_our_error(e);
        return Status::cuda_error(e);
      }
    }
  }
  // a walking call needs no workspace (with_scratch allocates none and a query answers 1 byte)
  return with_scratch(scratch, walk ? 0 : bytes, stream, [&](void* workspace) {
    if (dense) {
      const DenseRowParams<T> d = dense_params<T, kBackward>(p);
      const auto launch = [&](auto rows, auto packed_form) -> cudaError_t {
        constexpr int kRows = decltype(rows)::value;
        constexpr bool kPacked = decltype(packed_form)::value;
        return desc ? launch_dense_rows<T, kBackward, true, kDenseThreads, kRows, kDenseLanes,
                                        kPacked>(d, workspace, stream)
                    : launch_dense_rows<T, kBackward, false, kDenseThreads, kRows, kDenseLanes,
                                        kPacked>(d, workspace, stream);
      };
      using Short = std::integral_constant<int, kDenseRows<T, kBackward>>;
      using Tall = std::integral_constant<int, kDenseTallRows<kBackward>>;
      if (lean) {
        if constexpr (kDensePackedTall<T, kBackward>) {
          if (tall) return launch(Tall{}, std::true_type{});
        }
        return launch(Short{}, std::true_type{});
      }
      return tall ? launch(Tall{}, std::false_type{}) : launch(Short{}, std::false_type{});
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
