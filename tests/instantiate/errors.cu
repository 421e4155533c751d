// tests/instantiate/errors.cu: errors that are ours. An error the caller left pending in the
// runtime (here cudaSetDevice(-1)'s) is neither reported by ascan's entry points as theirs nor
// cleared by them: every entry point, forward and backward, on the one-block, multi-block and
// row paths, succeeds and leaves that error where it was. Exit code 77 without a GPU (skipped).
#include <ascan/instantiate.cuh>

#include <cstdio>

ASCAN_EXTERN_TEMPLATES(float)

namespace {

int failures = 0;

void expect(bool ok, const char* what, const ascan::Status& st) {
  const cudaError_t pending = cudaPeekAtLastError();
  if (!ok || pending != cudaErrorInvalidDevice) {
    std::printf("FAIL %s: status '%s', pending error now '%s' (want it left as '%s')\n", what,
                st.message, cudaGetErrorName(pending), cudaGetErrorName(cudaErrorInvalidDevice));
    ++failures;
  } else {
    std::printf("ok   %s\n", what);
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device (%s)\n", cudaGetErrorString(e));
    return 77;
  }
  const int64_t n = int64_t(1) << 22;  // enough for every shape below
  float *a, *b, *x, *g, *ga, *gb;
  for (float** p : {&a, &b, &x, &g, &ga, &gb}) {
    if (cudaMalloc(p, size_t(n) * sizeof(float)) != cudaSuccess) return 1;
    cudaMemset(*p, 0, size_t(n) * sizeof(float));
  }
  cudaDeviceSynchronize();

  struct Case {
    const char* name;
    ascan::Shape shape;
  };
  const Case cases[] = {
      {"one block per sequence (8, 64, 1000)", ascan::time_contiguous(8, 64, 1000)},
      {"multi-block (1, 1, 2^22)", ascan::time_contiguous(1, 1, n)},
      {"row path, channel-last (2, 4096, 512)", ascan::channel_last(2, 4096, 512)},
  };
  if (cudaSetDevice(-1) == cudaSuccess || cudaPeekAtLastError() != cudaErrorInvalidDevice) {
    std::printf("could not leave an error pending\n");
    return 1;
  }
  for (const Case& c : cases) {
    ascan::ScanArgs<float> fwd;
    fwd.gates = a;
    fwd.tokens = b;
    fwd.out = x;
    fwd.shape = c.shape;
    ascan::ScanBackwardArgs<float> bwd;
    bwd.gates = a;
    bwd.states = x;
    bwd.grad_out = g;
    bwd.grad_gates = ga;
    bwd.grad_tokens = gb;
    bwd.shape = c.shape;
    char what[160];
    size_t bytes = 0;
    ascan::Status st = ascan::scan(fwd, nullptr, bytes);
    void* workspace = nullptr;
    if (st.ok() && cudaMalloc(&workspace, bytes) != cudaSuccess) return 1;
    if (st.ok()) st = ascan::scan(fwd, workspace, bytes);
    std::snprintf(what, sizeof what, "scan, two-phase, %s", c.name);
    expect(st.ok(), what, st);
    size_t bytes2 = 0;
    st = ascan::scan_backward(bwd, nullptr, bytes2);
    void* workspace2 = nullptr;
    if (st.ok() && cudaMalloc(&workspace2, bytes2) != cudaSuccess) return 1;
    if (st.ok()) st = ascan::scan_backward(bwd, workspace2, bytes2);
    std::snprintf(what, sizeof what, "scan_backward, two-phase, %s", c.name);
    expect(st.ok(), what, st);
    st = ascan::scan(fwd, ascan::malloc_async);
    std::snprintf(what, sizeof what, "scan, malloc_async, %s", c.name);
    expect(st.ok(), what, st);
    st = ascan::scan_backward(bwd, ascan::malloc_async);
    std::snprintf(what, sizeof what, "scan_backward, malloc_async, %s", c.name);
    expect(st.ok(), what, st);
    st = ascan::scan(fwd);
    std::snprintf(what, sizeof what, "scan, no workspace, %s", c.name);
    expect(st.ok(), what, st);
    st = ascan::scan_backward(bwd);
    std::snprintf(what, sizeof what, "scan_backward, no workspace, %s", c.name);
    expect(st.ok(), what, st);
    cudaStreamSynchronize(0);
    cudaFree(workspace);
    cudaFree(workspace2);
  }
  const cudaError_t left = cudaGetLastError();  // ours to clear now
  const cudaError_t device = cudaDeviceSynchronize();
  for (float* p : {a, b, x, g, ga, gb}) cudaFree(p);
  std::printf("%d failures; the pending error at the end: %s; the device: %s\n", failures,
              cudaGetErrorName(left), cudaGetErrorName(device));
  return failures == 0 && left == cudaErrorInvalidDevice && device == cudaSuccess ? 0 : 1;
}
