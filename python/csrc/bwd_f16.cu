// python/csrc/bwd_f16.cu: the backward pass for __half (compiled when ASCAN_DTYPES asks for f16).
#include "scan_impl.cuh"

ASCAN_PY_DEFINE(backward, f16, __half)
