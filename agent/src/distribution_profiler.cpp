#include "distribution_profiler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "device_output.h"
#include "sp/loss_estimate.h"

namespace sp::agent::detail {
namespace {

// Streams keep the samples of different tensors independent: 2 per layer (weight, input).
std::uint64_t stream_of(int block, std::size_t layer, bool input) {
    return (std::uint64_t(block) << 20) + (std::uint64_t(layer) << 1) + (input ? 1 : 0);
}

at::Tensor host_float(const at::Tensor& t) {
    return t.detach().to(at::kCPU, at::kFloat).contiguous();
}

// The "sample" estimator's measure of a layer's output: w [rows x in] on tokens [count x in], both host
// fp32; the SNR per format (the low formats; the others stay 0) and the output error per low format.
// The worker's job, or the training thread's.
DistributionProfiler::OutputMeasure measure_output(const float* w, std::size_t rows, std::size_t in,
                                                   const std::vector<float>& tokens, std::size_t count,
                                                   std::size_t int4_group, bool quantize_inputs) {
    const std::vector<Precision> formats(kLowFormatsCheapestFirst.begin(), kLowFormatsCheapestFirst.end());
    OutputErrors errors =
        output_errors(formats, w, rows, in, tokens.data(), count, int4_group, quantize_inputs);
    const std::vector<double> measured = output_snr_db(errors);
    DistributionProfiler::OutputMeasure m;
    for (std::size_t f = 0; f < formats.size(); ++f) m.snr[std::size_t(formats[f])] = measured[f];
    m.error = std::move(errors.error);
    m.rows = rows;
    return m;
}

// rows x cols as the formats scale it: a weight [out, in, ...] has `out` rows; an activation
// [..., features] has one row per feature vector; a vector is one row.
std::pair<std::size_t, std::size_t> rows_cols(const at::Tensor& t, bool input) {
    const auto n = std::size_t(t.numel());
    if (n == 0) return {0, 0};
    if (t.dim() == 0) return {1, 1};
    const std::size_t cols =
        input ? std::size_t(t.size(t.dim() - 1)) : n / std::size_t(t.dim() >= 2 ? t.size(0) : 1);
    return {n / cols, cols};
}

}  // namespace

DistributionProfiler::DistributionProfiler(const Config& c, const std::vector<AgentBlock>& blocks,
                                           MasterSource masters)
    : blocks_(blocks),
      estimator_(parse_snr_estimator(c.snr_estimator).value_or(SnrEstimator::zeroing)),
      int4_group_(std::size_t(c.int4_group_size)),
      interval_(c.distribution_interval_steps) {
    sampling_.samples = c.snr_samples;
    sampling_.rate = c.snr_sample_rate;
    layers_.resize(blocks_.size());
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        const auto& params = blocks_[b].streamed();
        for (std::size_t k = 0; k < params.size(); ++k)
            if (params[k].dim() >= 2) layers_[b].push_back(k);
        // A block without matrices (all norms or biases) is judged by its vectors.
        if (layers_[b].empty())
            for (std::size_t k = 0; k < params.size(); ++k) layers_[b].push_back(k);
    }
    seed_ = std::uint64_t(c.snr_seed);
    masters_ = std::move(masters);
    quantize_inputs_ = !c.weights_scope();
}

bool DistributionProfiler::due(std::int64_t step) const {
    return interval_ > 0 && step >= 0 && step % interval_ == 0;
}

TensorProfile DistributionProfiler::profile(const at::Tensor& host, bool input, std::int64_t step,
                                            std::uint64_t stream) const {
    const auto [rows, cols] = rows_cols(host, input);
    SamplingConfig cfg = sampling_;
    cfg.seed = step_seed(step);
    return profile_tensor(host.data_ptr<float>(), rows, cols, cfg, stream, int4_group_);
}

