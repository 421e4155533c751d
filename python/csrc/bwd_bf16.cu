// python/csrc/bwd_bf16.cu: the backward pass for __nv_bfloat16 (compiled when ASCAN_DTYPES asks for bf16).
#include "scan_impl.cuh"

ASCAN_PY_DEFINE(backward, bf16, __nv_bfloat16)
