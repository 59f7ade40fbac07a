#pragma once
// sp-trainer --snr-validation FILE: how well the SNR estimators agree with the truth on this model's
// own weights and inputs over a run (core/SNR.md has the synthetic validation). At every
// distribution-statistics step, for each linear layer of each routed block and each low format, it
// records the truth — the SNR of the layer's output over the whole batch with both operands really
// quantized (output_snr_db on every token) — next to each estimate: the seed's zeroing pair estimate
// (per scaling unit, and with the tensor's absmax), the sample pair estimate, and the output SNR on
// the agent's token sample. One JSON line per (step, block, layer, format) goes to FILE; summary()
// gives Spearman's rank correlation and the mean absolute error in dB per format and estimator, for
// the layer's output and, separately, for the weight alone against its measured SNR.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "sp/config.h"
#include "sp/precision.h"

namespace sp::trainer {

class SnrValidation {
  public:
    // Throws std::runtime_error when FILE cannot be written.
    SnrValidation(const std::string& path, const Config& config);

    // The input a layer saw in a distribution step's forward pass [..., in]; kept until finish().
    void observe_input(int block, int layer, const at::Tensor& input);
    // Evaluates the kept inputs against the layers' weights [out, in] as `weight_of(block, layer)`
    // gives them: the fp32 masters (call it while the runtime holds them in the parameters, between
    // before_optimizer_step and after_optimizer_step), not the compute copy already in its format.
    void finish(std::int64_t step, const std::function<const at::Tensor&(int block, int layer)>& weight_of);

    // The agreement table, one line per format and estimator.
    std::string summary() const;

  private:
    struct Row {
        Precision format;
        double truth;                          // output SNR over the batch
        std::vector<double> estimates;         // by estimator, in kEstimators order
        double weight_truth;                   // measured_snr_db of the weight alone
        std::vector<double> weight_estimates;  // estimated_snr_db of the weight, by kWeightEstimators
    };
    void evaluate(std::int64_t step, int block, int layer, const at::Tensor& weight, const at::Tensor& input);

    std::ofstream out_;
    Config config_;
    std::vector<Row> rows_;
    std::vector<std::tuple<int, int, at::Tensor>> inputs_;  // (block, layer, host copy) of this step
};

}  // namespace sp::trainer
