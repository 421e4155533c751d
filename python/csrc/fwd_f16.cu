// python/csrc/fwd_f16.cu: the forward pass for __half (compiled when ASCAN_DTYPES asks for f16).
#include "scan_impl.cuh"

ASCAN_PY_DEFINE(forward, f16, __half)
