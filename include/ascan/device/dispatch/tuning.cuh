// ascan/device/dispatch/tuning.cuh: the constexpr dispatch table.
//
// Which kernel scans a sequence, and in what tile shape, is chosen from the element size and the
// sequence's span (its length, plus the few elements of misalignment in front of its first
// element when it is read in 16-byte vectors). Each entry covers spans up to `max_span`; the first
// entry that covers the span wins, and the last entry covers everything.
//
// Three kernels (see scan_kernels.cuh):
//   kWarp     several sequences per block, one group of `lanes` lanes per sequence, shuffles only;
//             loops over tiles, so it is correct at any length, and it is picked for short ones.
//   kBlock    one sequence per block, in exactly one tile; warps meet in shared memory.
//   kChunked  one sequence per block, walked tile by tile with a carried state, the next tile's
//             loads in flight while the current one is scanned.
//
// Every thread holds `items` consecutive elements: 32 bytes of each stream (two 16-byte vectors
// of float, one of double... ), enough independent loads in flight to cover DRAM latency at full
// occupancy. Crossovers were measured on the H200; see bench/RESULTS.md ("tuning sweep").
#pragma once

#include <cstdint>

namespace ascan {
namespace detail {

enum class KernelKind { kWarp, kBlock, kChunked };

/// One row of the dispatch table.
struct ScanPolicy {
  int64_t max_span;  ///< longest span this row covers (elements)
  KernelKind kind;
  int threads;  ///< threads per block
  int lanes;    ///< threads per sequence (kWarp: a power of two <= 32; else == threads)
  int items;    ///< consecutive elements per thread per tile
  constexpr int tile() const { return lanes * items; }
};

/// The dispatch table for elements of `kBytes` bytes. Items per thread are 32 bytes' worth.
template <int kBytes>
struct ScanTuning {
  static constexpr int kItems = 32 / kBytes;
  static constexpr int64_t kMax = INT64_MAX;
  static constexpr ScanPolicy kPolicies[] = {
      {4 * kItems, KernelKind::kWarp, 128, 4, kItems},
      {8 * kItems, KernelKind::kWarp, 128, 8, kItems},
      {16 * kItems, KernelKind::kWarp, 256, 16, kItems},
      {64 * kItems, KernelKind::kWarp, 256, 32, kItems},
      {128 * kItems, KernelKind::kBlock, 128, 128, kItems},
      {256 * kItems, KernelKind::kBlock, 256, 256, kItems},
      {512 * kItems, KernelKind::kBlock, 512, 512, kItems},
      {kMax, KernelKind::kChunked, 256, 256, kItems},
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

/// Index of the row that scans sequences of `span` elements.
template <int kBytes>
constexpr int select_policy(int64_t span) {
  using Table = ScanTuning<kBytes>;
  for (int i = 0; i < Table::kCount - 1; ++i)
    if (span <= Table::kPolicies[i].max_span) return i;
  return Table::kCount - 1;
}

}  // namespace detail
}  // namespace ascan
