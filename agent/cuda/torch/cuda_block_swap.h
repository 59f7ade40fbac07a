#pragma once
// Block-swap's K slots on CUDA (built only where LibTorch has CUDA; the schedule is
// agent/src/block_swap.h, the same code the CPU runs). Each slot is a device byte arena for a block's
// payloads and, holding the weights, a device buffer for its expanded weights (SwappedWeights).
// upload() copies a block's page-locked payloads (Payload::pinned, required) into the slot with
// cudaMemcpyAsync on a copy stream, after waiting on the device for the slot's previous expansion,
// and records the copy's event; expand() makes the compute stream wait on that event (on the device)
// and expands the slot into the block's parameters, one dequantize kernel launch for the block
// (cuda_dequantize_param.h; a BF16 payload or another dtype through detail::PayloadExpander), then
// records that the slot's payload has been read. release() only points the parameters away: the
// next expansion into the slot's weight buffer runs on the compute stream, after the kernels that
// read it.
//
// One host wait: before a slot is written again, upload() waits for that slot's previous copy to
// finish reading its host payloads, so that their page-locked memory may be freed or reused. That
// copy was issued K - 1 blocks earlier and overlapped their compute: normally long done; at worst it
// keeps the host from running more than K blocks ahead of the copies. The copies' and expansions'
// device times (SwapStats) are read from timing events at the same point.
#include <memory>

#include "block_swap.h"

namespace sp::agent::detail {

// `device`: a CUDA device (std::invalid_argument otherwise); `slots` >= 1.
std::unique_ptr<SwapSlots> make_cuda_swap_slots(c10::Device device, std::size_t slots, bool hold_weights);

}  // namespace sp::agent::detail
