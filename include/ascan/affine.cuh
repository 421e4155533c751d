// ascan/affine.cuh: the one small header of shared types that every device layer builds on.
//
// One step of the recurrence x[t] = a[t] * x[t-1] + b[t] is the affine map x -> a*x + b, held as
// an Affine pair. Two steps compose, earlier (a1, b1) then later (a2, b2), into
//
//     (a1 * a2,  a2 * b1 + b2).
//
// That operator is associative but NOT commutative: every level of a scan keeps the earlier
// operand on the left. The identity is (1, 0). A known state h is the constant map (0, h), so a
// carry between tiles is an Affine pair too, and "apply the prefix to the carry" is one compose.
//
// This header also holds the lane shuffle of a pair and the lane-group Kogge-Stone scan, the one
// primitive that the warp and block layers share; a user who copies warp/warp_scan.cuh or
// block/block_scan.cuh into a project needs this file beside it and nothing else.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace ascan {

/// The affine map x -> a * x + b in the compute type `T` (float for 16-bit storage).
template <class T>
struct Affine {
  T a;
  T b;
};

/// The identity map (1, 0).
template <class T>
__host__ __device__ __forceinline__ constexpr Affine<T> affine_identity() {
  return {T(1), T(0)};
}

/// Composes `earlier` then `later`: (a1 * a2, a2 * b1 + b2). Not commutative.
template <class T>
__host__ __device__ __forceinline__ Affine<T> compose(const Affine<T>& earlier,
                                                      const Affine<T>& later) {
  return {earlier.a * later.a, later.a * earlier.b + later.b};
}

/// Applies the map to a state: a * x + b.
template <class T>
__host__ __device__ __forceinline__ T apply(const Affine<T>& f, T x) {
  return f.a * x + f.b;
}

/// The type a storage type is scanned in: 16-bit types are scanned in float and rounded once on
/// store; float and double scan in themselves.
template <class T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<__half> {
  using type = float;
};
template <>
struct ComputeType<__nv_bfloat16> {
  using type = float;
};
template <class T>
using compute_t = typename ComputeType<T>::type;

/// Converts a storage value to its compute type.
template <class C, class T>
__host__ __device__ __forceinline__ C to_compute(T v) {
  return static_cast<C>(v);
}
/// Rounds a compute value to the storage type (round to nearest even, once).
template <class T, class C>
__host__ __device__ __forceinline__ T to_storage(C v) {
  return static_cast<T>(v);
}
template <>
__host__ __device__ __forceinline__ float to_compute<float, __half>(__half v) {
  return __half2float(v);
}
template <>
__host__ __device__ __forceinline__ float to_compute<float, __nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__host__ __device__ __forceinline__ __half to_storage<__half, float>(float v) {
  return __float2half_rn(v);
}
template <>
__host__ __device__ __forceinline__ __nv_bfloat16 to_storage<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}

#if defined(__CUDACC__)

/// Converts a vector of kVec storage values to compute values. A bfloat16 is the upper half of
/// the float it widens to, so a pair packed in a 32-bit word widens with one shift and one mask
/// (exact; element-wise conversion spends an extra byte permute on every odd element).
template <int kVec, class C, class T>
__device__ __forceinline__ void widen(const T (&in)[kVec], C (&out)[kVec]) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) out[i] = to_compute<C>(in[i]);
}
template <int kVec>
__device__ __forceinline__ void widen(const __nv_bfloat16 (&in)[kVec], float (&out)[kVec]) {
  if constexpr (kVec % 2 != 0) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = __bfloat162float(in[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) {
      uint32_t pair;
      memcpy(&pair, &in[2 * i], sizeof(pair));
      out[2 * i] = __uint_as_float(pair << 16);
      out[2 * i + 1] = __uint_as_float(pair & 0xffff0000u);
    }
  }
}

/// Number of lanes in a warp.
constexpr int kWarpThreads = 32;

/// Inclusive scan of one Affine pair per lane within independent groups of `kLanes` consecutive
/// lanes (kLanes a power of two, at most 32). `rank` is the lane's position in its group. In a
/// forward scan lower ranks are earlier; with `kReverse` higher ranks are earlier. All 32 lanes
/// of the warp must call it. Returns the composition of the group's pairs from the first
/// (earliest) lane through this one.
template <int kLanes, bool kReverse, class T>
__device__ __forceinline__ Affine<T> lane_group_inclusive_scan(Affine<T> x, int rank) {
  static_assert(kLanes >= 1 && kLanes <= kWarpThreads && (kLanes & (kLanes - 1)) == 0,
                "lane groups are a power of two of at most 32 lanes");
#pragma unroll
  for (int d = 1; d < kLanes; d *= 2) {
    Affine<T> y;
    bool has_earlier;
    if constexpr (kReverse) {
      y.a = __shfl_down_sync(0xffffffffu, x.a, d, kLanes);
      y.b = __shfl_down_sync(0xffffffffu, x.b, d, kLanes);
      has_earlier = rank + d < kLanes;
    } else {
      y.a = __shfl_up_sync(0xffffffffu, x.a, d, kLanes);
      y.b = __shfl_up_sync(0xffffffffu, x.b, d, kLanes);
      has_earlier = rank >= d;
    }
    if (has_earlier) x = compose(y, x);  // the lane d places earlier goes on the left
  }
  return x;
}

/// Reads lane `src` (within the caller's group of `kLanes`) of a pair held by every lane.
template <int kLanes, class T>
__device__ __forceinline__ Affine<T> lane_group_broadcast(const Affine<T>& x, int src) {
  return {__shfl_sync(0xffffffffu, x.a, src, kLanes), __shfl_sync(0xffffffffu, x.b, src, kLanes)};
}

#endif  // __CUDACC__

}  // namespace ascan
