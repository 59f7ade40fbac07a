#include "sp/agent/rounding.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <stdexcept>

namespace sp::agent {
namespace {

// Largest |value| over the finite elements of each row of a [rows x n] float matrix, as [rows x 1];
// 0 for a row with none (the reference's finite_absmax).
at::Tensor finite_absmax(const at::Tensor& m) {
    return at::where(at::isfinite(m), m.abs(), at::zeros({}, m.options())).amax({1}, /*keepdim=*/true);
}

// The reference's per-group scale: max(absmax / max_code, min_scale), a float division.
at::Tensor group_scale(const at::Tensor& m, float max_code, float min_scale) {
    return finite_absmax(m).div(at::scalar_tensor(max_code, m.options())).clamp_min(min_scale);
}

// INT8 (group = cols) and INT4: dequantize(quantize(x)) with round half to even. A NaN becomes 0,
// and so does a -0 code (the reference rounds through an int, which has no negative zero).
at::Tensor integer_roundtrip(const at::Tensor& rows, std::int64_t group, float max_code, float min_scale) {
    const std::int64_t n = rows.size(0), cols = rows.size(1);
    group = std::min(group, cols);  // a group past the row's end is the row, as in the reference
    const std::int64_t groups = (cols + group - 1) / group;
    // Padding with zeros changes no group's absmax and is cut off again at the end. Contiguous
    // first: a transposed input's padded copy keeps its strides, which no view can regroup.
    const at::Tensor padded =
        at::constant_pad_nd(rows.contiguous(), {0, groups * group - cols}).view({n * groups, group});
    const at::Tensor scale = group_scale(padded, max_code, min_scale);
    const at::Tensor codes = padded.div(scale).clamp(-max_code, max_code).round().add(0.0);
    const at::Tensor out = at::where(at::isnan(padded), at::zeros({}, rows.options()), codes.mul(scale));
    return out.view({n, groups * group}).narrow(1, 0, cols);
}

// 2^k for an int32 tensor of exponents within the normal float range, exactly (from the bit pattern).
at::Tensor exact_power_of_two(const at::Tensor& k) {
    return k.add(127).bitwise_left_shift(23).view(at::kFloat);
}

// FP8 per row: x / scale rounded to the format's grid, ties to even, saturating at its largest
// finite value, times the scale. The grid's quantum in a value's binade is 2^(exp - mantissa_bits),
// its exponent clamped to the smallest normal one (the subnormal spacing): |v| / quantum is a
// power-of-two scaling, exact, and so is the product after rounding (the reference's round_fp8).
at::Tensor fp8_roundtrip(const at::Tensor& rows, Precision format) {
    const bool e4m3 = format == Precision::fp8_e4m3;
    const float max_finite = e4m3 ? kFp8E4M3Max : kFp8E5M2Max;
    const int mantissa_bits = e4m3 ? 3 : 2, min_normal_exp = e4m3 ? -6 : -14;
    const at::Tensor scale = group_scale(rows, max_finite, kFp8MinScale);
    const at::Tensor v = rows.div(scale).clamp(-max_finite, max_finite);
    const at::Tensor magnitude = v.abs();
    const at::Tensor exponent =
        magnitude.view(at::kInt).bitwise_right_shift(23).sub(127).clamp_min(min_normal_exp);
    const at::Tensor quantum = exact_power_of_two(exponent.sub(mantissa_bits));
    const at::Tensor rounded = magnitude.div(quantum).round().mul(quantum).clamp_max(max_finite);
    return at::where(at::isnan(v), at::zeros({}, rows.options()), at::copysign(rounded, v).mul(scale));
}

}  // namespace

at::Tensor rounded_rows_aten(const at::Tensor& x, Precision format, std::size_t int4_group) {
    if (format == Precision::int4 && int4_group == 0)
        throw std::invalid_argument("rounded_rows: INT4 groups: the group size must be at least 1");
    at::NoGradGuard no_grad;
    const at::Tensor values = x.detach().to(at::kFloat);
    if (values.numel() == 0) return at::empty_like(x);
    const std::int64_t cols = values.dim() == 0 ? 1 : values.size(-1);
    const at::Tensor rows = values.reshape({-1, cols});
    at::Tensor out;
    switch (format) {
        case Precision::bf16:
            out = rows.to(at::kBFloat16).to(at::kFloat);  // round to nearest even, as round_to_bf16
            break;
        case Precision::int8:
            out = integer_roundtrip(rows, cols, float(kInt8Max), kInt8MinScale);
            break;
        case Precision::int4:
            out = integer_roundtrip(rows, std::int64_t(int4_group), float(kInt4Max), kInt4MinScale);
            break;
        case Precision::fp8_e4m3:
        case Precision::fp8_e5m2:
            out = fp8_roundtrip(rows, format);
            break;
        default:
            throw std::invalid_argument("rounded_rows: unknown precision");
    }
    // Contiguous, as the reference path's result is (a narrowed INT4 result is a view into padding).
    return out.reshape(x.sizes()).to(x.scalar_type()).contiguous();
}

at::Tensor rounded_rows(const at::Tensor& x, Precision format, std::size_t int4_group) {
    // On an accelerator the rows never leave it; on the host the reference itself runs (scalar, and
    // cheaper than a dozen whole-tensor passes on small activations).
    if (!x.is_cpu()) return rounded_rows_aten(x, format, int4_group);
    const at::Tensor host = x.detach().to(at::kFloat).contiguous();
    at::Tensor out = at::empty_like(host);
    const auto cols = static_cast<std::size_t>(host.dim() == 0 ? 1 : host.size(-1));
    if (cols > 0 && host.numel() > 0)
        sp::roundtrip(format, host.data_ptr<float>(), static_cast<std::size_t>(host.numel()) / cols, cols,
                      out.data_ptr<float>(), int4_group);
    return out.to(x.scalar_type());
}

}  // namespace sp::agent
