// tests/host_path_test.cu: the host side of the entry points on random argument sets.
//
// For each argument set of validate_fuzz.hpp's generator (ASCAN_FUZZ_CASES / 4 per test, default
// 32768; pointers are made-up values, never touched):
//   - the size query scan(args, nullptr, bytes) / scan_backward(args, nullptr, bytes) judges as
//     can_implement does; a refused query leaves bytes alone and an accepted one reports at
//     least 1 byte, or, where the plan needs the device and there is none, a CUDA error;
//   - for the accepted calls, the rest of the host arithmetic a launch does: the kernel
//     parameters (make_params), the plan on devices of 1 to 2^20 multiprocessors (plan_on, every
//     path), the one-block path's table row, the row path's scratch size.
// It launches nothing and needs no GPU; CI also runs it under -fsanitize=address,undefined,
// where any overflow or out-of-bounds access in that arithmetic stops it.
#include <gtest/gtest.h>
#include <ascan/ascan.cuh>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <type_traits>

#include "validate_fuzz.hpp"

namespace ascan::fuzz {
namespace {

int64_t cases_per_test() {
  if (const char* env = std::getenv("ASCAN_FUZZ_CASES"); env != nullptr && *env != '\0')
    return std::strtoll(env, nullptr, 0) / 4;
  return 32768;
}

/// What a launch of an accepted, non-empty call computes on the host before it launches.
template <class T, bool kBackward, class Args>
void plan_accepted(const Args& args,
                   const std::initializer_list<const std::optional<Strides>*>& own,
                   int64_t& planned) {
  using C = compute_t<T>;
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  using Lookback = detail::LookbackTuning<sizeof(T), kBackward>;
  const Shape& s = args.shape;
  if (detail::takes_row_path(s, args.packed, own)) {
    size_t bytes = 0;
    (void)detail::row_scratch_bytes<T, kBackward>(s.channels, s.batch * s.length, bytes);
    return;
  }
  using Table = std::conditional_t<kBackward, detail::BackwardTuning<sizeof(T)>,
                                   detail::ScanTuning<sizeof(T)>>;
  bool vector = false, flat = false;
  int64_t sequences = 0, length = 0, span = 0, state_stride = 0;
  if constexpr (kBackward) {
    const auto p = detail::make_backward_params(args, vector);
    sequences = p.sequences;
    length = p.length;
    span = p.span_bound;
    flat = detail::flat_layout(p, state_stride);
  } else {
    const auto p = detail::make_params(args, vector);
    sequences = p.sequences;
    length = p.length;
    span = p.span_bound;
    flat = detail::flat_layout(p, state_stride);
  }
  EXPECT_GE(span, length);
  (void)detail::select_row<sizeof(T), Table>(span);
  // The flat kernel's ranges: at least one sequence each, under 2^31 elements (its int32 offsets).
  if (flat) {
    constexpr detail::FlatPolicy F = detail::FlatTuning<sizeof(T), kBackward>::kPolicy;
    // the span one block per sequence's tiles would cover, as the dispatch weighs it
    const int64_t one_block =
        detail::covered_span(Table::kPolicies[detail::select_policy<sizeof(T), Table>(span)], span);
    for (const int sms : {1, 132, 1 << 20}) {
      (void)detail::flat_pays(sequences, length, sms, F, one_block);
      const int64_t per_block = detail::flat_sequences_per_block(sequences, length, F, sms);
      EXPECT_GE(per_block, 1);
      EXPECT_LE(per_block * length, int64_t{2147483647});
    }
  }
  for (const int sms : {1, 132, 1 << 20})
    for (const detail::Path path :
         {detail::Path::kAuto, detail::Path::kOneBlock, detail::Path::kMultiBlock}) {
      detail::Plan plan;
      const Status st = detail::plan_on<C, kVec, Lookback>(sequences, length, path, sms, plan);
      EXPECT_TRUE(st.ok() || st.code == StatusCode::kNotSupported) << st.message;
      if (plan.multi_block) {
        EXPECT_GT(plan.bytes, 0u);
        ++planned;
      }
    }
}

template <class T>
void drive(bool backward, const char* name) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(name) + " [seed " + std::to_string(seed) +
               "; replay with ASCAN_TEST_SEED=" + std::to_string(seed) + "]");
  Gen gen(seed);
  int failures = 0;
  int64_t accepted = 0, planned = 0;
  const int64_t n = cases_per_test();
  for (int64_t i = 0; i < n && failures < 5; ++i) {
    const Case c = gen.next(backward, static_cast<int64_t>(sizeof(T)));
    size_t bytes = 12345;
    Status v, q;
    if (backward) {
      const ScanBackwardArgs<T> a = backward_args<T>(c);
      v = can_implement(a);
      q = scan_backward(a, nullptr, bytes);
      if (v.ok() && !a.shape.empty())
        plan_accepted<T, true>(a,
                               {&a.gates_strides, &a.states_strides, &a.grad_out_strides,
                                &a.grad_gates_strides, &a.grad_tokens_strides},
                               planned);
    } else {
      const ScanArgs<T> a = forward_args<T>(c);
      v = can_implement(a);
      q = scan(a, nullptr, bytes);
      if (v.ok() && !a.shape.empty())
        plan_accepted<T, false>(a, {&a.gates_strides, &a.tokens_strides, &a.out_strides}, planned);
    }
    const bool good = v.ok() ? (q.ok() && bytes >= 1) || q.code == StatusCode::kCudaError ||
                                   q.code == StatusCode::kNotSupported
                             : q.code == v.code && bytes == 12345;
    if (!good) {
      ADD_FAILURE() << "case " << i << ": can_implement says \"" << v.message
                    << "\", the size query \"" << q.message << "\" (bytes " << bytes << ")\n  "
                    << describe(c);
      ++failures;
    }
    accepted += v.ok() ? 1 : 0;
  }
  std::cout << name << ": " << n << " cases, " << accepted << " accepted, " << planned
            << " multi-block plans\n";
}

