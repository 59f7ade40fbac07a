#pragma once
// The CUDA gradient-statistics collector: the fused pass of agent/cuda behind GradStatsCollector.
// Declared always; defined only where LibTorch has CUDA (sp_agent then defines SP_AGENT_HAVE_CUDA=1).
#include <memory>

#include "sp/agent/grad_stats_collector.h"

namespace sp::agent {

// All gradients must live on one CUDA device (fp32, bf16 or fp16, any strides). collect() enqueues the
// pass on that device's current CUDA stream (the one backward ran on) and returns without waiting:
// no .item(), no device or stream synchronization. results() waits on the pass's event. The plan
// (chunk table on the device) is rebuilt only when a gradient appears, vanishes, or its storage
// moves (data pointer, size, dtype, layout or device changed). Gradients that are not
// non-overlapping-and-dense are first copied (on the same stream) into a reused contiguous buffer.
// Statistics have the CPU collector's semantics (see make_cpu_grad_stats_collector()).
std::unique_ptr<GradStatsCollector> make_cuda_grad_stats_collector();

}  // namespace sp::agent
