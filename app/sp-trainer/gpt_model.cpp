#include "gpt_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "sp/agent/rounding.h"
#include "sp/quantize.h"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <utility>

namespace sp::trainer {
namespace {

using sp::agent::rounded_rows;  // the one rounding of activations and gradients (sp/agent/rounding.h)

// The identity forward; backward rounds the gradient arriving at a linear layer's output to the
// block's format, per token, as a low-precision backward pass feeds it to its matrix products.
struct RoundGradient : torch::autograd::Function<RoundGradient> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 std::int64_t format, std::int64_t int4_group) {
        ctx->saved_data["format"] = format;
        ctx->saved_data["int4_group"] = int4_group;
        return x.clone();
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto format = static_cast<Precision>(ctx->saved_data["format"].toInt());
        const auto group = static_cast<std::size_t>(ctx->saved_data["int4_group"].toInt());
        return {rounded_rows(grads[0], format, group), torch::Tensor(), torch::Tensor()};
    }
};

// One pre-norm transformer block. Its parameters are exactly what the agent routes as "blocks.<i>".
class BlockImpl : public torch::nn::Module {
  public:
    BlockImpl(int d_model, int heads, int seq_len) : heads_(heads), head_dim_(d_model / heads) {
        ln_attn_ = register_module("ln_attn", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})));
        qkv_ = register_module("qkv", torch::nn::Linear(d_model, 3 * d_model));
        attn_out_ = register_module("attn_out", torch::nn::Linear(d_model, d_model));
        ln_mlp_ = register_module("ln_mlp", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})));
        mlp_in_ = register_module("mlp_in", torch::nn::Linear(d_model, 4 * d_model));
        mlp_out_ = register_module("mlp_out", torch::nn::Linear(4 * d_model, d_model));
        // true above the diagonal: position t may not attend to positions after t. A buffer, not a
        // parameter, so the agent and the precision runtime never see it.
        causal_mask_ = register_buffer("causal_mask", torch::ones({seq_len, seq_len}, torch::kBool).triu(1));
    }

    // `observe(layer, input)`, when set, sees the input of each linear layer, in parameter order;
    // `observe_grad(layer, g)`, in the backward pass, the gradient of the loss at each one's output.
    // The block computes in the dtype of `x`: a parameter of another dtype is cast to it (an autograd
    // cast, so a trainable fp32 tensor still gets its gradient in fp32), which the weights scope's BF16
    // parameters never need.
    torch::Tensor forward(const torch::Tensor& x,
                          const std::function<void(int, const at::Tensor&)>& observe = {},
                          const std::function<void(int, const at::Tensor&)>& observe_grad = {}) {
        namespace F = torch::nn::functional;
        const auto batch = x.size(0), time = x.size(1), channels = x.size(2);
        const auto in_dtype = [&](const torch::Tensor& t) { return t.to(x.scalar_type()); };
        const auto norm = [&](torch::nn::LayerNorm& ln, const torch::Tensor& input) {
            return F::layer_norm(input, F::LayerNormFuncOptions({channels})
                                            .weight(in_dtype(ln->weight))
                                            .bias(in_dtype(ln->bias))
                                            .eps(ln->options.eps()));
        };
        // A linear layer as the block computes it: its input rounded to the block's format (and
        // seen by the profiler), the gradient at its output rounded; with adapters, plus the
        // low-rank update B·(A·x) on the unrounded input.
        auto linear = [&](int layer, torch::nn::Linear& base, const torch::Tensor& input) {
            if (observe) observe(layer, input.detach());
            auto out = in_compute_format_grad(
                F::linear(in_compute_format(input), in_dtype(base->weight), in_dtype(base->bias)));
            if (!adapter_a_.empty()) {
                const auto i = std::size_t(layer);
                out = out + F::linear(F::linear(input, in_dtype(adapter_a_[i])), in_dtype(adapter_b_[i]));
            }
            // The gradient at the layer's whole output, as it arrives (the base's share is rounded after
            // it): with adapters the frozen first block's base output alone needs none.
            if (observe_grad && out.requires_grad())
                out.register_hook([observe_grad, layer](const torch::Tensor& g) { observe_grad(layer, g); });
            return out;
        };
        // [B, T, 3, H, hd] -> [3, B, H, T, hd]
        const auto qkv = linear(0, qkv_, norm(ln_attn_, x))
                             .view({batch, time, 3, heads_, head_dim_})
                             .permute({2, 0, 3, 1, 4});
        const auto q = qkv[0], k = qkv[1], v = qkv[2];
        auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim_)));
        scores = scores.masked_fill(causal_mask_.slice(0, 0, time).slice(1, 0, time),
                                    -std::numeric_limits<float>::infinity());
        const auto attended = torch::matmul(torch::softmax(scores, -1), v);  // [B, H, T, hd]
        auto h = x + linear(1, attn_out_, attended.transpose(1, 2).reshape({batch, time, channels}));
        const auto hidden = torch::gelu(linear(2, mlp_in_, norm(ln_mlp_, h)));
        return h + linear(3, mlp_out_, hidden);
    }

    // Low-rank adapters on the four linear layers (sp-trainer --finetune-mode adapters): A (rank x
    // in) drawn N(0, 1/in), B (out x rank) zero, so the block computes what it did; the base
    // parameters are frozen. Registered after the base, so they are the block's own parameters.
    void add_adapters(int rank, at::Generator& generator) {
        torch::NoGradGuard no_grad;
        for (auto& p : parameters()) p.requires_grad_(false);
        const std::pair<const char*, torch::nn::Linear*> layers[] = {
            {"qkv", &qkv_}, {"attn_out", &attn_out_}, {"mlp_in", &mlp_in_}, {"mlp_out", &mlp_out_}};
        for (const auto& [name, layer] : layers) {
            const auto out = (*layer)->weight.size(0), in = (*layer)->weight.size(1);
            // Drawn on the CPU (the generator is a CPU one, so a run on CUDA starts from the same
            // adapters), then moved next to the weight.
            auto a = torch::empty({rank, in}, (*layer)->weight.options().device(torch::kCPU))
                         .normal_(0.0, 1.0 / std::sqrt(double(in)), generator)
                         .to((*layer)->weight.device());
            adapter_a_.push_back(register_parameter(std::string(name) + "_adapter_a", a));
            adapter_b_.push_back(
                register_parameter(std::string(name) + "_adapter_b", torch::zeros({out, rank}, a.options())));
        }
    }
    bool has_adapters() const { return !adapter_a_.empty(); }
    std::vector<torch::Tensor> adapters() const {
        std::vector<torch::Tensor> out;
        for (std::size_t i = 0; i < adapter_a_.size(); ++i) {
            out.push_back(adapter_a_[i]);
            out.push_back(adapter_b_[i]);
        }
        return out;
    }

    // Outlier features, function-preserving: in each of `channels` channels c (every d/channels-th),
    // whatever produces feature c of a linear layer's input is stored multiplied by s and the layer's
    // input column c divided by s, for three of the block's four linear layers: the LayerNorm gain
    // and bias before qkv and before mlp_in (large language models grow their outlier features
    // there), and the value row of qkv before attn_out (attention is linear in v). Those inputs then
    // hold `channels` features s times larger than the rest, and each layer divides them back: the
    // same function, and with s a power of two the same floating-point products, bit for bit.
    // (mlp_out's input comes out of a GELU, which no scale passes through.)
    void plant_outliers(double s, int channels) {
        planted_scale_ = s;
        planted_channels_ = channels;
        scale_planted_channels(s, /*grads=*/false);
    }

    // The optimizer steps the block as if nothing were planted (unplant, step, plant again). AdamW's
    // step is about lr per parameter whatever the parameter's size, so stepping the stored weights
    // would erode the plant within tens of steps (the shrunk attn_out columns grow back); in these
    // coordinates the planted run trains exactly as the unplanted one does. The gradients move by
    // the chain rule: dL/dW = dL/dW_stored * dW_stored/dW.
    void unplant_for_update() {
        if (planted_scale_ != 0.0) scale_planted_channels(1.0 / planted_scale_, /*grads=*/true);
    }
    void replant_after_update() {
        if (planted_scale_ != 0.0) scale_planted_channels(planted_scale_, /*grads=*/true);
    }
    // The projections that write into the residual stream (GPT-2 scales their init down).
    std::vector<torch::Tensor> residual_projections() const { return {attn_out_->weight, mlp_out_->weight}; }

    void set_compute_format(std::optional<Precision> p, std::size_t int4_group) {
        compute_format_ = p;
        int4_group_ = int4_group;
    }
    std::optional<Precision> compute_format() const { return compute_format_; }

  private:
    // A linear layer's input as the block's matrix products would take it: each token's features
    // (a row) rounded to the block's format with the core reference (INT8 and FP8 with a scale per
    // token, INT4 per group, BF16 per element). The gradient goes straight through.
    torch::Tensor in_compute_format(const torch::Tensor& input) const {
        if (!compute_format_) return input;
        torch::Tensor rounded;
        {
            torch::NoGradGuard no_grad;
            rounded = rounded_rows(input, *compute_format_, int4_group_);
        }
        return input + (rounded - input.detach());
    }
    // A linear layer's output, whose gradient the backward pass rounds to the block's format.
    torch::Tensor in_compute_format_grad(const torch::Tensor& output) const {
        if (!compute_format_ || !output.requires_grad()) return output;
        return RoundGradient::apply(output, static_cast<std::int64_t>(*compute_format_),
                                    static_cast<std::int64_t>(int4_group_));
    }

    // The producers of each planted feature times `f`, the consuming columns divided by it; their
    // gradients (when `grads`) the other way, by the chain rule.
    void scale_planted_channels(double f, bool grads) {
        torch::NoGradGuard no_grad;
        auto rescale = [&](const torch::Tensor& param, std::int64_t dim, std::int64_t index, double by) {
            param.select(dim, index).mul_(by);
            if (grads && param.grad().defined()) param.grad().select(dim, index).div_(by);
        };
        const auto d = attn_out_->weight.size(0);
        for (int j = 0; j < planted_channels_; ++j) {
            const auto c = j * (d / planted_channels_);
            for (const auto& [norm, consumer] : {std::pair{ln_attn_, qkv_}, std::pair{ln_mlp_, mlp_in_}}) {
                rescale(norm->weight, 0, c, f);
                rescale(norm->bias, 0, c, f);
                rescale(consumer->weight, 1, c, 1.0 / f);
            }
            rescale(qkv_->weight, 0, 2 * d + c, f);  // the value row
            rescale(qkv_->bias, 0, 2 * d + c, f);
            rescale(attn_out_->weight, 1, c, 1.0 / f);
        }
    }

    std::int64_t heads_, head_dim_;
    std::optional<Precision> compute_format_;  // unset: inputs stay fp32
    std::size_t int4_group_ = 0;
    double planted_scale_ = 0.0;  // 0: nothing planted
    int planted_channels_ = 0;
    torch::nn::LayerNorm ln_attn_{nullptr}, ln_mlp_{nullptr};
    torch::nn::Linear qkv_{nullptr}, attn_out_{nullptr}, mlp_in_{nullptr}, mlp_out_{nullptr};
    torch::Tensor causal_mask_;
    std::vector<torch::Tensor> adapter_a_, adapter_b_;  // per linear layer, in layer order; empty: none
};
TORCH_MODULE(Block);

}  // namespace

