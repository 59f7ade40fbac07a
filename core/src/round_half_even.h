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

// The same for a float of magnitude below 2^22 (the integer quantizers' clamped codes, FP8's
// subnormal quanta; NaN is the caller's to handle), through an int conversion instead of floor and
// fmod, with no branch: the comparisons are coin flips on real data, mispredicted branches cost
// more than the arithmetic, and a loop without branches vectorizes. About six times faster than the
// general path on x86-64 without SSE4.1.
inline float round_half_even_small(float x) {
    int t = static_cast<int>(x);                       // toward zero
    t -= static_cast<int>(static_cast<float>(t) > x);  // floor
    const float diff = x - static_cast<float>(t);
    t += static_cast<int>(diff > 0.5f) | (static_cast<int>(diff == 0.5f) & (t & 1));
    return static_cast<float>(t);
}

}  // namespace sp::detail
