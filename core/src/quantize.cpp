// Reference quantizers (INT8 rows, FP8 elements, relative error); the arithmetic contract is in
// sp/quantize.h. INT4 groups, FP8 rows, BF16 and the per-format entry points: quantize_formats.cpp.
#include "sp/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "round_half_even.h"

namespace sp {
namespace {

struct Fp8Format {
    int mantissa_bits;
    int exponent_bias;
    int min_normal_exp;  // 1 - bias
    double max_finite;
    bool has_inf;
};

constexpr Fp8Format kE4M3{3, 7, -6, 448.0, false};
constexpr Fp8Format kE5M2{2, 15, -14, 57344.0, true};

// Nearest representable magnitude for a finite a >= 0, ties to even, saturating at max_finite.
// The quantum (spacing of representable values) in a's binade is 2^(exp - mantissa_bits), with exp
// clamped to the smallest normal exponent so the subnormal range has the fixed spacing
// 2^(min_normal_exp - mantissa_bits). In the normal range that is rounding the float's 23-bit
// mantissa to mantissa_bits on its bit pattern (as round_to_bf16 does; a carry moves into the next
// binade, whose first value is representable); below it, a / quantum is a power-of-two scaling,
// exact, and so is the product after rounding.
float round_magnitude(float a, const Fp8Format& f) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &a, sizeof bits);
    const int exp = static_cast<int>(bits >> 23) - 127;  // floor(log2 a) for a normal float
    float r = 0.0f;
    if (exp < f.min_normal_exp) {
        const std::uint32_t quantum_bits = std::uint32_t(f.min_normal_exp - f.mantissa_bits + 127) << 23;
        float quantum = 0.0f;
        std::memcpy(&quantum, &quantum_bits, sizeof quantum);  // 2^(min_normal_exp - mantissa_bits)
        r = detail::round_half_even_small(a / quantum) * quantum;
    } else {
        const int drop = 23 - f.mantissa_bits;
        bits += ((1u << (drop - 1)) - 1u) + ((bits >> drop) & 1u);
        bits &= ~((1u << drop) - 1u);
        std::memcpy(&r, &bits, sizeof r);  // an overflow past FLT_MAX becomes inf: saturated below
    }
    return std::min(r, static_cast<float>(f.max_finite));
}

float round_fp8(float x, const Fp8Format& f) {
    if (std::isnan(x)) return x;
    if (std::isinf(x)) return f.has_inf ? x : std::copysign(static_cast<float>(f.max_finite), x);
    return std::copysign(round_magnitude(std::fabs(x), f), x);
}

std::uint8_t encode_fp8(float x, const Fp8Format& f) {
    const unsigned sign = std::signbit(x) ? 0x80u : 0u;
    if (std::isnan(x)) return static_cast<std::uint8_t>(sign | 0x7Fu);
    const double a = std::fabs(static_cast<double>(round_fp8(x, f)));
    const int m = f.mantissa_bits;
    const unsigned exp_all_ones = (0x7Fu >> m);
    if (std::isinf(a)) return static_cast<std::uint8_t>(sign | (exp_all_ones << m));  // E5M2 only
    if (a == 0.0) return static_cast<std::uint8_t>(sign);
    int e = 0;
    std::frexp(a, &e);
    const int exp = e - 1;
    unsigned field = 0;
    unsigned mantissa = 0;
    if (exp < f.min_normal_exp) {  // subnormal: a = mantissa * 2^(min_normal_exp - m)
        mantissa = static_cast<unsigned>(std::ldexp(a, m - f.min_normal_exp));
    } else {  // normal: a = (1 + mantissa / 2^m) * 2^exp
        field = static_cast<unsigned>(exp + f.exponent_bias);
        mantissa = static_cast<unsigned>(std::ldexp(a, m - exp)) - (1u << m);
    }
    return static_cast<std::uint8_t>(sign | (field << m) | mantissa);
}

