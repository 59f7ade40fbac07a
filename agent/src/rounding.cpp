#include "sp/agent/rounding.h"

#include <ATen/ATen.h>

namespace sp::agent {

at::Tensor rounded_rows(const at::Tensor& x, Precision format, std::size_t int4_group) {
    const at::Tensor host = x.detach().to(at::kCPU, at::kFloat).contiguous();
    at::Tensor out = at::empty_like(host);
    const auto cols = static_cast<std::size_t>(host.dim() == 0 ? 1 : host.size(-1));
    if (cols > 0 && host.numel() > 0)
        sp::roundtrip(format, host.data_ptr<float>(), static_cast<std::size_t>(host.numel()) / cols, cols,
                      out.data_ptr<float>(), int4_group);
    return out.to(x.device(), x.scalar_type());
}

}  // namespace sp::agent
