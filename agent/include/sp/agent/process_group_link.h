#pragma once
// sp::agent::ProcessGroupLink — the agent's hold on a LibTorch c10d process group (Gloo on CPU,
// NCCL on GPU) in a data-parallel job (agent/PROTOCOL.md §11). The trainer creates the process group
// as it would for its own gradients and hands it to the agent through AgentOptions::data_parallel;
// the agent then decides on rank 0 and applies the same map on every rank at the same step.
//
// Every collective here waits at most the timeout (the config's process_group_timeout_s) and turns
// any failure — a rank that died, one that stopped answering — into a DistributedError naming this
// rank, the collective and the step. Include this header only where a process group is made: it
// pulls in c10d's headers.
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace sp::agent {

// A collective failed or timed out: what() names this rank, the collective, the step and the cause.
class DistributedError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

class ProcessGroupLink {
  public:
    // `leader_control_endpoint`: rank 0's control socket, which the other ranks name when they refuse
    // a command ("" when rank 0 has none). `device`: where the collectives' small tensors live — the
    // CPU for Gloo, the rank's GPU for NCCL, which only moves device memory.
    explicit ProcessGroupLink(c10::intrusive_ptr<c10d::ProcessGroup> group,
                              std::string leader_control_endpoint = {},
                              std::chrono::milliseconds timeout = std::chrono::seconds(60),
                              at::Device device = at::kCPU);

    int rank() const { return rank_; }
    int world_size() const { return world_size_; }
    bool leader() const { return rank_ == 0; }
    const std::string& leader_control_endpoint() const { return leader_control_endpoint_; }
    std::chrono::milliseconds timeout() const { return timeout_; }
    void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

    // Every rank's `local` (the same length everywhere), rank 0's first.
    std::vector<double> all_gather(const std::vector<double>& local, std::string_view what,
                                   std::int64_t step);
    // Rank 0's `words` replace everyone else's (the same length everywhere).
    void broadcast(std::vector<std::int64_t>& words, std::string_view what, std::int64_t step);
    void broadcast(std::string& bytes, std::string_view what, std::int64_t step);
    // The mean of `value` over the ranks.
    double all_reduce_mean(double value, std::string_view what, std::int64_t step);
    // Data-parallel training without a DDP module (the C++ frontend has none): the parameters'
    // gradients averaged over the ranks, as one flat all-reduce. Parameters without a gradient are
    // skipped (they must be the same on every rank).
    void average_gradients(const std::vector<at::Tensor>& params, std::int64_t step);

  private:
    void wait(const c10::intrusive_ptr<c10d::Work>& work, std::string_view what, std::int64_t step);
    // Broadcasts `n` elements at `data` (host memory) from rank 0 through the link's device.
    void broadcast_host(void* data, std::int64_t n, at::ScalarType type, std::string_view what,
                        std::int64_t step);
    [[noreturn]] void fail(std::string_view what, std::int64_t step, double seconds,
                           const std::string& cause) const;

    c10::intrusive_ptr<c10d::ProcessGroup> group_;
    int rank_ = 0, world_size_ = 1;
    std::string leader_control_endpoint_;
    std::chrono::milliseconds timeout_;
    at::Device device_;
};

#if SP_AGENT_HAVE_NCCL
// The NCCL path (agent/cuda/torch/nccl_process_group.cpp): a ProcessGroupNCCL on `store` with the
// link's small tensors on cuda:`device_index`. Compiled in CI against the headers; unverified until
// it runs on GPUs (agent/PROTOCOL.md §11).
std::shared_ptr<ProcessGroupLink> make_nccl_process_group_link(const c10::intrusive_ptr<c10d::Store>& store,
                                                               int rank, int world_size, int device_index,
                                                               std::chrono::milliseconds timeout,
                                                               std::string leader_control_endpoint);
#endif

}  // namespace sp::agent
