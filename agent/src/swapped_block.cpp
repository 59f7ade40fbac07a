#include "sp/agent/swapped_block.h"

#include <torch/torch.h>

#include <utility>
#include <vector>

namespace sp::agent {
namespace {

// What the autograd node keeps for its backward besides the block's input.
struct SwappedBlockContext {
    ReferencePrecisionRuntime* runtime = nullptr;
    std::size_t block = 0;
    BlockForward forward;
};
// The context as the node's saved data holds it (an IValue capsule: no registration needed).
struct ContextHolder : torch::CustomClassHolder {
    explicit ContextHolder(SwappedBlockContext c) : context(std::move(c)) {}
    SwappedBlockContext context;
};

// Inputs: the block's input and its trainable tensors (so that the node is in the graph, and their
// gradients flow through it, even when the input needs none: block 0 of a frozen base).
struct SwappedBlockFunction : torch::autograd::Function<SwappedBlockFunction> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                 at::TensorList trainable, const SwappedBlockContext& context) {
        // Autograd runs this with gradients off: the block records no graph and saves no weight.
        // Saved: the input, then the trainable tensors (leaves: nothing is copied).
        std::vector<torch::Tensor> saved = {x};
        saved.insert(saved.end(), trainable.begin(), trainable.end());
        ctx->save_for_backward(saved);
        ctx->saved_data["context"] = c10::IValue::make_capsule(c10::make_intrusive<ContextHolder>(context));
        return context.forward(x, /*recompute=*/false);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto holder =
            c10::static_intrusive_pointer_cast<ContextHolder>(ctx->saved_data["context"].toCapsule());
        const SwappedBlockContext& context = holder->context;
        const torch::autograd::variable_list saved = ctx->get_saved_variables();
        const bool input_grad = saved[0].requires_grad();
        const torch::Tensor x = saved[0].detach().requires_grad_(input_grad);
        // What the gradients are taken for: the input where it needs one, and every trainable tensor.
        torch::autograd::variable_list inputs(saved.begin() + (input_grad ? 0 : 1), saved.end());
        if (input_grad) inputs[0] = x;
        context.runtime->before_block_backward(context.block);
        torch::autograd::variable_list found;
        {
            at::AutoGradMode enable(true);
            const torch::Tensor out = context.forward(x, /*recompute=*/true);
            if (!inputs.empty())
                found = torch::autograd::grad({out}, inputs, {grads[0]}, /*retain_graph=*/false,
                                              /*create_graph=*/false, /*allow_unused=*/true);
        }
        context.runtime->after_block_backward(context.block);
        // One gradient per input of forward: x (none when it needs none), each trainable tensor, the
        // context (none).
        torch::autograd::variable_list out;
        if (!input_grad) out.emplace_back();
        out.insert(out.end(), found.begin(), found.end());
        out.emplace_back();
        return out;
    }
};

}  // namespace

at::Tensor run_swapped_block(ReferencePrecisionRuntime& runtime, std::size_t block, const at::Tensor& x,
                             const BlockForward& forward) {
    runtime.before_block_forward(block);  // with the caller's gradient mode: a step, or an evaluation
    at::Tensor out;
    if (runtime.releases_weights() && at::GradMode::is_enabled()) {
        const SwappedBlockContext context{&runtime, block, forward};
        const std::vector<at::Tensor> trainable = runtime.trainable_tensors(block);
        out = SwappedBlockFunction::apply(x, at::TensorList(trainable), context);
    } else {
        out = forward(x, /*recompute=*/false);
    }
    runtime.after_block_forward(block);
    return out;
}

}  // namespace sp::agent
