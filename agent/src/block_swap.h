#pragma once
// Block-swap streaming (WeightResidency::block_swap, sp/agent/precision_runtime.h): each block's
// payload (detail::Payload, in the block's format) waits in host memory and is uploaded into one of
// two slots just before the block's forward, double-buffered: while block b computes, block b+1's
// payload is copied into the other slot. The schedule below is the same code on every device; a
// SwapSlots backend does the copies (the CPU: a memcpy into a host slot; CUDA: cudaMemcpyAsync on a
// copy stream, agent/cuda/torch/cuda_block_swap.h).
//
// Per block b, in this order: load b if it was not prefetched; prefetch b+1 into the other slot;
// expand b's slot into b's parameters. The prefetch goes out before b's expansion so that on a GPU
// it overlaps b's expansion and compute; it may therefore never take b's own slot, which b's
// expansion has not read yet. load() refuses (std::logic_error) to overwrite a slot whose block has
// not been expanded from it: the one hazard of double buffering, checked on every upload.
#include <ATen/core/Tensor.h>

#include <array>
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

// Where the two slots live and how a payload gets there.
class SwapSlots {
  public:
    virtual ~SwapSlots() = default;
    // Copies `block`'s payloads into `slot` (asynchronously where the device can). The caller has
    // made sure nothing still needs the slot's previous contents.
    virtual void upload(std::size_t slot, const SwapBlock& block) = 0;
    // Expands `slot` into `block`'s parameters once its upload is done (on a GPU the compute stream
    // waits on the upload's event, on the device), and marks the slot's contents read.
    virtual void expand(std::size_t slot, const SwapBlock& block) = 0;
};

// The CPU's slots: host byte buffers; upload is a memcpy, expansion detail::PayloadExpander.
std::unique_ptr<SwapSlots> make_host_swap_slots();

class BlockSwapSchedule {
  public:
    explicit BlockSwapSchedule(std::unique_ptr<SwapSlots> slots);
    // Before block `block` of `blocks` computes: loads it (unless prefetched), prefetches the next
    // block, expands it into its parameters. Returns the blocks this call uploaded (none, one or
    // two), for the caller to count their bytes.
    std::vector<std::size_t> before_block_forward(std::size_t block, const std::vector<SwapBlock>& blocks);
    // The payloads changed (an optimizer step, a new format): a prefetched slot is stale.
    void forget_slots();
    // The uploads and expansions in order, while recording (off by default: a long run would grow
    // the log without bound).
    void set_recording(bool on) { recording_ = on; }
    const std::vector<BlockSwapEvent>& events() const { return events_; }
    void clear_events() { events_.clear(); }

  private:
    struct Slot {
        std::optional<std::size_t> block;  // whose payload the slot holds
        bool expanded = true;              // that block has been expanded from it: free to overwrite
    };
    void load(std::size_t block, std::size_t slot, const std::vector<SwapBlock>& blocks);
    std::optional<std::size_t> slot_holding(std::size_t block) const;
    void record(BlockSwapEvent::Kind kind, std::size_t block, std::size_t slot);

    std::unique_ptr<SwapSlots> slots_;
    std::array<Slot, 2> slot_state_;
    std::vector<BlockSwapEvent> events_;
    bool recording_ = false;
};

// What the runtime keeps for block-swap: the blocks' payloads and their schedule.
struct BlockSwap {
    explicit BlockSwap(std::unique_ptr<SwapSlots> slots) : schedule(std::move(slots)) {}
    BlockSwapSchedule schedule;
    std::vector<SwapBlock> blocks;
};

}  // namespace sp::agent::detail
