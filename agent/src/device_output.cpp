#include "device_output.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "sp/agent/rounding.h"
#include "sp/precision.h"

namespace sp::agent::detail {

DeviceOutputErrors device_output_errors(const at::Tensor& rows, const at::Tensor& tokens,
                                        std::size_t int4_group, bool quantize_inputs) {
    at::NoGradGuard no_grad;
    // Float first, as the host path copies them (a bf16 activation is widened exactly), then double for
    // the products: each float product is exact in double, so the two paths differ only in the order
    // the sums are taken in (and a GPU's float matrix product, TF32 or not, never enters).
    const at::Tensor w = rows.detach().to(at::kFloat);
    const at::Tensor x = tokens.detach().to(at::kFloat);
    const at::Tensor y = x.to(at::kDouble).matmul(w.to(at::kDouble).t());
    std::vector<at::Tensor> errors;
    errors.reserve(kLowFormatsCheapestFirst.size());
    for (Precision p : kLowFormatsCheapestFirst) {
        const at::Tensor wq = rounded_rows_aten(w, p, int4_group).to(at::kDouble);
        const at::Tensor xq = (quantize_inputs ? rounded_rows_aten(x, p, int4_group) : x).to(at::kDouble);
        errors.push_back(xq.matmul(wq.t()).sub(y));
    }
    return {y.square().sum(), at::stack(errors)};
}

std::size_t device_sums_size(std::size_t tokens, bool with_grad) {
    const std::size_t formats = kLowFormatsCheapestFirst.size();
    return 1 + formats + (with_grad ? 2 * formats * tokens : 0);
}

at::Tensor device_output_sums(const DeviceOutputErrors& e, const at::Tensor& grad) {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> parts = {e.signal.reshape({1}), e.error.square().sum({1, 2})};
    if (grad.defined()) {
        // a = g e per format, token and row; the row sums and the sums of squares per token.
        const at::Tensor a = e.error.mul(grad.detach().to(e.error.device(), at::kDouble).unsqueeze(0));
        parts.push_back(a.sum(2).reshape({-1}));
        parts.push_back(a.square().sum(2).reshape({-1}));
    }
    return at::cat(parts);
}

at::Tensor to_device(const at::Tensor& t, c10::Device device) {
    if (t.device() == device) return t;
    return t.to(device, /*non_blocking=*/t.is_cpu() && !t.is_pinned());
}

at::Tensor index_on(const std::vector<std::int64_t>& index, c10::Device device) {
    return to_device(at::tensor(index, at::kLong), device);
}

}  // namespace sp::agent::detail
