#pragma once
// The blocks the agent routes, as LibTorch sees them: a name and the block's parameter tensors.
// Only <ATen/core/Tensor.h> here: <torch/torch.h> costs seconds per file that includes it.
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "sp/layout.h"

namespace torch::nn {
class Module;
}

namespace sp::agent {

struct AgentBlock {
    int id = 0;                            // dense 0..n-1 in registration order
    std::string name;                      // e.g. "blocks.3"
    std::vector<std::string> param_names;  // as named_parameters() gives them, relative to the block
    std::vector<at::Tensor> params;        // the parameters themselves (shared storage, not copies)
    // The weights stored and streamed in the block's format, when they are not the trainable
    // parameters: a fine-tune with low-rank adapters (sp-trainer --finetune-mode adapters) trains
    // `params` (the adapters, whose gradients the agent reads) and streams these frozen base
    // weights, which the layout's bytes, the SNR profiling, calibration and the reference runtime
    // use. Empty: the parameters are what is stored (streamed() returns them).
    std::vector<std::string> stored_names{};
    std::vector<at::Tensor> stored{};
    const std::vector<at::Tensor>& streamed() const { return stored.empty() ? params : stored; }
    // A planted fault for experiments (sp-trainer --harsh-block), 0 for none: this block's "INT8"
    // becomes a deliberately harsh quantizer, stochastic ternary rounding onto a grid whose step is
    // this many times each row's absmax. Unbiased, but with noise far above the weights themselves,
    // fresh at every step, so training cannot learn around it. Calibration and the runtime both
    // honour it; BF16 is unaffected.
    double harsh_int8_step = 0.0;
    // Per streamed tensor (empty: none): left as it is by the reference runtime, never materialized
    // in the block's format and counted as BF16 bytes (sp.torch.apply's module_filter_fn excludes a
    // module this way, as torchao leaves a module it does not convert in high precision).
    std::vector<bool> as_is{};
    bool kept_as_is(std::size_t k) const { return k < as_is.size() && as_is[k]; }
    // Per streamed tensor (empty: none): a matrix stored [in, out], as GPT-2's Conv1D stores its
    // weight, whose output channels (the rows every format scales on their own) are along dim 1. The
    // runtime quantizes, and the profiler and calibration measure, its transpose (output_rows).
    std::vector<bool> transposed{};
    bool stored_transposed(std::size_t k) const { return k < transposed.size() && transposed[k]; }
};

// `t` with its output channels along dim 0: its transpose (a view) for a tensor stored [in, out].
inline at::Tensor output_rows(const at::Tensor& t, bool transposed) {
    return transposed ? t.t() : t;
}

using NamedModule = std::pair<std::string, const torch::nn::Module*>;

// One AgentBlock per module, with its parameters (recursively) in named_parameters() order.
std::vector<AgentBlock> blocks_from_modules(const std::vector<NamedModule>& modules);

// bytes_bf16 = 2 bytes per parameter element.
BlockLayout layout_of(const std::vector<AgentBlock>& blocks);

}  // namespace sp::agent
