// python/csrc/bwd_f64.cu: the backward pass for double (compiled when ASCAN_DTYPES asks for f64).
#include "scan_impl.cuh"

ASCAN_PY_DEFINE(backward, f64, double)
