#include "rounding_check.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "sp/agent/rounding.h"
#include "sp/quantize.h"

namespace sp::check {
namespace {

constexpr Precision kFormats[] = {Precision::bf16, Precision::int8, Precision::fp8_e4m3, Precision::fp8_e5m2,
                                  Precision::int4};

// The reference's values for the rows of x (the last dimension), on the host.
at::Tensor reference(const at::Tensor& x, Precision p, std::size_t group) {
    const at::Tensor c = x.to(at::kFloat).contiguous();
    at::Tensor out = at::empty_like(c);
    const auto cols = static_cast<std::size_t>(c.size(-1));
    sp::roundtrip(p, c.data_ptr<float>(), static_cast<std::size_t>(c.numel()) / cols, cols,
                  out.data_ptr<float>(), group);
    return out;
}

// The first element whose bits differ (NaN matches any NaN), or "" when none does.
std::string first_difference(const at::Tensor& got, const at::Tensor& want) {
    if (got.sizes() != want.sizes()) return "shapes differ";
    const at::Tensor g = got.to(at::kCPU).contiguous(), w = want.contiguous();
    const float* a = g.data_ptr<float>();
    const float* b = w.data_ptr<float>();
    for (std::int64_t i = 0; i < g.numel(); ++i) {
        if (std::isnan(a[i]) && std::isnan(b[i])) continue;
        std::uint32_t x = 0, y = 0;
        std::memcpy(&x, &a[i], 4);
        std::memcpy(&y, &b[i], 4);
        if (x != y)
            return "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " (bits " +
                   std::to_string(x) + ") against the reference's " + std::to_string(b[i]) + " (bits " +
                   std::to_string(y) + ")";
    }
    return "";
}

// Rows built to reach every branch: normal values over many binades, exact ties, tiny values (FP8
// subnormals, codes that round to -0) next to a large one, zeros of both signs, NaN and infinities,
// an all-zero row. At least 7 rows; a narrower matrix is the first columns of one of 4.
at::Tensor awkward_rows(std::int64_t rows, std::int64_t cols) {
    if (cols < 4) return awkward_rows(rows, 4).narrow(1, 0, cols).contiguous();
    at::manual_seed(7);
    at::Tensor x = at::randn({rows, cols}) * at::exp(at::randn({rows, 1}) * 4.0f);
    const std::int64_t middle = cols / 2;
    x[0].copy_(at::arange(cols).to(at::kFloat).sub(static_cast<float>(middle)).mul(0.5f));  // ties
    x[1].copy_(at::randn({cols}) * 1e-6f);
    x[1][0].fill_(1000.0f);
    x[2].zero_();
    x[3][0].fill_(-0.0f);
    x[3][1].fill_(std::numeric_limits<float>::quiet_NaN());
    x[3][2].fill_(std::numeric_limits<float>::infinity());
    x[4][3].fill_(-std::numeric_limits<float>::infinity());
    x[5].fill_(std::numeric_limits<float>::quiet_NaN());
    x[6][0].fill_(3.0e38f);  // BF16 rounds it to infinity
    return x;
}

// Rows of (v, max finite): the scale is exactly 1, so v meets the FP8 grid itself; v sweeps the bit
// patterns of every binade below the format's largest value, both signs.
at::Tensor fp8_sweep(Precision p) {
    const float max = p == Precision::fp8_e4m3 ? kFp8E4M3Max : kFp8E5M2Max;
    std::vector<float> values;
    for (std::uint32_t bits = 0x30000000u; bits < 0x47800000u; bits += 0x1003u) {
        float v = 0;
        std::memcpy(&v, &bits, 4);
        if (v < max) values.insert(values.end(), {v, max, -v, max});
    }
    const auto n = static_cast<std::int64_t>(values.size()) / 2;
    return at::from_blob(values.data(), {n, 2}, at::kFloat).clone();
}

std::string case_name(Precision p, std::size_t group, std::int64_t cols) {
    return std::string(to_string(p)) + ", INT4 group " + std::to_string(group) + ", " + std::to_string(cols) +
           " columns: ";
}

}  // namespace

std::string rounding_mismatch(c10::Device device) {
    const std::vector<std::vector<std::int64_t>> shapes = {
        {9, 100}, {2, 5, 67}, {12, 1}, {64, 300}, {8, 128}};
    // INT4 groups: larger than a row (one group per row, without a padded copy of that size), not
    // dividing it, dividing it, and of one element.
    const std::size_t groups[] = {std::size_t(1) << 20, 64, 5, 1};
    for (const auto& shape : shapes)
        for (const Precision p : kFormats)
            for (const std::size_t group : groups) {
                std::int64_t rows = 1;
                for (std::size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
                const at::Tensor x = awkward_rows(std::max<std::int64_t>(rows, 7), shape.back())
                                         .narrow(0, 0, rows)
                                         .reshape(shape);
                const std::string diff = first_difference(agent::rounded_rows_aten(x.to(device), p, group),
                                                          reference(x, p, group));
                if (!diff.empty()) return case_name(p, group, shape.back()) + diff;
                // The same rows as a transposed view (an activation's transpose, a weight's .t()).
                const at::Tensor strided = x.reshape({-1, shape.back()}).t().contiguous().t();
                const at::Tensor got = agent::rounded_rows_aten(strided.to(device), p, group);
                const std::string strided_diff = first_difference(got, reference(strided, p, group));
                if (!strided_diff.empty())
                    return case_name(p, group, shape.back()) + "a transposed view: " + strided_diff;
                if (!got.is_contiguous())
                    return case_name(p, group, shape.back()) + "a non-contiguous result";
            }
    for (const Precision p : {Precision::fp8_e4m3, Precision::fp8_e5m2}) {
        const at::Tensor x = fp8_sweep(p);
        const std::string diff =
            first_difference(agent::rounded_rows_aten(x.to(device), p), reference(x, p, 64));
        if (!diff.empty()) return std::string(to_string(p)) + " sweep of every binade: " + diff;
    }
    return "";
}

}  // namespace sp::check