void DistributionProfiler::observe_input(std::int64_t step, int block, int layer, const at::Tensor& input) {
    if (block < 0 || std::size_t(block) >= blocks_.size())
        throw std::invalid_argument("observe_layer_input: unknown block " + std::to_string(block));
    if (layer < 0 || std::size_t(layer) >= layers_[std::size_t(block)].size())
        throw std::invalid_argument("observe_layer_input: block " + std::to_string(block) + " has " +
                                    std::to_string(layers_[std::size_t(block)].size()) +
                                    " linear layers, not " + std::to_string(layer + 1));
    if (!due(step) || input.numel() == 0) return;
    const AgentBlock& owner = blocks_[std::size_t(block)];
    const std::size_t k = layers_[std::size_t(block)][std::size_t(layer)];
    const at::Tensor w = output_rows(owner.streamed()[k], owner.stored_transposed(k));
    const std::int64_t features = input.dim() == 0 ? 1 : input.size(input.dim() - 1);
    if (w.dim() >= 2 && features != w.numel() / w.size(0))
        throw std::invalid_argument("observe_layer_input: block " + std::to_string(block) + " layer " +
                                    std::to_string(layer) + ": the input has " + std::to_string(features) +
                                    " features, the weight takes " + std::to_string(w.numel() / w.size(0)));
    if (inputs_step_ != step) inputs_.clear();
    inputs_step_ = step;
    const std::uint64_t stream = stream_of(block, std::size_t(layer), true);
    InputSample s;
    if (estimator_ == SnrEstimator::sample && w.dim() >= 2) {
        sample_tokens(input, step, stream, s);
    } else {
        const auto [rows, cols] = rows_cols(input, true);
        const at::Tensor host = host_float(input);
        s.profile = profile(host, true, step, stream);
        s.tokens = sample_rows(host.data_ptr<float>(), rows, cols, kInputTokens, seed_ ^ std::uint64_t(step),
                               stream);
        s.count = cols == 0 ? 0 : s.tokens.size() / cols;
    }
    if (w.dim() >= 2 && s.count > 0) measure_from_master(block, layer, step, s);
    inputs_[{block, layer}] = std::move(s);
}

void DistributionProfiler::sample_tokens(const at::Tensor& input, std::int64_t step, std::uint64_t stream,
                                         InputSample& s) const {
    // The output is measured on the sampled tokens alone (finish): only they are gathered, on the
    // input's device; the whole activation's profile would go unread.
    const auto [rows, cols] = rows_cols(input, true);
    const std::vector<std::size_t> picked =
        sample_row_indices(rows, kInputTokens, seed_ ^ std::uint64_t(step), stream);
    s.token_rows.assign(picked.begin(), picked.end());
    s.batch_tokens = rows;
    s.count = picked.size();
    s.on_device = measure_on_device_ || !input.is_cpu();
    const at::Tensor tokens = input.detach()
                                  .reshape({std::int64_t(rows), std::int64_t(cols)})
                                  .index_select(0, index_on(s.token_rows, input.device()));
    if (s.on_device) {
        s.device_tokens = tokens.to(at::kFloat);  // stays there: the device path measures it there
        return;
    }
    const at::Tensor host = host_float(tokens);
    s.tokens.assign(host.data_ptr<float>(), host.data_ptr<float>() + host.numel());
}

void DistributionProfiler::measure_from_master(int block, int layer, std::int64_t step, InputSample& s) {
    // The weight's master is what finish() would measure (the parameter holds it again by then, and
    // nothing changes it before the optimizer steps): its sampled rows are gathered now and the output
    // is measured while the step goes on (the worker's job on the host path, queued on the device on
    // the device path); the same numbers, whenever the job runs.
    const AgentBlock& owner = blocks_[std::size_t(block)];
    const std::size_t k = layers_[std::size_t(block)][std::size_t(layer)];
    const at::Tensor* master =
        masters_ && estimator_ == SnrEstimator::sample ? masters_(std::size_t(block), k) : nullptr;
    if (!master) return;
    const at::Tensor master_rows = output_rows(*master, owner.stored_transposed(k));
    if (master_rows.sizes() != output_rows(owner.streamed()[k], owner.stored_transposed(k)).sizes()) return;
    const at::Tensor sampled = sampled_rows(master_rows, step, stream_of(block, std::size_t(layer), false));
    if (s.on_device) {
        s.device_errors = device_output_errors(to_device(sampled, s.device_tokens.device()), s.device_tokens,
                                               int4_group_, quantize_inputs_);
        return;
    }
    const at::Tensor host = host_float(sampled);
    std::vector<float> wrows(host.data_ptr<float>(), host.data_ptr<float>() + host.numel());
    s.output = worker_.submit([wrows = std::move(wrows), n = std::size_t(host.size(0)),
                               in = std::size_t(host.size(1)), tokens = s.tokens, count = s.count,
                               group = int4_group_, inputs = quantize_inputs_] {
        return measure_output(wrows.data(), n, in, tokens, count, group, inputs);
    });
}