TEST(HostPath, ForwardFloat) { drive<float>(false, "forward float"); }
TEST(HostPath, ForwardDouble) { drive<double>(false, "forward double"); }
TEST(HostPath, ForwardHalf) { drive<__half>(false, "forward half"); }
TEST(HostPath, ForwardBfloat16) { drive<__nv_bfloat16>(false, "forward bfloat16"); }
TEST(HostPath, BackwardFloat) { drive<float>(true, "backward float"); }
TEST(HostPath, BackwardDouble) { drive<double>(true, "backward double"); }
TEST(HostPath, BackwardHalf) { drive<__half>(true, "backward half"); }
TEST(HostPath, BackwardBfloat16) { drive<__nv_bfloat16>(true, "backward bfloat16"); }

}  // namespace
}  // namespace ascan::fuzz

// The flat kernel's sizing ends the grid on whole waves of resident blocks: the tiles its waves
// walk one after another stay within 15% (and one tile) of an even spread of the call's tiles
// over every resident block, on the sweep's cells where the flat kernel runs and around them.
TEST(HostPath, FlatRangesFillWholeWaves) {
  for (const int bytes : {2, 4}) {
    const ascan::detail::FlatPolicy F = bytes == 2 ? ascan::detail::FlatTuning<2, false>::kPolicy
                                                   : ascan::detail::FlatTuning<4, false>::kPolicy;
    const int sms = 132;
    const double resident = double(sms) * F.blocks_per_sm;
    for (const int64_t sequences : {1024, 4096, 16384, 33000, 65536, 262144})
      for (const int64_t length : {1, 7, 33, 100, 300, 700, 1500, 2048, 3000}) {
        SCOPED_TRACE("bytes " + std::to_string(bytes) + ", " + std::to_string(sequences) + " x " +
                     std::to_string(length));
        const int64_t per_block =
            ascan::detail::flat_sequences_per_block(sequences, length, F, sms);
        ASSERT_GE(per_block, 1);
        const int64_t blocks = (sequences + per_block - 1) / per_block;
        const int64_t waves = (blocks + int64_t(resident) - 1) / int64_t(resident);
        const int64_t walked = waves * ((per_block * length + F.tile() - 1) / F.tile());
        const double even = double(sequences) * double(length) / double(F.tile()) / resident;
        EXPECT_LE(double(walked), 1.15 * even + 1.0)
            << per_block << " a block, " << blocks << " blocks";
        EXPECT_LE(per_block * length, (F.max_tiles_per_block + 4) * F.tile() + length);
      }
  }
}

// The row rule over the one-block tables: the table's row, or the tile-walking row whose whole
// tiles cover the span with the fewest elements among those whose blocks fill the
// multiprocessors, where the table's row covers more than the table's margin times that; the
// table's row wherever the margin is 0.
template <int kBytes, class Table>
void check_row_rule(const char* name) {
  SCOPED_TRACE(name);
  using ascan::detail::covered_span;
  using ascan::detail::KernelKind;
  const double margin = ascan::detail::RowRuleMargin<Table>::value;
  const int sms = 132;
  for (const int64_t sequences :
       {int64_t{1}, int64_t{131}, int64_t{1024}, int64_t{2048}, int64_t{4096}}) {
    for (int64_t span = 1; span <= 70000; ++span) {
      const auto filled = [&](int i) {
        return double(sequences) * Table::kPolicies[i].threads >=
               ascan::detail::kRowRuleThreadsPerSm * sms;
      };
      const auto fills = [&](int i) {
        return Table::kPolicies[i].kind == KernelKind::kChunked && filled(i);
      };
      // the table's row, or the first row before it whose filled_max_span covers the span
      int table_row = ascan::detail::select_policy<kBytes, Table>(span);
      for (int i = table_row - 1; i >= 0; --i)
        if (Table::kPolicies[i].filled_max_span >= span && filled(i)) table_row = i;
      const int row = ascan::detail::select_row<kBytes, Table>(sequences, span, sms);
      const double table_covers = double(covered_span(Table::kPolicies[table_row], span));
      const int64_t covers = covered_span(Table::kPolicies[row], span);
      ASSERT_GE(covers, span) << "span " << span;
      if (row == table_row) {
        ASSERT_NE(Table::kPolicies[row].max_span, 0) << "span " << span;
        if (margin > 0)
          for (int i = 0; i < Table::kCount; ++i)
            if (fills(i))
              ASSERT_LE(table_covers, margin * double(covered_span(Table::kPolicies[i], span)))
                  << sequences << " x " << span << ": row " << i << " covers it with fewer";
      } else {
        ASSERT_GT(margin, 0.0);
        ASSERT_TRUE(fills(row)) << sequences << " x " << span;
        ASSERT_GT(table_covers, margin * double(covers)) << "span " << span;
        for (int i = 0; i < Table::kCount; ++i)
          if (fills(i)) ASSERT_LE(covers, covered_span(Table::kPolicies[i], span)) << span;
      }
      // the span-only candidate is where the dispatch asks for the multiprocessor count
      if (row != ascan::detail::select_policy<kBytes, Table>(span)) {
        ASSERT_NE((ascan::detail::select_row<kBytes, Table>(span)),
                  (ascan::detail::select_policy<kBytes, Table>(span)));
      }
    }
  }
}

