// tests/headers/host_headers.cpp: the host-only headers compile as plain C++ with no warning at
// -Wall -Wextra -Wconversion -Wsign-conversion -Wshadow (-Werror: building it is the test), their
// templates instantiated for every type they take. The CUDA headers are only needed for
// cuda_runtime_api.h (status.cuh) and the 16-bit types, and are included as system headers. CI
// compiles this file with clang++ too (.ci/run).
#include <ascan/device/checked.cuh>
#include <ascan/device/scan_args.cuh>
#include <ascan/device/status.cuh>
#include <ascan/device/validate.cuh>
#include <ascan/reference/scan_reference.hpp>
#include <ascan/version.hpp>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

template ascan::Status ascan::can_implement<float>(const ascan::ScanArgs<float>&);
template ascan::Status ascan::can_implement<double>(const ascan::ScanArgs<double>&);
template ascan::Status ascan::can_implement<__half>(const ascan::ScanArgs<__half>&);
template ascan::Status ascan::can_implement<__nv_bfloat16>(const ascan::ScanArgs<__nv_bfloat16>&);
template ascan::Status ascan::can_implement<float>(const ascan::ScanBackwardArgs<float>&);
template ascan::Status ascan::can_implement<double>(const ascan::ScanBackwardArgs<double>&);
template ascan::Status ascan::can_implement<__half>(const ascan::ScanBackwardArgs<__half>&);
template ascan::Status ascan::can_implement<__nv_bfloat16>(
    const ascan::ScanBackwardArgs<__nv_bfloat16>&);

template void ascan::reference::sequential_scan<float>(const float*, const float*, int64_t, bool,
                                                       double, double*);
template void ascan::reference::sequential_scan_backward<float>(const float*, const float*,
                                                                const float*, int64_t, bool, double,
                                                                double, double*, double*, double*);
template void ascan::reference::tree_scan<float>(const float*, const float*, int64_t, bool, float,
                                                 float*);
template void ascan::reference::tree_scan<double>(const double*, const double*, int64_t, bool,
                                                  double, double*);

// The constexpr helpers in a constant expression.
static_assert(ascan::time_contiguous(2, 3, 4).batch_stride == 12);
static_assert(ascan::time_contiguous(2, INT64_MAX, 2).batch_stride == INT64_MAX);
static_assert(ascan::Shape{INT64_MAX, 2, 1}.sequences() == INT64_MAX);
static_assert(ascan::Shape{-2, INT64_MAX, 1}.elements() == INT64_MIN);
