// python/csrc/fwd_bf16.cu: the forward pass for __nv_bfloat16 (compiled when ASCAN_DTYPES asks for bf16).
#include "scan_impl.cuh"

ASCAN_PY_DEFINE(forward, bf16, __nv_bfloat16)
