// ascan/device/dispatch/tuning.cuh: the constexpr dispatch tables (forward, backward).
//
// Which kernel scans a sequence, and in what tile shape, is chosen from the element size and the
// sequence's span (its length, plus the few elements of misalignment in front of its first
// element when it is read in 16-byte vectors). Each entry covers spans up to `max_span`; the first
// entry that covers the span wins, and the last entry covers everything. One host rule
// (select_row, at the end) may give the span to a tile-walking row whose tiles it fills better;
// rows of max_span 0 are there for that rule only.
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
// see bench/RESULTS.md ("Tuning sweeps").
#pragma once

#include <cstdint>
#include <type_traits>

namespace ascan {
namespace detail {

enum class KernelKind { kWarp, kBlock, kChunked };

/// Resident threads and blocks per multiprocessor of the architecture being compiled (the CUDA
/// C++ Programming Guide's table of compute capabilities; 12.x's block limit taken as 24, below
/// the guide's, which only lowers a bound). The host pass, where launch bounds do nothing, sees
/// 2048 and 32.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int kArchThreadsPerSm = 1024, kArchBlocksPerSm = 16;  // 7.5
#elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870)
constexpr int kArchThreadsPerSm = __CUDA_ARCH__ == 860 ? 1536 : 2048, kArchBlocksPerSm = 16;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 890
constexpr int kArchThreadsPerSm = 1536, kArchBlocksPerSm = 24;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr int kArchThreadsPerSm = 1536, kArchBlocksPerSm = 24;
#else
constexpr int kArchThreadsPerSm = 2048, kArchBlocksPerSm = 32;  // 8.0, 9.0, 10.x
#endif

/// The minimum blocks per multiprocessor a kernel of `threads` threads asks __launch_bounds__
/// for: the policy's `wanted`, capped at what the target can hold (ptxas ignores, with a
/// warning, a minimum its target cannot hold). On sm_80, sm_90 and sm_100 the policies' values
/// are under the cap and pass unchanged.
__host__ __device__ constexpr int launch_min_blocks(int threads, int wanted) {
  const int by_threads = kArchThreadsPerSm / threads;
  const int cap = by_threads < kArchBlocksPerSm ? by_threads : kArchBlocksPerSm;
  return wanted < cap ? wanted : (cap > 1 ? cap : 1);
}

/// One row of the dispatch table.
struct ScanPolicy {
  int64_t max_span;  ///< longest span this row covers (elements)
  KernelKind kind;
  int threads;  ///< threads per block
  int lanes;    ///< threads per sequence (kWarp: a power of two <= 32; else == threads)
  int items;    ///< elements per thread per tile (whole 16-byte vectors)
  /// Blocks per multiprocessor the kernel's registers must allow (__launch_bounds__): 2048 /
  /// threads asks for full occupancy (at most 32 registers), 1 leaves the compiler free.
  int min_blocks = 1;
  /// Where a call's sequences fill the multiprocessors in this row's blocks (select_row,
  /// kRowRuleThreadsPerSm), the row covers spans up to this instead of max_span (0: max_span).
  int64_t filled_max_span = 0;
  constexpr int tile() const { return lanes * items; }
};

/// The dispatch table for elements of `kBytes` bytes: rows (max_span, kind, threads, lanes,
/// items). Items per thread are whole 16-byte vectors, striped across the group (see
/// scan_kernels.cuh). A warp row whose max_span fits its tile runs without a tile loop.
///
/// From the sweeps (bench/RESULTS.md, "Tuning sweeps"; H200, (8, 1536, T), efficiency against a
/// same-traffic copy): up to a few thousand elements the best kernel holds the whole sequence in
/// one tile with ONE vector per thread (the shortest chain from load to store, the most threads
/// in flight): lane groups up to 128 elements, a block of T / vector threads up to 1-2K; beyond
/// that 256 threads walk the sequence tile by tile. Lengths under 128 are not swept; their rows
/// keep the same one-vector-per-thread shape.
template <int kBytes>
struct ScanTuning;

/// 4-byte elements (float): a vector is 4 elements.
template <>
struct ScanTuning<4> {
  static constexpr ScanPolicy kPolicies[] = {
      {0, KernelKind::kChunked, 128, 128, 4, 8},          // tiles of 512: select_row's only
      {32, KernelKind::kWarp, 128, 8, 4},                 // one tile of 32
      {64, KernelKind::kWarp, 128, 16, 4},                // one tile of 64
      {128, KernelKind::kWarp, 128, 32, 4, 16},           // one tile of 128     sweep 0.98
      {256, KernelKind::kBlock, 64, 64, 4, 32},           // one tile of 256     sweep 0.98
      {512, KernelKind::kBlock, 128, 128, 4, 16},         // one tile of 512     sweep 0.98
      {1024, KernelKind::kBlock, 256, 256, 4, 8},         // one tile of 1024    sweep 0.95-0.97
      {2048, KernelKind::kBlock, 256, 256, 8},            // one tile of 2048    sweep 0.98-1.00
      {4096, KernelKind::kChunked, 128, 128, 8, 4},       // 4 tiles of 1024     sweep 0.995
      {8192, KernelKind::kChunked, 256, 256, 4, 4},       // tiles of 1024       sweep 0.97-0.99
      {INT64_MAX, KernelKind::kChunked, 256, 256, 8, 3},  // tiles of 2048 (below)
  };
  /// The long walk: 256 threads x 2 vectors, 3 blocks per multiprocessor, against the 256 x 1
  /// vector at 4 of the row before it. Measured on the H200 (bench --ascan_tune's long
  /// candidates, seven walks, lowest of three runs, results/tune_long_0aa4b95_run*.json.gz):
  /// 1024 sequences of 12000 / 40000 / 10^5 elements 0.83 / 0.865 / 0.86 -> 0.88 / 0.92 / 0.91 of
  /// the copy, 4096 of 12000 / 40000 0.90 / 0.93 -> 0.95 / 0.96, 256 of 12000-10^5 0.71 ->
  /// 0.82-0.87; at 5000 elements it was 0.01-0.02 slower (1024 and 4096 sequences), so up to 8192
  /// the walk of 1024-element tiles stays.
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
  /// select_row's margin: the first row's tiles of 512 take 1025-1536 elements from one tile of
  /// 2048 (0.70-0.86 -> 0.78-0.95 of the copy at 1100 and 1500 elements, 1024-16384 sequences);
  /// under 5/4 (2500, 3500 elements) they measured -0.03 to +0.004 with 4096 and 16384 sequences
  /// (+0.06 with 1024), and the table keeps its rows (bench/results/row_rule_probe_*.txt).
  static constexpr double kRowRuleMargin = 5.0 / 4;
};

/// 2-byte elements (half, bfloat16): a vector is 8 elements.
template <>
struct ScanTuning<2> {
  static constexpr ScanPolicy kPolicies[] = {
      {0, KernelKind::kChunked, 64, 64, 8, 16},            // tiles of 512: select_row's only
      {32, KernelKind::kWarp, 128, 4, 8},                  // one tile of 32
      {64, KernelKind::kWarp, 128, 8, 8},                  // one tile of 64
      {128, KernelKind::kWarp, 128, 8, 16},                // one tile of 128     sweep 0.87-0.94
      {256, KernelKind::kWarp, 128, 16, 16},               // one tile of 256     sweep 0.98
      {512, KernelKind::kBlock, 64, 64, 8, 32},            // one tile of 512     sweep 0.93-0.97
      {1024, KernelKind::kBlock, 128, 128, 8, 16},         // one tile of 1024    sweep 0.94-0.97
      {2048, KernelKind::kBlock, 256, 256, 8, 8},          // one tile of 2048    sweep 0.91-0.94
      {4096, KernelKind::kChunked, 128, 128, 8, 8},        // 4 tiles of 1024     sweep 0.955-0.97
      {8192, KernelKind::kChunked, 128, 128, 32, 4, INT64_MAX},  // 2 tiles of 4096  0.99-1.00
      {INT64_MAX, KernelKind::kChunked, 256, 256, 16, 3},  // tiles of 4096    sweep 0.965-0.99
  };
  /// Longer sequences walk the 8192 row's 128-thread tiles of 4096 where the call fills the
  /// multiprocessors with them (filled_max_span, select_row), the last row's 256-thread tiles of
  /// 4096 where it does not. Measured on the H200 (bench --ascan_tune's long candidates, lowest of
  /// three runs, results/tune_long_0aa4b95_run*.json.gz): 1024 sequences of 12000 / 40000 / 10^5
  /// elements 0.86 / 0.87 / 0.88 -> 0.90 / 0.90 / 0.89 of the copy, 4096 of 12000 / 40000
  /// 0.925 / 0.94 -> 0.95 / 0.95; with 256 sequences (not filling: 128-thread blocks take
  /// 768 threads per multiprocessor from 792 sequences) the 256-thread walk stays ahead, 0.81-0.93
  /// against 0.78-0.89.
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
  /// select_row's margin: the 4096-element tiles of the last two rows yield to tiles of 1024
  /// (bf16 at 5000, 6500 and 9000 elements, 1024-16384 sequences: 0.63-0.78 -> 0.78-0.95 of the
  /// copy), and tiles of 1024 or one tile of 2048 to the first row's tiles of 512 (1100-3500
  /// elements, 4096 and 16384 sequences: 0.50-0.82 -> 0.62-0.91; with 1024 sequences that row's
  /// 64-thread blocks are too few, and slower); bench/results/row_rule_probe_*.txt.
  static constexpr double kRowRuleMargin = 9.0 / 8;
};

/// 8-byte elements (double): a vector is 2 elements; the float rows by bytes (not swept).
template <>
struct ScanTuning<8> {
  static constexpr ScanPolicy kPolicies[] = {
      {16, KernelKind::kWarp, 128, 8, 2},
      {32, KernelKind::kWarp, 128, 16, 2},
      {64, KernelKind::kWarp, 128, 32, 2},
      {128, KernelKind::kBlock, 64, 64, 2},
      {256, KernelKind::kBlock, 128, 128, 2},
      {512, KernelKind::kBlock, 256, 256, 2},
      {1024, KernelKind::kBlock, 256, 256, 4},
      {2048, KernelKind::kChunked, 256, 256, 4},
      {INT64_MAX, KernelKind::kChunked, 256, 256, 2},
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

/// The backward pass's tables. It moves five streams instead of three and holds three loaded
/// vectors per run, so the one-tile rows keep ONE vector per thread; the tile walk for long
/// sequences comes from its own sweep (bench/RESULTS.md, "Tuning sweeps"): 16-bit types want
/// small blocks at full occupancy (128 threads, one run, 8 blocks per multiprocessor: 0.88-0.94
/// against 0.73-0.86 for 256 threads), float two runs per thread.
/// Occupancy targets (last field), by -Xptxas -v: 1536 threads per multiprocessor for the
/// one-tile block rows (40 registers), 1024 for the warp rows (64: at 40 the 16-bit ones spill).
template <int V>
struct BackwardOneTileRows {
  static constexpr ScanPolicy kRows[] = {
      {8 * V, KernelKind::kWarp, 128, 8, V, 8},        // one tile of 8 vectors
      {16 * V, KernelKind::kWarp, 128, 16, V, 8},      // one tile of 16 vectors
      {32 * V, KernelKind::kWarp, 128, 32, V, 8},      // one tile of 32 vectors
      {64 * V, KernelKind::kBlock, 64, 64, V, 24},     // one tile of 64 vectors
      {128 * V, KernelKind::kBlock, 128, 128, V, 12},  // one tile of 128 vectors
      {256 * V, KernelKind::kBlock, 256, 256, V, 6},   // one tile of 256 vectors
  };
};

template <int kBytes>
struct BackwardTuning {
  static constexpr int V = 16 / kBytes;
  using One = BackwardOneTileRows<V>;
  static constexpr ScanPolicy kPolicies[] = {
      One::kRows[0],
      One::kRows[1],
      One::kRows[2],
      One::kRows[3],
      One::kRows[4],
      One::kRows[5],
      {INT64_MAX, KernelKind::kChunked, 256, 256, V, 4},  // double: not swept
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

template <>
struct BackwardTuning<4> {
  using One = BackwardOneTileRows<4>;
  static constexpr ScanPolicy kPolicies[] = {
      One::kRows[0],
      One::kRows[1],
      One::kRows[2],
      One::kRows[3],
      One::kRows[4],
      {1024, KernelKind::kChunked, 128, 128, 4, 8, 1536},  // 2 tiles of 512: sweep 0.94-0.97
      {INT64_MAX, KernelKind::kChunked, 256, 256, 8, 3},   // tiles of 2048: sweep 0.97-0.99
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
  /// The 512-element tiles up to 1536 elements where the sequences fill the GPU, not one tile of
  /// 2048: at 1100 and 1500 elements (1024-16384 sequences) 0.68-0.87 -> 0.84-0.97 of the copy;
  /// with 1-256 sequences of 1500 the three tiles' chain measured 1.0-1.3 us slower (0.82 -> 0.70
  /// at one sequence; the sweep's runs of fe80661), so there the one tile of 2048 stays.
  /// select_row's margin, 4/3: tiles of 2048 walked twice over 3000-3500 elements (a third idle)
  /// measured 4-7% faster than tiles of 512 or 1024 filled, and slower only below (2049-2560
  /// elements: 3-5%); bench/results/row_rule_probe_*.txt.
  /// The tiles of 2048 also walk sequences longer than 8192, where 128 x 2 vectors at 4 blocks
  /// walked them before: on the H200 (bench --ascan_tune's long candidates, lowest of three runs,
  /// results/tune_long_0aa4b95_run*.json.gz) 256 sequences of 12000-10^5 elements 0.73-0.76 ->
  /// 0.85-0.89 of the copy, 1024 of 12000 0.89 -> 0.91, 4096 of 12000 / 40000 0.93 / 0.95 ->
  /// 0.94 / 0.95, and 0.01 slower with 1024 sequences of 40000 and 10^5 (0.92, 0.90 -> 0.91, 0.89).
  static constexpr double kRowRuleMargin = 4.0 / 3;
};

template <>
struct BackwardTuning<2> {
  using One = BackwardOneTileRows<8>;
  static constexpr ScanPolicy kPolicies[] = {
      {0, KernelKind::kChunked, 64, 64, 8, 16},  // tiles of 512: select_row's only
      One::kRows[0],
      One::kRows[1],
      One::kRows[2],
      One::kRows[3],
      One::kRows[4],
      One::kRows[5],
      {INT64_MAX, KernelKind::kChunked, 128, 128, 8, 8},  // sweep 0.88-0.94
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
  /// select_row's margin: one tile of 2048 or tiles of 1024 yield to the first row's tiles of 512
  /// (1100-3500 elements, 4096 and 16384 sequences: 0.46-0.80 -> 0.62-0.86 of the copy; with 1024
  /// sequences slower, as forward); bench/results/row_rule_probe_*.txt.
  static constexpr double kRowRuleMargin = 9.0 / 8;
};

/// Where a block of the multi-block path keeps its tile's loaded elements during the look-back.
/// The look-back takes as long as a tile's own loads under full memory load (4-7 us; the phase
/// profiles in bench/RESULTS.md, "Few long sequences"), so throughput is the bytes each
/// multiprocessor keeps resident while its tiles wait. Held in registers across the look-back,
/// the elements allow only two 4096-element blocks per multiprocessor, too few (bench/RESULTS.md,
/// "What was tried and dropped, and why"); so they wait elsewhere:
enum class LookbackHold {
  kReload,  ///< nowhere: loaded again after the look-back, from L2 by then
  kShared,  ///< in shared memory, copied there after the loads land
  /// In shared memory, put there by bulk copies (lookback_staged_kernel), plus, forward,
  /// LookbackPolicy::register_items per thread held in registers: vector path on sm_90 and
  /// later; elsewhere the tuning's fallback policy (LookbackFallbackTuning).
  kStaged,
};

/// The multi-block path (lookback_kernel): its tile shape, and when it runs. A call takes it when
/// a sequence spans more than one of its tiles and there are fewer than `max_sequences_per_sm`
/// sequences per multiprocessor (below that, one block per sequence leaves the GPU underfed).
struct LookbackPolicy {
  int threads;  ///< threads per block
  int items;    ///< elements per thread per tile (whole 16-byte vectors)
  int min_blocks;
  double max_sequences_per_sm;
  /// Where a tile's loaded elements wait while warp 0 looks back (see LookbackHold).
  LookbackHold hold = LookbackHold::kReload;
  /// kStaged: of `items`, the elements each thread holds in registers (whole vectors, striped)
  /// beside those staged in shared memory.
  int register_items = 0;
  /// kStaged: how many of a thread's staged vectors each iteration of the kernel's loops over
  /// them takes (0: all, fully unrolled). Less unrolling keeps the kernel's hot code within the
  /// instruction cache, where a tile's per-element code is long (16-bit forward).
  int unroll = 0;
  /// kStaged: the pace of the first wave's loads, a fraction of the device's peak memory
  /// bandwidth (0: not paced; WavePace, device/agent/tile_lookback.cuh).
  double wave_pace = 0;
  constexpr int64_t tile() const { return int64_t(threads) * items; }
};

/// Where a staged policy (LookbackTuning, below) cannot stage, it runs as these: on the scalar
/// path (pointers not on the 16-byte grid) and where the bulk-copy engine is not available
/// (before sm_90). They are also the 16-bit short-tile policies on every GPU. Loads into
/// registers, 256 threads; on the H200 forward f32 0.73-0.82, bf16 0.79-0.83, backward
/// 0.57-0.71 of the copy on the long rows (bench/RESULTS.md, "Few long sequences"); not measured
/// on any GPU before sm_90.
template <int kBytes, bool kBackward>
struct LookbackFallbackTuning {
  static constexpr int V = 16 / kBytes;
  static constexpr LookbackPolicy kPolicy =
      kBackward     ? LookbackPolicy{256, 2 * V, 4, 0, LookbackHold::kReload}
      : kBytes == 2 ? LookbackPolicy{256, 4 * V, 5, 0, LookbackHold::kShared}
                    : LookbackPolicy{256, 4 * V, 4, 0, LookbackHold::kReload};
};

/// The multi-block path's policies for elements of `kBytes` bytes, forward or backward: kPolicy,
/// kShortPolicy for calls that make few of its tiles, and kTinyPolicy for calls that make fewer
/// still. Chosen on the H200 by sweeps (bench
/// --ascan_tune_multi) on the four long rows (1, 1, 2^28) / (1, 16, 2^22) / (2, 4, 2^24) /
/// (1, 128, 2^20) and on short shapes: bench/RESULTS.md, "Few long sequences" has the runs behind
/// each value, and "What was tried and dropped, and why" the shapes not taken. Double is not
/// measured; it takes float's values where its registers allow.
///
/// Tile shape: 64 threads, each owning consecutive 16-byte vectors staged in shared memory by bulk
/// copies (an odd count: conflict-free reads) and, forward, more vectors held in registers.
/// Forward 17 + 8 vectors at 6 blocks per multiprocessor (16-bit 13 + 6 at 8, double 25 + 8 at
/// 4); backward 9 staged vectors at 8 blocks. At the same shared memory per multiprocessor,
/// smaller blocks with more vectors per thread win, and registers beside shared memory win again
/// (f32 forward (1, 1, 2^28): 1057 µs with the register kernel, 945 staged as 64 x 25, 890-908
/// with 8 vectors held beside).
///
/// Thresholds (max_sequences_per_sm: multi-block below this many sequences per multiprocessor),
/// where the two paths, each forced, cross on S sequences of 2^16 elements (132 multiprocessors):
///   - f32 forward 1.5: one block per sequence was the faster at S = 200 and 256 on an H100
///     (results/lookback_paths_8ee3842_h100.txt, each forced; of the copy at 12000, 40000 and
///     65536 elements, S = 256: 0.900 / 0.908 / 0.928 against 0.811 / 0.854 / 0.906; S = 200 at
///     12000 and 40000: 1.037 / 0.932 against 0.949 / 0.901), and in the sweep's (256, 12000)
///     and (256, 40000) on both GPUs (H200, results/sweep_69de2b3_run*: 0.831 / 0.868 against
///     0.758 / 0.759; H100: 0.913 / 0.897 against 0.813 / 0.840); many blocks from 100000
///     elements (S = 256: 0.920 against 0.901 on the H100, 0.895 against 0.869 on the H200). It
///     had been 2 (the paths crossed between S = 264 and 396 at 2^16 elements, measured before
///     the one-block rows' tile walk and edge mask);
///   - 16-bit forward 1: one block per sequence is faster from S = 132 on (the staged 16-bit tile
///     is large for 2^16-element sequences);
///   - f32 backward 1.5: the paths cross at about S = 264 (107 | 109 µs, one block per sequence
///     | multi-block), above the threshold's 198;
///   - 16-bit backward 6: the paths cross between S = 792 (161 | 158 µs) and S = 1056
///     (194 | 211). With 2^20-element sequences the multi-block path still wins at S = 528
///     (1921 | 1430 µs): the thresholds have no length term;
///   - double: the float values.
template <int kBytes, bool kBackward>
struct LookbackTuning {
  static constexpr int V = 16 / kBytes;  // elements per vector
  /// `tiles` tiles of `elements` elements each, counted in tiles of the policy `P`: a cut-off
  /// measured with another tile shape, kept at the same elements per multiprocessor.
  static constexpr double scaled(double tiles, int64_t elements, const LookbackPolicy& P) {
    return tiles * double(elements) / double(P.tile());
  }
  /// Forward: 64 threads x (17 staged + 8 held) vectors, 6 blocks per multiprocessor. For f32,
  /// 25 + 8 at 4 blocks measures the same (within 2% on each long row); double keeps that shape
  /// (at 6 blocks' registers the 17 + 8 shape spills).
  /// 16-bit: 13 + 6 vectors at 8 blocks, the fastest over the four long rows in its sweep (2.8%
  /// faster in sum than 17 + 8 at 6; 8 held vectors spill at 7-8 blocks), with the staged loops
  /// unrolled by 2, not fully (bf16 forward 1-4% faster on the four long rows; f32 1-2% slower,
  /// so f32 unrolls fully).
  /// The first wave's loads are paced at 0.8 of the device's peak memory bandwidth (WavePace; the
  /// H200's peak is 4.9 TB/s): against no pace, no long row is slower and some are up to 10%
  /// faster (on (1, 16, 2^22): bf16 forward 124 -> 112 µs, f32 backward 392 -> 360), and the six
  /// short shapes of the sweep at most 1.8 µs slower and up to 4 µs faster. Double and the short
  /// policies are not paced (not measured).
  static constexpr double kPace = kBytes == 8 ? 0.0 : 0.8;
  static constexpr LookbackPolicy kForward =
      kBytes == 8 ? LookbackPolicy{64, (25 + 8) * V, 4, 1.5, LookbackHold::kStaged, 8 * V}
      : kBytes == 2
          ? LookbackPolicy{64, (13 + 6) * V, 8, 1.0, LookbackHold::kStaged, 6 * V, 2, kPace}
          : LookbackPolicy{64, (17 + 8) * V, 6, 1.5, LookbackHold::kStaged, 8 * V, 0, kPace};
  /// Backward: staged tiles of 64 threads x 9 vectors at 8 blocks per multiprocessor, f32 and
  /// 16-bit, none held in registers (held vectors measured slower on most long rows). The staged
  /// reads test elements against the sequence only where a warp's stretch leaves it
  /// (StagedView::read<false>); so, bf16 µs on the four long rows: 751 / 211 / 373 / 358. In
  /// the same sweep 64 x 7 at 10, 64 x 11 at 6 and 64 x 5 at 14 are 0-4% slower on three rows
  /// and 3-5% faster on (1, 16, 2^22), and blocks of 96 or 128 threads 1-27% slower.
  static constexpr LookbackPolicy kBackwardPolicy =
      kBytes == 2 ? LookbackPolicy{64, 9 * V, 8, 6.0, LookbackHold::kStaged, 0, 0, kPace}
                  : LookbackPolicy{64, 9 * V, 8, 1.5, LookbackHold::kStaged, 0, 0, kPace};
  static constexpr LookbackPolicy kPolicy = kBackward ? kBackwardPolicy : kForward;
  /// Calls whose sequences make fewer than kShortBelowTilesPerSm of kPolicy's tiles per
  /// multiprocessor (too few to fill the GPU a few times over) take kShortPolicy's smaller tiles.
  /// f32 forward: 64 threads x (9 staged + 4 held) vectors, 8 blocks per multiprocessor. 16-bit:
  /// the register kernel of the fallback (256 threads; forward 4 vectors per thread kept in
  /// shared memory, backward 2 reloaded), 3-22% (forward) and 6-40% (backward) faster than the
  /// staged short tiles on all six short bf16 shapes of the sweep, and slower on the long rows
  /// (bf16 backward (1, 16, 2^22): 290 µs against 210); backward, no call takes it (its cut-off
  /// is 0, below). f32 backward: 64 x 7 at 10 blocks,
  /// faster than the main 64 x 9 at 8 on all six short shapes of the sweep (by 1-38%: 14.5
  /// against 23.3 µs on 1x8x2^16) and 1-2% slower on three of the four long rows. Double
  /// backward has none (not measured).
  static constexpr LookbackPolicy kShortPolicy =
      kBytes == 2   ? LookbackFallbackTuning<kBytes, kBackward>::kPolicy
      : !kBackward  ? LookbackPolicy{64, (9 + 4) * V, 8, 0, LookbackHold::kStaged, 4 * V}
      : kBytes == 4 ? LookbackPolicy{64, 7 * V, 10, 0, LookbackHold::kStaged}
                    : kPolicy;
  /// The cut-offs keep the elements per multiprocessor of the tiles they were measured with
  /// (scaled): forward 16 of f32's 64 x (25 + 8) tiles and 8 of 16-bit's 64 x (17 + 8) tiles,
  /// where the long and the short tiles cross. (16-bit backward: see below.) The f32
  /// backward's cut-off, 32 of its main tiles per multiprocessor, lies above the short shapes
  /// measured (1.7 to 27.6 of them) and below the long rows (220 and more); where between the two
  /// tiles cross is not measured.
  /// max_sequences_per_sm of the short, tiny and fallback policies is not read.
  /// 16-bit backward takes no short tiles (cut-off 0): from the tiny tiles' cut-off up, the main
  /// 64 x 9 tile measured faster than the register kernel on every cell of 64 and 256 sequences
  /// of 5000 to 10^5 elements (lowest of three, results/tune_multi_s64_s256_0aa4b95_run*.json.gz,
  /// bench/RESULTS.md, "Multi-block cells of 64 and 256 sequences"): at 5.8, 10.7 and 17.5 main
  /// tiles per multiprocessor 0.70 / 0.68 / 0.64 of the copy against 0.81 / 0.83 / 0.77. (The
  /// register kernel had been measured 29-40% faster than the 64 x 9 tile on three of the six
  /// short bf16 shapes, those of 0.9-3.6 main tiles per multiprocessor, which now take the tiny
  /// tiles, and within the spread on the other three.)
  static constexpr double kBackwardShortBelow = kBytes == 2   ? 0.0
                                                : kBytes == 4 ? 32.0
                                                              : 0.0;
  static constexpr double kForwardShortBelow =
      kBytes == 2   ? scaled(8.0, 64 * (17 + 8) * V, kForward)
      : kBytes == 4 ? scaled(16.0, 64 * (25 + 8) * V, kForward)
                    : 16.0;
  static constexpr double kShortBelowTilesPerSm =
      kBackward ? kBackwardShortBelow : kForwardShortBelow;
  /// Calls that make under kTinyBelowTilesPerSm of kPolicy's tiles per multiprocessor (f32
  /// forward 0.4, backward 1.0; 16-bit 1.5 and 3.0) take kTinyPolicy's tiles: 64 threads x 3 staged
  /// vectors at 8 blocks per multiprocessor (768 f32 elements, 1536 16-bit), none held. A few long
  /// sequences of a few thousand to 10^5 elements make a grid of a few dozen short tiles, too few
  /// to overlap one tile's loads with another's look-back; tiles of a few vectors a thread make
  /// hundreds of blocks, each a short chain of phases. Measured on the H200 (--ascan_tune_multi on
  /// the sweep's cells of 1, 4 and 16 sequences of 5000 to 10^5 elements, lowest of three runs,
  /// bench/results/tune_tiny_c46365b_run*.json.gz; bench/RESULTS.md, "Tiny multi-block tiles"),
  /// against the short tiles, at main tiles per multiprocessor: f32 forward 0.48 -> 0.55 at
  /// (1, 12000), 0.65 -> 0.74 at (4, 40000), 0.91 -> 1.00 at (16, 12000) (0.02-0.24), and no
  /// better from (4, 10^5) (0.48: 0.881 against 0.894); f32 backward (16, 12000) 0.85 -> 0.96,
  /// (4, 40000) 0.85 -> 0.94 (0.55-0.73), and slower at (4, 10^5) (1.33: 0.885 against 0.902);
  /// 16-bit forward faster on every cell the path takes, up to (16, 10^5) (1.33: 0.873 against
  /// 0.854); 16-bit backward faster on every cell, by 0.03-0.13, up to (16, 10^5) (2.67: 0.910
  /// against 0.842). Tiles of one vector a thread were faster still on the smallest 16-bit
  /// backward cells (up to 0.09) and slower on the larger ones (bf16 forward (16, 40000): 0.863
  /// against 0.973); five vectors up to 0.05 faster on the largest cells and up to 0.09 slower on
  /// the smallest. The 16-bit cut-offs lie just above the largest cells measured (1.33 and 2.67);
  /// between those and the short tiles' cut-offs is not measured. Double never takes the tiny
  /// tiles (cut-off 0: not measured).
  static constexpr LookbackPolicy kTinyPolicy{64, 3 * V, 8, 0, LookbackHold::kStaged};
  /// 16-bit backward: 5.0, from the cells of 256 x 5000 and 64 x 40000 elements (3.9 and 4.4
  /// main tiles per multiprocessor), where the tiny tiles measured 0.90 and 0.76 of the copy
  /// against 0.68 and 0.74 for the main tile and 0.73 and 0.59 for the register kernel that took
  /// them before; at 5.8 (256 x 12000) the main tile is ahead (0.81 against 0.74).
  static constexpr double kTinyBelowTilesPerSm = kBytes == 8   ? 0.0
                                                 : kBytes == 4 ? (kBackward ? 1.0 : 0.4)
                                                               : (kBackward ? 5.0 : 1.5);
  using Fallback = LookbackFallbackTuning<kBytes, kBackward>;
};

/// The flat kernel (dispatch/flat_kernels.cuh): whole short sequences back to back in tiles of
/// `threads` x `items` elements, a range of them per block.
struct FlatPolicy {
  int threads;
  int items;       ///< elements per thread per tile (whole 16-byte vectors)
  int min_blocks;  ///< blocks per multiprocessor the registers must allow
  /// The most tiles a block walks, and the blocks per multiprocessor its sizing counts on: a call
  /// of fewer than max_tiles_per_block tiles per resident block takes fewer tiles a block.
  int max_tiles_per_block;
  int blocks_per_sm;
  /// The library takes the flat kernel for sequences of at most `max_length` elements, at least
  /// `min_sequences_per_sm` of them per multiprocessor; for sequences of at most `tiny_length`
  /// elements from `tiny_min_sequences_per_sm` of them; and for those of `band_min_length` to
  /// `band_max_length` elements that would fill less than `band_max_fill` of the one-block
  /// path's tiles, from `band_min_sequences_per_sm` (flat_pays; no band where band_min_length >
  /// band_max_length).
  int64_t max_length;
  double min_sequences_per_sm;
  int64_t tiny_length;
  double tiny_min_sequences_per_sm;
  int64_t band_min_length;
  int64_t band_max_length;
  double band_max_fill;
  double band_min_sequences_per_sm;
  /// Packed calls with a workspace (flat_packed.cuh): a window is one tile of `window_items`
  /// elements a thread (whole vectors; on the scalar path as many single elements as it has
  /// vectors), staged in shared memory from its loads to its stores, with `window_min_blocks`
  /// blocks per multiprocessor the registers must allow.
  int window_items;
  int window_min_blocks;
  constexpr int64_t tile() const { return int64_t(threads) * items; }
};

/// The serial kernel (dispatch/serial_kernels.cuh): one thread a whole sequence, kSerialThreads
/// sequences a block staged in shared memory. The library takes it for sequences of at least
/// `min_length` elements and at most `max_sequence_bytes` bytes whose walk reads shared memory in
/// at most `max_bank_passes` passes (serial_bank_passes), at least `min_sequences_per_sm` of them
/// per multiprocessor (serial_pays), ahead of the flat kernel and one block per sequence.
struct SerialRule {
  int64_t min_length;
  int64_t max_sequence_bytes;
  int64_t max_bank_passes;
  double min_sequences_per_sm;
};

/// The flat kernel's policies: 128 threads x one 16-byte vector, up to 8 tiles a block, 8 blocks
/// per multiprocessor (the best or near it of six shapes probed on 13 cells of the sweep,
/// results/flat_variants_d506904.txt). Taken for sequences of at most 1024 elements, at least 256
/// of them per multiprocessor, of at most 4 elements from 96 per multiprocessor, and in f32
/// backward from 31 per multiprocessor where one block's tiles would be less than three quarters
/// filled (the band, below).
/// - The longest length: forced against one block per sequence in the S x T sweep's cells of 65536
///   sequences (sweep/path/ rows, bench/RESULTS.md "The flat rule's bounds"), one block per
///   sequence was faster at T = 1500 in all four (dtype, pass) cells on both GPUs, by 4-10% on the
///   H200 (results/sweep_69de2b3_run*) and 2-6% on an H100 (sweep_serial_12da11d_h100_run*); the
///   flat kernel at T = 300 and 700 by 8-25% on the H200 (on the H100 bf16 by 8-14%, f32 within
///   4% either way). In between, on an H100 (results/flat_crossover_eb5f24c_h100.txt), one block
///   per sequence was ahead from 900 in f32 and from 1024 in bf16 but at odd lengths (1025: the
///   flat kernel by 11-19%, 16-bit sequences off the 4-byte grid); the bound is the one-block
///   tables' row of 1024-element tiles, as the H200 was not measured there. When the rule was
///   first set (results/sweep_flat_d506904_run*) the flat kernel still won at 1500; the one-block
///   kernels have since gained (the edge mask). Through the library on an H100, the sweep's eight
///   cells this moved gained 0.02-0.10 (results/sweep_flat_rule_eb5f24c_h100_run*).
/// - Tiny lengths: at T = 1, 2 and 4 with 16384 and 32768 sequences (124 and 248 per
///   multiprocessor) the flat kernel forced beat one block per sequence in all 24 cells on an H100
///   (results/serial_path_dcb6a4b_h100.txt; 0.67-0.93 of the copy against 0.47-0.83), at 12288
///   (93 per multiprocessor) in six of eight (flat_crossover_eb5f24c_h100.txt), and at (16384, 1)
///   in all four of the sweep's cells on both GPUs (by 5-17%); below, the calls are launch-bound
///   and the two within each other's spread.
template <int kBytes, bool kBackward>
struct FlatTuning {
  /// Packed windows: 16 KiB of each stream forward (4096 f32 elements; two streams staged), 10 KiB
  /// backward (three) and 12 KiB in 16-bit types, so a window's slots take 36 KiB forward (a slot
  /// of padding after every eight vectors: a thread's 8 vectors read conflict-free), 30 KiB f32
  /// backward (no padding: 5 vectors a thread are conflict-free without it) and 36 KiB 16-bit
  /// backward (6 vectors a thread: 2-way conflicts padded or not, unpadded; window_padded), within
  /// the default allowance (run_flat_packed checks it); f32 windows four blocks per multiprocessor
  /// forward, the others six (16-bit forward windows fit five by shared memory, backward six
  /// without states: layout_test's WindowResidency; bounded for five they were no faster on an
  /// H100, bf16 forward the same, backward 0.852 / 0.849 against 0.860 / 0.860). On the H200's four
  /// packed time-contiguous rows (f32 and bf16, log-uniform and skewed; bench --ascan_tune_windows,
  /// lowest of three runs, bench/RESULTS.md "Packed windows' sizes"), of a same-traffic copy: f32
  /// backward 10 KiB 0.834 / 0.835 (log-uniform / skewed), 12 KiB 0.79-0.80, 16 KiB 0.79-0.80, 20
  /// KiB 0.72; bf16 backward 12 KiB 0.767 / 0.790 against 0.740 / 0.755 at 10 KiB (seven blocks
  /// 0.744 / 0.752, 16 KiB at four 0.71); f32 forward four blocks 0.918 / 0.866 against 0.908 /
  /// 0.856 at six, 24 KiB at four 0.908 / 0.868, 32 KiB at three 0.862 / 0.850; bf16 forward six
  /// blocks 0.909 / 0.828 against 0.870 / 0.824 at four
  /// (results/tune_windows_6f3021d_run*.json.gz). The f32 backward window at seven blocks (72
  /// registers) was ahead of six (80) there, 0.859 / 0.846, while its halo was loaded by plain
  /// loads; with the halo staged by asynchronous copies (stage_window) six are ahead on the H200,
  /// 0.920 / 0.907 against 0.907 / 0.894 (results/tune_windows_f32bwd_a2a3058_run*.json.gz), and on
  /// an H100 (0.967 / 0.949 against 0.954 / 0.935). Double keeps f32's sizes at six blocks,
  /// unmeasured.
  static constexpr int kWindowBytes = kBackward ? (kBytes == 2 ? 12288 : 10240) : 16384;
  static constexpr int kWindowItems = kWindowBytes / (128 * kBytes);
  static constexpr int kWindowMinBlocks = kBytes == 4 && !kBackward ? 4 : 6;
  /// The band: f32 backward takes the flat kernel for 257-1024 elements that fill less than
  /// three quarters of one block's tiles (257-383 and 513-767 elements, tiles of 512 and two of
  /// 512), from 31 sequences a multiprocessor (4092 on 132). Forced on the H200
  /// (results/flat_band_probe_8ee3842.txt, flat_offgrid_8ee3842.txt; the sweep's sweep/path/ rows
  /// of results/sweep_1c8b4b3_run*), the flat kernel was ahead of one block per sequence at 257,
  /// 300, 600 and 700 elements with 2048-24576 sequences in every cell but (2048, 300), by 2-21%
  /// (16384 x 300: 0.897 against 0.788; 4096 x 600: 0.888 against 0.734); level at 400, 768 and
  /// 800 (within 0.03), and behind where the tiles are filled: at 512, 0.887 / 0.920 against
  /// 0.935 / 0.969 (4096 / 16384 sequences), at 900, 0.852-0.888 against 0.877-0.945, and at 500
  /// (98% filled) ahead by 0.02-0.05, left to one block. A band of every length from 257 to 768
  /// cost the grid's (12288, 512) row 0.968 -> 0.929 (results/flat_band_ab_*). 16-bit types and
  /// f32 forward took turns there (bf16 ahead at 300 and 700, behind at 500 and at 4096
  /// sequences), and keep the rule above.
  static constexpr bool kBand = kBytes == 4 && kBackward;
  static constexpr FlatPolicy kPolicy{
      128, 16 / kBytes, 8, 8, 8, 1024, 256.0, 4, 96.0, kBand ? 257 : 1, kBand ? 1024 : 0, 0.75,
      31.0, kWindowItems, kWindowMinBlocks};
  /// The serial kernel's rule: sequences of 5 elements to 256 bytes (64 f32 elements, 128 16-bit,
  /// 32 double) read in at most 2 bank passes, at least 256 of them per multiprocessor forward and
  /// 96 backward. Measured on an H100 (bench/RESULTS.md "The serial kernel";
  /// results/serial_path_5b431fb_h100.txt, _dcb6a4b_h100.txt; the sweep through this rule,
  /// sweep_serial_12da11d_h100_run*, against the library before it, 64 / 53 / 31 / 27 -> 69 / 54
  /// / 34 / 28 cells at target):
  /// forced against the flat kernel and one block per sequence at 16384-65536 sequences, it was
  /// the fastest at T = 7 and 33 with 32768 sequences and more (f32 forward at 65536: 0.90-0.91
  /// against 0.78-0.80; bf16 0.86-0.88 against 0.62-0.66), and backward from 16384 (f32 T = 33
  /// 0.84-0.88 against 0.82; bf16 T = 7 0.79 against 0.69-0.70); the flat kernel was faster at
  /// T = 1 to 4, one block per sequence at T = 100 f32 (400 bytes), and forward at 16384 the
  /// three were within a few hundredths either way.
  /// 16-bit backward takes it from one element: at T = 1, 2 and 4 with 8192-32768 sequences it
  /// was ahead of both in all eight bf16 cells on an H100 (results/flat_crossover_eb5f24c_h100.txt;
  /// 0.77-0.82 of the copy against the flat kernel's 0.66-0.73 and one block's 0.48-0.71, 0.6-1.2
  /// µs a call), where in the other dtypes and passes the two took turns within 0.1 (f32 at T = 1
  /// and 2 the flat kernel ahead, at T = 4 mostly the serial one); f16 follows, unmeasured.
  static constexpr SerialRule kSerial{kBytes == 2 && kBackward ? 1 : 5, 256, 2,
                                      kBackward ? 96.0 : 256.0};
};

/// Index of the row of `Table` whose max_span covers sequences of `span` elements.
template <int kBytes, class Table = ScanTuning<kBytes>>
constexpr int select_policy(int64_t span) {
  for (int i = 0; i < Table::kCount - 1; ++i)
    if (span <= Table::kPolicies[i].max_span) return i;
  return Table::kCount - 1;
}

/// The elements row `P`'s tiles cover for a sequence of `span`: the tile of a one-tile row, the
/// whole tiles a tile-walking row (kChunked) takes. Lanes past the span hold nothing and load
/// nothing, but a block spends a tile's instructions and its latency on them.
constexpr int64_t covered_span(const ScanPolicy& P, int64_t span) {
  return P.kind == KernelKind::kChunked ? (span + P.tile() - 1) / P.tile() * P.tile() : P.tile();
}

/// A table's margin for select_row (Table::kRowRuleMargin; 0, the rule off, where it has none).
template <class Table, class = void>
struct RowRuleMargin {
  static constexpr double value = 0;
};
template <class Table>
struct RowRuleMargin<Table, std::void_t<decltype(Table::kRowRuleMargin)>> {
  static constexpr double value = Table::kRowRuleMargin;
};

/// A tile-walking row takes a call from the table's row only where its blocks keep at least
/// this many threads per multiprocessor (sequences x threads >= this x multiprocessors). On the
/// H200 (132 multiprocessors) the 64-thread rows lost to the table's rows in 18 of 21 cells with
/// 512-1056 sequences (bf16 backward at 2500 with 1056: 0.97 -> 0.85) and won in all 22 with
/// 2048-16384; the 128-thread rows, where the margins give them the span, lost 2 of 4 cells with
/// 512 sequences (f32 forward at 1500: 0.87 -> 0.80), 1 of 4 with 768 (by 1%) and none from 1024
/// (bench/results/row_rule_probe_*.txt, threshold_probe_*.txt). 768 takes the 64-thread rows from
/// 1584 sequences, the 128-thread rows from 792.
constexpr double kRowRuleThreadsPerSm = 768;

/// The one documented host rule over the one-block tables: the row that scans `sequences`
/// sequences of `span` elements on `sms` multiprocessors. The tables' rows were measured on
/// lengths that fill their tiles (powers of two and just under); between those a row's tiles can
/// leave up to half of the lanes idle (bf16 forward at 5000 elements: two tiles of 4096, 61%
/// filled, 0.63-0.67 of the copy). So where a tile-walking row (kChunked) whose blocks fill the
/// multiprocessors (kRowRuleThreadsPerSm) covers the span with fewer elements than the table's
/// row by more than the table's margin (Table::kRowRuleMargin; none, the rule off), the
/// tile-walking row that covers the fewest (the larger tile on a tie) takes it. Rows of max_span
/// 0 are the rule's only; a row's filled_max_span extends its spans where the call fills it.
/// Measured with 1024-16384 sequences of 1100-9000 elements (bench/results/row_rule_probe_*.txt);
/// the multi-block and flat paths are chosen before this.
template <int kBytes, class Table = ScanTuning<kBytes>>
constexpr int select_row(int64_t sequences, int64_t span, int sms) {
  const auto fills = [&](const ScanPolicy& P) {
    return double(sequences) * P.threads >= kRowRuleThreadsPerSm * double(sms);
  };
  int table_row = select_policy<kBytes, Table>(span);
  for (int i = 0; i < table_row; ++i)  // rows that cover more where the call fills them
    if (Table::kPolicies[i].filled_max_span >= span && fills(Table::kPolicies[i])) {
      table_row = i;
      break;
    }
  const double margin = RowRuleMargin<Table>::value;
  if (margin <= 0) return table_row;
  int best = -1;
  int64_t fewest = 0;
  for (int i = 0; i < Table::kCount; ++i) {
    const ScanPolicy& P = Table::kPolicies[i];
    if (P.kind != KernelKind::kChunked || !fills(P)) continue;
    const int64_t c = covered_span(P, span);
    if (best < 0 || c < fewest || (c == fewest && P.tile() > Table::kPolicies[best].tile())) {
      best = i;
      fewest = c;
    }
  }
  const double table_covers = double(covered_span(Table::kPolicies[table_row], span));
  return best >= 0 && table_covers > margin * double(fewest) ? best : table_row;
}

/// select_row where the sequences fill any device: the rows a span may take. The dispatch asks
/// for the multiprocessor count only where this differs from the table's row.
template <int kBytes, class Table = ScanTuning<kBytes>>
constexpr int select_row(int64_t span) {
  return select_row<kBytes, Table>(INT64_MAX, span, 0);
}

}  // namespace detail
}  // namespace ascan
