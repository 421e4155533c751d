// tests/instantiate/kernels.cu: the one TU that compiles ascan's kernels for this test
// (ascan/instantiate.cuh), for float and bfloat16.
#include <ascan/instantiate.cuh>

ASCAN_INSTANTIATE(float)
ASCAN_INSTANTIATE(__nv_bfloat16)
