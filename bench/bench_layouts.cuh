// bench/bench_layouts.cuh: the layout/ and varlen/ rows, the same copy and scan rows as the
// grid's on the channel-last layout (layout_cases) and on packed batches of varied lengths in
// both layouts (varlen_cases); see the top of scan_bench.cu for the cases. Included by
// scan_bench.cu only (its anonymous namespace).
#pragma once

#include "bench_check.cuh"
#include "bench_harness.cuh"
#include "bench_rows.cuh"

#include <ascan/ascan.cuh>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

enum class Layout { kTimeContiguous, kChannelLast };

/// The seed of the log-uniform batch's lengths (std::mt19937_64): the batch is the same in every
/// run and on every machine.
constexpr uint64_t kVarlenSeed = 20251201;
constexpr int64_t kVarlenTokens = int64_t{1} << 22;  // the log-uniform batch's total
constexpr int64_t kVarlenMaxLength = 16384;
constexpr int64_t kSkewedShort = 1000;  // sequences of length 1 after the skewed batch's long one
constexpr int64_t kVarlenChannels = 1024;
/// What one varlen row may hold on the device (workspace_bytes: five arrays of N elements, the
/// copy's two buffers of 5 N / 2, the flush buffer): of the H200's ~140 GiB, 130 for the
/// log-uniform batch; 60 for the skewed one, which otherwise runs at 256 channels. The same rows
/// run on every device: one without room for the copy's buffers (80 GB) holds them in the arrays
/// (workspace_for).
constexpr size_t kVarlenBudget = size_t{130} << 30;
constexpr size_t kSkewedBudget = size_t{60} << 30;

/// cu_seqlens of lengths floor(exp(u * ln(max_length + 1))), u uniform in [0, 1) from the top 53
/// bits of one std::mt19937_64 draw (so no library's distribution code enters): log-uniform over
/// 1..max_length. Drawn until the total reaches `total`; the last length is trimmed to hit it.
std::vector<int32_t> loguniform_offsets(int64_t total, int64_t max_length, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double log_range = std::log(double(max_length) + 1.0);
  std::vector<int32_t> offsets = {0};
  int64_t sum = 0;
  while (sum < total) {
    const double u = double(rng() >> 11) * 0x1.0p-53;
    int64_t length = std::clamp<int64_t>(int64_t(std::exp(u * log_range)), 1, max_length);
    length = std::min(length, total - sum);
    sum += length;
    offsets.push_back(static_cast<int32_t>(sum));
  }
  return offsets;
}

/// cu_seqlens of one sequence of `long_length` tokens followed by `short_count` of length 1.
std::vector<int32_t> skewed_offsets(int64_t long_length, int64_t short_count) {
  std::vector<int32_t> offsets = {0};
  for (int64_t i = 0; i <= short_count; ++i)
    offsets.push_back(static_cast<int32_t>(long_length + i));
  return offsets;
}

struct LayoutCase {
  std::string name;     // the row name after "<group>/<op>/<dtype>/", without "/bwd"
  std::string buffers;  // the workspace key after "<dtype>/": cases that share it share buffers
  Extent extent;        // (B, C, T) sizes; packed: (1, C, total tokens)
  Layout layout = Layout::kChannelLast;
  std::shared_ptr<const std::vector<int32_t>> offsets;  // packed: count + 1 cu_seqlens; else null

  int64_t count() const { return offsets ? int64_t(offsets->size()) - 1 : 0; }
  ascan::Shape shape() const {
    return layout == Layout::kChannelLast
               ? ascan::channel_last(extent.batch, extent.length, extent.channels)
               : ascan::time_contiguous(extent.batch, extent.channels, extent.length);
  }
  int64_t length(int64_t n) const { return (*offsets)[n + 1] - (*offsets)[n]; }
  /// Sequence (b, c) as the checks read it; b is the packed sequence's index when packed.
  SeqRef seq(int64_t b, int64_t c) const {
    const ascan::Shape s = shape();
    const int64_t id = b * extent.channels + c;
    if (!offsets)
      return {id, b * s.batch_stride + c * s.channel_stride, s.time_stride, extent.length};
    return {id, c * s.channel_stride + (*offsets)[b] * s.time_stride, s.time_stride, length(b)};
  }
  /// The first and the last sequence; packed, also the longest and the one after it.
  std::vector<SeqRef> check_seqs() const {
    const int64_t last_channel = extent.channels - 1;
    if (!offsets) return {seq(0, 0), seq(extent.batch - 1, last_channel)};
    const int64_t n = count();
    int64_t longest = 0;
    for (int64_t i = 1; i < n; ++i)
      if (length(i) > length(longest)) longest = i;
    std::vector<SeqRef> seqs = {seq(0, 0), seq(longest, extent.channels / 2)};
    if (longest + 1 < n) seqs.push_back(seq(longest + 1, std::min<int64_t>(1, last_channel)));
    seqs.push_back(seq(n - 1, last_channel));
    return seqs;
  }
};

