#pragma once
// Distribution statistics at a low cadence (POLICY.md rule 17): every distribution_interval_steps,
// each block's linear weights — and the inputs of those layers when the trainer hands them over
// during that step's forward pass — are profiled and turned into an estimated SNR per format. With
// the "sample" estimator and an input, that is the SNR of the layer's output on kInputTokens sampled
// tokens and kWeightRows sampled output rows, both operands quantized (output_snr_db); otherwise the
// weight's (and input's) profile estimate (core/SNR.md). The block's SNR in a format is its worst
// layer's. Training-thread only, but for its worker: when the runtime names the weights' fp32 masters
// (MasterSource), the output SNR of a layer is measured on the worker thread from the moment its input
// is seen, and finish() waits for it (core/SNR.md, "Off the training thread"). An input on an
// accelerator is measured there instead (device_output.h; core/SNR.md, "On the device"): the sampled
// tokens, rows and output gradients never leave it, and finish() copies each layer's sums at once.
#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <utility>
#include <vector>

#include "device_output.h"
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
    // registration order) of `block`, seen in the forward pass of a due `step`. Sampled at once, and
    // profiled on the host or, with the "sample" estimator, kept (and measured) on the input's device
    // when it is an accelerator; the last dimension is the row the format scales. Ignored on other
    // steps. Throws
    // std::invalid_argument for a block or layer the model lacks.
    void observe_input(std::int64_t step, int block, int layer, const at::Tensor& input);

    // The gradient of the loss at the output of the same layer, seen in the backward pass of a due
    // `step` whose forward pass handed over the layer's input ("sample" estimator only; ignored
    // otherwise). Its sampled tokens and output rows are kept for the loss-change estimate (rule 23).
    // Throws std::invalid_argument for a block or layer the model lacks, or a gradient whose shape does
    // not fit the layer's output.
    void observe_output_grad(std::int64_t step, int block, int layer, const at::Tensor& grad);

    // precision_scope "compute" (true: the inputs are quantized too) or "weights" (false).
    void set_quantize_inputs(bool quantize) { quantize_inputs_ = quantize; }
    // The "sample" estimator measures an input on an accelerator where it lives (device_output.h) and
    // one in host memory on the host, with the core reference; `always` measures host inputs the
    // device's way too (ATen on the CPU: the same draws and code as on a GPU, for tests).
    void set_measure_on_device(bool always) { measure_on_device_ = always; }

    // Profiles every block's weights and combines them with the inputs observed at `step`; also the
    // loss-change estimates (loss_estimates()) of the blocks whose every layer had its input and
    // output gradient observed.
    std::vector<BlockSnr> finish(std::int64_t step);
    // The estimates of the last finish(), one per block that has them.
    const std::vector<BlockLossEstimate>& loss_estimates() const { return loss_estimates_; }

    // Linear layers (parameters of two or more dimensions) per block: the pairs the SNR is taken over.
    std::size_t layer_count(int block) const { return layers_[std::size_t(block)].size(); }

    using FormatSnr = std::array<double, kPrecisionCount>;
    // The "sample" estimator's measure of one layer's output on the sampled tokens and rows.
    struct OutputMeasure {
        FormatSnr snr{};  // per format (low formats only)
        // Per low format (kLowFormatsCheapestFirst order): y_f - y, [tokens x sampled rows] (host path).
        std::vector<std::vector<double>> error;
        std::size_t rows = 0;  // the sampled output rows
        // Device path, when the output gradient was seen: per low format and token, the sums over the
        // sampled rows of g e and of (g e)^2 (sp::loss_change_from_token_sums).
        std::vector<std::vector<double>> grad_dot, grad_squares;
    };

    static constexpr std::size_t kInputTokens = 32;
    // Output rows of a weight that the "sample" estimator's output SNR is measured on (all of them
    // in a smaller layer), drawn afresh at each profiling step.
    static constexpr std::size_t kWeightRows = 128;

  private:
    struct InputSample {
        TensorProfile profile;
        std::vector<float> tokens;  // kInputTokens sampled rows (fewer for a short input), row-major
        std::size_t count = 0;
        std::vector<std::int64_t> token_rows;  // which rows of the input the tokens are
        std::size_t batch_tokens = 0;          // the input's rows: N
        std::future<OutputMeasure> output;     // valid when the worker measures the layer's output
        std::vector<float> grad;               // the output gradient at the tokens and sampled rows
        // Device path: the same samples where the input lives (tokens fp32 [count x in], the gradient
        // [count x sampled rows]), and the errors when they were measured from the master already.
        bool on_device = false;
        at::Tensor device_tokens, device_grad;
        DeviceOutputErrors device_errors;
    };
    // Gathers the "sample" estimator's tokens of `input` into `s`: to the host, or kept on the device.
    void sample_tokens(const at::Tensor& input, std::int64_t step, std::uint64_t stream,
                       InputSample& s) const;
    // Starts measuring the layer's output from its master when the runtime names one: on the worker
    // (host path) or queued on the device.
    void measure_from_master(int block, int layer, std::int64_t step, InputSample& s);
    // The device path's measures of this step's layers, their sums copied to the host at once.
    std::map<std::pair<int, int>, OutputMeasure> device_measures(std::int64_t step) const;
    // `host`: fp32, contiguous, on the CPU. `input`: an activation (rows are its feature vectors).
    TensorProfile profile(const at::Tensor& host, bool input, std::int64_t step, std::uint64_t stream) const;
    // The "sample" estimator's measure of weight `w` (any device) on the input's sampled tokens, over
    // kWeightRows sampled output rows.
    OutputMeasure sampled_output(const at::Tensor& w, const InputSample& input, std::int64_t step,
                                 std::uint64_t stream) const;
    // The output rows sampled_output measures (all of them in a smaller layer), as indices.
    std::vector<std::int64_t> sampled_row_indices(std::size_t out_rows, std::int64_t step,
                                                  std::uint64_t stream) const;
    // One block's loss-change estimate from its layers' measures and gradients (NaN where one lacks).
    PerFormat block_loss(int block, const std::vector<const OutputMeasure*>& measures) const;
    // The kWeightRows output rows of `w` that sampled_output measures, gathered on w's device, [rows x in].
    at::Tensor sampled_rows(const at::Tensor& w, std::int64_t step, std::uint64_t stream) const;
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
    bool quantize_inputs_ = true;     // precision_scope "compute": inputs are rounded to the format too
    bool measure_on_device_ = false;  // set_measure_on_device
    std::vector<BlockLossEstimate> loss_estimates_;
    SerialWorker<OutputMeasure> worker_;  // last: destroyed (its queue run, joined) before what jobs read
};

}  // namespace sp::agent::detail