struct GptModel::Impl : torch::nn::Module {
    torch::nn::Embedding token_embedding{nullptr}, position_embedding{nullptr};
    torch::nn::ModuleList blocks{nullptr};
    std::vector<Block> block_list;  // typed handles to the same modules
    torch::nn::LayerNorm final_norm{nullptr};
    torch::nn::Linear lm_head{nullptr};
    torch::Device device{torch::kCPU};
};

GptModel::GptModel(const GptShape& shape, std::uint64_t seed, const std::string& device)
    : shape_(shape), impl_(std::make_unique<Impl>()) {
    if (shape.d_model % shape.heads != 0) throw std::invalid_argument("d_model must be divisible by heads");
    auto& m = *impl_;
    m.token_embedding =
        m.register_module("token_embedding", torch::nn::Embedding(shape.vocab, shape.d_model));
    m.position_embedding =
        m.register_module("position_embedding", torch::nn::Embedding(shape.seq_len, shape.d_model));
    m.blocks = m.register_module("blocks", torch::nn::ModuleList());
    for (int i = 0; i < shape.blocks; ++i) {
        m.block_list.emplace_back(shape.d_model, shape.heads, shape.seq_len);
        m.blocks->push_back(m.block_list.back());
    }
    m.final_norm =
        m.register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({shape.d_model})));
    m.lm_head = m.register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(shape.d_model, shape.vocab).bias(false)));

    // Our own generator rather than the global one: the initial weights depend on the seed only,
    // which is what the calibration cache's model identity promises.
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    torch::NoGradGuard no_grad;
    for (auto& named : m.named_parameters()) {
        auto& p = named.value();
        if (p.dim() >= 2) {
            p.normal_(0.0, 0.02, generator);  // linear and embedding weights
        } else if (named.key().size() >= 4 && named.key().compare(named.key().size() - 4, 4, "bias") == 0) {
            p.zero_();  // linear and LayerNorm biases
        }               // LayerNorm gains keep LibTorch's deterministic 1
    }
    const double residual_scale = 1.0 / std::sqrt(2.0 * shape.blocks);
    for (auto& block : m.block_list)
        for (auto& w : block->residual_projections()) w.mul_(residual_scale);

    m.device = torch::Device(device);
    m.to(m.device);
}

