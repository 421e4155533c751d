// ascan/device/dispatch/tuning.cuh: the constexpr dispatch tables (forward, backward).
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
// see bench/RESULTS.md ("Tuning sweeps").
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
  /// Blocks per multiprocessor the kernel's registers must allow (__launch_bounds__): 2048 /
  /// threads asks for full occupancy (at most 32 registers), 1 leaves the compiler free.
  int min_blocks = 1;
  constexpr int tile() const { return lanes * items; }
};

/// The dispatch table for elements of `kBytes` bytes: rows (max_span, kind, threads, lanes,
/// items). Items per thread are whole 16-byte vectors, striped across the group (see
/// scan_kernels.cuh). A warp row whose max_span fits its tile runs without a tile loop.
///
/// From the sweeps in bench/RESULTS.md (H200, (8, 1536, T), efficiency against a same-traffic
/// copy): up to a few thousand elements the best kernel holds the whole sequence in one tile with
/// ONE vector per thread (the shortest chain from load to store, the most threads in flight):
/// lane groups up to 128 elements, a block of T / vector threads up to 1-2K; beyond that 256
/// threads walk the sequence tile by tile. Lengths under 128 are not swept; their rows keep the
/// same one-vector-per-thread shape.
template <int kBytes>
struct ScanTuning;

