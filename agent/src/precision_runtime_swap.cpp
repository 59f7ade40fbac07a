// ReferencePrecisionRuntime's block-swap (WeightResidency::block_swap) and the weights scope's BF16
// parameters: the header comment of sp/agent/precision_runtime.h says what they do.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "block_swap.h"
#include "materialize.h"
#include "payload.h"
#include "sp/agent/precision_runtime.h"
#include "swapped_weights.h"
#if SP_AGENT_HAVE_CUDA
#include "cuda_block_swap.h"
#include "cuda_staged_upload.h"
#endif

namespace sp::agent {

namespace {

// The next `count` blocks of a forward from `block` on: block+1..N-1, and with a backward to follow,
// N-2..0 (the last block stays in its slot between its forward and its backward).
std::vector<std::size_t> upcoming_after_forward(std::size_t block, std::size_t blocks, bool backward_follows,
                                                std::size_t count) {
    std::vector<std::size_t> out;
    for (std::size_t b = block + 1; b < blocks && out.size() < count; ++b) out.push_back(b);
    if (backward_follows)
        for (std::size_t b = blocks - 1; b-- > 0 && out.size() < count;)
            if (b != block) out.push_back(b);
    return out;
}

// The next `count` blocks of a backward from `block` on: block-1..0.
std::vector<std::size_t> upcoming_in_backward(std::size_t block, std::size_t count) {
    std::vector<std::size_t> out;
    for (std::size_t b = block; b-- > 0 && out.size() < count;) out.push_back(b);
    return out;
}

}  // namespace

void ReferencePrecisionRuntime::compute_frozen_in_bf16() {
    if (swap_)
        throw std::logic_error(
            "ReferencePrecisionRuntime::compute_frozen_in_bf16 after block-swap was set: call it first");
    if (masters_in_params_)
        throw std::logic_error(
            "ReferencePrecisionRuntime::compute_frozen_in_bf16 between before_optimizer_step and "
            "after_optimizer_step");
    at::NoGradGuard no_grad;
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        bool changed = false;
        for (std::size_t k = 0; k < blocks_[b].streamed().size(); ++k) {
            const at::Tensor& p = blocks_[b].streamed()[k];
            if (!frozen(b, k) || blocks_[b].kept_as_is(k) || p.scalar_type() == at::kBFloat16) continue;
            p.set_data(at::empty(p.sizes(), p.options().dtype(at::kBFloat16)));  // the same tensor object
            changed = true;
        }
        if (changed) materialize(b);  // the values it held, now in BF16: a conversion, no step's bytes
    }
    frozen_in_bf16_ = true;
}

std::vector<at::Tensor> ReferencePrecisionRuntime::trainable_tensors(std::size_t block) const {
    const AgentBlock& b = blocks_.at(block);
    std::vector<at::Tensor> out;
    for (const auto* list : {&b.params, &b.stored})
        for (const at::Tensor& t : *list)
            if (t.requires_grad()) out.push_back(t);
    return out;
}

bool ReferencePrecisionRuntime::releases_weights() const {
    return swap_ && swap_->schedule.holds_weights();
}

SwapStats ReferencePrecisionRuntime::swap_stats() const {
    return swap_ ? swap_->schedule.stats() : SwapStats{};
}

std::uint64_t ReferencePrecisionRuntime::weights_peak_bytes() const {
    if (releases_weights()) return swap_->schedule.stats().peak_bytes;
    std::uint64_t bytes = swap_ ? swap_->schedule.stats().peak_bytes : 0;  // the payloads' staging
    for (const AgentBlock& block : blocks_)
        for (const at::Tensor& p : block.streamed()) bytes += std::uint64_t(p.numel()) * p.element_size();
    return bytes;
}

void ReferencePrecisionRuntime::set_weight_residency(WeightResidency r, std::size_t swap_slots) {
    if (r == WeightResidency::block_swap && swap_slots == 0)
        throw std::invalid_argument("ReferencePrecisionRuntime: block-swap needs at least one slot");
    residency_ = r;
    if (r != WeightResidency::block_swap) {
        if (releases_weights())
            throw std::logic_error("ReferencePrecisionRuntime: the weights are in block-swap's slots");
        swap_.reset();
        return;
    }
    if (swap_) return;
    bool every_tensor_frozen = true, planted = false;
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        const AgentBlock& block = blocks_[b];
        if (!block.as_is.empty() || !block.transposed.empty())
            throw std::invalid_argument(
                "ReferencePrecisionRuntime: block-swap with tensors kept as they are or "
                "stored transposed (block '" +
                block.name + "') is not built");
        for (std::size_t k = 0; k < block.streamed().size(); ++k) every_tensor_frozen &= frozen(b, k);
        planted |= block.harsh_int8_step > 0.0;
    }
    const bool hold = every_tensor_frozen && !blocks_.empty();
    if (hold && planted)
        throw std::invalid_argument(
            "ReferencePrecisionRuntime: block-swap of frozen weights with a planted INT8 fault is not built "
            "(the backward's upload would draw other noise than the forward's)");
    std::unique_ptr<detail::SwapSlots> slots;
