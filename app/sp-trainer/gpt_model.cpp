#include "gpt_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <utility>

namespace sp::trainer {
namespace {

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

    // `observe(layer, input)`, when set, sees the input of each linear layer, in parameter order.
    torch::Tensor forward(const torch::Tensor& x,
                          const std::function<void(int, const at::Tensor&)>& observe = {}) {
        const auto batch = x.size(0), time = x.size(1), channels = x.size(2);
        auto seen = [&](int layer, const torch::Tensor& input) {
            if (observe) observe(layer, input.detach());
            return input;
        };
        // [B, T, 3, H, hd] -> [3, B, H, T, hd]
        const auto qkv =
            qkv_(seen(0, ln_attn_(x))).view({batch, time, 3, heads_, head_dim_}).permute({2, 0, 3, 1, 4});
        const auto q = qkv[0], k = qkv[1], v = qkv[2];
        auto scores = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim_)));
        scores = scores.masked_fill(causal_mask_.slice(0, 0, time).slice(1, 0, time),
                                    -std::numeric_limits<float>::infinity());
        const auto attended = torch::matmul(torch::softmax(scores, -1), v);  // [B, H, T, hd]
        auto h = x + attn_out_(seen(1, attended.transpose(1, 2).reshape({batch, time, channels})));
        return h + mlp_out_(seen(3, torch::gelu(mlp_in_(seen(2, ln_mlp_(h))))));
    }

    // Outlier features, function-preserving: value channel c (row 2d + c of qkv, and its bias) is scaled
    // by 1/s and input column c of attn_out by s. Attention is linear in v, so attn_out sees channel c
    // divided by s and multiplies it back: the same function (up to rounding), but attn_out's weight
    // rows now each hold `channels` entries s times larger than the rest.
    void plant_outliers(double s, int channels) {
        torch::NoGradGuard no_grad;
        const auto d = attn_out_->weight.size(0);
        for (int j = 0; j < channels; ++j) {
            const auto c = j * (d / channels);
            qkv_->weight[2 * d + c].div_(s);
            qkv_->bias[2 * d + c].div_(s);
            attn_out_->weight.select(1, c).mul_(s);
        }
    }

    // The projections that write into the residual stream (GPT-2 scales their init down).
    std::vector<torch::Tensor> residual_projections() const { return {attn_out_->weight, mlp_out_->weight}; }

  private:
    std::int64_t heads_, head_dim_;
    torch::nn::LayerNorm ln_attn_{nullptr}, ln_mlp_{nullptr};
    torch::nn::Linear qkv_{nullptr}, attn_out_{nullptr}, mlp_in_{nullptr}, mlp_out_{nullptr};
    torch::Tensor causal_mask_;
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
        if (!input_observer_) {
            x = m.block_list[b](x);
            continue;
        }
        x = m.block_list[b]->forward(
            x, [&](int layer, const at::Tensor& in) { input_observer_(int(b), layer, in); });
    }
    return m.lm_head(m.final_norm(x));
}

at::Tensor GptModel::loss(const at::Tensor& tokens, const at::Tensor& targets) {
    const auto logits = forward(tokens);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

at::Tensor GptModel::run_block(int block, const at::Tensor& x) {
    torch::NoGradGuard no_grad;
    return impl_->block_list.at(static_cast<std::size_t>(block))(x);
}

void GptModel::plant_outliers(int block, double scale) {
    if (!(scale > 0.0) || !std::isfinite(scale))
        throw std::invalid_argument("outlier scale must be finite and > 0");
    impl_->block_list.at(static_cast<std::size_t>(block))->plant_outliers(scale, kOutlierChannels);
}

std::vector<sp::agent::NamedModule> GptModel::named_blocks() const {
    std::vector<sp::agent::NamedModule> out;
    for (std::size_t i = 0; i < impl_->block_list.size(); ++i)
        out.emplace_back("blocks." + std::to_string(i), impl_->block_list[i].get());
    return out;
}

std::vector<at::Tensor> GptModel::parameters() const {
    return impl_->parameters();
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
    std::vector<torch::Tensor> all;
    std::unique_ptr<torch::optim::AdamW> optimizer;
};

AdamW::AdamW(const GptModel& model, double lr, double weight_decay) : impl_(std::make_unique<Impl>()) {
    std::vector<torch::Tensor> decay, no_decay;
    for (const auto& p : model.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
    impl_->all = model.parameters();
    auto options = [&](double wd) {
        return std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(lr).betas({0.9, 0.95}).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, options(weight_decay));
    groups.emplace_back(no_decay, options(0.0));
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
    torch::nn::utils::clip_grad_norm_(impl_->all, 1.0);
    impl_->optimizer->step();
}

}  // namespace sp::trainer
