#pragma once
// Runs a grid on the calling OS thread: blocks one after another, each block's threads as fibers.
#include <functional>

#include "simt/device.h"

namespace simt {

// Calls `thread_body` once per thread of every block of the grid and returns when all have exited.
// Fatal (message, abort) when a block cannot finish: threads left waiting at a __syncthreads or at a
// shuffle that the rest of the block or warp never reaches.
void run_grid(dim3 grid, dim3 block, const std::function<void()>& thread_body);

}  // namespace simt
