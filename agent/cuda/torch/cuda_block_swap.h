#pragma once
// Block-swap's two slots on CUDA (built only where LibTorch has CUDA; the schedule is
// agent/src/block_swap.h, the same code the CPU runs). Each slot is a device byte arena. upload()
// copies a block's page-locked payloads (Payload::pinned, required) into the slot with
// cudaMemcpyAsync on a copy stream, after waiting on the device for the slot's previous expansion,
// and records the copy's event; expand() makes the compute stream wait on that event (on the device)
// and expands the slot into the block's parameters (detail::PayloadExpander), then records that the
// slot has been read.
//
// One host wait: before a slot is written again, upload() waits for that slot's previous copy to
// finish reading its host payloads, so that their page-locked memory may be freed or reused. That
// copy was issued one block earlier and overlapped a block's compute: normally long done; at worst it
// keeps the host from running more than two blocks ahead of the copies.
#include <memory>

#include "block_swap.h"

namespace sp::agent::detail {

// `device`: a CUDA device (std::invalid_argument otherwise).
std::unique_ptr<SwapSlots> make_cuda_swap_slots(c10::Device device);

}  // namespace sp::agent::detail
