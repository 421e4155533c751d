// ascan/device/checked.cuh: 64-bit integer arithmetic that reports overflow instead of having it.
//
// Host code only, plain C++17 with no compiler builtins (MSVC has no __builtin_mul_overflow): the
// checks divide before they multiply, so no expression here overflows for any input. Used by the
// argument checks (validate.cuh) and the Shape helpers (scan_args.cuh).
#pragma once

#include <cstdint>
#include <limits>

namespace ascan {
namespace detail {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

/// out = a + b, or false (out untouched) when the sum leaves int64_t.
constexpr bool add_ok(int64_t a, int64_t b, int64_t& out) {
  if ((b > 0 && a > kInt64Max - b) || (b < 0 && a < kInt64Min - b)) return false;
  out = a + b;
  return true;
}

/// out = a * b, or false (out untouched) when the product leaves int64_t.
constexpr bool mul_ok(int64_t a, int64_t b, int64_t& out) {
  if (a > 0) {
    if (b > 0 ? a > kInt64Max / b : b < kInt64Min / a) return false;
  } else if (a < 0) {
    if (b > 0 ? a < kInt64Min / b : b < kInt64Max / a) return false;  // b <= 0: a * b >= 0
  }
  out = a * b;
  return true;
}

/// a * b, or the int64_t bound of its sign when the product leaves int64_t.
constexpr int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t p = 0;
  if (mul_ok(a, b, p)) return p;
  return (a < 0) != (b < 0) ? kInt64Min : kInt64Max;
}

/// out = a + b for unsigned 64-bit values, or false when the sum wraps.
constexpr bool add_ok(uint64_t a, uint64_t b, uint64_t& out) {
  if (a > std::numeric_limits<uint64_t>::max() - b) return false;
  out = a + b;
  return true;
}

}  // namespace detail
}  // namespace ascan
