// ascan/instantiate.cuh: compile ascan's kernels once in a project instead of in every
// translation unit that calls them.
//
// Every TU that calls ascan::scan<T> or ascan::scan_backward<T> instantiates the whole dispatch
// for T: every kernel path, about a minute of nvcc and several MB of object per dtype and
// architecture (README, "Compile the kernels once", gives the figures). To pay that once,
// instantiate the entry points in one .cu file of the project:
//
//     // ascan_kernels.cu
//     #include <ascan/instantiate.cuh>
//     ASCAN_INSTANTIATE(float)
//     ASCAN_INSTANTIATE(__nv_bfloat16)
//
// and declare them extern wherever they are called (a project header is the natural place):
//
//     #include <ascan/instantiate.cuh>
//     ASCAN_EXTERN_TEMPLATES(float)
//     ASCAN_EXTERN_TEMPLATES(__nv_bfloat16)
//
// Those TUs then compile no ascan kernel and link against the one instantiating TU (no
// relocatable device code needed: the kernels are launched from the TU that holds them). Each
// macro covers the six entry points of one dtype: scan and scan_backward with a workspace, with
// ascan::malloc_async and with none. can_implement is host code and stays implicit.
#pragma once

#include "ascan.cuh"

#define ASCAN_DETAIL_ENTRY_POINTS(EXTERN, T)                                                   \
  EXTERN template ::ascan::Status ascan::scan<T>(const ::ascan::ScanArgs<T>&, void*, size_t&,  \
                                                 cudaStream_t);                                \
  EXTERN template ::ascan::Status ascan::scan<T>(const ::ascan::ScanArgs<T>&,                  \
                                                 ::ascan::MallocAsync, cudaStream_t);          \
  EXTERN template ::ascan::Status ascan::scan<T>(const ::ascan::ScanArgs<T>&, cudaStream_t);   \
  EXTERN template ::ascan::Status ascan::scan_backward<T>(const ::ascan::ScanBackwardArgs<T>&, \
                                                          void*, size_t&, cudaStream_t);       \
  EXTERN template ::ascan::Status ascan::scan_backward<T>(const ::ascan::ScanBackwardArgs<T>&, \
                                                          ::ascan::MallocAsync, cudaStream_t); \
  EXTERN template ::ascan::Status ascan::scan_backward<T>(const ::ascan::ScanBackwardArgs<T>&, \
                                                          cudaStream_t);

/// Explicit instantiation of ascan's entry points for dtype T (one TU of the project, once per T,
/// at global scope).
#define ASCAN_INSTANTIATE(T) ASCAN_DETAIL_ENTRY_POINTS(, T)
/// Declares ascan's entry points for dtype T instantiated elsewhere (ASCAN_INSTANTIATE), at
/// global scope.
#define ASCAN_EXTERN_TEMPLATES(T) ASCAN_DETAIL_ENTRY_POINTS(extern, T)