TEST(HostPath, RowRule) {
  using namespace ascan::detail;
  check_row_rule<4, ScanTuning<4>>("f32 forward");
  check_row_rule<2, ScanTuning<2>>("16-bit forward");
  check_row_rule<8, ScanTuning<8>>("double forward");
  check_row_rule<4, BackwardTuning<4>>("f32 backward");
  check_row_rule<2, BackwardTuning<2>>("16-bit backward");
  check_row_rule<8, BackwardTuning<8>>("double backward");
  const auto tile = [](const ScanPolicy& P) { return P.tile(); };
  const auto kind = [](const ScanPolicy& P) { return P.kind; };
  // bf16 forward at 5000 (+7 of lead): five tiles of 1024, not two of 4096, from 792 sequences
  // (128-thread blocks); fewer keep the table's row
  EXPECT_EQ(tile(ScanTuning<2>::kPolicies[select_row<2, ScanTuning<2>>(1024, 5007, 132)]), 1024);
  EXPECT_EQ(kind(ScanTuning<2>::kPolicies[select_row<2, ScanTuning<2>>(1024, 5007, 132)]),
            KernelKind::kChunked);
  EXPECT_EQ((select_row<2, ScanTuning<2>>(500, 5007, 132)),
            (select_policy<2, ScanTuning<2>>(5007)));
  // bf16 at 1500: the 64-thread tiles of 512 from 1584 sequences
  EXPECT_EQ((select_row<2, ScanTuning<2>>(1024, 1507, 132)),
            (select_policy<2, ScanTuning<2>>(1507)));
  EXPECT_EQ(tile(ScanTuning<2>::kPolicies[select_row<2, ScanTuning<2>>(4096, 1507, 132)]), 512);
  EXPECT_EQ(tile(BackwardTuning<2>::kPolicies[select_row<2, BackwardTuning<2>>(4096, 1507, 132)]),
            512);
  // ... not from 1056 (bf16 backward at 2500 measured 0.97 -> 0.85 there)
  EXPECT_EQ((select_row<2, BackwardTuning<2>>(1056, 2507, 132)),
            (select_policy<2, BackwardTuning<2>>(2507)));
  // f32 forward at 1500: tiles of 512 (128 threads) from 792 sequences
  EXPECT_EQ(tile(ScanTuning<4>::kPolicies[select_row<4, ScanTuning<4>>(1024, 1503, 132)]), 512);
  // f32 backward at 1500: tiles of 512 from 792 sequences (128 threads), one tile of 2048 below
  EXPECT_EQ(tile(BackwardTuning<4>::kPolicies[select_row<4, BackwardTuning<4>>(1024, 1500, 132)]),
            512);
  EXPECT_EQ(tile(BackwardTuning<4>::kPolicies[select_row<4, BackwardTuning<4>>(64, 1500, 132)]),
            2048);
  // f32 backward: 2049-2560 elements walk tiles of 512, 3000 keeps its two tiles of 2048
  EXPECT_EQ(tile(BackwardTuning<4>::kPolicies[select_row<4, BackwardTuning<4>>(1024, 2503, 132)]),
            512);
  EXPECT_EQ(tile(BackwardTuning<4>::kPolicies[select_row<4, BackwardTuning<4>>(1024, 3003, 132)]),
            2048);
  // 16-bit forward past 8192: the 128-thread tiles of 4096 where they fill the GPU, the 256-thread
  // tiles of 4096 where they do not
  const ScanPolicy& filled =
      ScanTuning<2>::kPolicies[select_row<2, ScanTuning<2>>(1024, 40000, 132)];
  const ScanPolicy& unfilled =
      ScanTuning<2>::kPolicies[select_row<2, ScanTuning<2>>(256, 40000, 132)];
  EXPECT_EQ(filled.threads, 128);
  EXPECT_EQ(filled.tile(), 4096);
  EXPECT_EQ(unfilled.threads, 256);
  EXPECT_EQ(unfilled.tile(), 4096);
  EXPECT_EQ((select_row<2, ScanTuning<2>>(65536)), (select_policy<2, ScanTuning<2>>(8192)));
  // f32 past 8192: tiles of 2048, forward and backward, whatever the sequences
  for (const int64_t sequences : {int64_t{256}, int64_t{1024}, int64_t{4096}}) {
    EXPECT_EQ(tile(ScanTuning<4>::kPolicies[select_row<4, ScanTuning<4>>(sequences, 40000, 132)]),
              2048);
    EXPECT_EQ(
        tile(BackwardTuning<4>::kPolicies[select_row<4, BackwardTuning<4>>(sequences, 40000, 132)]),
        2048);
  }
  // the lengths the tables were measured on keep their rows (16-bit forward at 65536: above)
  for (const int64_t span : {128, 1024, 2048, 4096, 8192, 65536}) {
    if (span != 65536)
      EXPECT_EQ((select_row<2, ScanTuning<2>>(span)), (select_policy<2, ScanTuning<2>>(span)));
    EXPECT_EQ((select_row<4, ScanTuning<4>>(span)), (select_policy<4, ScanTuning<4>>(span)));
    EXPECT_EQ((select_row<2, BackwardTuning<2>>(span)),
              (select_policy<2, BackwardTuning<2>>(span)));
    EXPECT_EQ((select_row<4, BackwardTuning<4>>(span)),
              (select_policy<4, BackwardTuning<4>>(span)));
  }
}

