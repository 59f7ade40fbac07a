#include "block_swap.h"

#include <stdexcept>
#include <string>

namespace sp::agent::detail {

std::uint64_t SwapBlock::payload_bytes() const {
    std::uint64_t bytes = 0;
    for (const auto& payload : payloads) bytes += payload->bytes();
    return bytes;
}

BlockSwapSchedule::BlockSwapSchedule(std::unique_ptr<SwapSlots> slots, std::size_t slot_count,
                                     bool hold_weights)
    : slots_(std::move(slots)), slot_state_(slot_count), hold_weights_(hold_weights) {
    if (slot_count == 0) throw std::invalid_argument("block-swap needs at least one slot");
}

void BlockSwapSchedule::record(BlockSwapEvent::Kind kind, std::size_t block, std::size_t slot) {
    if (recording_) events_.push_back(BlockSwapEvent{kind, block, slot});
}

std::optional<std::size_t> BlockSwapSchedule::slot_of(std::size_t block, SlotUse use) const {
    for (std::size_t s = 0; s < slot_state_.size(); ++s)
        if (slot_state_[s].block == block && slot_state_[s].use == use) return s;
    return std::nullopt;
}

bool BlockSwapSchedule::present(std::size_t block) const {
    for (const Slot& s : slot_state_)
        if (s.block == block && (s.use != SlotUse::free || fault_ == BlockSwapFault::reuse_stale_slot))
            return true;
    return false;
}

bool BlockSwapSchedule::holds(std::size_t block) const {
    return slot_of(block, SlotUse::holding).has_value();
}

// `preferred` when it is free (block b goes to slot b mod K, which makes the order easy to read in a
// log), else the first free slot.
std::optional<std::size_t> BlockSwapSchedule::free_slot(std::size_t preferred) const {
    if (slot_state_[preferred].use == SlotUse::free) return preferred;
    for (std::size_t s = 0; s < slot_state_.size(); ++s)
        if (slot_state_[s].use == SlotUse::free) return s;
    return std::nullopt;
}

void BlockSwapSchedule::load(std::size_t block, std::size_t slot, const std::vector<SwapBlock>& blocks) {
    Slot& state = slot_state_.at(slot);
    if (state.use != SlotUse::free && fault_ != BlockSwapFault::prefetch_into_busy_slot)
        throw std::logic_error("BlockSwapSchedule: uploading block " + std::to_string(block) + " into slot " +
                               std::to_string(slot) + " would overwrite block " +
                               std::to_string(*state.block) + ", which is not done with it");
    slots_->upload(slot, blocks[block]);
    state.block = block;
    state.use = SlotUse::loaded;
    record(BlockSwapEvent::upload, block, slot);
}

void BlockSwapSchedule::prefetch(std::size_t block, const std::vector<std::size_t>& upcoming,
                                 const std::vector<SwapBlock>& blocks, std::vector<std::size_t>& uploaded) {
    std::size_t depth = 0;
    for (const std::size_t next : upcoming) {
        if (depth + 1 >= slot_state_.size()) break;  // one slot is the computing block's
        ++depth;
        if (next == block || next >= blocks.size()) continue;
        if (present(next)) continue;
        std::optional<std::size_t> slot = free_slot(next % slot_state_.size());
        if (fault_ == BlockSwapFault::prefetch_into_busy_slot)
            slot = next_faulty_slot_++ % slot_state_.size();
        if (!slot) break;  // every other slot still holds a block: nothing to prefetch into
        load(next, *slot, blocks);
        uploaded.push_back(next);
    }
}

std::vector<std::size_t> BlockSwapSchedule::acquire(std::size_t block,
                                                    const std::vector<std::size_t>& upcoming,
                                                    const std::vector<SwapBlock>& blocks) {
    if (block >= blocks.size())
        throw std::out_of_range("BlockSwapSchedule: no block " + std::to_string(block));
    std::vector<std::size_t> uploaded;
    if (holds(block)) {  // kept since its last use (the last block between its forward and backward)
        prefetch(block, upcoming, blocks, uploaded);
        return uploaded;
    }
    std::optional<std::size_t> slot = slot_of(block, SlotUse::loaded);
    if (!slot && fault_ == BlockSwapFault::reuse_stale_slot)
        for (std::size_t s = 0; s < slot_state_.size() && !slot; ++s)
            if (slot_state_[s].block == block) slot = s;
    if (!slot) {
        // Not prefetched (the first block, or a computation that did not follow the order): stale
        // prefetches of other blocks are dropped (nothing reads them), then the block takes a slot.
        for (std::size_t s = 0; s < slot_state_.size(); ++s)
            if (slot_state_[s].use == SlotUse::loaded) {
                record(BlockSwapEvent::drop, *slot_state_[s].block, s);
                slot_state_[s].use = SlotUse::free;
            }
        slot = free_slot(block % slot_state_.size());
        if (!slot)
            throw std::logic_error("BlockSwapSchedule: no slot is free for block " + std::to_string(block) +
                                   ": every slot holds a block that was not released");
        load(block, *slot, blocks);
        uploaded.push_back(block);
    }
    prefetch(block, upcoming, blocks, uploaded);
    slots_->expand(*slot, blocks[block]);
    slot_state_[*slot].use = hold_weights_ ? SlotUse::holding : SlotUse::free;
    record(BlockSwapEvent::expand, block, *slot);
    return uploaded;
}

void BlockSwapSchedule::release(std::size_t block, const std::vector<SwapBlock>& blocks) {
    if (!hold_weights_) return;
    const std::optional<std::size_t> slot = slot_of(block, SlotUse::holding);
    if (!slot)
        throw std::logic_error("BlockSwapSchedule: releasing block " + std::to_string(block) +
                               ", which no slot holds");
    if (fault_ != BlockSwapFault::keep_released_weights) slots_->release(*slot, blocks.at(block));
    slot_state_[*slot].use = SlotUse::free;
    record(BlockSwapEvent::release, block, *slot);
}

void BlockSwapSchedule::forget_slots() {
    for (std::size_t s = 0; s < slot_state_.size(); ++s) {
        Slot& state = slot_state_[s];
        if (state.use == SlotUse::loaded) {
            record(BlockSwapEvent::drop, *state.block, s);
            state.use = SlotUse::free;
        }
        // A slot holding weights keeps them: the block is computing (its release frees the slot).
    }
}

}  // namespace sp::agent::detail
