#pragma once
// A block-swap slot's expanded weights (block_swap.h, "holding the weights"): one byte buffer on the
// slot's device, and the parameters of the block the slot holds pointed at views of it, so that the
// memory the weights use is the slots' and nothing else. Shared by the CPU's and the CUDA slots.
//
// Pointing a parameter elsewhere replaces its data in place (at::Tensor::set_data: the same tensor
// object, which the modules, the agent and autograd hold), never its shape. A released parameter views
// one NaN element broadcast to its shape: it takes no memory, every shape reader still works, and a
// computation that uses a released block gives NaN instead of another block's values.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace sp::agent::detail {

class SwappedWeights {
  public:
    // Points `params` (one block's, all on one device, any float dtypes) at consecutive 16-byte-aligned
    // views of this buffer, growing it first when the block is larger than any before. The values
    // are whatever the buffer held: the caller expands into them next.
    void view_into(const std::vector<at::Tensor>& params);
    // The parameters hold no memory of a slot any more (see above).
    static void release(const std::vector<at::Tensor>& params);
    // The buffer's size.
    std::uint64_t bytes() const { return buffer_.defined() ? std::uint64_t(buffer_.numel()) : 0; }
    // The bytes `params` take in a slot (with the alignment).
    static std::uint64_t bytes_for(const std::vector<at::Tensor>& params);

  private:
    at::Tensor buffer_;  // kByte
};

}  // namespace sp::agent::detail
