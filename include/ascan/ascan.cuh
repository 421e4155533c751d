// ascan/ascan.cuh: the umbrella header. Solves x[t] = a[t] * x[t-1] + b[t] for many sequences.
//
// Layers, as CUB has them (a path says which threads run the code):
//   affine.cuh              the Affine pair, its compose, compute types, the lane-group scan
//   thread/thread_scan.cuh  serial recurrence over the items one thread holds in registers
//   warp/warp_scan.cuh      shuffle scan of Affine pairs across lane groups of a warp
//   block/block_scan.cuh    warps joined through shared memory, a carry across tiles
//   device/agent/           one group of threads walking one sequence tile by tile, what the
//                           forward and backward passes load, scan and store there, and the
//                           tile states that join many blocks on one sequence (look-back)
//   device/dispatch/        the kernels, the constexpr dispatch tables, the path choice and
//                           the workspace rules
//   device/                 the host entry points: scan, scan_backward, can_implement, Status
//   reference/...           host-only references (no CUDA): Blelloch tree scan, double loop
#pragma once

#include "affine.cuh"
#include "version.hpp"
#include "block/block_scan.cuh"
#include "device/scan.cuh"
#include "device/scan_backward.cuh"
#include "thread/thread_scan.cuh"
#include "warp/warp_scan.cuh"