GptModel::~GptModel() = default;

at::Tensor GptModel::embed(const at::Tensor& tokens) {
    auto& m = *impl_;
    const auto positions =
        torch::arange(tokens.size(1), torch::TensorOptions().dtype(torch::kLong).device(m.device));
    return m.token_embedding(tokens) + m.position_embedding(positions);
}

at::Tensor GptModel::forward(const at::Tensor& tokens) {
    if (tokens.size(1) > shape_.seq_len) throw std::invalid_argument("sequence longer than seq_len");
    auto& m = *impl_;
    auto x = embed(tokens);
    for (std::size_t b = 0; b < m.block_list.size(); ++b) {
        // The block as a function of its input; with block-swap it runs again in the backward pass
        // (sp::agent::run_swapped_block), so it holds its own copies of what it needs.
        std::function<void(int, const at::Tensor&)> observe, observe_grad;
        if (input_observer_)
            observe = [observer = input_observer_, block = int(b)](int layer, const at::Tensor& in) {
                observer(block, layer, in);
            };
        if (input_observer_ && grad_observer_)
            observe_grad = [observer = grad_observer_, block = int(b)](int layer, const at::Tensor& g) {
                observer(block, layer, g);
            };
        const sp::agent::BlockForward run = [block = m.block_list[b].ptr(), bf16 = weights_scope_, observe,
                                             observe_grad](const at::Tensor& in, bool recompute) {
            // The weights scope computes in BF16: the block's input, and so its whole computation.
            const at::Tensor out = block->forward(bf16 ? in.to(torch::kBFloat16) : in,
                                                  recompute ? decltype(observe){} : observe, observe_grad);
            return out.to(in.scalar_type());
        };
        x = block_runner_ ? block_runner_(int(b), x, run) : run(x, false);
    }
    return m.lm_head(m.final_norm(x));
}

