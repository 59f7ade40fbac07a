#pragma once
// A small GPT-style decoder-only transformer (byte-level, vocab 256) written with the LibTorch C++
// frontend, and the AdamW optimizer that trains it. The implementation lives in gpt_model.cpp, the
// only file of sp-trainer that includes <torch/torch.h>: everything here is declared with the
// narrow ATen headers so that main.cpp compiles in a fraction of the time.
//
// Structure: token embedding + learned positional embedding -> N pre-norm blocks
// (LayerNorm -> causal multi-head self-attention -> residual; LayerNorm -> MLP 4d with GELU ->
// residual) -> final LayerNorm -> LM head. The N blocks are what Selective Precision routes; the
// embeddings, the final norm and the head stay fp32 and unrouted.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sp/agent/block.h"
#include "sp/agent/swapped_block.h"
#include "sp/quantize.h"

namespace sp::trainer {

struct GptShape {
    int vocab = 256;  // byte-level
    int blocks = 4;
    int d_model = 64;
    int heads = 4;
    int seq_len = 64;  // the longest sequence the positional embedding covers
};

class GptModel {
  public:
    // Initial weights are a function of `shape` and `seed` alone (GPT-2 style normal(0, 0.02) init,
    // residual projections scaled by 1/sqrt(2 * blocks)), drawn on the CPU and then moved to
    // `device` ("cpu" or "cuda"), so the same seed gives the same model on either device.
    GptModel(const GptShape& shape, std::uint64_t seed, const std::string& device);
    ~GptModel();
    GptModel(const GptModel&) = delete;
    GptModel& operator=(const GptModel&) = delete;

    const GptShape& shape() const { return shape_; }

    // While set, forward() hands the input of each block's linear layers to `observer(block, layer,
    // input)` (layers in parameter order: qkv, attn_out, mlp_in, mlp_out). Unset: an empty function.
    using LayerInputObserver = std::function<void(int block, int layer, const at::Tensor& input)>;
    void set_layer_input_observer(LayerInputObserver observer) { input_observer_ = std::move(observer); }
    // While set (with an input observer), the forward passes register hooks that hand the gradient of
    // the loss at each of those layers' outputs to `observer(block, layer, grad)` during backward, before
    // the compute format rounds it. Hooks already registered keep the observer they were given.
    void set_layer_output_grad_observer(LayerInputObserver observer) { grad_observer_ = std::move(observer); }

    // While set, forward() runs each block through `runner(block, x, forward)` rather than
    // `forward(x, false)`: block-swap streaming runs it with sp::agent::run_swapped_block, which
    // uploads the block's weights around it and, when the slots hold the weights, runs it again in the
    // backward pass. Unset: an empty function. run_block() does not use it: calibration, its one user,
    // runs before the runtime exists.
    using BlockRunner =
        std::function<at::Tensor(int block, const at::Tensor& x, const sp::agent::BlockForward& forward)>;
    void set_block_runner(BlockRunner runner) { block_runner_ = std::move(runner); }

    // tokens: int64 [B, T] with T <= seq_len. Returns logits [B, T, vocab].
    at::Tensor forward(const at::Tensor& tokens);
    // Mean cross-entropy of predicting `targets` (int64 [B, T]) from `tokens`; differentiable.
    at::Tensor loss(const at::Tensor& tokens, const at::Tensor& targets);

    // The pieces calibration needs: the embedding output (the activation entering block 0) and one
    // block applied to an activation [B, T, d_model]. Neither records autograd history.
    at::Tensor embed(const at::Tensor& tokens);
    // run_block with `compute_format` rounds the block's linear inputs to it for this call only.
    at::Tensor run_block(int block, const at::Tensor& x, std::optional<Precision> compute_format = {});

    // Plants outlier features in `block` (sp-trainer --outlier-block): kOutlierChannels value channels
    // (every d_model/kOutlierChannels-th) stored scaled down by `scale` and the matching input columns
    // of the attention output projection scaled up by it, which leaves the block's function unchanged
    // (bit for bit when `scale` is a power of two). Call before training starts, once per block.
    static constexpr int kOutlierChannels = 4;
    void plant_outliers(int block, double scale);
    // The plant as the optimizer must not see it: AdamW (below) steps the weights in unplanted
    // coordinates, parameters and gradients, and plants them again afterwards, so the planted ratio
    // holds for the whole run and training follows the unplanted model's. No-ops without a plant.
    void unplant_for_update();
    void replant_after_update();

