#include "payload.h"

#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "materialize.h"

namespace sp::agent::detail {

Payload pack_payload(const at::Tensor& master, Precision p, std::size_t int4_group) {
    if (master.is_cuda() || !master.is_floating_point())
        throw std::invalid_argument("pack_payload: expects a float tensor in host memory");
    if (p == Precision::int4 && int4_group == 0) throw std::invalid_argument("pack_payload: INT4 group of 0");
    const at::Tensor host = master.detach().to(at::kFloat).contiguous();
    Payload out;
    out.precision = p;
    out.rows = int8_rows(host);
    out.cols = out.rows > 0 ? host.numel() / out.rows : 0;
    if (host.numel() == 0) return out;
    if (p == Precision::int4) out.group = int4_group;
    const float* w = host.data_ptr<float>();
    const auto cols = std::size_t(out.cols);
    const PackedRow row = packed_row(p, cols, int4_group);
    out.values.resize(std::size_t(out.rows) * row.code_bytes);
    out.scales.resize(std::size_t(out.rows) * row.scales);
    // The rows split over ATen's intra-op pool, kPackGrainElements elements a task at least.
    const std::int64_t grain = std::max<std::int64_t>(1, kPackGrainElements / out.cols);
    at::parallel_for(0, out.rows, grain, [&](std::int64_t begin, std::int64_t end) {
        pack_rows(p, w, cols, std::size_t(begin), std::size_t(end), out.values.data(), out.scales.data(),
                  int4_group);
    });
    return out;
}

namespace {

at::Tensor decode_table(Precision format, c10::Device device) {
    std::array<float, 256> table{};
    for (int code = 0; code < 256; ++code)
        table[std::size_t(code)] = format == Precision::fp8_e4m3 ? decode_fp8_e4m3(std::uint8_t(code))
                                                                 : decode_fp8_e5m2(std::uint8_t(code));
    return at::from_blob(table.data(), {256}, at::kFloat).to(device, /*non_blocking=*/false, /*copy=*/true);
}

// The signed INT4 codes of a [rows x ceil(cols/2)] byte matrix as a [rows x cols] int32 matrix.
at::Tensor int4_codes(const at::Tensor& bytes, std::int64_t rows, std::int64_t cols) {
    const at::Tensor b = bytes.view({rows, (cols + 1) / 2}).to(at::kInt);
    const at::Tensor low = b.bitwise_and(15), high = b.div(16, "floor");
    const at::Tensor nibbles = at::stack({low, high}, 2).view({rows, -1}).narrow(1, 0, cols);
    return nibbles.sub(nibbles.ge(8).to(at::kInt).mul(16));  // two's complement: 8..15 -> -8..-1
}

}  // namespace

PayloadExpander::PayloadExpander(c10::Device device)
    : fp8_e4m3_(decode_table(Precision::fp8_e4m3, device)),
      fp8_e5m2_(decode_table(Precision::fp8_e5m2, device)) {}

void PayloadExpander::expand(const at::Tensor& values, const at::Tensor& scales, const Payload& meta,
                             const at::Tensor& param) const {
    if (param.numel() != meta.rows * meta.cols)
        throw std::invalid_argument("PayloadExpander: a payload of " + std::to_string(meta.rows * meta.cols) +
                                    " elements for a parameter of " + std::to_string(param.numel()));
    if (param.numel() == 0) return;
    at::NoGradGuard no_grad;
    const std::int64_t rows = meta.rows, cols = meta.cols;
    at::Tensor out;
    switch (meta.precision) {
        case Precision::bf16:
            out = values.view(at::kBFloat16);
            break;
        case Precision::int8:
            out = values.view(at::kChar).view({rows, cols}).to(at::kFloat).mul(scales.view({rows, 1}));
            break;
        case Precision::fp8_e4m3:
        case Precision::fp8_e5m2: {
            const at::Tensor& table = meta.precision == Precision::fp8_e4m3 ? fp8_e4m3_ : fp8_e5m2_;
            out = table.index_select(0, values.to(at::kLong)).view({rows, cols}).mul(scales.view({rows, 1}));
            break;
        }
        case Precision::int4: {
            const auto group = static_cast<std::int64_t>(meta.group);
            const at::Tensor per_element =
                scales.view({rows, -1}).repeat_interleave(group, 1).narrow(1, 0, cols);
            out = int4_codes(values, rows, cols).to(at::kFloat).mul(per_element);
            break;
        }
    }
    param.copy_(out.view(param.sizes()));
}

}  // namespace sp::agent::detail
