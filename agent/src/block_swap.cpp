#include "block_swap.h"

#include <ATen/Functions.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace sp::agent::detail {

std::uint64_t SwapBlock::payload_bytes() const {
    std::uint64_t bytes = 0;
    for (const auto& payload : payloads) bytes += payload->bytes();
    return bytes;
}

namespace {

// A host slot holds a block's payloads back to back, each tensor's values then its scales, the
// scales on a 4-byte boundary so that they can be viewed as fp32 where they lie.
class HostSwapSlots final : public SwapSlots {
  public:
    HostSwapSlots() : expander_(c10::Device(c10::kCPU)) {}

    void upload(std::size_t slot, const SwapBlock& block) override {
        std::vector<float>& bytes = slots_.at(slot);  // float elements: 4-byte aligned storage
        std::size_t floats = 0;
        for (const auto& payload : block.payloads)
            floats += (payload->values.size() + 3) / 4 + payload->scales.size();
        bytes.resize(floats);
        std::size_t at = 0;
        for (const auto& payload : block.payloads) {
            if (!payload->values.empty())
                std::memcpy(&bytes[at], payload->values.data(), payload->values.size());
            at += (payload->values.size() + 3) / 4;
            if (!payload->scales.empty())
                std::memcpy(&bytes[at], payload->scales.data(), payload->scales.size() * sizeof(float));
            at += payload->scales.size();
        }
    }

    void expand(std::size_t slot, const SwapBlock& block) override {
        std::vector<float>& bytes = slots_.at(slot);
        std::size_t at = 0;
        for (std::size_t k = 0; k < block.params.size(); ++k) {
            const Payload& payload = *block.payloads[k];
            const at::Tensor values =
                at::from_blob(bytes.data() + at, {std::int64_t(payload.values.size())}, at::kByte);
            at += (payload.values.size() + 3) / 4;
            const at::Tensor scales =
                at::from_blob(bytes.data() + at, {std::int64_t(payload.scales.size())}, at::kFloat);
            at += payload.scales.size();
            expander_.expand(values, scales, payload, block.params[k]);
        }
    }

  private:
    PayloadExpander expander_;
    std::array<std::vector<float>, 2> slots_;
};

}  // namespace

std::unique_ptr<SwapSlots> make_host_swap_slots() {
    return std::make_unique<HostSwapSlots>();
}

BlockSwapSchedule::BlockSwapSchedule(std::unique_ptr<SwapSlots> slots) : slots_(std::move(slots)) {}

void BlockSwapSchedule::record(BlockSwapEvent::Kind kind, std::size_t block, std::size_t slot) {
    if (recording_) events_.push_back(BlockSwapEvent{kind, block, slot});
}

std::optional<std::size_t> BlockSwapSchedule::slot_holding(std::size_t block) const {
    for (std::size_t s = 0; s < slot_state_.size(); ++s)
        if (slot_state_[s].block == block && !slot_state_[s].expanded) return s;
    return std::nullopt;
}

void BlockSwapSchedule::load(std::size_t block, std::size_t slot, const std::vector<SwapBlock>& blocks) {
    Slot& state = slot_state_.at(slot);
    if (!state.expanded)
        throw std::logic_error("BlockSwapSchedule: uploading block " + std::to_string(block) + " into slot " +
                               std::to_string(slot) + " would overwrite block " +
                               std::to_string(*state.block) + ", which has not been expanded from it yet");
    slots_->upload(slot, blocks[block]);
    state.block = block;
    state.expanded = false;
    record(BlockSwapEvent::upload, block, slot);
}

std::vector<std::size_t> BlockSwapSchedule::before_block_forward(std::size_t block,
                                                                 const std::vector<SwapBlock>& blocks) {
    if (block >= blocks.size())
        throw std::out_of_range("BlockSwapSchedule: no block " + std::to_string(block));
    std::vector<std::size_t> uploaded;
    std::optional<std::size_t> slot = slot_holding(block);
    if (!slot) {
        // Not prefetched (the first block, or a forward that did not follow the order): a stale
        // prefetch of another block is dropped (nothing reads it), then the block takes a slot.
        for (Slot& s : slot_state_)
            if (!s.expanded) {
                record(BlockSwapEvent::drop, *s.block, std::size_t(&s - slot_state_.data()));
                s.expanded = true;
            }
        slot = block % slot_state_.size();
        load(block, *slot, blocks);
        uploaded.push_back(block);
    }
    // The next block's copy goes out before this one's expansion, into the other slot.
    const std::size_t next = block + 1;
    if (next < blocks.size()) {
        load(next, 1 - *slot, blocks);
        uploaded.push_back(next);
    }
    slots_->expand(*slot, blocks[block]);
    slot_state_[*slot].expanded = true;
    record(BlockSwapEvent::expand, block, *slot);
    return uploaded;
}

void BlockSwapSchedule::forget_slots() {
    for (Slot& s : slot_state_) {
        if (!s.expanded && s.block)
            record(BlockSwapEvent::drop, *s.block, std::size_t(&s - slot_state_.data()));
        s = Slot{};
    }
}

}  // namespace sp::agent::detail
