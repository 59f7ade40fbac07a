#pragma once
// Internal to core: the rounding every reference quantizer shares.
#include <cmath>

namespace sp::detail {

// Round half to even without touching (or depending on) the floating point environment.
// Exact for any |x| below 2^52 (double) or 2^23 (float), where x - floor(x) has no rounding.
template <typename T>
T round_half_even(T x) {
    const T f = std::floor(x);
    const T diff = x - f;
    if (diff > T(0.5)) return f + T(1);
    if (diff < T(0.5)) return f;
    return std::fmod(f, T(2)) == T(0) ? f : f + T(1);
}

}  // namespace sp::detail
