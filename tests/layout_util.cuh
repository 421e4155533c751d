// tests/layout_util.cuh: small generic helpers of the layout tests (layout_test.cu).
//
// Strided geometry (an array's view inside a buffer: offset and strides, where element (b, c, t)
// lives), packed offsets (cu_seqlens) from sequence lengths, the entry points without the forced
// multi-block ones (so a test that needs only the public paths instantiates no extra kernels),
// edge gate values, and two checks built on test_util.cuh's error measure: one that lets
// non-finite expected values (a NaN or an Inf in the inputs) require a non-finite output, and
// one that compares two outputs of the same inputs (two layouts, or one call against several).
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.cuh"

namespace ascan::test {

// ---------------------------------------------------------------------------------------------
// Geometry

/// The strides a shape gives every array that has none of its own.
inline Strides strides_of(const Shape& s) {
  return Strides{s.batch_stride, s.channel_stride, s.time_stride};
}

/// A shape of the given sizes with the given strides.
inline Shape shape_with(int64_t batch, int64_t channels, int64_t length, const Strides& s) {
  return Shape{batch, channels, length, s.batch_stride, s.channel_stride, s.time_stride};
}

/// Strides of the dense (B, C, T) layout, time fastest.
inline Strides time_contiguous_strides(int64_t channels, int64_t length) {
  return strides_of(time_contiguous(1, channels, length));
}

/// Strides of the (B, T, C) layout with rows of `row` >= C elements (row == C: dense).
inline Strides channel_last_strides(int64_t length, int64_t row) {
  return Strides{length * row, 1, row};
}

/// Elements from the first to one past the last element of a (B, C, T) view with non-negative
/// strides; 0 when a size is 0.
inline int64_t view_footprint(const Strides& s, int64_t batch, int64_t channels, int64_t length) {
  if (batch <= 0 || channels <= 0 || length <= 0) return 0;
  return (batch - 1) * s.batch_stride + (channels - 1) * s.channel_stride +
         (length - 1) * s.time_stride + 1;
}

/// Where one array of a call lives: in buffer `buffer` (an index into the case's buffers),
/// `offset` elements from its base, element (b, c, t) at offset + b * batch_stride +
/// c * channel_stride + t * time_stride. `own_strides`: the strides are passed as the array's
/// own (ScanArgs::gates_strides, ...); otherwise they must be the shape's.
struct ArrayView {
  int buffer = 0;
  int64_t offset = 0;
  Strides strides{};
  bool own_strides = false;

