#pragma once
// Distribution statistics at a low cadence (POLICY.md rule 17): every distribution_interval_steps,
// each block's linear weights — and the inputs of those layers when the trainer hands them over
// during that step's forward pass — are profiled and turned into an estimated SNR per format. With
// the "sample" estimator and an input, that is the SNR of the layer's output on kInputTokens sampled
// tokens and kWeightRows sampled output rows, both operands quantized (output_snr_db); otherwise the
// weight's (and input's) profile estimate (core/SNR.md). The block's SNR in a format is its worst
// layer's. Training-thread only, but for its worker: when the runtime names the weights' fp32 masters
// (MasterSource), the output SNR of a layer is measured on the worker thread from the moment its input
// is seen, and finish() waits for it (core/SNR.md, "Off the training thread").
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <utility>
#include <vector>

#include "serial_worker.h"
#include "sp/agent/block.h"
#include "sp/config.h"
#include "sp/snr.h"
#include "sp/stats.h"

namespace sp::agent::detail {

class DistributionProfiler {
  public:
    // The fp32 value of block b's k-th streamed parameter when the parameter holds another during the
    // forward pass (HintSink::master), or nullptr.
    using MasterSource = std::function<const at::Tensor*(std::size_t block, std::size_t k)>;

    DistributionProfiler(const Config& config, const std::vector<AgentBlock>& blocks,
                         MasterSource masters = {});

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

    static constexpr std::size_t kInputTokens = 32;
    // Output rows of a weight that the "sample" estimator's output SNR is measured on (all of them
    // in a smaller layer), drawn afresh at each profiling step.
    static constexpr std::size_t kWeightRows = 128;

  private:
    using FormatSnr = std::array<double, kPrecisionCount>;
    struct InputSample {
        TensorProfile profile;
        std::vector<float> tokens;  // kInputTokens sampled rows (fewer for a short input), row-major
        std::size_t count = 0;
        std::future<FormatSnr> output_snr;  // valid when the worker measures the layer's output SNR
    };
    // `host`: fp32, contiguous, on the CPU. `input`: an activation (rows are its feature vectors).
    TensorProfile profile(const at::Tensor& host, bool input, std::int64_t step, std::uint64_t stream) const;
    // The "sample" estimator's SNR per format (low formats only) of weight `w` (any device) on the
    // input's sampled tokens, over kWeightRows sampled output rows.
    FormatSnr sampled_output_snr(const at::Tensor& w, const InputSample& input, std::int64_t step,
                                 std::uint64_t stream) const;
    // The kWeightRows output rows of `w` that sampled_output_snr measures, on the host, fp32 [rows x in].
    at::Tensor sampled_weight_rows(const at::Tensor& w, std::int64_t step, std::uint64_t stream) const;
    // A fresh, reproducible draw per step: the same seed and step sample the same elements and rows.
    std::uint64_t step_seed(std::int64_t step) const {
        return seed_ ^ (std::uint64_t(step) * 0x9E3779B97F4A7C15ull);
    }
    // One layer's estimated SNR in `p` from its weight's profile, and its input's when one was seen
    // (every estimator but "sample" with an input, which measures the output instead).
    double layer_snr(Precision p, const TensorProfile& w, const InputSample* in) const;

    const std::vector<AgentBlock>& blocks_;
    SamplingConfig sampling_;
    SnrEstimator estimator_;
    std::size_t int4_group_;
    std::int64_t interval_;
    std::uint64_t seed_ = 0;
    std::vector<std::vector<std::size_t>> layers_;       // per block: indices into params (profiled tensors)
    std::map<std::pair<int, int>, InputSample> inputs_;  // (block, layer) -> input sample
    std::int64_t inputs_step_ = -1;
    MasterSource masters_;
    SerialWorker<FormatSnr> worker_;  // last: destroyed (its queue run, joined) before what jobs read
};

}  // namespace sp::agent::detail
