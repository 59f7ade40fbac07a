// The NCCL path of a data-parallel job (agent/PROTOCOL.md §11): the same ProcessGroupLink over a
// ProcessGroupNCCL, its small tensors on the rank's GPU. Compiled in CI against LibTorch's and the
// CUDA toolkit's headers (never linked there: Debian's LibTorch has no NCCL); unverified until it
// runs on GPUs.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "sp/agent/process_group_link.h"

namespace sp::agent {

std::shared_ptr<ProcessGroupLink> make_nccl_process_group_link(const c10::intrusive_ptr<c10d::Store>& store,
                                                               int rank, int world_size, int device_index,
                                                               std::chrono::milliseconds timeout,
                                                               std::string leader_control_endpoint) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
    return std::make_shared<ProcessGroupLink>(std::move(group), std::move(leader_control_endpoint), timeout,
                                              at::Device(at::kCUDA, c10::DeviceIndex(device_index)));
}

}  // namespace sp::agent
