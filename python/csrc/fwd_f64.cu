// python/csrc/fwd_f64.cu: the forward pass for double (compiled when ASCAN_DTYPES asks for f64).
#include "scan_impl.cuh"

ASCAN_PY_DEFINE(forward, f64, double)
