#pragma once
// The SIMT emulator's binary16 type and its conversion to float: what the device's conversion
// instruction computes (exact: every half is a float; NaN payloads kept).
#include <cmath>
#include <cstdint>

#include "simt/device.h"

struct __half {
    unsigned short bits;
};

inline __half __ushort_as_half(unsigned short bits) {
    return __half{bits};
}

inline float __half2float(__half h) {
    const std::uint32_t sign = std::uint32_t(h.bits & 0x8000u) << 16;
    const std::uint32_t exp = (h.bits >> 10) & 0x1fu, mant = h.bits & 0x3ffu;
    if (exp == 0) {  // zero or subnormal: mant * 2^-24
        const float v = std::ldexp(float(mant), -24);
        return sign ? -v : v;
    }
    const std::uint32_t float_exp = exp == 0x1f ? 0xffu : exp + (127u - 15u);  // Inf/NaN stay Inf/NaN
    return __uint_as_float(sign | float_exp << 23 | mant << 13);
}
