// A minimal trainer that embeds Selective Precision: a stack of MLP blocks learns a fixed random
// map, and the agent routes each block to BF16, INT8 or FP8 from its gradient statistics. What an
// embedder writes is marked STEP 1..4; the rest is an ordinary LibTorch training loop.
//
//   embed_agent [STEPS] [TELEMETRY.jsonl]     prints the routed map and the bytes saved
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "sp/agent/agent.h"
#include "sp/agent/precision_runtime.h"

namespace {

struct BlockImpl : torch::nn::Module {
    torch::nn::Linear up{nullptr}, down{nullptr};
    explicit BlockImpl(int width) {
        up = register_module("up", torch::nn::Linear(width, 4 * width));
        down = register_module("down", torch::nn::Linear(4 * width, width));
    }
    torch::Tensor forward(const torch::Tensor& x) { return x + down(torch::gelu(up(x))); }
};
TORCH_MODULE(Block);

}  // namespace

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::stoi(argv[1]) : 300;
    const int width = 32, blocks = 4, batch = 64;
    torch::manual_seed(1);

    std::vector<Block> model;
    std::vector<torch::Tensor> params;
    for (int b = 0; b < blocks; ++b) {
        model.emplace_back(width);
        for (const auto& p : model.back()->parameters()) params.push_back(p);
    }
    const torch::Tensor target_map = torch::randn({width, width}) / std::sqrt(double(width));

    // STEP 1: configure the agent (here: the defaults, telemetry to a file, no network).
    sp::Config config;
    config.telemetry_enabled = argc > 2;
    if (argc > 2) config.telemetry_file = argv[2];
    sp::agent::Agent agent(config, {});

    // STEP 2: register the blocks it routes, and a runtime that materializes its decisions.
    std::vector<sp::agent::NamedModule> named;
    for (int b = 0; b < blocks; ++b) named.emplace_back("blocks." + std::to_string(b), model[b].get());
    agent.register_blocks(named);
    sp::agent::ReferencePrecisionRuntime runtime(agent.blocks());
    agent.add_hint_sink(&runtime);

    torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(1e-3));
    double last_loss = 0;
    for (int step = 0; step < steps; ++step) {
        agent.begin_step(step);  // STEP 3: operator commands apply here
        const torch::Tensor x = torch::randn({batch, width});
        torch::Tensor y = x;
        for (auto& block : model) y = block->forward(y);
        torch::Tensor loss = torch::mse_loss(y, x.matmul(target_map));
        optimizer.zero_grad();
        loss.backward();

        // STEP 4: statistics after backward, the map before the optimizer step, the loss at the end.
        agent.collect_block_grad_stats();
        runtime.before_optimizer_step();
        agent.compute_hints(step);  // delivered to the runtime (on_hints)
        optimizer.step();
        runtime.after_optimizer_step();  // every block materialized in its routed precision
        agent.record_transfer(runtime.step_bytes().copied, runtime.step_bytes().bf16);
        last_loss = loss.item<double>();
        agent.end_step(last_loss);
    }
    agent.end_run("completed");  // the telemetry's last record: this run ended, it was not cut

    std::printf("final loss %.4f after %d steps\n", last_loss, steps);
    for (int b = 0; b < blocks; ++b) {
        const std::string_view format = sp::to_string(runtime.precisions()[std::size_t(b)]);
        std::printf("blocks.%d: %.*s\n", b, int(format.size()), format.data());
    }
    std::printf("bytes saved against all-BF16: %.1f%%\n", runtime.total_bytes().saving_pct());
    return 0;
}