// The rule that takes the flat kernel: short sequences, many per multiprocessor.
/// The dense row kernel's block shapes (row_dispatch.cuh's dense_tile) on the shapes whose
/// measurements set the rule, with 132 multiprocessors (the H200's), and the workspace a dense
/// call asks: enough for every shape.
TEST(HostPath, DenseTileShapes) {
  using namespace ascan::detail;
  using bf16 = __nv_bfloat16;
  const int sms = 132;
  const auto f32 = [&](bool backward, int64_t b, int64_t t, int64_t c) {
    return backward ? dense_tile<float, true>(b, t, c, false, sms)
                    : dense_tile<float, false>(b, t, c, false, sms);
  };
  const auto h16 = [&](bool backward, int64_t b, int64_t t, int64_t c) {
    return backward ? dense_tile<bf16, true>(b, t, c, false, sms)
                    : dense_tile<bf16, false>(b, t, c, false, sms);
  };
  // f32: narrow blocks at any chain count, tall (16 rows forward, 12 backward) from 2048 positions
  EXPECT_EQ(f32(false, 1, 1 << 20, 256), DenseTile::kNarrowTall);
  EXPECT_EQ(f32(false, 16, 2048, 2048), DenseTile::kNarrowTall);
  EXPECT_EQ(f32(false, 1, 2047, 4096), DenseTile::kNarrow);
  EXPECT_EQ(f32(false, 8, 1024, 1536), DenseTile::kNarrow);
  EXPECT_EQ(f32(false, 8, 128, 1536), DenseTile::kNarrow);
  EXPECT_EQ(f32(true, 16, 2048, 2048), DenseTile::kNarrowTall);
  EXPECT_EQ(f32(true, 8, 1024, 1536), DenseTile::kNarrow);
  EXPECT_EQ(f32(true, 1, 1 << 20, 256), DenseTile::kNarrowTall);
  // 16-bit: narrow from 0.45 chains per multiprocessor (60 on 132), tall from 4096 positions
  // forward, 8192 backward; fewer chains 256 threads, tall from 4096 / 2048
  EXPECT_EQ(h16(false, 8, 65536, 1536), DenseTile::kNarrowTall);    // 192 chains
  EXPECT_EQ(h16(false, 1, 1 << 17, 4096), DenseTile::kNarrowTall);  // 64
  EXPECT_EQ(h16(false, 16, 2048, 2048), DenseTile::kNarrow);        // 512
  EXPECT_EQ(h16(false, 1, 1 << 18, 2048), DenseTile::kTall);        // 32
  EXPECT_EQ(h16(false, 1, 2048, 2048), DenseTile::kShort);
  EXPECT_EQ(h16(true, 8, 8192, 1536), DenseTile::kNarrowTall);
  EXPECT_EQ(h16(true, 4, 4096, 4096), DenseTile::kNarrow);
  EXPECT_EQ(h16(true, 1, 1 << 20, 256), DenseTile::kTall);  // 4 chains
  EXPECT_EQ(h16(true, 2, 1000, 1024), DenseTile::kShort);
  EXPECT_EQ((dense_tile<bf16, true>(1, 1 << 20, 256, false, 0)), DenseTile::kNarrowTall);
  // packed: f32 narrow (16 rows forward, 8 backward); 16-bit half slabs both ways
  EXPECT_EQ((dense_tile<float, true>(1, 1 << 22, 512, true, sms)), DenseTile::kNarrow);
  EXPECT_EQ((dense_tile<float, false>(1, 1 << 22, 512, true, sms)), DenseTile::kNarrowTall);
  EXPECT_EQ((dense_tile<bf16, true>(1, 1 << 22, 1024, true, sms)), DenseTile::kHalfSlab);
  EXPECT_EQ((dense_tile<bf16, true>(1, 100, 8, true, sms)), DenseTile::kHalfSlab);
  EXPECT_EQ((dense_tile<bf16, false>(1, 1 << 22, 1024, true, sms)), DenseTile::kHalfSlab);
  EXPECT_EQ((dense_tile<bf16, false>(1, 100, 8, true, sms)), DenseTile::kHalfSlab);
  // each tile's block, and which calls can take it (dense_tile's choices and their fallbacks)
  static_assert(DenseShape<bf16, false, DenseTile::kShort>::kThreads == 256 &&
                    DenseShape<bf16, false, DenseTile::kShort>::kRows == 8 &&
                    DenseShape<bf16, true, DenseTile::kShort>::kRows == 5 &&
                    DenseShape<float, true, DenseTile::kShort>::kRows == 4 &&
                    DenseShape<bf16, false, DenseTile::kTall>::kRows == 12 &&
                    DenseShape<bf16, true, DenseTile::kTall>::kRows == 8 &&
                    DenseShape<float, false, DenseTile::kNarrow>::kThreads == 128 &&
                    DenseShape<float, false, DenseTile::kNarrow>::kRows == 8 &&
                    DenseShape<float, false, DenseTile::kNarrowTall>::kRows == 16 &&
                    DenseShape<float, true, DenseTile::kNarrowTall>::kRows == 12 &&
                    DenseShape<bf16, false, DenseTile::kHalfSlab>::kThreads == 128 &&
                    DenseShape<bf16, false, DenseTile::kHalfSlab>::kRows == 16 &&
                    DenseShape<bf16, false, DenseTile::kHalfSlab>::kLanes == 4 &&
                    DenseShape<bf16, true, DenseTile::kHalfSlab>::kRows == 12 &&
                    DenseShape<bf16, true, DenseTile::kHalfSlab>::kLanes == 4 &&
                    DenseShape<bf16, false, DenseTile::kNarrowTall>::kLanes == 8 &&
                    DenseShape<bf16, false, DenseTile::kShort>::kLanes == 8,
                "the tiles' blocks");
  static_assert(
      DenseShape<bf16, true, DenseTile::kTall>::kFallback == DenseTile::kShort &&
          DenseShape<float, false, DenseTile::kNarrowTall>::kFallback == DenseTile::kNarrow &&
          DenseShape<bf16, false, DenseTile::kHalfSlab>::kFallback == DenseTile::kShort &&
          DenseShape<bf16, true, DenseTile::kHalfSlab>::kFallback == DenseTile::kShort,
      "a tile that does not fit falls back to the short tile of its block size (the half-slab "
      "tile to the 256-thread one)");
  for (const DenseTile t : {DenseTile::kShort, DenseTile::kTall, DenseTile::kNarrow,
                            DenseTile::kNarrowTall, DenseTile::kHalfSlab}) {
    const bool narrow = t == DenseTile::kNarrow || t == DenseTile::kNarrowTall;
    const bool half = t == DenseTile::kHalfSlab;
    EXPECT_EQ((dense_reachable<bf16, false, false>(t)), !half);
    EXPECT_EQ((dense_reachable<float, true, false>(t)), narrow);
    EXPECT_EQ((dense_reachable<float, false, true>(t)), narrow);
    EXPECT_EQ((dense_reachable<bf16, false, true>(t)), t == DenseTile::kShort || half);
    EXPECT_EQ((dense_reachable<bf16, true, true>(t)), t == DenseTile::kShort || half);
  }
  // every choice of the rule is reachable, and so is its fallback
  for (const bool backward : {false, true})
    for (const bool packed : {false, true})
      for (const int64_t length : {int64_t{128}, int64_t{4096}, int64_t{1} << 20})
        for (const int64_t b : {int64_t{1}, int64_t{64}}) {
          const int64_t bb = packed ? 1 : b;
          const DenseTile h = backward ? dense_tile<bf16, true>(bb, length, 1024, packed, sms)
                                       : dense_tile<bf16, false>(bb, length, 1024, packed, sms);
          const DenseTile f = backward ? dense_tile<float, true>(bb, length, 1024, packed, sms)
                                       : dense_tile<float, false>(bb, length, 1024, packed, sms);
          const auto reach = [&](auto t, DenseTile tile) {
            using U = decltype(t);
            return backward ? (packed ? dense_reachable<U, true, true>(tile)
                                      : dense_reachable<U, true, false>(tile))
                            : (packed ? dense_reachable<U, false, true>(tile)
                                      : dense_reachable<U, false, false>(tile));
          };
          EXPECT_TRUE(reach(bf16{}, h));
          EXPECT_TRUE(reach(float{}, f));
          const auto fallback = [](auto t, DenseTile tile) {
            using U = decltype(t);
            return with_dense_tile(tile, [](auto kind) {
              return DenseShape<U, false, decltype(kind)::value>::kFallback;
            });
          };
          EXPECT_TRUE(reach(bf16{}, fallback(bf16{}, h)));
          EXPECT_TRUE(reach(float{}, fallback(float{}, f)));
        }
  // the workspace covers every shape, packed start words included
  for (const bool packed : {false, true})
    for (const int64_t length : {int64_t{1}, int64_t{128}, int64_t{161}, int64_t{5000}}) {
      const int64_t b = packed ? 1 : 3;
      size_t bytes = 0, each[5] = {};
      ASSERT_TRUE((dense_scratch_bytes<bf16, true>(b, length, 72, packed, bytes)));
      ASSERT_TRUE(
          (dense_scratch_bytes_of<bf16, true, DenseTile::kShort>(b, length, 72, packed, each[0])));
      ASSERT_TRUE(
          (dense_scratch_bytes_of<bf16, true, DenseTile::kTall>(b, length, 72, packed, each[1])));
      ASSERT_TRUE(
          (dense_scratch_bytes_of<bf16, true, DenseTile::kNarrow>(b, length, 72, packed, each[2])));
      ASSERT_TRUE((dense_scratch_bytes_of<bf16, true, DenseTile::kNarrowTall>(b, length, 72, packed,
                                                                              each[3])));
      ASSERT_TRUE((dense_scratch_bytes_of<bf16, true, DenseTile::kHalfSlab>(b, length, 72, packed,
                                                                            each[4])));
      for (size_t e : each) {
        EXPECT_GT(e, 0u);
        EXPECT_GE(bytes, e) << length;
      }
      // forward, the half-slab tile's (4 lanes: its own slabs and tiles)
      size_t forward = 0, half = 0;
      ASSERT_TRUE((dense_scratch_bytes<bf16, false>(b, length, 72, packed, forward)));
      ASSERT_TRUE(
          (dense_scratch_bytes_of<bf16, false, DenseTile::kHalfSlab>(b, length, 72, packed, half)));
      EXPECT_GT(half, 0u);
      EXPECT_GE(forward, half) << length;
    }
}