/// The channel-last rows: (B, T, C) tensors, ascan::channel_last(B, T, C).
std::vector<LayoutCase> layout_cases() {
  std::vector<LayoutCase> cases;
  auto add = [&](int64_t b, int64_t t, int64_t c) {
    const std::string name =
        "channel_last/B" + std::to_string(b) + "_T" + std::to_string(t) + "_C" + std::to_string(c);
    cases.push_back({name, name, Extent{b, c, t}, Layout::kChannelLast, nullptr});
  };
  for (int k : {7, 10, 13, 16}) add(8, int64_t{1} << k, 1536);
  add(4, 4096, 4096);
  add(1, int64_t{1} << 20, 256);
  add(16, 2048, 2048);
  return cases;
}

/// The packed rows for elements of `elem_bytes`: each batch in both layouts, at the channel count
/// whose buffers fit the batch's budget (kVarlenBudget: the largest power of two up to
/// kVarlenChannels, f32 512 and bf16 1024; kSkewedBudget: kVarlenChannels or else 256, 256 for
/// both dtypes). Offsets are int32.
std::vector<LayoutCase> varlen_cases(size_t elem_bytes) {
  static const auto loguniform = std::make_shared<const std::vector<int32_t>>(
      loguniform_offsets(kVarlenTokens, kVarlenMaxLength, kVarlenSeed));
  static const auto skewed =
      std::make_shared<const std::vector<int32_t>>(skewed_offsets(kVarlenTokens, kSkewedShort));
  auto fits = [&](const std::vector<int32_t>& offsets, int64_t channels, size_t budget) {
    return workspace_bytes(int64_t{offsets.back()} * channels, channels, elem_bytes,
                           int64_t(offsets.size())) <= budget;
  };
  std::vector<LayoutCase> cases;
  for (const auto& [batch, offsets] :
       {std::pair<const char*, std::shared_ptr<const std::vector<int32_t>>>{"loguniform",
                                                                            loguniform},
        {"skewed", skewed}}) {
    const bool is_skewed = offsets == skewed;
    int64_t channels = kVarlenChannels;
    if (is_skewed) {
      if (!fits(*offsets, channels, kSkewedBudget)) channels = 256;
    } else {
      while (channels > 1 && !fits(*offsets, channels, kVarlenBudget)) channels /= 2;
    }
    const int64_t total = offsets->back();
    const std::string sizes = std::string(batch) + "_n" + std::to_string(offsets->size() - 1) +
                              "/T" + std::to_string(total) + "_C" + std::to_string(channels);
    // Both layouts hold the same elements (filled by flat index): one set of buffers.
    for (Layout layout : {Layout::kChannelLast, Layout::kTimeContiguous})
      cases.push_back(
          {std::string(layout == Layout::kChannelLast ? "channel_last/" : "time_contiguous/") +
               sizes,
           "varlen/" + sizes, Extent{1, channels, total}, layout, offsets});
  }
  return cases;
}

/// The arguments of direction `Dir`'s call on layout or varlen case `c`: the case's buffers (as
/// Dir::args gives them), its shape and, packed, its batch's offsets.
template <class Dir>
typename Dir::Args case_args(const LayoutCase& c) {
  typename Dir::Args args = Dir::args(c.extent, false, false);
  args.shape = c.shape();
  if (c.offsets) args.packed = ascan::packed(static_cast<const int32_t*>(g_ws.offsets), c.count());
  return args;
}

