// tests/compile/all_entry_points.cu: every entry point for the four dtypes, instantiated in one
// TU. CI compiles it (compile only) for each architecture ascan supports with -Werror
// all-warnings and the host compiler at -Wall -Wextra (.ci/run, step (g)).
#include <ascan/instantiate.cuh>

ASCAN_INSTANTIATE(float)
ASCAN_INSTANTIATE(double)
ASCAN_INSTANTIATE(__half)
ASCAN_INSTANTIATE(__nv_bfloat16)