// The multi-block path's tile sizes (plan_on on 132 multiprocessors): the tiny tiles below
// LookbackTuning::kTinyBelowTilesPerSm main tiles per multiprocessor (f32 forward 0.4, backward
// 1.0; 16-bit 1.5 and 5.0), the short tiles below kShortBelowTilesPerSm, the main ones above; the
// scratch covers the tiles the call takes (and the fallback's, which may run instead).
TEST(HostPath, LookbackTileSizes) {
  using namespace ascan::detail;
  const int sms = 132;
  const auto plan = [&](int bytes, bool backward, int64_t sequences, int64_t length) {
    Plan p;
    ascan::Status st;
    if (bytes == 4)
      st =
          backward
              ? plan_on<float, 4, LookbackTuning<4, true>>(sequences, length, Path::kAuto, sms, p)
              : plan_on<float, 4, LookbackTuning<4, false>>(sequences, length, Path::kAuto, sms, p);
    else if (bytes == 2)
      st =
          backward
              ? plan_on<float, 8, LookbackTuning<2, true>>(sequences, length, Path::kAuto, sms, p)
              : plan_on<float, 8, LookbackTuning<2, false>>(sequences, length, Path::kAuto, sms, p);
    else
      st = backward
               ? plan_on<double, 2, LookbackTuning<8, true>>(sequences, length, Path::kAuto, sms, p)
               : plan_on<double, 2, LookbackTuning<8, false>>(sequences, length, Path::kAuto, sms,
                                                              p);
    EXPECT_TRUE(st.ok()) << st.message;
    EXPECT_TRUE(p.multi_block) << bytes << " " << sequences << " x " << length;
    return p.tiles;
  };
  // the sweep's cells that measured the tiny tiles faster
  EXPECT_EQ(plan(4, false, 1, 12000), TileSize::kTiny);
  EXPECT_EQ(plan(4, false, 4, 40000), TileSize::kTiny);    // 28 main tiles: 0.21 per SM
  EXPECT_EQ(plan(4, false, 16, 12000), TileSize::kTiny);   // 32: 0.24
  EXPECT_EQ(plan(4, true, 16, 12000), TileSize::kTiny);    // 96: 0.73
  EXPECT_EQ(plan(2, false, 16, 100000), TileSize::kTiny);  // 176: 1.33
  EXPECT_EQ(plan(2, true, 16, 100000), TileSize::kTiny);   // 352: 2.67
  EXPECT_EQ(plan(2, true, 256, 5000), TileSize::kTiny);    // 512: 3.9
  EXPECT_EQ(plan(2, true, 64, 40000), TileSize::kTiny);    // 576: 4.4
  // and those that did not
  EXPECT_EQ(plan(4, false, 4, 100000), TileSize::kShort);  // 64: 0.48
  EXPECT_EQ(plan(4, true, 4, 100000), TileSize::kShort);   // 176: 1.33
  EXPECT_EQ(plan(4, false, 16, 1 << 22), TileSize::kMain);
  EXPECT_EQ(plan(2, true, 16, 1 << 22), TileSize::kMain);
  EXPECT_EQ(plan(2, true, 256, 12000), TileSize::kMain);   // 768: 5.8 (16-bit backward: no
  EXPECT_EQ(plan(2, true, 64, 100000), TileSize::kMain);   // 1408: 10.7  short tiles)
  EXPECT_EQ(plan(8, false, 1, 100000), TileSize::kShort);  // double: no tiny tiles
  // the scratch: the tiles of the smallest policy that may run
  Plan tiny;
  ASSERT_TRUE((plan_on<float, 4, LookbackTuning<4, false>>(3, 20000, Path::kAuto, sms, tiny).ok()));
  ASSERT_EQ(tiny.tiles, TileSize::kTiny);
  constexpr int64_t kTiny = LookbackTuning<4, false>::kTinyPolicy.tile();
  static_assert(kTiny == 768, "64 threads x 3 vectors of 4 floats");
  EXPECT_EQ(tiny.bytes, TileGrid::of(3, 20000 + 3, kTiny).state_bytes<float>());
}

