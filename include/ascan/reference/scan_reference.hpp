// ascan/reference/scan_reference.hpp: host-only references for the first-order linear recurrence
//
//     x[t] = a[t] * x[t-1] + b[t],   x[-1] = h0        (forward)
//     x[t] = a[t] * x[t+1] + b[t],   x[n]  = h0        (reverse)
//
// Plain C++17 with no CUDA dependency. `sequential_scan` is the ground truth (one loop in
// double) and `sequential_scan_backward` its gradient (one reverse loop in double); `tree_scan`
// is a Blelloch up-sweep / down-sweep scan of affine pairs whose combine order mirrors the device
// scans, so a wrong operand order shows up here first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ascan::reference {

/// The affine map x -> a * x + b; one step of the recurrence.
template <class T>
struct Pair {
  T a;
  T b;
};

/// The identity map (1, 0).
template <class T>
constexpr Pair<T> identity() {
  return {T(1), T(0)};
}

/// Composes `earlier` then `later`: (a1 * a2, a2 * b1 + b2). Associative, NOT commutative.
template <class T>
constexpr Pair<T> compose(const Pair<T>& earlier, const Pair<T>& later) {
  return {earlier.a * later.a, later.a * earlier.b + later.b};
}

/// Applies the map to a state: a * x + b.
template <class T>
constexpr T apply(const Pair<T>& f, T x) {
  return f.a * x + f.b;
}

/// Runs the recurrence as a plain loop in double: forward x[t] = a[t] * x[t-1] + b[t] with
/// x[-1] = h0, or with `reverse` x[t] = a[t] * x[t+1] + b[t] with x[n] = h0. `a`, `b` and `x`
/// hold n contiguous elements; `x` may alias `a` or `b`. n <= 0 is a no-op (pointers unread).
inline void sequential_scan(const double* a, const double* b, int64_t n, bool reverse, double h0,
                            double* x) {
  double h = h0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = reverse ? n - 1 - i : i;
    h = a[t] * h + b[t];
    x[t] = h;
  }
}

/// The same loop for any input type convertible to double: each a[t], b[t] is widened with
/// static_cast<double> and the recurrence runs in double. 16-bit device types are converted by
/// the caller first (this header knows no CUDA types). n <= 0 is a no-op.
template <class T>
void sequential_scan(const T* a, const T* b, int64_t n, bool reverse, double h0, double* x) {
  double h = h0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = reverse ? n - 1 - i : i;
    h = static_cast<double>(a[t]) * h + static_cast<double>(b[t]);
    x[t] = h;
  }
}

/// The backward pass of sequential_scan as a plain loop in double, for any input type
/// convertible to double (each a[t], x[t], g[t] is widened with static_cast<double>). Inputs: the
/// gates a[n], the forward outputs x[n], the upstream gradient g[n] = dL/dx, the forward's initial
/// state h0, and gT = dL/d(final state), the final state being x[n-1] forward or x[0] reversed.
/// Forward: d[t] = g[t] + a[t+1] * d[t+1] with d[n-1] = g[n-1] + gT; da[t] = d[t] * x[t-1] with
/// x[-1] = h0; db[t] = d[t]; dh0 = a[0] * d[0]. With `reverse` every index is mirrored:
/// d[t] = g[t] + a[t-1] * d[t-1] with d[0] = g[0] + gT; da[t] = d[t] * x[t+1] with x[n] = h0;
/// db[t] = d[t]; dh0 = a[n-1] * d[n-1]. Writes da[n], db[n] and, unless `dh0` is null, *dh0. Each
/// step reads a[t], g[t] and the previous state before writing da[t], db[t], so `da` and `db` may
/// each alias any one of `a`, `x` or `g` (element for element), but not each other. n <= 0 leaves
/// da, db unread and unwritten and sets *dh0 = gT: with no steps the final state is h0 itself.
template <class T>
void sequential_scan_backward(const T* a, const T* x, const T* g, int64_t n, bool reverse,
                              double h0, double gT, double* da, double* db, double* dh0) {
  const auto index = [&](int64_t k) { return reverse ? n - 1 - k : k; };  // k: scan order
  double d = gT;        // carried d, seeded so that d[last] = g[last] + 1 * gT
  double a_next = 1.0;  // the gate one step later in scan order
  for (int64_t k = n - 1; k >= 0; --k) {
    const int64_t t = index(k);
    const double at = static_cast<double>(a[t]);
    d = static_cast<double>(g[t]) + a_next * d;
    const double prev = k > 0 ? static_cast<double>(x[index(k - 1)]) : h0;
    da[t] = d * prev;
    db[t] = d;
    a_next = at;
  }
  if (dh0) *dh0 = a_next * d;  // a[first] * d[first]; gT when n <= 0
}

/// The same backward loop on double inputs; the math, aliasing rules and n <= 0 behaviour are
/// those of the converting overload above: d[t] = g[t] + a[t+1] * d[t+1],
/// d[n-1] = g[n-1] + gT, da[t] = d[t] * x[t-1] (x[-1] = h0), db[t] = d[t], dh0 = a[0] * d[0],
/// every index mirrored when `reverse`.
inline void sequential_scan_backward(const double* a, const double* x, const double* g, int64_t n,
                                     bool reverse, double h0, double gT, double* da, double* db,
                                     double* dh0) {
  sequential_scan_backward<double>(a, x, g, n, reverse, h0, gT, da, db, dh0);
}

/// Runs the recurrence in T as a Blelloch work-efficient tree scan. Scan order k = 0..n-1 is
/// t = k forward and t = n-1-k in reverse; the pairs (a[t], b[t]) in scan order are padded with
/// the identity to m = next power of two >= n. The up-sweep builds subtree sums
/// s[i] := compose(s[i - d], s[i]); the root is set to the identity; the down-sweep then pushes
/// exclusive prefixes down: left := p, right := compose(p, old left sum), the parent prefix p
/// being the earlier operand. Finally x[t] = apply(compose(E[k], pair[k]), h0) where E[k] is
/// the exclusive prefix. Any n >= 1 is allowed; n <= 0 is a no-op (pointers unread). Uses O(m)
/// scratch; `x` may alias `a` or `b`.
template <class T>
void tree_scan(const T* a, const T* b, int64_t n, bool reverse, T h0, T* x) {
  if (n <= 0) return;
  const size_t count = static_cast<size_t>(n);
  size_t m = 1;
  while (m < count) m *= 2;  // count <= 2^63: no wrap
  const auto index = [&](size_t k) { return reverse ? count - 1 - k : k; };

  std::vector<Pair<T>> elem(count), s(m, identity<T>());
  for (size_t k = 0; k < count; ++k) s[k] = elem[k] = {a[index(k)], b[index(k)]};

  for (size_t d = 1; d < m; d *= 2)  // up-sweep: s[i] = sum of the 2d pairs ending at i
    for (size_t i = 2 * d - 1; i < m; i += 2 * d) s[i] = compose(s[i - d], s[i]);

  s[m - 1] = identity<T>();
  for (size_t d = m / 2; d >= 1; d /= 2)  // down-sweep: s[i] becomes an exclusive prefix
    for (size_t i = 2 * d - 1; i < m; i += 2 * d) {
      const Pair<T> left = s[i - d];
      s[i - d] = s[i];
      s[i] = compose(s[i], left);
    }

  for (size_t k = 0; k < count; ++k) x[index(k)] = apply(compose(s[k], elem[k]), h0);
}

}  // namespace ascan::reference