double DistributionProfiler::layer_snr(Precision p, const TensorProfile& w, const InputSample* in) const {
    if (!in) return estimated_snr_db(p, w, estimator_);
    return estimated_pair_snr_db(p, w, in->profile, estimator_);
}

std::vector<std::int64_t> DistributionProfiler::sampled_row_indices(std::size_t out_rows, std::int64_t step,
                                                                    std::uint64_t stream) const {
    std::vector<std::int64_t> index;
    if (out_rows <= kWeightRows) {
        index.resize(out_rows);
        for (std::size_t r = 0; r < out_rows; ++r) index[r] = std::int64_t(r);
        return index;
    }
    const std::vector<std::size_t> picked =
        sample_row_indices(out_rows, kWeightRows, step_seed(step), stream);
    index.assign(picked.begin(), picked.end());
    return index;
}

at::Tensor DistributionProfiler::sampled_rows(const at::Tensor& w, std::int64_t step,
                                              std::uint64_t stream) const {
    // Every format scales each output row on its own (a row scale, or groups within the row), so
    // the sampled rows are quantized exactly as in the whole matrix: only they are gathered (on the
    // weight's device) and quantized, which bounds the cost per layer however wide the layer is.
    const auto out_rows = std::size_t(w.size(0));
    at::Tensor rows = w.detach().reshape({w.size(0), -1});
    if (out_rows > kWeightRows)
        rows = rows.index_select(0, index_on(sampled_row_indices(out_rows, step, stream), w.device()));
    return rows;
}

DistributionProfiler::OutputMeasure DistributionProfiler::sampled_output(const at::Tensor& w,
                                                                         const InputSample& input,
                                                                         std::int64_t step,
                                                                         std::uint64_t stream) const {
    const at::Tensor host = host_float(sampled_rows(w, step, stream));
    return measure_output(host.data_ptr<float>(), std::size_t(host.size(0)), std::size_t(host.size(1)),
                          input.tokens, input.count, int4_group_, quantize_inputs_);
}

void DistributionProfiler::observe_output_grad(std::int64_t step, int block, int layer,
                                               const at::Tensor& grad) {
    const std::string where = "observe_layer_output_grad: block " + std::to_string(block);
    if (block < 0 || std::size_t(block) >= blocks_.size())
        throw std::invalid_argument(where + ": unknown block");
    if (layer < 0 || std::size_t(layer) >= layers_[std::size_t(block)].size())
        throw std::invalid_argument(where + " has " + std::to_string(layers_[std::size_t(block)].size()) +
                                    " linear layers, not " + std::to_string(layer + 1));
    if (!due(step) || inputs_step_ != step || estimator_ != SnrEstimator::sample) return;
    const auto found = inputs_.find({block, layer});
    if (found == inputs_.end() || found->second.token_rows.empty()) return;  // no input seen: nothing to pair
    InputSample& s = found->second;
    const AgentBlock& owner = blocks_[std::size_t(block)];
    const std::size_t k = layers_[std::size_t(block)][std::size_t(layer)];
    const auto out_rows = std::size_t(output_rows(owner.streamed()[k], owner.stored_transposed(k)).size(0));
    const std::int64_t features = grad.dim() == 0 ? 1 : grad.size(grad.dim() - 1);
    if (features != std::int64_t(out_rows) || std::size_t(grad.numel()) != s.batch_tokens * out_rows)
        throw std::invalid_argument(where + " layer " + std::to_string(layer) + ": the gradient has " +
                                    std::to_string(grad.numel()) + " elements of " +
                                    std::to_string(features) + " features; the layer's output is " +
                                    std::to_string(s.batch_tokens) + " tokens x " + std::to_string(out_rows));
    const std::vector<std::int64_t> rows =
        sampled_row_indices(out_rows, step, stream_of(block, std::size_t(layer), false));
    const at::Tensor picked = grad.detach()
                                  .reshape({std::int64_t(s.batch_tokens), std::int64_t(out_rows)})
                                  .index_select(0, index_on(s.token_rows, grad.device()))
                                  .index_select(1, index_on(rows, grad.device()));
    if (s.on_device) {
        s.device_grad = picked;  // a gathered copy, reduced with the errors in finish()
        return;
    }
    const at::Tensor host = host_float(picked);
    s.grad.assign(host.data_ptr<float>(), host.data_ptr<float>() + host.numel());
}