at::Tensor GptModel::loss(const at::Tensor& tokens, const at::Tensor& targets) {
    const auto logits = forward(tokens);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

at::Tensor GptModel::run_block(int block, const at::Tensor& x, std::optional<Precision> compute_format) {
    torch::NoGradGuard no_grad;
    auto& b = impl_->block_list.at(static_cast<std::size_t>(block));
    if (!compute_format) return b(x);
    const auto before = b->compute_format();
    b->set_compute_format(compute_format, int4_group_);
    auto out = b(x);
    b->set_compute_format(before, int4_group_);
    return out;
}

void GptModel::plant_outliers(int block, double scale) {
    if (!(scale > 0.0) || !std::isfinite(scale))
        throw std::invalid_argument("outlier scale must be finite and > 0");
    impl_->block_list.at(static_cast<std::size_t>(block))->plant_outliers(scale, kOutlierChannels);
}

void GptModel::set_compute_formats(const std::vector<Precision>& formats, std::size_t int4_group) {
    if (formats.size() != impl_->block_list.size())
        throw std::invalid_argument("set_compute_formats: " + std::to_string(formats.size()) +
                                    " formats for " + std::to_string(impl_->block_list.size()) + " blocks");
    int4_group_ = int4_group;
    for (std::size_t b = 0; b < formats.size(); ++b)
        impl_->block_list[b]->set_compute_format(weights_scope_ ? std::nullopt : std::optional(formats[b]),
                                                 int4_group);
}

void GptModel::unplant_for_update() {
    for (auto& block : impl_->block_list) block->unplant_for_update();
}

void GptModel::replant_after_update() {
    for (auto& block : impl_->block_list) block->replant_after_update();
}

void GptModel::enable_adapters(int rank, std::uint64_t seed) {
    if (rank < 1) throw std::invalid_argument("adapter rank must be >= 1");
    if (adapters_) throw std::logic_error("enable_adapters: the adapters are there already");
    {
        torch::NoGradGuard no_grad;
        for (auto& p : impl_->parameters()) p.requires_grad_(false);  // the whole pretrained base
    }
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0xada97e5ULL);
    for (auto& block : impl_->block_list) block->add_adapters(rank, generator);
    adapters_ = true;
}

