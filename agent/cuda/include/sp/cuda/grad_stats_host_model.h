#pragma once
// The gradient-statistics kernels replayed on the host: every simulated thread runs the kernels' own
// code (grad_stats_kernel_math.h) over the same chunk, and the warp, block and merge reductions are
// replayed in the kernels' order. Pure C++, built everywhere.
//
// What it is for: testing the kernels' algorithm (head/vector/tail traversal, shifted sums, the
// non-finite count, Chan's merge) on machines without a GPU, and giving the kernels an exact expected
// value on a GPU (the results are meant to agree bit for bit). It is far slower than the CPU collector
// and not meant for production use.
#include <vector>

#include "sp/cuda/block_moments.h"
#include "sp/cuda/grad_stats_plan.h"

namespace sp::cuda {

// The plan's chunk addresses must point into host memory (build the plan from host pointers laid out
// like the device tensors: the same addresses modulo 16 give the same chunks). plan.n_blocks entries.
std::vector<BlockMoments> grad_stats_on_host(const GradStatsPlan& plan);

}  // namespace sp::cuda
