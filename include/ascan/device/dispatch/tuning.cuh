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
// Every thread holds `items` elements per tile, in whole 16-byte vectors striped across its group
// so that each warp-wide load is one contiguous stretch. Crossovers were measured on the H200;
// see bench/RESULTS.md ("tuning sweep").
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
  int items;    ///< elements per thread per tile (whole 16-byte vectors)
  constexpr int tile() const { return lanes * items; }
};

/// The dispatch table for elements of `kBytes` bytes: rows (max_span, kind, threads, lanes,
/// items). Items per thread are whole 16-byte vectors, striped across the group (see
/// scan_kernels.cuh). Rows chosen from the sweep in bench/RESULTS.md ("tuning sweep", H200,
/// (8, 1536, T)): the best candidate per length, preferring one tile per sequence up to 2-4K
/// elements and 128-256-thread blocks walking tiles beyond. Lengths below 128 are not in the
/// sweep; their rows keep one tile per sequence with the fewest lanes that cover it.
template <int kBytes>
struct ScanTuning;

/// 4-byte elements (float): a vector is 4 elements.
template <>
struct ScanTuning<4> {
  static constexpr ScanPolicy kPolicies[] = {
      {32, KernelKind::kWarp, 128, 4, 8},          // tile 32
      {64, KernelKind::kWarp, 128, 8, 8},          // tile 64
      {128, KernelKind::kWarp, 128, 16, 8},        // tile 128            sweep: 0.92
      {512, KernelKind::kWarp, 256, 32, 8},        // tile 256, 1-2 tiles sweep: 0.91, 0.96
      {1024, KernelKind::kBlock, 128, 128, 8},     // tile 1024           sweep: 0.96
      {2048, KernelKind::kBlock, 256, 256, 8},     // tile 2048           sweep: 1.00
      {4096, KernelKind::kChunked, 256, 256, 8},   // 2 tiles             sweep: 1.00
      {INT64_MAX, KernelKind::kChunked, 256, 256, 4},  //                 sweep: 0.97-0.99
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

/// 2-byte elements (half, bfloat16): a vector is 8 elements.
template <>
struct ScanTuning<2> {
  static constexpr ScanPolicy kPolicies[] = {
      {64, KernelKind::kWarp, 128, 8, 8},          // tile 64
      {128, KernelKind::kWarp, 128, 16, 8},        // tile 128
      {256, KernelKind::kWarp, 128, 8, 16},        // tile 128, 2 tiles   sweep: 0.91
      {512, KernelKind::kWarp, 128, 16, 16},       // tile 256, 2 tiles   sweep: 0.93
      {1024, KernelKind::kWarp, 256, 32, 16},      // tile 512, 2 tiles   sweep: 0.92
      {2048, KernelKind::kBlock, 128, 128, 16},    // tile 2048           sweep: 0.99
      {4096, KernelKind::kBlock, 256, 256, 16},    // tile 4096           sweep: 0.94
      {8192, KernelKind::kChunked, 128, 128, 32},  // 2 tiles             sweep: 0.99
      {INT64_MAX, KernelKind::kChunked, 256, 256, 16},  //                sweep: 0.98
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

/// 8-byte elements (double): a vector is 2 elements; the float rows by bytes (not swept).
template <>
struct ScanTuning<8> {
  static constexpr ScanPolicy kPolicies[] = {
      {16, KernelKind::kWarp, 128, 4, 4},
      {32, KernelKind::kWarp, 128, 8, 4},
      {64, KernelKind::kWarp, 128, 16, 4},
      {256, KernelKind::kWarp, 256, 32, 4},
      {512, KernelKind::kBlock, 128, 128, 4},
      {1024, KernelKind::kBlock, 256, 256, 4},
      {2048, KernelKind::kChunked, 256, 256, 4},
      {INT64_MAX, KernelKind::kChunked, 256, 256, 2},
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
