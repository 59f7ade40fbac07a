#pragma once
// What one thread of the dequantize kernels computes for one element, shared by the kernels
// (dequantize_kernels.cu) and their host model (dequantize_host_model.cpp), so that both give the same
// bits. Every decode is exact (an FP8 or INT4 code is a float without rounding) and the value is one
// fp32 multiplication, decode(code) * scale, as core's dequantize_* functions (sp/quantize.h); the
// kernels are built with --fmad=false and the host model with -ffp-contract=off, so nothing fuses.
// The BF16 output rounds as core's round_to_bf16 (nearest, ties to even; every NaN -> 0x7FC0).
#include <cstdint>
#include <cstring>

#include "sp/cuda/dequantize_launcher.h"

#if defined(__CUDACC__)
#define SP_DQ_FN __host__ __device__ __forceinline__
#else
#define SP_DQ_FN inline
#endif

namespace sp::cuda::dequant {

SP_DQ_FN float float_from_bits(std::uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

SP_DQ_FN std::uint32_t bits_of(float f) {
    std::uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

// A NaN with the code's sign, as core's decode_fp8 gives it (a quiet double NaN converted to float).
SP_DQ_FN float signed_nan(std::uint32_t sign) {
    return float_from_bits(sign | 0x7FC00000u);
}

// E4M3 (OCP FN): bias 7, 3 mantissa bits, no infinity, NaN = S.1111.111; subnormals m * 2^-9.
SP_DQ_FN float fp8_e4m3_value(std::uint8_t code) {
    const std::uint32_t sign = std::uint32_t(code & 0x80u) << 24;
    const std::uint32_t field = (code >> 3) & 0xFu, mantissa = code & 0x7u;
    if (field == 0xFu && mantissa == 0x7u) return signed_nan(sign);
    if (field == 0) {
        const float magnitude = float(mantissa) * float_from_bits(std::uint32_t(127 - 9) << 23);  // exact
        return float_from_bits(sign | bits_of(magnitude));
    }
    return float_from_bits(sign | ((field - 7u + 127u) << 23) | (mantissa << 20));
}

// E5M2 (IEEE-like): bias 15, 2 mantissa bits, inf = S.11111.00, NaN otherwise; subnormals m * 2^-16.
SP_DQ_FN float fp8_e5m2_value(std::uint8_t code) {
    const std::uint32_t sign = std::uint32_t(code & 0x80u) << 24;
    const std::uint32_t field = (code >> 2) & 0x1Fu, mantissa = code & 0x3u;
    if (field == 0x1Fu) return mantissa == 0 ? float_from_bits(sign | 0x7F800000u) : signed_nan(sign);
    if (field == 0) {
        const float magnitude = float(mantissa) * float_from_bits(std::uint32_t(127 - 16) << 23);  // exact
        return float_from_bits(sign | bits_of(magnitude));
    }
    return float_from_bits(sign | ((field - 15u + 127u) << 23) | (mantissa << 21));
}

// Column `col`'s two's-complement nibble of its byte (low nibble = even column), sign-extended.
SP_DQ_FN int int4_code(std::uint8_t byte, std::int64_t col) {
    const int nibble = (col & 1) ? (byte >> 4) : (byte & 0xF);
    return nibble >= 8 ? nibble - 16 : nibble;
}

// Element (row, col) of a payload, decode(code) * scale.
template <PackedFormat kFormat>
SP_DQ_FN float element_value(const PackedTensor& t, std::int64_t row, std::int64_t col) {
    if constexpr (kFormat == PackedFormat::int4) {
        const std::int64_t bytes_per_row = (t.cols + 1) / 2;
        const std::int64_t groups_per_row = (t.cols + t.group - 1) / t.group;
        const std::uint8_t byte = t.codes[row * bytes_per_row + col / 2];
        // A 32-bit division where the row allows (a GPU divides 64-bit integers in software).
        const std::int64_t group_of_col =
            t.cols <= std::int64_t(UINT32_MAX) && t.group <= std::int64_t(UINT32_MAX)
                ? std::int64_t(std::uint32_t(col) / std::uint32_t(t.group))
                : col / t.group;
        return float(int4_code(byte, col)) * t.scales[row * groups_per_row + group_of_col];
    } else {
        const std::uint8_t code = t.codes[row * t.cols + col];
        const float scale = t.scales[row];
        if constexpr (kFormat == PackedFormat::int8)
            return float(std::int8_t(code)) * scale;
        else if constexpr (kFormat == PackedFormat::fp8_e4m3)
            return fp8_e4m3_value(code) * scale;
        else
            return fp8_e5m2_value(code) * scale;
    }
}

// core's round_to_bf16 on the bit pattern: nearest, ties to even, overflow to inf, NaN -> 0x7FC0.
SP_DQ_FN std::uint16_t bf16_bits(float x) {
    std::uint32_t bits = bits_of(x);
    if (x != x) return 0x7FC0u;
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    return std::uint16_t(bits >> 16);
}

template <DequantizedType kType>
SP_DQ_FN void store(void* out, std::int64_t i, float v) {
    if constexpr (kType == DequantizedType::f32)
        static_cast<float*>(out)[i] = v;
    else
        static_cast<std::uint16_t*>(out)[i] = bf16_bits(v);
}

}  // namespace sp::cuda::dequant