float decode_fp8(std::uint8_t bits, const Fp8Format& f) {
    const int m = f.mantissa_bits;
    const bool negative = (bits & 0x80u) != 0;
    const unsigned field = (bits & 0x7Fu) >> m;
    const unsigned mantissa = bits & ((1u << m) - 1u);
    const unsigned exp_all_ones = (0x7Fu >> m);
    double value = 0.0;
    if (f.has_inf && field == exp_all_ones) {
        value = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
    } else if (!f.has_inf && field == exp_all_ones && mantissa == (1u << m) - 1u) {
        value = std::numeric_limits<double>::quiet_NaN();  // E4M3's single NaN per sign
    } else if (field == 0) {
        value = std::ldexp(static_cast<double>(mantissa), f.min_normal_exp - m);
    } else {
        value = std::ldexp(static_cast<double>((1u << m) + mantissa),
                           static_cast<int>(field) - f.exponent_bias - m);
    }
    return static_cast<float>(negative ? -value : value);
}

}  // namespace

Int8Rows quantize_int8_rows(const float* w, std::size_t rows, std::size_t cols) {
    Int8Rows out;
    out.rows = rows;
    out.cols = cols;
    out.q.resize(rows * cols);
    out.scales.resize(rows);
    constexpr float kMax = static_cast<float>(kInt8Max);
    for (std::size_t r = 0; r < rows; ++r) {
        const float* row = w + r * cols;
        float absmax = 0.0f;
        for (std::size_t c = 0; c < cols; ++c)
            if (std::isfinite(row[c])) absmax = std::max(absmax, std::fabs(row[c]));
        const float scale = std::max(absmax / kMax, kInt8MinScale);
        out.scales[r] = scale;
        for (std::size_t c = 0; c < cols; ++c) {
            float q = 0.0f;  // NaN quantizes to 0
            if (!std::isnan(row[c]))
                q = detail::round_half_even_small(std::clamp(row[c] / scale, -kMax, kMax));
            out.q[r * cols + c] = static_cast<std::int8_t>(q);
        }
    }
    return out;
}

void dequantize_int8_rows(const Int8Rows& m, float* out) {
    for (std::size_t r = 0; r < m.rows; ++r)
        for (std::size_t c = 0; c < m.cols; ++c)
            out[r * m.cols + c] = static_cast<float>(m.q[r * m.cols + c]) * m.scales[r];
}

Int8Rows quantize_int8(const std::vector<float>& v) {
    return quantize_int8_rows(v.data(), 1, v.size());
}

std::vector<float> dequantize_int8(const Int8Rows& m) {
    std::vector<float> out(m.rows * m.cols);
    dequantize_int8_rows(m, out.data());
    return out;
}

std::vector<float> int8_roundtrip_rows(const float* w, std::size_t rows, std::size_t cols) {
    return dequantize_int8(quantize_int8_rows(w, rows, cols));
}

float round_to_fp8_e4m3(float x) {
    return round_fp8(x, kE4M3);
}
float round_to_fp8_e5m2(float x) {
    return round_fp8(x, kE5M2);
}
std::uint8_t encode_fp8_e4m3(float x) {
    return encode_fp8(x, kE4M3);
}
std::uint8_t encode_fp8_e5m2(float x) {
    return encode_fp8(x, kE5M2);
}
float decode_fp8_e4m3(std::uint8_t bits) {
    return decode_fp8(bits, kE4M3);
}
float decode_fp8_e5m2(std::uint8_t bits) {
    return decode_fp8(bits, kE5M2);
}

double relative_error(const float* a, const float* b, std::size_t n) {
    double norm_a = 0.0;
    double norm_diff = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double x = a[i];
        const double d = x - static_cast<double>(b[i]);
        norm_a += x * x;
        norm_diff += d * d;
    }
    if (norm_a == 0.0) {
        if (std::isnan(norm_diff)) return norm_diff;
        return norm_diff == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
    }
    return std::sqrt(norm_diff) / std::sqrt(norm_a);
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) throw std::invalid_argument("relative_error: sizes differ");
    return relative_error(a.data(), b.data(), a.size());
}

}  // namespace sp
