// ascan/ascan.cuh: the umbrella header. Solves x[t] = a[t] * x[t-1] + b[t] for many sequences.
//
// Layers, as CUB has them (a path says which threads run the code):
//   affine.cuh              the Affine pair, its compose, compute types, the lane-group scan
//   thread/thread_scan.cuh  serial recurrence over the items one thread holds in registers
//   warp/warp_scan.cuh      shuffle scan of Affine pairs across lane groups of a warp
//   block/block_scan.cuh    warps joined through shared memory, a carry across tiles
//   device/agent/           one group of threads walking one sequence tile by tile, and what
//                           the forward and backward passes load, scan and store there
//   device/dispatch/        the three kernels and the constexpr dispatch tables
//   device/                 the host entry points: scan, scan_backward, can_implement, Status
//   reference/...           host-only references (no CUDA): Blelloch tree scan, double loop
#pragma once

#include "affine.cuh"
#include "block/block_scan.cuh"
#include "device/scan.cuh"
#include "device/scan_backward.cuh"
#include "thread/thread_scan.cuh"
#include "warp/warp_scan.cuh"
