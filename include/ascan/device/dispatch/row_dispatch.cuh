// ascan/device/dispatch/row_dispatch.cuh: the row path's dispatch, run_rows: which of its
// kernels (row_kernels.cuh's row_kernel walking or looking back, dense_rows.cuh's
// dense_row_kernel) and which workspace a row-path call takes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

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
/// "Few chains").
constexpr int kDenseThreads = 256, kDenseLanes = 8;
template <class T, bool kBackward>
constexpr int kDenseRows = kBackward ? (sizeof(T) == 2 ? 5 : 4) : 8;

/// Look-back records of a dense call: every (sequence, slab, tile of the sequence); for a packed
/// call (one batch) and kDensePremark, each tile's start bits after them.
template <class T, bool kBackward>
bool dense_scratch_bytes(int64_t batch, int64_t length, int64_t channels, bool packed,
                         size_t& bytes) {
  constexpr int64_t kWidth = int64_t(kDenseLanes) * (16 / int64_t(sizeof(T)));
  constexpr int kTileRows = kDenseTileRows<kDenseThreads, kDenseRows<T, kBackward>, kDenseLanes>;
  const int64_t tiles = ceil_div(length, int64_t(kTileRows));
  const double grid = double(batch) * double(ceil_div(channels, kWidth)) * double(tiles);
  if (grid > double(kMaxTiles)) return false;
  bytes = RowStates<compute_t<T>>::bytes(int64_t(grid), kWidth);
  if (packed && kDensePremark<kBackward>)
    bytes += size_t(tiles) * sizeof(uint32_t) * kDenseMarkWords<kTileRows>;
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
/// back; any other call as row_walks says. Those two that look back take the dense row kernel
/// (the packed one as one batch of every row, resets at the sequence starts), any other
/// row_kernel.
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
  // a dense forward call on the vector path never walks by choice: the dense look-back was
  // faster on every shape measured; the rest (backward: where the chains fill the waves,
  // walking still wins in f32) decide by row_walks
  if (!walk && path == Path::kAuto && !lean && (kBackward || packed || !vector)) {
    const Status st =
        vector ? row_walks<T, kBackward, kVec>(p, walk) : row_walks<T, kBackward, 1>(p, walk);
    if (!st.ok()) return st;
  }
  const bool dense = (!packed || lean) && vector && !walk;
  // a walking call needs no workspace (with_scratch allocates none and a query answers 1 byte)
  return with_scratch(scratch, walk ? 0 : bytes, stream, [&](void* workspace) {
    if (dense) {
      constexpr int kRows = kDenseRows<T, kBackward>;
      const DenseRowParams<T> d = dense_params<T, kBackward>(p);
      if (lean)
        return desc
                   ? launch_dense_rows<T, kBackward, true, kDenseThreads, kRows, kDenseLanes, true>(
                         d, workspace, stream)
                   : launch_dense_rows<T, kBackward, false, kDenseThreads, kRows, kDenseLanes,
                                       true>(d, workspace, stream);
      return desc ? launch_dense_rows<T, kBackward, true, kDenseThreads, kRows, kDenseLanes>(
                        d, workspace, stream)
                  : launch_dense_rows<T, kBackward, false, kDenseThreads, kRows, kDenseLanes>(
                        d, workspace, stream);
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