PerFormat DistributionProfiler::block_loss(int block,
                                           const std::vector<const OutputMeasure*>& measures) const {
    const auto& layers = layers_[std::size_t(block)];
    PerFormat delta = kNoSnr;
    for (std::size_t f = 0; f < kLowFormatsCheapestFirst.size(); ++f) {
        double sum = 0;
        for (std::size_t l = 0; l < layers.size(); ++l) {
            const auto in = inputs_.find({block, int(l)});
            const OutputMeasure* m = measures[l];
            // Every layer or none: a block's estimate without one of its layers would understate it.
            if (!m || in == inputs_.end()) return kNoSnr;
            const InputSample& s = in->second;
            const bool reduced = !m->grad_dot.empty();  // the device path's sums
            if (!reduced && s.grad.size() != s.count * m->rows) return kNoSnr;
            const AgentBlock& owner = blocks_[std::size_t(block)];
            const auto rows_total = std::size_t(
                output_rows(owner.streamed()[layers[l]], owner.stored_transposed(layers[l])).size(0));
            const auto n = double(s.batch_tokens);
            sum += reduced ? loss_change_from_token_sums(m->grad_dot[f].data(), m->grad_squares[f].data(),
                                                         s.count, m->rows, rows_total, n)
                           : loss_change_estimate(m->error[f].data(), s.grad.data(), s.count, m->rows,
                                                  rows_total, n);
        }
        delta[std::size_t(kLowFormatsCheapestFirst[f])] = sum;
    }
    return delta;
}

std::map<std::pair<int, int>, DistributionProfiler::OutputMeasure> DistributionProfiler::device_measures(
    std::int64_t step) const {
    std::vector<std::pair<int, int>> layers;  // the layers measured, in the order of their sums
    std::vector<at::Tensor> sums;
    std::vector<std::size_t> rows;  // their sampled output rows
    for (const auto& [key, s] : inputs_) {
        if (inputs_step_ != step || !s.on_device || s.count == 0) continue;
        const auto [b, l] = key;
        const std::size_t k = layers_[std::size_t(b)][std::size_t(l)];
        const at::Tensor w =
            output_rows(blocks_[std::size_t(b)].streamed()[k], blocks_[std::size_t(b)].stored_transposed(k));
        if (w.dim() < 2 || w.numel() == 0) continue;
        const c10::Device device = s.device_tokens.device();
        const DeviceOutputErrors errors =
            s.device_errors.error.defined()
                ? s.device_errors
                : device_output_errors(
                      to_device(sampled_rows(w, step, stream_of(b, std::size_t(l), false)), device),
                      s.device_tokens, int4_group_, quantize_inputs_);
        sums.push_back(
            to_device(device_output_sums(errors, s.device_grad), sums.empty() ? device : sums[0].device()));
        layers.push_back(key);
        rows.push_back(std::size_t(errors.error.size(2)));
    }
    std::map<std::pair<int, int>, OutputMeasure> out;
    if (sums.empty()) return out;
    // The one copy to the host (and the one wait for the device) of the step's profiling.
    const at::Tensor host = at::cat(sums).to(at::kCPU).contiguous();
    const double* v = host.data_ptr<double>();
    constexpr std::size_t formats = kLowFormatsCheapestFirst.size();
    for (std::size_t i = 0; i < layers.size(); ++i) {
        const InputSample& s = inputs_.at(layers[i]);
        OutputMeasure& m = out[layers[i]];
        m.rows = rows[i];
        const std::size_t t = s.count;
        for (std::size_t f = 0; f < formats; ++f) {
            m.snr[std::size_t(kLowFormatsCheapestFirst[f])] = output_snr_db_of_powers(v[0], v[1 + f]);
            if (!s.device_grad.defined()) continue;
            const double* dot = v + 1 + formats + f * t;
            const double* squares = dot + formats * t;
            m.grad_dot.emplace_back(dot, dot + t);
            m.grad_squares.emplace_back(squares, squares + t);
        }
        v += device_sums_size(t, s.device_grad.defined());
    }
    return out;
}

