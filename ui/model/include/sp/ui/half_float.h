#pragma once
// 16-bit floats for the store's per-block columns (telemetry_store.h): IEEE binary16 (fp16) where
// the values have a known small range and want the precision, bfloat16 where they may be any size.
// Both round to nearest even, keep NaN (the store's "missing") as NaN and +-inf as +-inf.
//   fp16: 11 significant bits (relative error <= 2^-11 ~ 0.05%), normal from 6.1e-5 to 65504; smaller
//         values keep an absolute error <= 2^-25, larger ones become +-inf.
//   bf16: 8 significant bits (relative error <= 2^-8 ~ 0.4%), the range of a float.
#include <cstdint>
#include <cstring>

namespace sp::ui {

// std::bit_cast is C++20; ui/ builds as C++17.
inline std::uint32_t floatBits(float f) {
    std::uint32_t x = 0;
    std::memcpy(&x, &f, sizeof x);
    return x;
}

inline float bitsFloat(std::uint32_t x) {
    float f = 0.0f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

inline std::uint16_t toHalf(float f) {
    std::uint32_t x = floatBits(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
    if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
    if (x < 0x38800000u) {                 // below fp16's smallest normal: a subnormal in units of 2^-24
        if (x < 0x33000000u) return sign;  // below 2^-25: rounds to zero
        const std::uint32_t mant = (x & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - (x >> 23);
        std::uint32_t q = mant >> shift;
        const std::uint32_t rem = mant & ((1u << shift) - 1u);
        const std::uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
        return static_cast<std::uint16_t>(sign | q);
    }
    std::uint32_t h = (x - 0x38000000u) >> 13;  // re-biased exponent and the top 10 mantissa bits
    const std::uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
    return static_cast<std::uint16_t>(sign | h);
}

inline float fromHalf(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t e = (h >> 10) & 0x1fu;
    const std::uint32_t m = h & 0x3ffu;
    if (e == 0) {
        const float v = static_cast<float>(m) * 0x1p-24f;
        return sign ? -v : v;
    }
    const std::uint32_t x = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112u) << 23) | (m << 13);
    return bitsFloat(x);
}

inline std::uint16_t toBfloat16(float f) {
    const std::uint32_t x = floatBits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
    return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float fromBfloat16(std::uint16_t b) {
    return bitsFloat(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace sp::ui