  int64_t at(int64_t b, int64_t c, int64_t t) const {
    return offset + b * strides.batch_stride + c * strides.channel_stride + t * strides.time_stride;
  }
  bool same_place(const ArrayView& o) const {
    return buffer == o.buffer && offset == o.offset &&
           strides.batch_stride == o.strides.batch_stride &&
           strides.channel_stride == o.strides.channel_stride &&
           strides.time_stride == o.strides.time_stride;
  }
};

/// FlashAttention's cu_seqlens of the given lengths: N + 1 ascending offsets from 0.
inline std::vector<int64_t> cu_seqlens(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> cu(1, 0);
  for (int64_t n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

// ---------------------------------------------------------------------------------------------
// Entry points

/// Calls the public entry point `via` names (kWorkspace, kPlain or kMallocAsync), or the
/// library's dispatch with the row path's mode forced (kRowWalk, kRowLookBack), on `stream`; a
/// two-phase call queries the size, checks it is at least 1, and runs in `workspace`, a fresh
/// allocation of exactly that size filled with poison. Unlike call_entry it never names the
/// small-tile multi-block entry points, so it instantiates only the library's own kernels.
template <class Args>
Status call_public(const Args& a, Via via, cudaStream_t stream,
                   DeviceBuffer<unsigned char>& workspace) {
  if (via == Via::kPlain) return entry(a, stream);
  if (via == Via::kMallocAsync) return entry(a, malloc_async, stream);
  const bool forced =
      via == Via::kRowWalk || via == Via::kRowLookBack || via == Via::kFlat || via == Via::kSerial;
  if (via != Via::kWorkspace && !forced) return Status::invalid("test: not a public entry point");
  const detail::Path path = via == Via::kRowWalk       ? detail::Path::kOneBlock
                            : via == Via::kRowLookBack ? detail::Path::kMultiBlock
                            : via == Via::kFlat        ? detail::Path::kFlat
                            : via == Via::kSerial      ? detail::Path::kSerial
                                                       : detail::Path::kAuto;
  const auto call = [&](void* w, size_t& bytes) {
    return forced ? entry_path(a, w, bytes, stream, path) : entry(a, w, bytes, stream);
  };
  size_t bytes = 0;
  Status st = call(nullptr, bytes);
  if (!st.ok()) return st;
  if (bytes == 0)
    return Status::invalid("test: the size query reported 0 bytes (CUB's rule: >= 1)");
  if (!workspace.allocate(bytes) || !workspace.poison() || cudaDeviceSynchronize() != cudaSuccess)
    return Status::invalid("test: allocating and poisoning the workspace failed");
  return call(workspace.get(), bytes);
}

// ---------------------------------------------------------------------------------------------
// Inputs

/// An edge gate: exactly 0, 1, -1, 0.5, -0.75, 1.0625, -1.25, or uniform in (0, 1), each with
/// probability 1/8. Runs between zeros average 8 steps and log|a| drifts down, so states stay far
/// inside half's range while gates above 1 in magnitude and of both signs keep appearing.
inline double draw_edge_gate(Rng& rng) {
  constexpr double kEdges[] = {0.0, 1.0, -1.0, 0.5, -0.75, 1.0625, -1.25};
  const uint64_t k = rng.next() % 8;
  return k < 7 ? kEdges[k] : rng.uniform(0.0, 1.0);
}

// ---------------------------------------------------------------------------------------------
// Checks

/// The per-sequence bound check_sequence (test_util.cuh) judges n values against: for float and
/// double tol * ||m||, for the 16-bit types 1.5 ||round(x) - x|| + 64 u_float ||m||.
template <class T>
double sequence_bound(const double* exact, const double* scale, int64_t n) {
  double round2 = 0, scale2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    scale2 += scale[i] * scale[i];
    if constexpr (kIs16Bit<T>) {
      const double r = to_double(from_double<T>(exact[i])) - exact[i];
      round2 += r * r;
    }
  }
  const double norm_m = std::sqrt(scale2);
  if constexpr (kIs16Bit<T>)
    return kRoundingFactor * std::sqrt(round2) + 64 * kFloatRoundoff * norm_m;
  else
    return kRelTolerance<T> * (norm_m > 0 ? norm_m : 1.0);
}

/// check_sequence, where a NaN or an Inf among the inputs is allowed for: a value whose exact
/// answer is not finite must come out not finite (and not poison: it was written); the others are
/// judged by check_sequence as usual (and added to `total`).
template <class T>
SequenceCheck check_values(const T* got, const double* exact, const double* scale, int64_t n,
                           ErrorSums* total = nullptr) {
  bool all_finite = true;
  for (int64_t i = 0; i < n && all_finite; ++i) all_finite = std::isfinite(exact[i]);
  if (all_finite) return check_sequence(got, exact, scale, n, total);
  std::vector<T> g;
  std::vector<double> x, m;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(exact[i])) {
      g.push_back(got[i]);
      x.push_back(exact[i]);
      m.push_back(scale[i]);
      continue;
    }
    const double y = to_double(got[i]);
    if (std::isfinite(y) || is_poison(got[i])) {
      std::ostringstream s;
      s << "element " << i << " of " << n << " is "
        << (is_poison(got[i]) ? "poison (never written)" : "finite") << " (" << y
        << "); expected a non-finite value (" << exact[i] << ")";
      return {false, s.str()};
    }
  }
  return check_sequence(g.data(), x.data(), m.data(), static_cast<int64_t>(g.size()), total);
}

/// Two outputs y1, y2 of the same inputs (exact answer x, magnitudes m) agree as two correct
/// outputs must: ||y1 - y2|| <= 2 * the per-sequence bound of check_sequence. Elements whose
/// exact answer is not finite must be non-finite in both.
template <class T>
SequenceCheck check_pair(const T* y1, const T* y2, const double* exact, const double* scale,
                         int64_t n) {
  std::vector<double> x, m;
  double diff2 = 0;
  int64_t worst = -1;
  double worst_abs = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double a = to_double(y1[i]), b = to_double(y2[i]);
    if (!std::isfinite(exact[i])) {
      if (std::isfinite(a) || std::isfinite(b)) {
        std::ostringstream s;
        s << "element " << i << ": " << a << " and " << b
          << " where a non-finite value is expected";
        return {false, s.str()};
      }
      continue;
    }
    if (!std::isfinite(a) || !std::isfinite(b)) {
      std::ostringstream s;
      s << "element " << i << ": " << a << " and " << b << "; expected " << exact[i];
      return {false, s.str()};
    }
    x.push_back(exact[i]);
    m.push_back(scale[i]);
    diff2 += (a - b) * (a - b);
    if (std::abs(a - b) > worst_abs) {
      worst_abs = std::abs(a - b);
      worst = i;
    }
  }
  const double bound = 2 * sequence_bound<T>(x.data(), m.data(), static_cast<int64_t>(x.size()));
  if (std::sqrt(diff2) <= bound) return {};
  std::ostringstream s;
  s << std::setprecision(10) << "the two outputs differ by " << std::sqrt(diff2)
    << " (L2), more than twice the bound " << bound / 2 << " of either against the exact answer";
  if (worst >= 0)
    s << "; worst element " << worst << ": " << to_double(y1[worst]) << " and "
      << to_double(y2[worst]) << ", expected " << exact[worst];
  return {false, s.str()};
}

}  // namespace ascan::test