std::vector<sp::agent::AgentBlock> GptModel::agent_blocks() const {
    std::vector<sp::agent::AgentBlock> blocks = sp::agent::blocks_from_modules(named_blocks());
    if (!adapters_) return blocks;
    // The adapters train (the agent reads their gradients); the frozen base is what is stored.
    for (sp::agent::AgentBlock& b : blocks) {
        sp::agent::AgentBlock split;
        split.id = b.id;
        split.name = b.name;
        for (std::size_t k = 0; k < b.params.size(); ++k) {
            const bool adapter = b.param_names[k].find("_adapter_") != std::string::npos;
            (adapter ? split.param_names : split.stored_names).push_back(b.param_names[k]);
            (adapter ? split.params : split.stored).push_back(b.params[k]);
        }
        b = std::move(split);
    }
    return blocks;
}

std::vector<sp::agent::NamedModule> GptModel::named_blocks() const {
    std::vector<sp::agent::NamedModule> out;
    for (std::size_t i = 0; i < impl_->block_list.size(); ++i)
        out.emplace_back("blocks." + std::to_string(i), impl_->block_list[i].get());
    return out;
}

std::vector<at::Tensor> GptModel::parameters() const {
    std::vector<at::Tensor> trainable;
    for (const auto& p : impl_->parameters())
        if (p.requires_grad()) trainable.push_back(p);
    return trainable;
}

std::int64_t GptModel::parameter_count() const {
    std::int64_t n = 0;
    for (const auto& p : impl_->parameters()) n += p.numel();
    return n;
}

std::int64_t GptModel::block_parameter_count() const {
    std::int64_t n = 0;
    for (const auto& block : impl_->block_list)
        for (const auto& p : block->parameters()) n += p.numel();
    return n;
}

struct AdamW::Impl {
    GptModel* model = nullptr;
    std::vector<torch::Tensor> all;
    std::unique_ptr<torch::optim::AdamW> optimizer;
};

AdamW::AdamW(GptModel& model, double lr, double weight_decay) : impl_(std::make_unique<Impl>()) {
    impl_->model = &model;
    std::vector<torch::Tensor> decay, no_decay;
    for (const auto& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    impl_->all = model.parameters();
    auto options = [&](double wd) {
        return std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(lr).betas({0.9, 0.95}).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, options(weight_decay));
    if (!no_decay.empty()) groups.emplace_back(no_decay, options(0.0));  // adapters: matrices only
    impl_->optimizer =
        std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(lr));
}

AdamW::~AdamW() = default;

void AdamW::zero_grad() {
    impl_->optimizer->zero_grad();
}

void AdamW::set_learning_rate(double lr) {
    for (auto& group : impl_->optimizer->param_groups())
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

void AdamW::step() {
    // Clipping here, after the agent has read the gradients: the agent sees the raw gradients,
    // the update is kept bounded in the first, noisy steps at the demo's fairly high learning rate.
    // Planted outliers are taken out for the step (clipping included), so that they never change
    // how the model trains (GptModel::plant_outliers).
    // With adapters the planted base is frozen: there is nothing to unplant.
    const bool planted_base_steps = !impl_->model->adapters();
    if (planted_base_steps) impl_->model->unplant_for_update();
    torch::nn::utils::clip_grad_norm_(impl_->all, 1.0);
    impl_->optimizer->step();
    if (planted_base_steps) impl_->model->replant_after_update();
}

}  // namespace sp::trainer

