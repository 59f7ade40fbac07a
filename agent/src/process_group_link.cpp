#include "sp/agent/process_group_link.h"

#include <ATen/ATen.h>

#include <cstdio>

namespace sp::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Who the failure is about: with two ranks there is only one other.
std::string peers(int rank, int world_size) {
    if (world_size == 2) return "rank " + std::to_string(1 - rank);
    return "one of the other " + std::to_string(world_size - 1) + " ranks";
}

}  // namespace

ProcessGroupLink::ProcessGroupLink(c10::intrusive_ptr<c10d::ProcessGroup> group,
                                   std::string leader_control_endpoint, std::chrono::milliseconds timeout,
                                   at::Device device)
    : group_(std::move(group)),
      leader_control_endpoint_(std::move(leader_control_endpoint)),
      timeout_(timeout),
      device_(device) {
    if (!group_) throw std::invalid_argument("ProcessGroupLink: no process group");
    rank_ = group_->getRank();
    world_size_ = group_->getSize();
}

void ProcessGroupLink::fail(std::string_view what, std::int64_t step, double seconds,
                            const std::string& cause) const {
    char times[64];
    std::snprintf(times, sizeof times, "%.1f s (timeout %g s)", seconds,
                  std::chrono::duration<double>(timeout_).count());
    throw DistributedError("rank " + std::to_string(rank_) + " of " + std::to_string(world_size_) + ": the " +
                           std::string(what) + " at step " + std::to_string(step) + " failed after " + times +
                           ": " + peers(rank_, world_size_) + " died or stopped answering. Cause: " + cause);
}

void ProcessGroupLink::wait(const c10::intrusive_ptr<c10d::Work>& work, std::string_view what,
                            std::int64_t step) {
    const auto t0 = Clock::now();
    try {
        if (!work->wait(timeout_))
            fail(what, step, std::chrono::duration<double>(Clock::now() - t0).count(), "timed out");
    } catch (const DistributedError&) {
        throw;
    } catch (const std::exception& e) {
        std::string cause = e.what();
        if (const auto nl = cause.find('\n'); nl != std::string::npos) cause.resize(nl);  // c10's backtrace
        fail(what, step, std::chrono::duration<double>(Clock::now() - t0).count(), cause);
    }
}

// The small tensors go to the link's device and back: a no-op copy for Gloo's CPU tensors.
std::vector<double> ProcessGroupLink::all_gather(const std::vector<double>& local, std::string_view what,
                                                 std::int64_t step) {
    const auto n = std::int64_t(local.size());
    std::vector<at::Tensor> input{at::from_blob(const_cast<double*>(local.data()), {n}, at::kDouble)
                                      .to(device_, /*non_blocking=*/false, /*copy=*/true)};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < world_size_; ++r) output[0].push_back(at::empty({n}, input[0].options()));
    c10d::AllgatherOptions options;
    options.timeout = timeout_;
    wait(group_->allgather(output, input, options), what, step);
    std::vector<double> all;
    all.reserve(local.size() * std::size_t(world_size_));
    for (const at::Tensor& t : output[0]) {
        const at::Tensor host = t.cpu();
        const double* p = host.data_ptr<double>();
        all.insert(all.end(), p, p + host.numel());
    }
    return all;
}

void ProcessGroupLink::broadcast_host(void* data, std::int64_t n, at::ScalarType type, std::string_view what,
                                      std::int64_t step) {
    const at::Tensor host = at::from_blob(data, {n}, type);
    std::vector<at::Tensor> tensors{host.to(device_)};
    c10d::BroadcastOptions options;
    options.timeout = timeout_;
    wait(group_->broadcast(tensors, options), what, step);
    if (tensors[0].data_ptr() != host.data_ptr()) host.copy_(tensors[0]);
}

void ProcessGroupLink::broadcast(std::vector<std::int64_t>& words, std::string_view what, std::int64_t step) {
    broadcast_host(words.data(), std::int64_t(words.size()), at::kLong, what, step);
}

void ProcessGroupLink::broadcast(std::string& bytes, std::string_view what, std::int64_t step) {
    broadcast_host(bytes.data(), std::int64_t(bytes.size()), at::kByte, what, step);
}

double ProcessGroupLink::all_reduce_mean(double value, std::string_view what, std::int64_t step) {
    std::vector<at::Tensor> tensors{
        at::full({1}, value, at::TensorOptions().dtype(at::kDouble).device(device_))};
    c10d::AllreduceOptions options;
    options.timeout = timeout_;
    wait(group_->allreduce(tensors, options), what, step);
    return tensors[0].item<double>() / double(world_size_);
}

void ProcessGroupLink::average_gradients(const std::vector<at::Tensor>& params, std::int64_t step) {
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : params)
        if (p.grad().defined()) grads.push_back(p.grad());
    if (grads.empty()) return;
    std::vector<at::Tensor> flat;
    for (const at::Tensor& g : grads) flat.push_back(g.reshape({-1}));
    std::vector<at::Tensor> buffer{at::cat(flat)};
    c10d::AllreduceOptions options;
    options.timeout = timeout_;
    wait(group_->allreduce(buffer, options), "all-reduce of the gradients", step);
    buffer[0].div_(double(world_size_));
    std::int64_t offset = 0;
    for (at::Tensor& g : grads) {
        g.copy_(buffer[0].narrow(0, offset, g.numel()).view_as(g));
        offset += g.numel();
    }
}

}  // namespace sp::agent
