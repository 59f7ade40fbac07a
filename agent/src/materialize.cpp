#include "materialize.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <stdexcept>
#include <string>

#include "sp/quantize.h"

namespace sp::agent::detail {

void check_routable(Precision p) {
    if (p == Precision::bf16 || p == Precision::int8) return;
    throw std::invalid_argument("precision '" + std::string(to_string(p)) +
                                "' is not routed in this build (only bf16 and int8)");
}

std::int64_t int8_rows(const at::Tensor& t) {
    return t.dim() >= 2 ? t.size(0) : 1;
}

std::uint64_t materialized_bytes(const at::Tensor& t, Precision p) {
    check_routable(p);
    const auto numel = static_cast<std::uint64_t>(t.numel());
    if (p == Precision::bf16) return 2 * numel;
    return numel + 4 * static_cast<std::uint64_t>(int8_rows(t));
}

namespace {

at::Tensor int8_roundtrip(const at::Tensor& src) {
    // The core reference works on contiguous float data in host memory. A CUDA tensor therefore
    // takes a round trip through the CPU: correct (bit for bit the reference) but slow; a fused
    // kernel checked against the same reference is the production path.
    at::Tensor host = src.detach().to(at::kCPU, at::kFloat).contiguous();
    at::Tensor out = at::empty_like(host);
    const auto rows = static_cast<std::size_t>(int8_rows(host));
    const auto numel = static_cast<std::size_t>(host.numel());
    if (numel > 0) {
        const std::size_t cols = numel / rows;
        const Int8Rows q = quantize_int8_rows(host.data_ptr<float>(), rows, cols);
        dequantize_int8_rows(q, out.data_ptr<float>());
    }
    return out.to(src.device(), src.scalar_type());
}

}  // namespace

at::Tensor materialized(const at::Tensor& src, Precision p) {
    check_routable(p);
    if (!src.is_floating_point())
        throw std::invalid_argument("cannot materialize a tensor of dtype " +
                                    std::string(c10::toString(src.scalar_type())) + " in " +
                                    std::string(to_string(p)));
    at::NoGradGuard no_grad;
    if (p == Precision::bf16) {
        // copy=true: a tensor that is already bfloat16 must not come back as an alias of itself.
        return src.detach().to(at::kBFloat16, /*non_blocking=*/false, /*copy=*/true).to(src.scalar_type());
    }
    return int8_roundtrip(src);
}

void assign(const at::Tensor& param, const at::Tensor& value) {
    at::NoGradGuard no_grad;
    // Under no-grad an in-place copy into a leaf that requires grad is allowed and not recorded.
    param.copy_(value);
}

}  // namespace sp::agent::detail
