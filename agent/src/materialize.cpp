#include "materialize.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "sp/quantize.h"

namespace sp::agent::detail {

std::int64_t int8_rows(const at::Tensor& t) {
    return t.dim() >= 2 ? t.size(0) : 1;
}

std::uint64_t materialized_bytes(const at::Tensor& t, Precision p, std::size_t int4_group) {
    const auto numel = static_cast<std::size_t>(t.numel());
    const auto rows = static_cast<std::size_t>(int8_rows(t));
    if (numel == 0) return 0;
    return stored_bytes(p, rows, numel / rows, int4_group);
}

namespace {

at::Tensor reference_roundtrip(const at::Tensor& src, Precision p, std::size_t int4_group) {
    // The core reference works on contiguous float data in host memory. A CUDA tensor therefore
    // takes a round trip through the CPU: correct (bit for bit the reference) but slow; a fused
    // kernel checked against the same reference is the production path.
    at::Tensor host = src.detach().to(at::kCPU, at::kFloat).contiguous();
    at::Tensor out = at::empty_like(host);
    const auto rows = static_cast<std::size_t>(int8_rows(host));
    const auto numel = static_cast<std::size_t>(host.numel());
    if (numel > 0)
        roundtrip(p, host.data_ptr<float>(), rows, numel / rows, out.data_ptr<float>(), int4_group);
    return out.to(src.device(), src.scalar_type());
}

// The planted fault: stochastic rounding onto {-s, 0, s} per row, s = step * absmax, in plain ATen
// (not the reference: no kernel will ever be checked against it). Rounding to the nearest level
// would be a fixed function of the master weights, which training with a straight-through gradient
// learns around; fresh noise at every materialization it cannot. The generator is seeded once, so a
// run that materializes in the same order draws the same noise.
at::Tensor harsh_roundtrip(const at::Tensor& src, double step) {
    static at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(0x5eed);
    at::Tensor host = src.detach().to(at::kCPU, at::kFloat).contiguous();
    if (host.numel() == 0) return host.to(src.device(), src.scalar_type());
    const at::Tensor rows = host.reshape({int8_rows(host), -1});
    const at::Tensor scale = rows.abs().amax(1, /*keepdim=*/true).mul(step).clamp_min(kInt8MinScale);
    const at::Tensor x = rows.div(scale);  // in [-1/step, 1/step]
    const at::Tensor low = x.floor();
    const at::Tensor up = at::rand(x.sizes(), generator, x.options()).lt(x.sub(low)).to(at::kFloat);
    const at::Tensor q = low.add(up).clamp(-1, 1).mul(scale);
    return q.reshape(host.sizes()).to(src.device(), src.scalar_type());
}

}  // namespace

at::Tensor materialized(const at::Tensor& src, Precision p, double harsh_int8_step, std::size_t int4_group) {
    if (!src.is_floating_point())
        throw std::invalid_argument("cannot materialize a tensor of dtype " +
                                    std::string(c10::toString(src.scalar_type())) + " in " +
                                    std::string(to_string(p)));
    at::NoGradGuard no_grad;
    if (p == Precision::bf16) {
        // copy=true: a tensor that is already bfloat16 must not come back as an alias of itself.
        return src.detach().to(at::kBFloat16, /*non_blocking=*/false, /*copy=*/true).to(src.scalar_type());
    }
    if (!(harsh_int8_step >= 0.0) || !std::isfinite(harsh_int8_step))
        throw std::invalid_argument("harsh_int8_step must be finite and >= 0, got " +
                                    std::to_string(harsh_int8_step));
    if (p == Precision::int8 && harsh_int8_step > 0.0) return harsh_roundtrip(src, harsh_int8_step);
    return reference_roundtrip(src, p, int4_group);
}

at::Tensor materialized_as_stored(const at::Tensor& src, bool transposed, Precision p, double harsh_int8_step,
                                  std::size_t int4_group) {
    if (!transposed) return materialized(src, p, harsh_int8_step, int4_group);
    return materialized(src.t(), p, harsh_int8_step, int4_group).t();
}

void assign(const at::Tensor& param, const at::Tensor& value) {
    at::NoGradGuard no_grad;
    // Under no-grad an in-place copy into a leaf that requires grad is allowed and not recorded.
    param.copy_(value);
}

}  // namespace sp::agent::detail
