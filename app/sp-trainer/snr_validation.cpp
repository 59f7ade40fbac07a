#include "snr_validation.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "sp/snr.h"

namespace sp::trainer {
namespace {

constexpr const char* kEstimators[] = {"zeroing", "zeroing_tensor_absmax", "sample", "output_sample",
                                       "output_sample_rows"};
constexpr std::size_t kEstimatorCount = 5;
constexpr const char* kWeightEstimators[] = {"zeroing", "zeroing_tensor_absmax", "sample"};
constexpr SnrEstimator kWeightEstimatorIds[] = {SnrEstimator::zeroing, SnrEstimator::zeroing_tensor_absmax,
                                                SnrEstimator::sample};
constexpr std::size_t kWeightEstimatorCount = 3;

// "  int8      sample     0.990   0.32 dB  (n 96)" for the pairs whose both values are finite.
std::string agreement(const char* format, const char* estimator, const std::vector<double>& truth_all,
                      const std::vector<double>& est_all) {
    std::vector<double> truth, est;
    for (std::size_t i = 0; i < truth_all.size(); ++i)
        if (std::isfinite(truth_all[i]) && std::isfinite(est_all[i])) {
            truth.push_back(truth_all[i]);
            est.push_back(est_all[i]);
        }
    double mae = 0;
    for (std::size_t i = 0; i < truth.size(); ++i) mae += std::fabs(truth[i] - est[i]);
    char line[256];
    std::snprintf(line, sizeof line, "  %-9s %-22s %7.3f  %6.2f dB  (n %zu)\n", format, estimator,
                  spearman(truth, est), truth.empty() ? NAN : mae / double(truth.size()), truth.size());
    return line;
}
constexpr std::size_t kOutputTokens = 32;  // the agent's token sample (DistributionProfiler::kInputTokens)
constexpr std::size_t kOutputRows = 128;   // and its weight-row sample (DistributionProfiler::kWeightRows)

struct Matrix {
    at::Tensor host;  // fp32, contiguous, on the CPU
    std::size_t rows = 0, cols = 0;
    const float* data() const { return host.data_ptr<float>(); }
};

Matrix as_matrix(const at::Tensor& t) {
    Matrix m;
    m.host = t.detach().to(at::kCPU, at::kFloat).contiguous();
    m.cols = std::size_t(t.size(t.dim() - 1));
    m.rows = m.cols == 0 ? 0 : std::size_t(t.numel()) / m.cols;
    return m;
}

nlohmann::json number(double v) {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace

SnrValidation::SnrValidation(const std::string& path, const Config& config) : out_(path), config_(config) {
    if (!out_) throw std::runtime_error("--snr-validation: cannot write '" + path + "'");
}

void SnrValidation::observe_input(int block, int layer, const at::Tensor& input) {
    inputs_.emplace_back(block, layer, input.detach().to(at::kCPU, at::kFloat).contiguous().clone());
}

void SnrValidation::finish(std::int64_t step, const std::function<const at::Tensor&(int, int)>& weight_of) {
    for (const auto& [block, layer, input] : inputs_)
        evaluate(step, block, layer, weight_of(block, layer), input);
    inputs_.clear();
    out_.flush();
}

void SnrValidation::evaluate(std::int64_t step, int block, int layer, const at::Tensor& weight,
                             const at::Tensor& input) {
    if (weight.dim() != 2 || input.dim() < 1) return;
    const Matrix w = as_matrix(weight), x = as_matrix(input);
    if (w.cols != x.cols || w.rows == 0 || x.rows == 0) return;
    SamplingConfig cfg;
    cfg.samples = config_.snr_samples;
    cfg.rate = config_.snr_sample_rate;
    cfg.seed = std::uint64_t(config_.snr_seed) ^ std::uint64_t(step);
    const auto group = std::size_t(config_.int4_group_size);
    const std::uint64_t stream = (std::uint64_t(block) << 20) + (std::uint64_t(layer) << 1);
    const TensorProfile wp = profile_tensor(w.data(), w.rows, w.cols, cfg, stream, group);
    const TensorProfile xp = profile_tensor(x.data(), x.rows, x.cols, cfg, stream + 1, group);
    const std::vector<float> tokens =
        sample_rows(x.data(), x.rows, x.cols, kOutputTokens, cfg.seed, stream + 1);
    // What the agent measures: those tokens through kOutputRows sampled output rows.
    const std::vector<float> rows = sample_rows(w.data(), w.rows, w.cols, kOutputRows, cfg.seed, stream);
    for (Precision p : kLowFormatsCheapestFirst) {
        Row r;
        r.format = p;
        r.truth = output_snr_db(p, w.data(), w.rows, w.cols, x.data(), x.rows, group);
        r.weight_truth = measured_snr_db(p, w.data(), w.rows, w.cols, group);
        for (SnrEstimator e : kWeightEstimatorIds) r.weight_estimates.push_back(estimated_snr_db(p, wp, e));
        r.estimates = {
            estimated_pair_snr_db(p, wp, xp, SnrEstimator::zeroing),
            estimated_pair_snr_db(p, wp, xp, SnrEstimator::zeroing_tensor_absmax),
            estimated_pair_snr_db(p, wp, xp, SnrEstimator::sample),
            output_snr_db(p, w.data(), w.rows, w.cols, tokens.data(), tokens.size() / x.cols, group),
            output_snr_db(p, rows.data(), rows.size() / w.cols, w.cols, tokens.data(), tokens.size() / x.cols,
                          group)};
        nlohmann::json line = {
            {"step", step},
            {"block", block},
            {"layer", layer},
            {"format", std::string(to_string(p))},
            {"truth", number(r.truth)},
            {"weight_measured", number(r.weight_truth)},
            {"input_measured", number(measured_snr_db(p, x.data(), x.rows, x.cols, group))}};
        for (std::size_t e = 0; e < kEstimatorCount; ++e) line[kEstimators[e]] = number(r.estimates[e]);
        for (std::size_t e = 0; e < kWeightEstimatorCount; ++e)
            line[std::string("weight_") + kWeightEstimators[e]] = number(r.weight_estimates[e]);
        out_ << line.dump() << '\n';
        rows_.push_back(std::move(r));
    }
}

std::string SnrValidation::summary() const {
    std::string text =
        "SNR validation: layer outputs (truth: output SNR over the whole batch, both operands quantized)\n"
        "  format    estimator              Spearman  mean |error|\n";
    auto column = [this](Precision p, auto&& pick) {
        std::vector<double> out;
        for (const Row& r : rows_)
            if (r.format == p) out.push_back(pick(r));
        return out;
    };
    for (Precision p : kLowFormatsCheapestFirst) {
        const std::string name(to_string(p));
        const auto truth = column(p, [](const Row& r) { return r.truth; });
        for (std::size_t e = 0; e < kEstimatorCount; ++e)
            text += agreement(name.c_str(), kEstimators[e], truth,
                              column(p, [e](const Row& r) { return r.estimates[e]; }));
    }
    text += "SNR validation: weights alone (truth: measured_snr_db of the weight)\n";
    for (Precision p : kLowFormatsCheapestFirst) {
        const std::string name(to_string(p));
        const auto truth = column(p, [](const Row& r) { return r.weight_truth; });
        for (std::size_t e = 0; e < kWeightEstimatorCount; ++e)
            text += agreement(name.c_str(), kWeightEstimators[e], truth,
                              column(p, [e](const Row& r) { return r.weight_estimates[e]; }));
    }
    return text;
}

}  // namespace sp::trainer