// The look-back's threshold on 132 multiprocessors: sequences longer than a main tile take many
// blocks each below max_sequences_per_sm per multiprocessor (f32 1.5: 198 sequences; 16-bit
// forward 1: 132, backward 6: 792), one block each from there.
TEST(HostPath, LookbackThreshold) {
  using namespace ascan::detail;
  const int sms = 132;
  const auto multi = [&](auto lookback, int64_t sequences, int64_t length) {
    using Lookback = decltype(lookback);
    constexpr int kVec = Lookback::V;  // elements per 16-byte vector; f32 and 16-bit in float
    Plan p;
    const ascan::Status st = plan_on<float, kVec, Lookback>(sequences, length, Path::kAuto, sms, p);
    EXPECT_TRUE(st.ok()) << st.message;
    return p.multi_block;
  };
  EXPECT_TRUE(multi(LookbackTuning<4, false>{}, 197, 40000));
  EXPECT_FALSE(multi(LookbackTuning<4, false>{}, 198, 40000));
  EXPECT_FALSE(multi(LookbackTuning<4, false>{}, 256, 12000));  // the sweep's (256, 12000)
  EXPECT_FALSE(multi(LookbackTuning<4, false>{}, 256, 100000));
  EXPECT_TRUE(multi(LookbackTuning<4, false>{}, 64, 12000));
  EXPECT_TRUE(multi(LookbackTuning<4, true>{}, 197, 40000));
  EXPECT_FALSE(multi(LookbackTuning<4, true>{}, 198, 40000));
  EXPECT_TRUE(multi(LookbackTuning<2, false>{}, 131, 40000));
  EXPECT_FALSE(multi(LookbackTuning<2, false>{}, 132, 40000));
  EXPECT_TRUE(multi(LookbackTuning<2, true>{}, 791, 40000));
  EXPECT_FALSE(multi(LookbackTuning<2, true>{}, 792, 40000));
}

// The flat kernel's rule on 132 multiprocessors (33792 sequences up to max_length, 12672 at tiny
// lengths, 4092 in f32 backward's band) and on a smaller GPU, at the bounds of the lengths and
// counts.
template <int kBytes, bool kBackward>
void expect_flat_rule() {
  namespace d = ascan::detail;
  constexpr d::FlatPolicy F = d::FlatTuning<kBytes, kBackward>::kPolicy;
  using Table = std::conditional_t<kBackward, d::BackwardTuning<kBytes>, d::ScanTuning<kBytes>>;
  const auto pays = [&](int64_t sequences, int64_t length, int sms) {  // as the dispatch asks
    const d::ScanPolicy& row = Table::kPolicies[d::select_policy<kBytes, Table>(length)];
    return d::flat_pays(sequences, length, sms, F, d::covered_span(row, length));
  };
  SCOPED_TRACE(testing::Message() << kBytes << " bytes, backward " << kBackward);
  EXPECT_EQ(F.max_length, 1024);
  EXPECT_EQ(F.tiny_length, 4);
  EXPECT_TRUE(pays(65536, 1, 132));
  EXPECT_TRUE(pays(65536, 1024, 132));
  EXPECT_FALSE(pays(65536, 1025, 132));  // one block per sequence from here
  EXPECT_FALSE(pays(65536, 1500, 132));
  EXPECT_TRUE(pays(33792, 5, 132));  // 256 a multiprocessor
  EXPECT_FALSE(pays(33791, 5, 132));
  EXPECT_FALSE(pays(16384, 100, 132));
  EXPECT_TRUE(pays(12672, 4, 132));  // tiny lengths: 96 a multiprocessor
  EXPECT_TRUE(pays(16384, 1, 132));
  EXPECT_FALSE(pays(12671, 4, 132));
  EXPECT_FALSE(pays(4096, 1, 132));
  EXPECT_TRUE(pays(16384, 100, 32));  // a smaller GPU fills with fewer
  // The band: f32 backward from 31 a multiprocessor (4092 sequences on 132) at 257-1024
  // elements that fill less than three quarters of one block's tiles (257-383, 513-767).
  const bool band = kBytes == 4 && kBackward;
  for (const int64_t t : {257, 300, 383, 513, 600, 767}) {
    EXPECT_EQ(pays(4092, t, 132), band) << t;
    EXPECT_EQ(pays(16384, t, 132), band) << t;
    EXPECT_FALSE(pays(4091, t, 132)) << t;
  }
  // filled, or outside the band
  for (const int64_t t : {200, 256, 384, 400, 500, 512, 768, 900, 1024})
    EXPECT_FALSE(pays(16384, t, 132)) << t;
  // the main rule in and out of the band
  EXPECT_TRUE(pays(33792, 256, 132));
  EXPECT_TRUE(pays(33792, 512, 132));
}

TEST(HostPath, FlatRule) {
  expect_flat_rule<2, false>();
  expect_flat_rule<2, true>();
  expect_flat_rule<4, false>();
  expect_flat_rule<4, true>();
  expect_flat_rule<8, false>();
  expect_flat_rule<8, true>();
}