#if SP_AGENT_HAVE_CUDA
    if (uploader_)
        for (const AgentBlock& block : blocks_)
            for (const at::Tensor& p : block.streamed())
                if (!slots && p.is_cuda()) slots = detail::make_cuda_swap_slots(p.device(), swap_slots, hold);
#endif
    if (!slots) slots = detail::make_host_swap_slots(swap_slots, hold);
    swap_ = std::make_shared<detail::BlockSwap>(std::move(slots), swap_slots, hold);
    swap_->blocks.resize(blocks_.size());
    for (std::size_t b = 0; b < blocks_.size(); ++b) {
        pack_swap_block(b);
        if (hold) detail::SwappedWeights::release(blocks_[b].streamed());  // in no slot until acquired
    }
}

void ReferencePrecisionRuntime::pack_swap_block(std::size_t block) {
    const Precision p = precision_[block];
    detail::SwapBlock& swap = swap_->blocks[block];
    swap.params = blocks_[block].streamed();
    swap.payloads.clear();
    for (std::size_t k = 0; k < masters_[block].size(); ++k) {
        if (frozen(block, k)) {
            frozen_payload(block, k, p);  // packs (and pins) it when the format changed
            swap.payloads.push_back(frozen_payloads_[block][k]);
            continue;
        }
        auto payload =
            std::make_shared<detail::Payload>(detail::pack_payload(masters_[block][k], p, int4_group_));
#if SP_AGENT_HAVE_CUDA
        // Page-locked, so that the copy stream reads it by DMA while the host goes on.
        if (uploader_) detail::CudaStagedUploader::pin(*payload);
#endif
        swap.payloads.push_back(std::move(payload));
    }
    swap_->schedule.forget_slots();  // a prefetched copy of the old payload is stale
}

void ReferencePrecisionRuntime::count_uploads(const std::vector<std::size_t>& uploaded, bool in_step) {
    for (const std::size_t b : uploaded) {
        const TransferBytes bytes = block_bytes(b, precision_[b]);  // as `streamed` counts a block
        if (!in_step) {
            total_ += bytes;
            continue;
        }
        pending_per_block_[b] += bytes;
        pending_total_ += bytes;
    }
}

void ReferencePrecisionRuntime::before_block_forward(std::size_t block) {
    if (!swap_) return;
    if (masters_in_params_)
        throw std::logic_error(
            "ReferencePrecisionRuntime::before_block_forward between before_optimizer_step and "
            "after_optimizer_step: the payloads are about to change");
    // Read before the guard below: an evaluation's forward runs with gradients off.
    const bool in_step = at::GradMode::is_enabled();
    at::NoGradGuard no_grad;
    detail::BlockSwapSchedule& schedule = swap_->schedule;
    const std::size_t n = blocks_.size();
    // A new forward: a block an earlier forward kept for a backward that never came is let go.
    if (block == 0 && schedule.holds_weights())
        for (std::size_t b = 0; b < n; ++b)
            if (schedule.holds(b)) schedule.release(b, swap_->blocks);
    const bool backward_follows = in_step && schedule.holds_weights();
    count_uploads(
        schedule.acquire(block, upcoming_after_forward(block, n, backward_follows, schedule.slot_count()),
                         swap_->blocks),
        in_step);
    const Precision p = precision_[block];
    if (p == Precision::int8 && blocks_[block].harsh_int8_step > 0.0)
        for (std::size_t k = 0; k < masters_[block].size(); ++k)
            detail::assign(
                blocks_[block].streamed()[k],
                detail::materialized(masters_[block][k], p, blocks_[block].harsh_int8_step, int4_group_));
}

void ReferencePrecisionRuntime::after_block_forward(std::size_t block) {
    if (!releases_weights()) return;
    // The last block's backward comes next: its weights stay.
    if (at::GradMode::is_enabled() && block + 1 == blocks_.size()) return;
    swap_->schedule.release(block, swap_->blocks);
}

void ReferencePrecisionRuntime::before_block_backward(std::size_t block) {
    if (!releases_weights()) return;
    at::NoGradGuard no_grad;
    detail::BlockSwapSchedule& schedule = swap_->schedule;
    count_uploads(schedule.acquire(block, upcoming_in_backward(block, schedule.slot_count()), swap_->blocks),
                  /*in_step=*/true);
}

void ReferencePrecisionRuntime::after_block_backward(std::size_t block) {
    if (!releases_weights()) return;
    swap_->schedule.release(block, swap_->blocks);
}

void ReferencePrecisionRuntime::record_block_swap_events(bool on) {
    if (swap_) swap_->schedule.set_recording(on);
}

const std::vector<BlockSwapEvent>& ReferencePrecisionRuntime::block_swap_events() const {
    static const std::vector<BlockSwapEvent> none;
    return swap_ ? swap_->schedule.events() : none;
}

void ReferencePrecisionRuntime::clear_block_swap_events() {
    if (swap_) swap_->schedule.clear_events();
}

void ReferencePrecisionRuntime::plant_block_swap_fault(BlockSwapFault fault) {
    if (swap_) swap_->schedule.plant_fault(fault);
}

}  // namespace sp::agent
