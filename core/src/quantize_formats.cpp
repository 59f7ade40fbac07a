// INT4 per-group and FP8 per-row reference quantizers, BF16 rounding, and the packed layout
// (packed_row, stored_bytes; roundtrip, vectorized: quantize_roundtrip.cpp; pack_rows:
// quantize_pack.cpp). The arithmetic contract is in sp/quantize.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "round_half_even.h"
#include "sp/quantize.h"

namespace sp {
namespace {

// Largest |value| over the finite elements of x[0, n); 0 when there are none.
float finite_absmax(const float* x, std::size_t n) {
    float absmax = 0.0f;
    for (std::size_t i = 0; i < n; ++i)
        if (std::isfinite(x[i])) absmax = std::max(absmax, std::fabs(x[i]));
    return absmax;
}

struct Fp8Codec {
    float max_finite;
    std::uint8_t (*encode)(float);
    float (*decode)(std::uint8_t);
};

Fp8Codec fp8_codec(Precision format) {
    switch (format) {
        case Precision::fp8_e4m3:
            return {kFp8E4M3Max, encode_fp8_e4m3, decode_fp8_e4m3};
        case Precision::fp8_e5m2:
            return {kFp8E5M2Max, encode_fp8_e5m2, decode_fp8_e5m2};
        default:
            throw std::invalid_argument("FP8 rows: the format must be fp8_e4m3 or fp8_e5m2");
    }
}

void require_int4_group(std::size_t group) {
    if (group == 0) throw std::invalid_argument("INT4 groups: the group size must be at least 1");
}

}  // namespace

Int4Groups quantize_int4_groups(const float* w, std::size_t rows, std::size_t cols, std::size_t group) {
    require_int4_group(group);
    Int4Groups out;
    out.rows = rows;
    out.cols = cols;
    out.group = group;
    const std::size_t row_bytes = int4_bytes_per_row(cols);
    const std::size_t groups = int4_groups_per_row(cols, group);
    out.packed.assign(rows * row_bytes, 0);
    out.scales.resize(rows * groups);
    constexpr float kMax = static_cast<float>(kInt4Max);
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = w + r * cols;
        std::uint8_t* bytes = out.packed.data() + r * row_bytes;
        for (std::size_t g = 0; g < groups; ++g) {
            const std::size_t begin = g * group;
            const std::size_t end = std::min(begin + group, cols);
            const float scale = std::max(finite_absmax(row + begin, end - begin) / kMax, kInt4MinScale);
            out.scales[r * groups + g] = scale;
            for (std::size_t c = begin; c < end; ++c) {
                float q = 0.0f;  // NaN quantizes to 0
                if (!std::isnan(row[c]))
                    q = detail::round_half_even_small(std::clamp(row[c] / scale, -kMax, kMax));
                const auto nibble = static_cast<unsigned>(static_cast<int>(q)) & 0xFu;  // two's complement
                bytes[c / 2] = static_cast<std::uint8_t>(bytes[c / 2] | (c % 2 == 0 ? nibble : nibble << 4));
            }
        }
    }
    return out;
}

int int4_code(const Int4Groups& m, std::size_t r, std::size_t c) {
    const std::uint8_t byte = m.packed[r * int4_bytes_per_row(m.cols) + c / 2];
    const int nibble = (c % 2 == 0 ? byte : byte >> 4) & 0xF;
    return nibble >= 8 ? nibble - 16 : nibble;
}

void dequantize_int4_groups(const Int4Groups& m, float* out) {
    require_int4_group(m.group);
    const std::size_t groups = int4_groups_per_row(m.cols, m.group);
    for (std::size_t r = 0; r < m.rows; ++r)
        for (std::size_t c = 0; c < m.cols; ++c)
            out[r * m.cols + c] = static_cast<float>(int4_code(m, r, c)) * m.scales[r * groups + c / m.group];
}

Fp8Rows quantize_fp8_rows(const float* w, std::size_t rows, std::size_t cols, Precision format) {
    const Fp8Codec codec = fp8_codec(format);
    Fp8Rows out;
    out.rows = rows;
    out.cols = cols;
    out.format = format;
    out.q.resize(rows * cols);
    out.scales.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = w + r * cols;
        const float scale = std::max(finite_absmax(row, cols) / codec.max_finite, kFp8MinScale);
        out.scales[r] = scale;
        for (std::size_t c = 0; c < cols; ++c) {
            const float x = row[c] / scale;
            out.q[r * cols + c] = std::isnan(x)
                                      ? std::uint8_t{0}
                                      : codec.encode(std::clamp(x, -codec.max_finite, codec.max_finite));
        }
    }
    return out;
}

void dequantize_fp8_rows(const Fp8Rows& m, float* out) {
    const Fp8Codec codec = fp8_codec(m.format);
    for (std::size_t r = 0; r < m.rows; ++r)
        for (std::size_t c = 0; c < m.cols; ++c)
            out[r * m.cols + c] = codec.decode(m.q[r * m.cols + c]) * m.scales[r];
}

PackedRow packed_row(Precision p, std::size_t cols, std::size_t int4_group) {
    switch (p) {
        case Precision::bf16:
            return {2 * cols, 0};
        case Precision::int8:
        case Precision::fp8_e4m3:
        case Precision::fp8_e5m2:
            return {cols, 1};
        case Precision::int4:
            require_int4_group(int4_group);
            return {int4_bytes_per_row(cols), int4_groups_per_row(cols, int4_group)};
    }
    throw std::invalid_argument("packed_row: unknown precision");
}

std::uint64_t stored_bytes(Precision p, std::size_t rows, std::size_t cols, std::size_t int4_group) {
    const PackedRow row = packed_row(p, cols, int4_group);
    return std::uint64_t(rows) * (row.code_bytes + sizeof(float) * row.scales);
}

float round_to_bf16(float x) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    if (std::isnan(x)) {
        bits = 0x7FC00000u;
    } else {
        bits += 0x7FFFu + ((bits >> 16) & 1u);  // carries into the exponent when rounding up
        bits &= 0xFFFF0000u;
    }
    float out = 0.0f;
    std::memcpy(&out, &bits, sizeof out);
    return out;
}

}  // namespace sp
