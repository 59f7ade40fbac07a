#pragma once
// The seam between the agent and the device: one collector reads every registered gradient after
// backward and yields per-block statistics. The CPU implementation is here; a CUDA one (one fused
// launch, results in pinned memory behind an event) plugs in behind the same interface.
#include <memory>
#include <vector>

#include "sp/agent/block.h"
#include "sp/stats.h"

namespace sp::agent {

class GradStatsCollector {
  public:
    virtual ~GradStatsCollector() = default;

    // Called once after registration: the blocks whose parameters' .grad() will be read.
    virtual void prepare(const std::vector<AgentBlock>& blocks) = 0;

    // Reads the current gradients. A GPU implementation only enqueues work here (no host sync).
    virtual void collect() = 0;

    // Statistics of the last collect(), one entry per block that had at least one defined gradient,
    // ascending by block id. May wait for the device. Valid until the next collect().
    virtual const std::vector<BlockGradStats>& results() = 0;
};

// The part of every gradient one rank of a sharded (FSDP- or ZeRO-like) job holds: rank `index` of
// `count` reads elements [numel * index / count, numel * (index + 1) / count) of each gradient, in
// memory order. The default is the whole gradient.
struct GradShard {
    int index = 0;
    int count = 1;
};

// One pass over each gradient (fp32, bf16 or fp16; any strides), parallel over chunks with
// at::parallel_for; count, mean and M2 merged with Chan's formula, max |g| over finite values, and a
// count of non-finite values. l2_norm = sqrt(sum of squares); variance is the population variance
// over all of a block's finite gradient elements. No allocation per step after the first.
// With a shard, only that part of each gradient is read (and counted in numel).
std::unique_ptr<GradStatsCollector> make_cpu_grad_stats_collector(GradShard shard = {});

}  // namespace sp::agent
