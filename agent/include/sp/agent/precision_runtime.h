#pragma once
// The reference precision runtime: what makes the routing real. Each routed block's weights live as
// an fp32 master; after every optimizer step (and when its precision changes) they are materialized
// in the routed precision — BF16, or INT8 per-output-row symmetric with fp32 scales (the core
// quantization reference) — and copied into the compute copy the forward pass uses. Gradients are
// taken at the compute weights and applied to the master (straight-through). Bytes are counted per
// block per step: BF16 = 2 bytes per element, INT8 = 1 byte per element + 4 bytes per row scale.
//
// Trainer step: forward; backward; agent.collect...; hints = agent.compute_hints(step) (delivered to
// on_hints); runtime.before_optimizer_step(); optimizer.step(); runtime.after_optimizer_step().
#include <cstdint>
#include <vector>

#include "sp/agent/block.h"
#include "sp/agent/hints.h"

namespace sp::agent {

struct TransferBytes {
    std::uint64_t copied = 0;      // bytes materialized and copied this step
    std::uint64_t bf16 = 0;        // what the same copies would have cost in BF16
    double saving_pct() const { return bf16 == 0 ? 0.0 : 100.0 * (1.0 - double(copied) / double(bf16)); }
};

class ReferencePrecisionRuntime : public HintSink {
public:
    // Takes the blocks' parameters (fp32, CPU or CUDA); snapshots them as the masters and
    // materializes every block in BF16.
    explicit ReferencePrecisionRuntime(std::vector<AgentBlock> blocks);

    // Records the routed map; blocks whose precision changed are re-materialized at once (counted).
    void on_hints(const PrecisionHints& hints) override;

    // Puts the masters back into the parameters so the optimizer updates the fp32 master values.
    void before_optimizer_step();
    // Takes the updated masters, materializes every block in its routed precision into the
    // parameters (the compute copy) and counts the bytes of this step.
    void after_optimizer_step();

    const std::vector<Precision>& precisions() const { return precision_; }
    // Bytes of the last completed step (since the previous after_optimizer_step), total and per block.
    const TransferBytes& step_bytes() const { return step_total_; }
    const std::vector<TransferBytes>& step_bytes_per_block() const { return step_per_block_; }
    // Bytes since construction.
    const TransferBytes& total_bytes() const { return total_; }

private:
    void materialize(std::size_t block);

    std::vector<AgentBlock> blocks_;
    std::vector<std::vector<at::Tensor>> masters_;  // fp32, per block per parameter
    std::vector<Precision> precision_;
    std::vector<TransferBytes> step_per_block_;     // being accumulated for the current step
    TransferBytes step_total_, pending_total_, total_;
};

}  // namespace sp::agent
