#pragma once
// Distribution statistics at a low cadence (POLICY.md rule 17): every distribution_interval_steps,
// each block's linear weights — and the inputs of those layers when the trainer hands them over
// during that step's forward pass — are profiled (the bulk's mean and sigma from sampling, the exact
// absmax) and turned into an estimated SNR per format. The block's SNR in a format is its worst
// layer's. Training-thread only.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "sp/agent/block.h"
#include "sp/config.h"
#include "sp/snr.h"
#include "sp/stats.h"

namespace sp::agent::detail {

class DistributionProfiler {
  public:
    DistributionProfiler(const Config& config, const std::vector<AgentBlock>& blocks);

    // Whether `step` takes distribution statistics (step % distribution_interval_steps == 0).
    bool due(std::int64_t step) const;

    // The input of the `layer`-th linear layer (the layer-th parameter of two or more dimensions, in
    // registration order) of `block`, seen in the forward pass of a due `step`. Profiled at once, on
    // the host; the last dimension is the row the format scales. Ignored on other steps. Throws
    // std::invalid_argument for a block or layer the model lacks.
    void observe_input(std::int64_t step, int block, int layer, const at::Tensor& input);

    // Profiles every block's weights and combines them with the inputs observed at `step`.
    std::vector<BlockSnr> finish(std::int64_t step);

    // Linear layers (parameters of two or more dimensions) per block: the pairs the SNR is taken over.
    std::size_t layer_count(int block) const { return layers_[std::size_t(block)].size(); }

  private:
    TensorProfile profile(const at::Tensor& t, std::int64_t step, std::uint64_t stream) const;

    const std::vector<AgentBlock>& blocks_;
    SamplingConfig sampling_;
    SnrEstimator estimator_;
    std::size_t int4_group_;
    std::int64_t interval_;
    std::uint64_t seed_ = 0;
    std::vector<std::vector<std::size_t>> layers_;  // per block: indices into params (profiled tensors)
    std::map<std::pair<int, int>, TensorProfile> inputs_;  // (block, layer) -> input profile
    std::int64_t inputs_step_ = -1;
};

}  // namespace sp::agent::detail
