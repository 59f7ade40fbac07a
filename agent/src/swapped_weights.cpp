#include "swapped_weights.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <limits>

namespace sp::agent::detail {
namespace {

std::uint64_t align16(std::uint64_t n) {
    return (n + 15) / 16 * 16;
}

std::uint64_t tensor_bytes(const at::Tensor& t) {
    return std::uint64_t(t.numel()) * t.element_size();
}

}  // namespace

std::uint64_t SwappedWeights::bytes_for(const std::vector<at::Tensor>& params) {
    std::uint64_t bytes = 0;
    for (const at::Tensor& p : params) bytes = align16(bytes + tensor_bytes(p));
    return bytes;
}

void SwappedWeights::view_into(const std::vector<at::Tensor>& params) {
    if (params.empty()) return;
    at::NoGradGuard no_grad;
    const std::uint64_t needed = bytes_for(params);
    if (bytes() < needed)
        buffer_ = at::empty({std::int64_t(needed)},
                            at::TensorOptions().dtype(at::kByte).device(params[0].device()));
    std::uint64_t at = 0;
    for (const at::Tensor& p : params) {
        const auto n = std::int64_t(tensor_bytes(p));
        // set_data on the same tensor object: what the modules, the agent and autograd hold.
        p.set_data(buffer_.narrow(0, std::int64_t(at), n).view(p.scalar_type()).view(p.sizes()));
        at = align16(at + std::uint64_t(n));
    }
}

void SwappedWeights::release(const std::vector<at::Tensor>& params) {
    at::NoGradGuard no_grad;
    for (const at::Tensor& p : params) {
        const at::Tensor nan = at::full({}, std::numeric_limits<double>::quiet_NaN(), p.options());
        p.set_data(nan.expand(p.sizes()));
    }
}

}  // namespace sp::agent::detail