/// Runs a row on layout or varlen case `c` (buffers "<dtype>/<c.buffers>", checked on
/// c.check_seqs()): ascan::scan or ascan::scan_backward with the case's shape and packed batch.
template <class T>
void run_layout_row(benchmark::State& state, Op op, const std::string& case_name,
                    const LayoutCase& c, bool backward) {
  const std::string key = std::string(DtypeInfo<T>::kName) + "/" + c.buffers;
  const RowCase row{key, c.extent, c.offsets.get(), false, backward, false};
  const auto measure = [&](double* ms) {
    return with_direction<T>(backward, [&](auto dir) {
      using Dir = decltype(dir);
      const typename Dir::Args args = case_args<Dir>(c);
      if (op == Op::kPath)  // the flat path forced: whole sequences a block
        return measure_two_phase(
            Dir::kWith,
            [&](void* w, size_t& b) { return Dir::with(args, w, b, ascan::detail::Path::kFlat); },
            ms);
      return measure_entry<Dir>(args, ms);
    });
  };
  run_measured<T>(state, op, case_name, row, measure, [&] { return c.check_seqs(); });
}

/// "<dtype>/<name>[/bwd]" of layout or varlen case `c`: what follows "<group>/<op>/" in its rows.
template <class T>
std::string layout_tail(const LayoutCase& c, bool backward) {
  return std::string(DtypeInfo<T>::kName) + "/" + c.name + (backward ? "/bwd" : "");
}

/// The copy and scan rows of one layout or varlen case, "<group>/{copy,scan}/<dtype>/<name>";
/// returns the case's name, "<group>/<dtype>/<name>[/bwd]".
template <class T>
std::string register_copy_and_scan(const char* group, const LayoutCase& c, bool backward) {
  const std::string tail = layout_tail<T>(c, backward);
  const std::string case_name = std::string(group) + "/" + tail;
  g_case_order.push_back(case_name);
  for (Op op : {Op::kCopy, backward ? Op::kBackward : Op::kScan})
    register_row(std::string(group) + (op == Op::kCopy ? "/copy/" : "/scan/") + tail,
                 [=](benchmark::State& st) { run_layout_row<T>(st, op, case_name, c, backward); });
  return case_name;
}

/// The rows of one layout or varlen case: copy and scan, and for a packed time-contiguous case
/// the whole-sequence path.
template <class T>
void register_layout_case(const char* group, const LayoutCase& c, bool backward) {
  const std::string tail = layout_tail<T>(c, backward);
  const std::string case_name = register_copy_and_scan<T>(group, c, backward);
  // packed time-contiguous: also the flat kernel by whole sequences (what a call without a
  // workspace runs), beside the library's windows
  if (c.offsets && c.layout == Layout::kTimeContiguous)
    register_row(std::string(group) + "/whole/" + tail, [=](benchmark::State& st) {
      run_layout_row<T>(st, Op::kPath, case_name, c, backward);
    });
}

/// A tuning sweep's rows of layout or varlen case `c`: its copy and scan rows, then
/// "<group>/tune/<dtype>/<name>[/bwd]/<Candidate::name()>" for each type of `Forward` (or, for the
/// backward pass, `Backward`; std::tuples of them) that takes elements of T
/// (Candidate::fits<sizeof(T)>), timed by `measure(Candidate{}, std::bool_constant<backward>{},
/// ms)` (a generic callable, kept by copy, that returns an error or "") and checked as every row
/// is.
template <class T, class Forward, class Backward, class Measure>
void register_candidates(const char* group, const LayoutCase& c, bool backward,
                         const Measure& measure) {
  const std::string case_name = register_copy_and_scan<T>(group, c, backward);
  const std::string tail = layout_tail<T>(c, backward);
  const auto rows = [&](auto candidates, auto direction) {
    const auto add = [&](auto candidate) {
      using Candidate = decltype(candidate);
      if constexpr (Candidate::template fits<int(sizeof(T))>)
        register_row(std::string(group) + "/tune/" + tail + "/" + Candidate::name(),
                     [=](benchmark::State& st) {
                       const std::string key = std::string(DtypeInfo<T>::kName) + "/" + c.buffers;
                       const RowCase row{key, c.extent, c.offsets.get(), false, backward, false};
                       run_measured<T>(
                           st, Op::kTune, case_name, row,
                           [&](double* ms) { return measure(Candidate{}, direction, ms); },
                           [&] { return c.check_seqs(); });
                     });
    };
    std::apply([&](auto... candidate) { (add(candidate), ...); }, candidates);
  };
  if (backward)
    rows(Backward{}, std::true_type{});
  else
    rows(Forward{}, std::false_type{});
}

}  // namespace
