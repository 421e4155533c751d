// python/csrc/fwd_f32.cu: the forward pass for float (compiled when ASCAN_DTYPES asks for f32).
#include "scan_impl.cuh"

ASCAN_PY_DEFINE(forward, f32, float)
