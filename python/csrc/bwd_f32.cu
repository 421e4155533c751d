// python/csrc/bwd_f32.cu: the backward pass for float (compiled when ASCAN_DTYPES asks for f32).
#include "scan_impl.cuh"

ASCAN_PY_DEFINE(backward, f32, float)
