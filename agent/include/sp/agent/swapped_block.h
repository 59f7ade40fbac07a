#pragma once
// A block's forward as a block-swapped model runs it (ReferencePrecisionRuntime::releases_weights,
// sp/agent/precision_runtime.h): the model calls run_swapped_block in place of the block's forward.
//
// When the runtime releases weights, the forward runs without recording a graph (nothing saves the
// block's weights, and only its input is kept) between before_block_forward and after_block_forward;
// the backward uploads the block again (before_block_backward), recomputes its forward with gradients
// on, back-propagates the incoming gradient through it, which accumulates the gradients of its
// trainable tensors (the adapters, which stay resident) and gives the input's, and releases it
// (after_block_backward): the shape of activation checkpointing. Otherwise the block runs as it is,
// after before_block_forward (a no-op outside block-swap).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>

#include "sp/agent/precision_runtime.h"

namespace sp::agent {

// `forward(x, recompute)`: the block applied to `x`; `recompute` is true for the backward's second
// run (a profiler that saw the block's inputs in the first must not see them again; one that hooks the
// gradients at its outputs must hook them there, where the graph is).
using BlockForward = std::function<at::Tensor(const at::Tensor& x, bool recompute)>;

at::Tensor run_swapped_block(ReferencePrecisionRuntime& runtime, std::size_t block, const at::Tensor& x,
                             const BlockForward& forward);

}  // namespace sp::agent