namespace sp::trainer {
namespace {

constexpr const char* kShapeKey = "sp_trainer_shape";  // int64 [vocab, blocks, d_model, heads, seq_len]
constexpr const char* kModelKey = "model";
constexpr const char* kOptimizerKey = "optimizer";
// Present (a 1) when the state is an adapters fine-tune's: the optimizer state is then the adapters',
// which a run never takes (a run with adapters gets fresh ones; a full run has none).
constexpr const char* kAdaptersKey = "sp_trainer_adapters";

torch::serialize::InputArchive open_checkpoint(const std::string& path, torch::Device device) {
    torch::serialize::InputArchive archive;
    try {
        archive.load_from(path, device);
    } catch (const c10::Error&) {
        throw CheckpointError("--init-checkpoint: '" + path + "' is not an sp-trainer checkpoint");
    }
    return archive;
}

// Every flag whose value differs between the checkpoint and this run, e.g. "--blocks 8 (this run 4)".
std::string shape_mismatch(const torch::Tensor& saved, const GptShape& run) {
    const std::int64_t now[] = {run.vocab, run.blocks, run.d_model, run.heads, run.seq_len};
    const char* flags[] = {"vocab", "--blocks", "--d-model", "--heads", "--seq-len"};
    std::string out;
    for (int i = 0; i < 5; ++i) {
        const std::int64_t was = saved[i].item<std::int64_t>();
        if (was != now[i])
            out += std::string(out.empty() ? "" : ", ") + flags[i] + " " + std::to_string(was) +
                   " (this run " + std::to_string(now[i]) + ")";
    }
    return out;
}

}  // namespace

void save_checkpoint(const std::string& path, GptModel& model, const AdamW& optimizer) {
    const GptShape& s = model.shape();
    torch::serialize::OutputArchive archive, weights, state;
    archive.write(kShapeKey,
                  torch::tensor({std::int64_t(s.vocab), std::int64_t(s.blocks), std::int64_t(s.d_model),
                                 std::int64_t(s.heads), std::int64_t(s.seq_len)}));
    model.unplant_for_update();  // the model's function, whatever a run planted in it
    for (const auto& named : model.impl_->named_parameters()) weights.write(named.key(), named.value());
    model.replant_after_update();
    optimizer.impl_->optimizer->save(state);
    archive.write(kModelKey, weights);
    archive.write(kOptimizerKey, state);
    if (model.adapters()) archive.write(kAdaptersKey, torch::tensor(std::int64_t(1)));
    try {
        archive.save_to(path);
    } catch (const c10::Error& e) {
        throw std::runtime_error("--save-checkpoint: cannot write '" + path +
                                 "': " + e.what_without_backtrace());
    }
}

void load_model_checkpoint(const std::string& path, GptModel& model) {
    torch::serialize::InputArchive archive = open_checkpoint(path, torch::kCPU);
    torch::Tensor shape;
    if (!archive.try_read(kShapeKey, shape) || shape.numel() != 5)
        throw CheckpointError("--init-checkpoint: '" + path + "' is not an sp-trainer checkpoint");
    if (const std::string mismatch = shape_mismatch(shape, model.shape()); !mismatch.empty())
        throw CheckpointError("--init-checkpoint: '" + path + "' holds another model: " + mismatch);
    torch::serialize::InputArchive weights;
    if (!archive.try_read(kModelKey, weights))
        throw CheckpointError("--init-checkpoint: '" + path + "' has no weights");
    torch::NoGradGuard no_grad;
    // Read into host copies, then copy into the parameters in place: they keep their tensors, device
    // and storage (an optimizer built on them keeps working).
    for (auto& named : model.impl_->named_parameters()) {
        if (named.key().find("_adapter_") != std::string::npos) continue;  // adapters start afresh
        torch::Tensor value;
        if (!weights.try_read(named.key(), value) || value.sizes() != named.value().sizes())
            throw CheckpointError("--init-checkpoint: '" + path + "' lacks " + named.key() +
                                  " or has another shape");
        named.value().copy_(value);
    }
}

void load_optimizer_checkpoint(const std::string& path, AdamW& optimizer) {
    if (optimizer.impl_->model->adapters()) return;  // a new optimizer for the adapters alone
    torch::serialize::InputArchive archive = open_checkpoint(path, optimizer.impl_->model->impl_->device);
    torch::Tensor adapters;
    if (archive.try_read(kAdaptersKey, adapters)) return;  // the adapters' state: nothing for this run
    torch::serialize::InputArchive state;
    if (!archive.try_read(kOptimizerKey, state))
        throw CheckpointError("--init-checkpoint: '" + path + "' has no optimizer state");
    try {
        optimizer.impl_->optimizer->load(state);
    } catch (const c10::Error& e) {
        throw CheckpointError(
            "--init-checkpoint: '" + path +
            "': its optimizer state does not fit this model: " + e.what_without_backtrace());
    }
}

}  // namespace sp::trainer