    // The format each block computes in (one per block): its linear layers' inputs are rounded to it
    // per token, as the runtime rounds its weights, and so are the gradients at their outputs. In the
    // "weights" precision scope (set_weights_scope) nothing is rounded: every block computes in BF16
    // (its input is cast to BF16 at its entry and its output back at its exit, its parameters are BF16
    // or cast to it), whatever its format, and only its weights are stored in the format.
    // std::invalid_argument for another count.
    void set_compute_formats(const std::vector<Precision>& formats, std::size_t int4_group);
    void set_weights_scope(bool weights) { weights_scope_ = weights; }
    std::size_t int4_group() const { return int4_group_; }

    // The routed blocks as modules: "blocks.0" .. "blocks.<N-1>".
    std::vector<sp::agent::NamedModule> named_blocks() const;
    // The routed blocks as the agent registers them: every parameter, or with adapters the adapters
    // as the parameters (their gradients are read) and the frozen base as the stored weights.
    std::vector<sp::agent::AgentBlock> agent_blocks() const;

    // A fine-tune with low-rank adapters (sp-trainer --finetune-mode adapters): every parameter so
    // far (the pretrained base: embeddings, blocks, head) is frozen, and each block's four linear
    // layers get trainable adapters of `rank` (B zero: the model's function is unchanged). Call it
    // after loading a checkpoint and planting outliers.
    void enable_adapters(int rank, std::uint64_t seed);
    bool adapters() const { return adapters_; }

    std::int64_t parameter_count() const;
    std::int64_t block_parameter_count() const;  // the routed part

    // Every trainable parameter (for the optimizer): all of them, or with adapters the adapters.
    std::vector<at::Tensor> parameters() const;

  private:
    friend void save_checkpoint(const std::string&, GptModel&, const class AdamW&);
    friend void load_model_checkpoint(const std::string&, GptModel&);
    friend void load_optimizer_checkpoint(const std::string&, class AdamW&);
    struct Impl;
    GptShape shape_;
    std::unique_ptr<Impl> impl_;
    bool adapters_ = false;
    LayerInputObserver input_observer_;
    LayerInputObserver grad_observer_;
    bool weights_scope_ = false;
    BlockRunner block_runner_;
    std::size_t int4_group_ = kDefaultInt4GroupSize;
};

// torch::optim::AdamW over all of the model's parameters. Weight decay applies to matrices
// (linear and embedding weights) only, as usual for transformers: decaying LayerNorm gains and
// biases towards zero only hurts.
class AdamW {
  public:
    // Keeps `model` to step planted outliers in unplanted coordinates (GptModel::unplant_for_update).
    AdamW(GptModel& model, double lr, double weight_decay = 0.01);
    ~AdamW();
    AdamW(const AdamW&) = delete;
    AdamW& operator=(const AdamW&) = delete;

    void zero_grad();
    void step();
    void set_learning_rate(double lr);

  private:
    friend void save_checkpoint(const std::string&, GptModel&, const AdamW&);
    friend void load_optimizer_checkpoint(const std::string&, AdamW&);
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Checkpoints (sp-trainer --save-checkpoint, --init-checkpoint): one LibTorch archive holding the
// model's shape, its weights in unplanted coordinates (a checkpoint is the model's function; a run
// that loads it plants its own outliers) and the optimizer's state. A file that is not such an
// archive, or one of another shape, is a CheckpointError whose message names the mismatching flags.
class CheckpointError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Writes `path` (replaced if it exists). The weights saved are the model's parameters as they are:
// call it while they hold the fp32 masters (ReferencePrecisionRuntime::before_optimizer_step).
void save_checkpoint(const std::string& path, GptModel& model, const AdamW& optimizer);
// The weights, into the model's parameters in place (the same tensors, so an optimizer built on them
// keeps working): before outliers are planted and before the runtime takes its masters.
void load_model_checkpoint(const std::string& path, GptModel& model);
// The optimizer's state (AdamW's moments and step counts).
void load_optimizer_checkpoint(const std::string& path, AdamW& optimizer);

}  // namespace sp::trainer