/// 4-byte elements (float): a vector is 4 elements.
template <>
struct ScanTuning<4> {
  static constexpr ScanPolicy kPolicies[] = {
      {32, KernelKind::kWarp, 128, 8, 4},                 // one tile of 32
      {64, KernelKind::kWarp, 128, 16, 4},                // one tile of 64
      {128, KernelKind::kWarp, 128, 32, 4, 16},           // one tile of 128     sweep 0.98
      {256, KernelKind::kBlock, 64, 64, 4, 32},           // one tile of 256     sweep 0.98
      {512, KernelKind::kBlock, 128, 128, 4, 16},         // one tile of 512     sweep 0.98
      {1024, KernelKind::kBlock, 256, 256, 4, 8},         // one tile of 1024    sweep 0.95-0.97
      {2048, KernelKind::kBlock, 256, 256, 8},            // one tile of 2048    sweep 0.98-1.00
      {4096, KernelKind::kChunked, 128, 128, 8, 4},       // 4 tiles of 1024     sweep 0.995
      {INT64_MAX, KernelKind::kChunked, 256, 256, 4, 4},  // tiles of 1024     sweep 0.97-0.99
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

/// 2-byte elements (half, bfloat16): a vector is 8 elements.
template <>
struct ScanTuning<2> {
  static constexpr ScanPolicy kPolicies[] = {
      {32, KernelKind::kWarp, 128, 4, 8},                  // one tile of 32
      {64, KernelKind::kWarp, 128, 8, 8},                  // one tile of 64
      {128, KernelKind::kWarp, 128, 8, 16},                // one tile of 128     sweep 0.87-0.94
      {256, KernelKind::kWarp, 128, 16, 16},               // one tile of 256     sweep 0.98
      {512, KernelKind::kBlock, 64, 64, 8, 32},            // one tile of 512     sweep 0.93-0.97
      {1024, KernelKind::kBlock, 128, 128, 8, 16},         // one tile of 1024    sweep 0.94-0.97
      {2048, KernelKind::kBlock, 256, 256, 8, 8},          // one tile of 2048    sweep 0.91-0.94
      {4096, KernelKind::kChunked, 128, 128, 8, 8},        // 4 tiles of 1024     sweep 0.955-0.97
      {8192, KernelKind::kChunked, 128, 128, 32, 4},       // 2 tiles of 4096     sweep 0.99-1.00
      {INT64_MAX, KernelKind::kChunked, 256, 256, 16, 3},  // tiles of 4096    sweep 0.965-0.99
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
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
/// sequences comes from its own sweep (bench/RESULTS.md): 16-bit types want small blocks at
/// full occupancy (128 threads, one run, 8 blocks per multiprocessor: 0.88-0.94 against
/// 0.73-0.86 for 256 threads), float two runs per thread.
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
      {1024, KernelKind::kChunked, 128, 128, 4, 8},       // 2 tiles of 512: sweep 0.94-0.97
      {8192, KernelKind::kChunked, 256, 256, 8, 3},       // sweep 0.97-0.99
      {INT64_MAX, KernelKind::kChunked, 128, 128, 8, 4},  // sweep 0.91-0.95
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

template <>
struct BackwardTuning<2> {
  using One = BackwardOneTileRows<8>;
  static constexpr ScanPolicy kPolicies[] = {
      One::kRows[0],
      One::kRows[1],
      One::kRows[2],
      One::kRows[3],
      One::kRows[4],
      One::kRows[5],
      {INT64_MAX, KernelKind::kChunked, 128, 128, 8, 8},  // sweep 0.88-0.94
  };
  static constexpr int kCount = sizeof(kPolicies) / sizeof(kPolicies[0]);
};

/// Where a block of the multi-block path keeps its tile's loaded elements during the look-back.
/// The look-back takes as long as a tile's own loads under full memory load (4-7 us; phase
/// profiles in bench/RESULTS.md), so throughput is the bytes each multiprocessor keeps resident
/// while its tiles wait. Holding the elements in registers allowed only two 4096-element blocks
/// per multiprocessor and measured 0.44-0.59 of the copy; that mode was removed.
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
/// (before sm_90). They are also the 16-bit short-tile policies on every GPU. They are the
/// multi-block policies measured on the H200 before staged tiles (2026-11-29, loads into registers;
/// forward f32 0.73-0.82, bf16 0.79-0.83, backward 0.57-0.71 of the copy on the long rows), not
/// measured on any earlier GPU.
template <int kBytes, bool kBackward>
struct LookbackFallbackTuning {
  static constexpr int V = 16 / kBytes;
  static constexpr LookbackPolicy kPolicy =
      kBackward     ? LookbackPolicy{256, 2 * V, 4, 0, LookbackHold::kReload}
      : kBytes == 2 ? LookbackPolicy{256, 4 * V, 5, 0, LookbackHold::kShared}
                    : LookbackPolicy{256, 4 * V, 4, 0, LookbackHold::kReload};
};

/// The multi-block path's policy (kPolicy) for elements of `kBytes` bytes, forward or backward.
///
/// Tile shape: 64 threads, each owning consecutive 16-byte vectors staged in shared memory by bulk
/// copies (an odd count: conflict-free reads) and, forward, more vectors held in registers.
/// Forward 17 + 8 vectors, 6 blocks per multiprocessor (16-bit 13 + 6 at 8, double 25 + 8 at 4);
/// backward 9 staged vectors, 8 blocks (16-bit too since the sixth session). f32 forward took 25 +
/// 8 at 4 blocks until 2026-11-30; runs of both shapes that day (µs on the four rows below;
/// results/multiblock_lookback_depth_*.json, multiblock_direct_stores_sweep.json,
/// grid_f32_forward_17_8.json) gave 878-890 / 222-241 / 408-412 / 417-419 for 25 + 8 and 884-902 /
/// 219-234 / 417-420 / 408-410 for 17 + 8: a wash overall (-1-2% on two rows, +2% on the others),
/// and one shape then for every 16- and 32-bit type. (1, 16, 2^22) moves between two speeds from
/// run to run, forward and backward alike. From the sweeps on the H200 (bench --ascan_tune_multi,
/// 2026-11-30; results/multiblock_staged_*sweep*.json), µs on (1, 1, 2^28) / (1, 16, 2^22) / (2, 4,
/// 2^24) / (1, 128, 2^20):
///
///                        f32 forward            bf16 forward
///   256x4 reload|shared  1057 / 266 / 493 / 501  524 / 128 / 245 / 234   (the previous policies)
///   staged 128x9 m6       997 / 238 / 455 / 434  522 / 132 / 247 / 236
///   staged 64x25 m4       945 / 227 / 439 / 418  515 / 137 / 249 / 241
///   staged 64x25+8 m4     890 / 220 / 410 / 413  513 / 159 / 264 / 236
///   staged 64x17+8 m6     908 / 217 / 417 / 407  500 / 130 / 245 / 223
///                        f32 backward            bf16 backward
///   256x2 reload         2112 / 519 / 983 / 889  1118 / 284 / 530 / 495 (the previous policy)
///   staged 64x13 m5      1672 / 388 / 758 / 704  1046 / 259 / 496 / 456
///   staged 64x9 m8       1659 / 385 / 751 / 695   955 / 232 / 457 / 421
///
/// Smaller blocks with more vectors per thread win at the same shared memory per multiprocessor,
/// and registers beside shared memory win again. Double is not measured.
///
/// Crossover (position-major build with the earlier tiles, 2026-11-29,
/// results/multiblock_position_major_crossover.json): efficiency of each path forced, S sequences
/// of 2^16 elements (2^20 where marked). Re-measured forward with the staged tiles
/// (results/multiblock_staged_crossover.json): f32 0.76 / 0.81 / 0.85 / 0.88 multi-block at
/// S = 132 / 264 / 396 / 528, so the f32 threshold stands; bf16 0.45 / 0.55 / 0.57 / 0.61, below
/// one block per sequence from S = 132 on, where the threshold already sends it (the staged
/// 16-bit tile is large for 2^16-element sequences; bench/RESULTS.md).
///
///              S=16 (2^20)   S=128 (2^20)  S=132         S=264         S=396         S=528
///   f32 fwd    0.10 | 0.73   0.53 | 0.83   0.56 | 0.72   0.75 | 0.76   0.87 | 0.78   0.93 | 0.80
///   bf16 fwd   0.16 | 0.67   0.72 | 0.83   0.72 | 0.68   0.89 | 0.73   0.90 | 0.78   0.84 | 0.79
///   f32 bwd    0.10 | 0.62   0.57 | 0.71   0.60 | 0.69   0.81 | 0.69   0.90 | 0.68   0.93 | 0.70
///   bf16 bwd   0.04 | 0.60   0.22 | 0.64   0.28 | 0.62   0.43 | 0.60   0.56 | 0.63   0.65 | 0.64
///              (one block per sequence | multi-block)
///
/// Short tiles (kShortPolicy; sweep of 2026-11-30, results/multiblock_short_tiles_sweep.json,
/// forward, efficiency of the library's long tile | the short tile; 7 launches each, and shapes
/// this small move by +-0.05 between runs):
///
///              1x8x2^16     1x32x2^16    1x128x2^16   1x132x2^16   1x32x2^18    1x16x2^20
///   f32        0.53 | 0.58  0.65 | 0.68  0.73 | 0.73  -            0.64 | 0.74  0.67 | 0.75
///   bf16       0.21 | 0.50  0.31 | 0.55  0.48 | 0.67  0.45*| 0.69  0.49 | 0.60  0.67 | 0.64
///
/// (* from the crossover run above, results/multiblock_staged_crossover.json; the other figures
/// come from a build that also read the look-back's records early, which was not kept,
/// bench/RESULTS.md.) The long tiles win from about 16 (f32, tiles of 25 + 8 vectors) and 8
/// (16-bit) of them per multiprocessor; below, the short ones. Double is not measured. The 16-bit
/// rows were the regression of the first staged policy.
///
/// Since look-back records have lines of their own (results/multiblock_tune_lines_bf16.json,
/// µs, 7 launches): the staged short tile (backward: 64 x 9 at 8 blocks) | the register kernel,
/// now kShortPolicy for 16-bit (forward 256 x 4 vectors in shared memory, backward 256 x 2
/// reloaded); the register kernel loses on the long rows (bf16 backward (1, 16, 2^22): 290 µs
/// against 210):
///
///              1x8x2^16     1x32x2^16    1x128x2^16   1x8x2^18     1x32x2^18    1x4x2^20
///   bf16 fwd   10.7 | 9.8   12.9 | 12.5  25.9 | 25.7  16.0 | 12.9  29.8 | 26.2  21.9 | 17.1
///   bf16 bwd   19.8 | 11.6  23.9 | 15.4  45.8 | 40.1  25.7 | 15.7  48.0 | 41.8  26.6 | 24.8
///
/// Thresholds (multi-block below this many sequences per multiprocessor): f32 forward 2,
/// 16-bit forward 1, f32 backward 1.5, 16-bit backward 6 (4 until the sixth session's faster
/// backward tile). Double: the float values (not measured). The 16-bit backward crossover with
/// that tile, each path forced, µs (results/multiblock_bwd_inside_sweep.json; one block per
/// sequence | multi-block):
///
///              S=132        S=264        S=396        S=528        S=792        S=1056
///   bf16 bwd   104 | 43.5   107 | 66.2   117 | 91.8   132 | 115    161 | 158    194 | 211
///
/// and at 528 sequences of 2^20, 1921 | 1430 µs. f32 backward crosses at about S = 264
/// (107 | 109 µs), where its threshold (198) leaves it.
template <int kBytes, bool kBackward>
struct LookbackTuning {
  static constexpr int V = 16 / kBytes;  // elements per vector
  /// `tiles` tiles of `elements` elements each, counted in tiles of the policy `P`: a cut-off
  /// measured with an earlier tile, kept at the same elements per multiprocessor.
  static constexpr double scaled(double tiles, int64_t elements, const LookbackPolicy& P) {
    return tiles * double(elements) / double(P.tile());
  }
  /// Forward: 64 threads x (17 staged + 8 held) vectors, 6 blocks per multiprocessor; double
  /// keeps 25 + 8 at 4 blocks (at 6 blocks' registers the 17 + 8 shape spills).
  /// 16-bit: the staged loops unrolled by 2, not fully (bf16 forward 1-4% faster on the four
  /// long rows, f32 1-2% slower; results/multiblock_icache_sweep*.json), and since the fifth
  /// session 13 + 6 vectors at 8 blocks: fewer held registers, more blocks. bf16 µs on the four
  /// long rows, two runs each (results/multiblock_occupancy_sweep2_bf16*.json):
  ///
  ///   64x17+8 m6 (before)  440 / 126 / 216 / 215
  ///   64x15+6 m7           416 / 123 / 214 / 220
  ///   64x17+6 m6           427 / 128 / 228 / 221
  ///   64x15+5 m7           432 / 125 / 218 / 218
  ///   64x13+6 m8           418 / 121 / 220 / 210   (the policy: -2.8% over the four rows)
  ///   64x15+4 m7           438 / 124 / 224 / 213
  ///   (the first sweep, results/multiblock_occupancy_sweep_bf16*.json: 64x15+8 m7 and 64x13+8
  ///   m8, whose 8 held vectors spill at those block counts, 0-5% slower than 13 + 6)
  ///
  /// The first wave's loads are paced at 0.8 of the device's peak memory bandwidth (WavePace,
  /// seventh session; the H200's peak is 4.9 TB/s). µs on the four long rows, (1, 1, 2^28) /
  /// (1, 16, 2^22) / (2, 4, 2^24) / (1, 128, 2^20) (--ascan_tune_multi, 7 launches,
  /// results/multiblock_wave_pace_tune.json):
  ///
  ///                not paced               paced at 0.7            at 0.8 (the policy)
  ///   f32 fwd      824 / 230 / 405 / 442   -                       805 / 208 / 399 / 404
  ///   f32 bwd     1456 / 392 / 711 / 691  1456 / 360 / 709 / 689  1453 / 360 / 709 / 688
  ///   bf16 fwd     419 / 124 / 212 / 208   408 / 113 / 208 / 204   408 / 112 / 207 / 203
  ///   bf16 bwd     747 / 203 / 366 / 349   741 / 187 / 361 / 348   745 / 187 / 363 / 348
  ///
  /// (0.9: within 4 µs of 0.8 on every row.) On the six short shapes of the same sweep, at most
  /// 1.8 µs slower (f32 forward 1x32x2^16, 18.7 -> 20.5) and up to 4 µs faster. Double and the
  /// short policies are not paced (not measured).
  static constexpr double kPace = kBytes == 8 ? 0.0 : 0.8;
  static constexpr LookbackPolicy kForward =
      kBytes == 8 ? LookbackPolicy{64, (25 + 8) * V, 4, 2.0, LookbackHold::kStaged, 8 * V}
      : kBytes == 2
          ? LookbackPolicy{64, (13 + 6) * V, 8, 1.0, LookbackHold::kStaged, 6 * V, 2, kPace}
          : LookbackPolicy{64, (17 + 8) * V, 6, 2.0, LookbackHold::kStaged, 8 * V, 0, kPace};
  /// Backward: staged tiles of 64 threads x 9 vectors at 8 blocks per multiprocessor, f32 and
  /// 16-bit. Until the sixth session the 16-bit tile was 128 x 6 at 6 (128 x 7 at 5 before): its
  /// staged reads tested every element against the sequence, a third of the kernel's
  /// instructions, and the larger blocks made fewer tiles of that work. With the tests only where
  /// a warp's stretch leaves the sequence (StagedView::read<false>), bf16 µs on the four long
  /// rows (results/multiblock_bwd_inside_sweep.json, 7 launches):
  ///
  ///   128x6 m6   877 / 214 / 420 / 381   (the previous policy, without the tests)
  ///   64x9 m8    751 / 211 / 373 / 358   (the policy; 803 / 210 / 396 / 381 with the tests)
  ///   64x7 m10   768 / 204 / 387 / 370
  ///   64x11 m6   753 / 200 / 379 / 363
  ///   64x5 m14   768 / 201 / 382 / 366
  ///   96x5 m9    951 / 229 / 450 / 430
  static constexpr LookbackPolicy kBackwardPolicy =
      kBytes == 2 ? LookbackPolicy{64, 9 * V, 8, 6.0, LookbackHold::kStaged, 0, 0, kPace}
                  : LookbackPolicy{64, 9 * V, 8, 1.5, LookbackHold::kStaged, 0, 0, kPace};
  static constexpr LookbackPolicy kPolicy = kBackward ? kBackwardPolicy : kForward;
  /// Calls whose sequences make fewer than kShortBelowTilesPerSm of kPolicy's tiles per
  /// multiprocessor (too few to fill the GPU a few times over) take kShortPolicy's smaller tiles.
  /// f32 forward: 64 threads x (9 staged + 4 held) vectors, 8 blocks per multiprocessor. 16-bit:
  /// the register kernel of the fallback (256 threads; forward 4 vectors per thread kept in
  /// shared memory, backward 2 reloaded), which measured 3-22% (forward) and 6-40% (backward)
  /// faster than the staged short tiles on all six short bf16 shapes of the sweep once records
  /// had lines of their own (results/multiblock_tune_lines_bf16.json; two of the backward ones
  /// make 9-10 main tiles per multiprocessor, and since the fourth session the cut-off below
  /// takes them to the register kernel too). f32 backward: 64 x 7 at 10 blocks, faster than the
  /// main 64 x 9 at 8 on all six short shapes of the sweep (µs, 7 launches,
  /// results/multiblock_bwd_inside_sweep.json):
  ///
  ///              1x8x2^16     1x32x2^16    1x128x2^16   1x8x2^18     1x32x2^18    1x4x2^20
  ///   64x9 m8    23.3         32.4         66.2         27.5         63.8         37.1
  ///   64x7 m10   14.5         23.0         58.0         25.7         63.2         36.8
  ///
  /// and 1-2% slower on three of the four long rows. Double backward has none (not measured).
  static constexpr LookbackPolicy kShortPolicy =
      kBytes == 2   ? LookbackFallbackTuning<kBytes, kBackward>::kPolicy
      : !kBackward  ? LookbackPolicy{64, (9 + 4) * V, 8, 0, LookbackHold::kStaged, 4 * V}
      : kBytes == 4 ? LookbackPolicy{64, 7 * V, 10, 0, LookbackHold::kStaged}
                    : kPolicy;
  /// The forward cut-offs were measured with the 16-bit tile and the earlier f32 tile of 25 + 8
  /// vectors (16 of those per multiprocessor); f32's is scaled to the same elements per
  /// multiprocessor. The 16-bit backward's is 12: at 9.0 and 9.7 of its main tiles per
  /// multiprocessor (bf16 1x32x2^18, 1x128x2^16) the register kernel measured 13% faster than
  /// the main tile in the sweep (41.8 / 40.1 µs against 48.0 / 45.8), and through the library
  /// 3% and 7% (44.1 -> 42.8, 45.6 -> 42.5 µs; results/multiblock_short_cutoff_bwd.json); at 55
  /// it lost by 38%; between 10 and 55 is not measured. The 16-bit cut-offs were measured with
  /// the earlier tiles (forward 17 + 8 vectors, backward 128 x 7) and are scaled to the same
  /// elements per multiprocessor. With the 64 x 9 backward tile (18.7 of them per
  /// multiprocessor) the register kernel measured 29-40% faster than it on three of the six
  /// short bf16 shapes, all below the cut-off, and within the spread on the other three
  /// (results/multiblock_bwd_inside_sweep.json, multiblock_bwd_paths_sixth.json).
  /// The f32 backward's cut-off, 32 of its main tiles per multiprocessor, lies above the short
  /// shapes measured (1.7 to 27.6 of them) and below the long rows (220 and more); where between
  /// the two tiles cross is not measured.
  /// max_sequences_per_sm of the short and fallback policies is not read.
  static constexpr double kBackwardShortBelow = kBytes == 2
                                                    ? scaled(12.0, 128 * 7 * V, kBackwardPolicy)
                                                : kBytes == 4 ? 32.0
                                                              : 0.0;
  static constexpr double kForwardShortBelow =
      kBytes == 2   ? scaled(8.0, 64 * (17 + 8) * V, kForward)
      : kBytes == 4 ? scaled(16.0, 64 * (25 + 8) * V, kForward)
                    : 16.0;
  static constexpr double kShortBelowTilesPerSm =
      kBackward ? kBackwardShortBelow : kForwardShortBelow;
  using Fallback = LookbackFallbackTuning<kBytes, kBackward>;
};

/// Index of the row of `Table` that scans sequences of `span` elements.
template <int kBytes, class Table = ScanTuning<kBytes>>
constexpr int select_policy(int64_t span) {
  for (int i = 0; i < Table::kCount - 1; ++i)
    if (span <= Table::kPolicies[i].max_span) return i;
  return Table::kCount - 1;
}

}  // namespace detail
}  // namespace ascan
