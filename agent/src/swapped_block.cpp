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
        ctx->save_for_backward({x});
        ctx->saved_data["trainable"] = static_cast<std::int64_t>(trainable.size());
        ctx->saved_data["context"] = c10::IValue::make_capsule(c10::make_intrusive<ContextHolder>(context));
        return context.forward(x, /*recompute=*/false);
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const auto holder =
            c10::static_intrusive_pointer_cast<ContextHolder>(ctx->saved_data["context"].toCapsule());
        const SwappedBlockContext& context = holder->context;
        const auto trainable_count = std::size_t(ctx->saved_data["trainable"].toInt());
        const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(
            ctx->get_saved_variables()[0].requires_grad());
        context.runtime->before_block_backward(context.block);
        torch::autograd::variable_list inputs;
        if (x.requires_grad()) inputs.push_back(x);
        const std::vector<at::Tensor> trainable = context.runtime->trainable_tensors(context.block);
        for (const at::Tensor& t : trainable) inputs.push_back(t);
        torch::autograd::variable_list found;
        {
            at::AutoGradMode enable(true);
            const torch::Tensor out = context.forward(x, /*recompute=*/true);
            found = inputs.empty() ? torch::autograd::variable_list{}
                                   : torch::autograd::grad({out}, inputs, {grads[0]}, /*retain_graph=*/false,
                                                           /*create_graph=*/false, /*allow_unused=*/true);
        }
        context.runtime->after_block_backward(context.block);
        torch::autograd::variable_list out;
        std::size_t next = 0;
        out.push_back(x.requires_grad() ? found[next++] : torch::Tensor());
        for (std::size_t i = 0; i < trainable_count; ++i) out.push_back(found[next++]);
        out.emplace_back();  // the context
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