std::vector<BlockSnr> DistributionProfiler::finish(std::int64_t step) {
    std::vector<BlockSnr> out(blocks_.size());
    loss_estimates_.clear();
    std::vector<OutputMeasure> measured;  // this block's layers' output measures, when taken
    std::vector<const OutputMeasure*> measures;
    std::map<std::pair<int, int>, OutputMeasure> on_device = device_measures(step);
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        out[b].block_id = int(b);
        out[b].snr_db = kNoSnr;
        measured.assign(layers_[b].size(), OutputMeasure{});
        measures.assign(layers_[b].size(), nullptr);
        for (std::size_t l = 0; l < layers_[b].size(); ++l) {
            const std::size_t k = layers_[b][l];
            // The master where the runtime names it: the parameter may hold a BF16 compute copy (the
            // weights scope) or nothing at all (a block block-swap has released).
            const at::Tensor* master = masters_ ? masters_(b, k) : nullptr;
            const at::Tensor w =
                output_rows(master ? *master : blocks_[b].streamed()[k], blocks_[b].stored_transposed(k));
            if (w.numel() == 0) continue;
            const std::uint64_t stream = stream_of(int(b), l, false);
            const auto in = inputs_step_ == step ? inputs_.find({int(b), int(l)}) : inputs_.end();
            InputSample* input = in != inputs_.end() ? &in->second : nullptr;
            FormatSnr snr{};
            const auto device = on_device.find({int(b), int(l)});
            if (input && input->output.valid()) {
                measured[l] = input->output.get();  // measured on the worker; waits if still running
            } else if (device != on_device.end()) {
                measured[l] = std::move(device->second);
            } else if (estimator_ == SnrEstimator::sample && input && input->count > 0 && w.dim() >= 2) {
                measured[l] = sampled_output(w, *input, step, stream);
            } else {
                const at::Tensor host = host_float(w);  // once per layer, for the profile and every format
                const TensorProfile weight = profile(host, false, step, stream);
                for (Precision p : kLowFormatsCheapestFirst)
                    snr[std::size_t(p)] = layer_snr(p, weight, input);
            }
            if (measured[l].rows > 0) {
                snr = measured[l].snr;
                measures[l] = &measured[l];
            }
            for (Precision p : kLowFormatsCheapestFirst) {
                double& worst = out[b].snr_db[std::size_t(p)];
                worst = std::isnan(worst) ? snr[std::size_t(p)] : std::min(worst, snr[std::size_t(p)]);
            }
        }
        const PerFormat delta = block_loss(int(b), measures);
        if (std::isfinite(delta[std::size_t(Precision::int8)])) loss_estimates_.push_back({int(b), delta});
    }
    inputs_.clear();
    inputs_step_ = -1;
    return out;
}

}  // namespace sp::agent::detail
