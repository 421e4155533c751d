// Must not compile: a dispatch table whose one-tile block row covers spans longer than its tile
// (64 threads x 4 items = 256 elements, max_span 512). launch_row's static_assert refuses it;
// the ctest one_tile_row_static_assert checks that the compiler says so.
#include <ascan/ascan.cuh>

struct TooLongRowTable {
  static constexpr ascan::detail::ScanPolicy kPolicies[] = {
      {512, ascan::detail::KernelKind::kBlock, 64, 64, 4},
      {INT64_MAX, ascan::detail::KernelKind::kChunked, 256, 256, 4},
  };
  static constexpr int kCount = 2;
};

cudaError_t launch(const ascan::detail::ScanParams<float>& p) {
  return ascan::detail::launch_scan_row<ascan::detail::ForwardProblem, float, TooLongRowTable>(
      0, false, true, p, 0);
}