// The serial kernel: the lengths it takes (496 bytes a sequence), its shared memory within a
// block's default allowance at every one of them (forward two streams, backward three), the
// library's rule on 132 multiprocessors, and a forced call's size query, which needs no device
// and refuses a sequence past the bound.
TEST(HostPath, SerialRule) {
  namespace d = ascan::detail;
  for (const int bytes : {2, 4, 8}) {
    const int64_t longest = d::kSerialMaxSequenceBytes / bytes;
    EXPECT_TRUE(d::serial_fits(1, 1, bytes));
    EXPECT_TRUE(d::serial_fits(1, longest, bytes));
    EXPECT_FALSE(d::serial_fits(1, longest + 1, bytes));
    EXPECT_FALSE(d::serial_fits(1, 0, bytes));
    EXPECT_TRUE(d::serial_fits(int64_t{2147483647} * 32, 1, bytes));  // the grid's last block
    EXPECT_FALSE(d::serial_fits(int64_t{2147483647} * 32 + 1, 1, bytes));
  }
  for (int64_t t = 1; t <= d::kSerialMaxSequenceBytes / 2; ++t) {
    EXPECT_LE(3 * d::serial_stream_bytes<__half>(t), 48 * 1024) << t;
    if (t <= d::kSerialMaxSequenceBytes / 4)
      EXPECT_LE(3 * d::serial_stream_bytes<float>(t), 48 * 1024) << t;
    if (t <= d::kSerialMaxSequenceBytes / 8)
      EXPECT_LE(3 * d::serial_stream_bytes<double>(t), 48 * 1024) << t;
  }
  const d::SerialRule R{5, 256, 2, 96.0};
  EXPECT_TRUE(d::serial_pays(65536, 33, 4, 132, R));
  EXPECT_TRUE(d::serial_pays(16384, 7, 4, 132, R));
  EXPECT_FALSE(d::serial_pays(16384, 65, 4, 132, R));  // past 256 bytes
  EXPECT_TRUE(d::serial_pays(16384, 100, 2, 132, R));
  EXPECT_FALSE(d::serial_pays(4096, 33, 4, 132, R));   // 31 sequences a multiprocessor
  EXPECT_TRUE(d::serial_pays(4096, 33, 4, 32, R));     // a smaller GPU fills with fewer
  EXPECT_FALSE(d::serial_pays(65536, 4, 4, 132, R));   // shorter than min_length
  EXPECT_FALSE(d::serial_pays(65536, 64, 4, 132, R));  // 32 bank passes a read
  EXPECT_FALSE(d::serial_pays(65536, 16, 2, 132, R));  // 8
  // The library's rules: 16-bit backward from one element, the rest from five.
  for (const int64_t t : {1, 2, 3, 4}) {
    EXPECT_TRUE(d::serial_pays(16384, t, 2, 132, d::FlatTuning<2, true>::kSerial)) << t;
    EXPECT_FALSE(d::serial_pays(12288, t, 2, 132, d::FlatTuning<2, true>::kSerial)) << t;
    EXPECT_FALSE(d::serial_pays(65536, t, 2, 132, d::FlatTuning<2, false>::kSerial)) << t;
    EXPECT_FALSE(d::serial_pays(65536, t, 4, 132, d::FlatTuning<4, true>::kSerial)) << t;
    EXPECT_FALSE(d::serial_pays(65536, t, 4, 132, d::FlatTuning<4, false>::kSerial)) << t;
  }
  EXPECT_TRUE(d::serial_pays(65536, 5, 4, 132, d::FlatTuning<4, true>::kSerial));
  EXPECT_TRUE(d::serial_pays(65536, 5, 2, 132, d::FlatTuning<2, false>::kSerial));
  // The walk's bank passes (serial_bank_passes), against a model of the banks: every lane's
  // 4-byte words at two consecutive steps, the most distinct words that share a bank (8-byte reads
  // in two halves of 16 lanes).
  for (const int bytes : {2, 4, 8})
    for (int64_t t = 1; t * bytes <= d::kSerialMaxSequenceBytes; ++t) {
      int64_t most = 1;
      for (const int64_t step : {5, 6})  // 16-bit lanes meet in a word at one step's parity
        for (int half = 0; half < (bytes == 8 ? 2 : 1); ++half) {
          std::map<int64_t, std::set<int64_t>> banks;
          for (int64_t r = half * 16; r < (bytes == 8 ? half * 16 + 16 : 32); ++r) {
            const int64_t byte = (r * t + step) * bytes;  // lane r's element at `step`
            for (int64_t w = byte / 4; w <= (byte + bytes - 1) / 4; ++w) banks[w % 32].insert(w);
          }
          for (const auto& [bank, words] : banks) most = std::max<int64_t>(most, words.size());
        }
      EXPECT_EQ(d::serial_bank_passes(t, bytes), most) << bytes << "-byte elements, T = " << t;
    }
  const auto at = [](uintptr_t address) { return reinterpret_cast<float*>(address); };
  for (const int64_t t : {int64_t{124}, int64_t{125}}) {
    ascan::ScanArgs<float> a;
    a.gates = at(0x1000000);
    a.tokens = at(0x2000000);
    a.out = at(0x3000000);
    a.shape = ascan::time_contiguous(1, 3, t);
    size_t bytes = 0;
    const ascan::Status st =
        d::scan_with(a, d::Scratch::two_phase(nullptr, bytes), 0, d::Path::kSerial);
    if (t == 124) {
      EXPECT_TRUE(st.ok()) << st.message;
      EXPECT_EQ(bytes, 1u);
    } else {
      EXPECT_EQ(st.code, ascan::StatusCode::kNotSupported) << st.message;
    }
  }
}

