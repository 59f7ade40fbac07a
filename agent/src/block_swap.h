#pragma once
// Block-swap streaming (WeightResidency::block_swap, sp/agent/precision_runtime.h): each block's
// payload (detail::Payload, in the block's format) waits in host memory and is uploaded into one of
// K slots (--swap-slots, default 2) just before the block computes, with the next blocks' uploads
// going out while it does (prefetch depth K - 1). The schedule below is the same code on every
// device; a SwapSlots backend does the copies (the CPU: a memcpy into a host slot; CUDA:
// cudaMemcpyAsync on a copy stream, agent/cuda/torch/cuda_block_swap.h).
//
// Two ways a slot is held:
//   - expanded into the parameters (a block whose tensors train: they own their memory, the optimizer
//     steps them): the slot holds the payload from its upload until its expansion, then is free;
//   - holding the weights (every streamed tensor frozen, the fine-tune's base under adapters): the slot
//     also holds the block's expanded weights, and the block's parameters are views of it from its
//     expansion until release(); the device memory weights use is bounded by the K slots. The block
//     is released after its forward and acquired again for its backward (the runtime's
//     after_block_forward / before_block_backward), in reverse order.
//
// Per acquire(b): upload b unless a slot holds it; prefetch the next blocks the computation visits
// (`upcoming`, nearest first) into free slots, up to K - 1 of them; expand b. The prefetches go out
// before b's expansion so that on a GPU they overlap b's expansion and compute; they never take b's own
// slot. load() refuses (std::logic_error) a slot whose block is not done with it (not expanded, or
// still holding its weights): the one hazard of the schedule, checked on every upload.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "payload.h"
#include "sp/agent/precision_runtime.h"

namespace sp::agent::detail {

// One block as the swap streams it: its compute parameters and their payloads, in the same order.
struct SwapBlock {
    std::vector<at::Tensor> params;
    std::vector<std::shared_ptr<const Payload>> payloads;
    std::uint64_t payload_bytes() const;
};

// Where the slots live and how a payload gets there.
class SwapSlots {
  public:
    virtual ~SwapSlots() = default;
    // Copies `block`'s payloads into `slot` (asynchronously where the device can). The caller has
    // made sure nothing still needs the slot's previous contents.
    virtual void upload(std::size_t slot, const SwapBlock& block) = 0;
    // Expands `slot` into `block`'s parameters once its upload is done (on a GPU the compute stream
    // waits on the upload's event, on the device). Holding the weights, the parameters first become
    // views of the slot's own weight buffer.
    virtual void expand(std::size_t slot, const SwapBlock& block) = 0;
    // Holding the weights: the block is done computing; its parameters stop viewing the slot (they
    // keep their shape, and hold NaN, so that a computation with a released block cannot pass unseen).
    virtual void release(std::size_t slot, const SwapBlock& block) = 0;
    // Host seconds spent uploading and expanding, and the most bytes the slots held at once.
    virtual SwapStats stats() const = 0;
};

// The CPU's slots: host buffers; upload is a memcpy, expansion detail::PayloadExpander.
// `slots` >= 1; `hold_weights`: see the header comment.
std::unique_ptr<SwapSlots> make_host_swap_slots(std::size_t slots, bool hold_weights);

class BlockSwapSchedule {
  public:
    // `slots` >= 1 (std::invalid_argument otherwise).
    BlockSwapSchedule(std::unique_ptr<SwapSlots> slots, std::size_t slot_count, bool hold_weights);

    // Before block `block` computes: loads it (unless a slot holds it), prefetches `upcoming` (the
    // blocks computed next, nearest first), expands it. Returns the blocks this call uploaded, for the
    // caller to count their bytes. Acquiring a block that holds its weights already uploads nothing.
    std::vector<std::size_t> acquire(std::size_t block, const std::vector<std::size_t>& upcoming,
                                     const std::vector<SwapBlock>& blocks);
    // Holding the weights: `block` is done computing; its slot is free again. std::logic_error for a
    // block no slot holds. Without holding, a no-op (acquire freed the slot after the expansion).
    void release(std::size_t block, const std::vector<SwapBlock>& blocks);
    // Whether a slot holds `block`'s expanded weights (acquired and not released).
    bool holds(std::size_t block) const;
    // The payloads changed (an optimizer step, a new format): a prefetched slot is stale.
    void forget_slots();

    std::size_t slot_count() const { return slot_state_.size(); }
    bool holds_weights() const { return hold_weights_; }
    SwapStats stats() const { return slots_->stats(); }

    // The uploads, expansions, drops and releases in order, while recording (off by default: a long
    // run would grow the log without bound).
    void set_recording(bool on) { recording_ = on; }
    const std::vector<BlockSwapEvent>& events() const { return events_; }
    void clear_events() { events_.clear(); }

    void plant_fault(BlockSwapFault fault) { fault_ = fault; }

  private:
    enum class SlotUse { free, loaded, holding };
    struct Slot {
        std::optional<std::size_t> block;  // whose payload the slot holds (or last held)
        SlotUse use = SlotUse::free;
    };
    void load(std::size_t block, std::size_t slot, const std::vector<SwapBlock>& blocks);
    void prefetch(std::size_t block, const std::vector<std::size_t>& upcoming,
                  const std::vector<SwapBlock>& blocks, std::vector<std::size_t>& uploaded);
    std::optional<std::size_t> slot_of(std::size_t block, SlotUse use) const;
    bool present(std::size_t block) const;  // a slot holds the block's payload or weights
    std::optional<std::size_t> free_slot(std::size_t preferred) const;
    void record(BlockSwapEvent::Kind kind, std::size_t block, std::size_t slot);

    std::unique_ptr<SwapSlots> slots_;
    std::vector<Slot> slot_state_;
    bool hold_weights_;
    std::vector<BlockSwapEvent> events_;
    bool recording_ = false;
    BlockSwapFault fault_ = BlockSwapFault::none;
    std::size_t next_faulty_slot_ = 0;
};

// What the runtime keeps for block-swap: the blocks' payloads and their schedule.
struct BlockSwap {
    BlockSwap(std::unique_ptr<SwapSlots> slots, std::size_t slot_count, bool hold_weights)
        : schedule(std::move(slots), slot_count, hold_weights) {}
    BlockSwapSchedule schedule;
    std::vector<SwapBlock> blocks;
};

}  // namespace sp::agent::detail