// A packed (C, total) size query needs no device and does not depend on the pointers: the same
// bytes with every array on the 16-byte grid (the vector path's windows) and one element off it
// (the scalar path's, more of them), enough for a 16-byte record per window of either, forward
// and backward.
TEST(HostPath, PackedWindowsQuery) {
  const int64_t channels = 300, total = 70001, count = 9;
  const auto at = [](uintptr_t address) { return reinterpret_cast<float*>(address); };
  const int32_t* offsets = reinterpret_cast<const int32_t*>(uintptr_t{0x7000000});
  for (const bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    size_t bytes[2] = {0, 0};
    for (const int off : {0, 1}) {
      const uintptr_t base = 0x10000000 + off * sizeof(float);
      const uintptr_t array = uintptr_t(channels * total * sizeof(float) + 4096);
      ascan::Status st;
      if (backward) {
        ascan::ScanBackwardArgs<float> args{};
        args.shape = ascan::time_contiguous(1, channels, total);
        args.packed = ascan::packed(offsets, count);
        args.gates = at(base);
        args.states = at(base + array);
        args.grad_out = at(base + 2 * array);
        args.grad_gates = at(base + 3 * array);
        args.grad_tokens = at(base + 4 * array);
        st = ascan::scan_backward(args, nullptr, bytes[off]);
      } else {
        ascan::ScanArgs<float> args{};
        args.shape = ascan::time_contiguous(1, channels, total);
        args.packed = ascan::packed(offsets, count);
        args.gates = at(base);
        args.tokens = at(base + array);
        args.out = at(base + 2 * array);
        st = ascan::scan(args, nullptr, bytes[off]);
      }
      ASSERT_TRUE(st.ok()) << st.message;
    }
    EXPECT_EQ(bytes[0], bytes[1]);
    const ascan::detail::FlatPolicy F = backward ? ascan::detail::FlatTuning<4, true>::kPolicy
                                                 : ascan::detail::FlatTuning<4, false>::kPolicy;
    const int64_t scalar_window = int64_t(F.threads) * F.window_items / 4;
    EXPECT_GE(bytes[0], size_t(16) * channels * ((total + scalar_window - 1) / scalar_window));
  }
}

// The bank conflict model behind the packed windows' slot padding (window_padded): known strides
// checked against the banks counted by hand; the library's vector windows, every dtype size and
// both directions, with the conflicts the padding they get leaves (none, or 2-way at 6 vectors a
// thread); and the shared memory the kernel launches with following that choice.
TEST(HostPath, WindowBankConflicts) {
  using ascan::detail::blocked_window_conflicts;
  using ascan::detail::window_padded;
  // 16-byte vectors, eight threads a request: a stride of 8 slots puts all eight in one bank
  // group unpadded, eight groups padded (9 slots apart); a stride of 5 is conflict-free unpadded
  // and meets a 2-way conflict padded (threads 0 and 3: slots 0 and 15 + 1 = 16).
  EXPECT_EQ(blocked_window_conflicts(8, 16, false), 8);
  EXPECT_EQ(blocked_window_conflicts(8, 16, true), 1);
  EXPECT_EQ(blocked_window_conflicts(5, 16, false), 1);
  EXPECT_EQ(blocked_window_conflicts(5, 16, true), 2);
  EXPECT_EQ(blocked_window_conflicts(4, 16, false), 4);
  // a stride of 6: threads 0 and 4 (slots 0 and 24) unpadded, 0 and 6 (0 and 36 + 4 = 40) padded
  EXPECT_EQ(blocked_window_conflicts(6, 16, false), 2);
  EXPECT_EQ(blocked_window_conflicts(6, 16, true), 2);
  EXPECT_FALSE(window_padded(true, 6, 16));
  // 4-byte elements, a warp a request: a stride of 8 words meets 4 banks (8-way)
  EXPECT_EQ(blocked_window_conflicts(8, 4, false), 8);
  EXPECT_EQ(blocked_window_conflicts(1, 4, false), 1);
  // 2-byte elements: two threads in one word share it
  EXPECT_EQ(blocked_window_conflicts(1, 2, false), 1);
  EXPECT_EQ(blocked_window_conflicts(2, 2, false), 1);
  EXPECT_TRUE(window_padded(true, 8, 16));
  EXPECT_FALSE(window_padded(true, 5, 16));
  EXPECT_FALSE(window_padded(false, 8, 16));  // striped windows: consecutive vectors
  // The library's windows on the vector path, with the padding they get: conflict-free, but for
  // the 16-bit backward window's 6 vectors a thread.
  const auto conflicts = [&](const ascan::detail::FlatPolicy& F, int element_bytes) {
    const int per = F.window_items / (16 / element_bytes);  // 16-byte vectors a thread
    return blocked_window_conflicts(per, 16, window_padded(true, per, 16));
  };
  EXPECT_EQ(conflicts(ascan::detail::FlatTuning<4, false>::kPolicy, 4), 1);
  EXPECT_EQ(conflicts(ascan::detail::FlatTuning<4, true>::kPolicy, 4), 1);
  EXPECT_EQ(conflicts(ascan::detail::FlatTuning<2, false>::kPolicy, 2), 1);
  EXPECT_EQ(conflicts(ascan::detail::FlatTuning<2, true>::kPolicy, 2), 2);  // 6 vectors a thread
  EXPECT_EQ(conflicts(ascan::detail::FlatTuning<8, true>::kPolicy, 8), 1);
  // And the kernel's slots follow the choice: the shared memory a window launches with is its
  // streams' bytes, an eighth more where padded (f32 forward: 2 streams of 16 KiB, 8 vectors a
  // thread, padded; backward: 3 of 10 KiB, 5 vectors a thread, not; 16-bit backward 3 of 12 KiB,
  // 6 vectors a thread, not: the padding leaves their 2-way conflicts as they are).
  namespace d = ascan::detail;
  constexpr int kForward =
      d::kWindowShared<d::FlatWindowForward<float, false, true>, d::FlatTuning<4, false>, false>;
  constexpr int kBackward =
      d::kWindowShared<d::FlatWindowBackward<float, false, true>, d::FlatTuning<4, true>, false>;
  constexpr int kBackward16 = d::kWindowShared<d::FlatWindowBackward<__nv_bfloat16, true, true>,
                                               d::FlatTuning<2, true>, false>;
  EXPECT_EQ(kForward, 2 * 16384 * 9 / 8);
  EXPECT_EQ(kBackward, 3 * 10240);
  EXPECT_EQ(kBackward16, 3 * 12288);
}
