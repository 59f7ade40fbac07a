#pragma once
// Internal to core: the reference quantizers' arithmetic on vectors of eight floats (GCC/Clang vector
// extensions, so the code is vectorized whatever the optimizer decides; one AVX2 register or two SSE2
// ones), shared by roundtrip() (quantize_roundtrip.cpp) and pack_rows() (quantize_pack.cpp). The
// scalar reference quantizers (sp/quantize.h) stay the definition; test_quantize_vector and
// test_quantize_pack check both users against them bit for bit.
//
// How they stay equal: each lane runs the reference's own sequence of IEEE float operations
// (division, comparisons, round_half_even_small's conversions, one multiplication: nothing contracts
// into a fused multiply-add), with the branches turned into selects; a lane whose branch the
// reference would not take computes a harmless value (never a float-to-int conversion out of range)
// that is then discarded. The absmax is a maximum, which does not depend on the order it is taken
// in. A row's tail shorter than a vector goes through the same code in a zero-padded vector.
//
// Every function here is always inlined into its user's SP_AVX2_AND_BASELINE kernel, so each of the
// kernel's clones compiles them for its own instruction set. No vector crosses a call, so GCC's note
// that passing 32-byte vectors without AVX differs between ABIs concerns nothing here (core/
// CMakeLists.txt builds the files that include this with -Wno-psabi). For the same reason the
// per-vector bodies are functors whose call is always inlined, never lambdas: a lambda is a function
// of its own, compiled for the default target.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sp::detail::lanes {

#define SP_LANES [[gnu::always_inline]] inline

constexpr std::size_t kLanes = 8;
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = std::int32_t __attribute__((vector_size(kLanes * sizeof(float))));
using UInts = std::uint32_t __attribute__((vector_size(kLanes * sizeof(float))));

constexpr std::int32_t kSignBit = std::int32_t(0x80000000u);
constexpr std::int32_t kAbsMask = 0x7FFFFFFF;
constexpr std::int32_t kInfBits = 0x7F800000;

SP_LANES Floats load(const float* x, std::size_t n) {  // n <= kLanes; missing lanes are 0
    Floats v = {};
    std::memcpy(&v, x, n * sizeof(float));
    return v;
}
SP_LANES Floats splat(float x) {
    return Floats{} + x;
}
SP_LANES Ints bits(Floats v) {
    return __builtin_bit_cast(Ints, v);
}
SP_LANES Floats floats(Ints v) {
    return __builtin_bit_cast(Floats, v);
}
// Masks are -1 (true) or 0 per lane.
SP_LANES Floats select(Ints mask, Floats a, Floats b) {
    return floats((mask & bits(a)) | (~mask & bits(b)));
}
SP_LANES Ints select_ints(Ints mask, Ints a, Ints b) {
    return (mask & a) | (~mask & b);
}

// Calls body(i, v, n) on x[0, count) vector by vector: v holds x[i, i + n), whole vectors (n ==
// kLanes), then the tail in a zero-padded one (n < kLanes; lanes are independent, so the padding
// changes nothing that is kept).
template <typename Body>
SP_LANES void for_each_vector(const float* x, std::size_t count, Body&& body) {
    std::size_t i = 0;
    for (; i + kLanes <= count; i += kLanes) body(i, load(x + i, kLanes), kLanes);
    if (i < count) body(i, load(x + i, count - i), count - i);
}

// Largest |value| over the finite elements of x[0, n); 0 when there are none. On bit patterns: for
// non-negative floats the integer order is the float order (padding lanes are +0).
struct FiniteMaxBits {
    Ints& max_bits;
    SP_LANES void operator()(std::size_t /*i*/, Floats v, std::size_t /*n*/) const {
        const Ints a = bits(v) & kAbsMask;
        const Ints finite = (a < kInfBits) & a;
        max_bits = finite > max_bits ? finite : max_bits;
    }
};

SP_LANES float finite_absmax(const float* x, std::size_t n) {
    Ints max_bits = {};
    for_each_vector(x, n, FiniteMaxBits{max_bits});
    std::int32_t m = 0;
    for (std::size_t k = 0; k < kLanes; ++k) m = std::max(m, max_bits[k]);
    float out = 0;
    std::memcpy(&out, &m, sizeof out);
    return out;
}

// The scale of a row or group x[0, n): max(finite absmax / fmt_max, min_scale), as every reference
// quantizer takes it (fmt_max: the largest code or FP8 value).
SP_LANES float scale_of(const float* x, std::size_t n, float fmt_max, float min_scale) {
    return std::max(finite_absmax(x, n) / fmt_max, min_scale);
}

// detail::round_half_even_small lane by lane (|x| < 2^22): the same conversions and comparisons,
// giving the integer.
SP_LANES Ints round_half_even_small_ints(Floats x) {
    Ints t = __builtin_convertvector(x, Ints);    // toward zero
    t += __builtin_convertvector(t, Floats) > x;  // -1 where t > x: floor
    const Floats diff = x - __builtin_convertvector(t, Floats);
    return t - ((diff > 0.5f) | ((diff == 0.5f) & -(t & 1)));
}
SP_LANES Floats round_half_even_small(Floats x) {
    return __builtin_convertvector(round_half_even_small_ints(x), Floats);
}

// std::clamp(v, -bound, bound) as the reference evaluates it (NaN passes through).
SP_LANES Floats clamp_symmetric(Floats v, float bound) {
    return select(v < -bound, splat(-bound), select(bound < v, splat(bound), v));
}

// INT8/INT4 codes: round_half_even_small(clamp(x / scale, -max_code, max_code)), NaN -> 0. A NaN lane
// rounds 0 instead (no conversion of a NaN), which gives the same code.
SP_LANES Ints integer_codes(Floats x, float scale, float max_code) {
    const Floats v = x / scale;
    return round_half_even_small_ints(select(v == v, clamp_symmetric(v, max_code), Floats{}));
}

// FP8 lanes of a row with scale `scale`, x = w / scale: NaN lanes (the reference's isnan(x)), the
// sign of v = clamp(x, -max, max), and round_to_fp8's rounding of |v|: below the smallest normal
// 2^MinExp to k quanta of 2^(MinExp - M) (k = 2^M is the smallest normal), else on the bit pattern to
// M mantissa bits. Both roundings are computed and one is selected; the subnormal one gets 0 in lanes
// that are normal (|v| / quantum could leave int's range there). The reference's saturation at max
// never binds after the clamp: |v| <= max, which is representable, so it rounds to max at most.
struct Fp8Rounded {
    Ints nan;
    Ints sign;         // kSignBit or 0
    Ints subnormal;    // the lanes rounded to quanta
    Ints quanta;       // k, in subnormal lanes
    Ints normal_bits;  // the rounded float's bits, in the others
};

template <int M, int MinExp>
SP_LANES Fp8Rounded fp8_round(Floats w, float scale, float max_finite) {
    constexpr int kDrop = 23 - M;
    constexpr float kPerQuantum = float(1u << (M - MinExp));  // 2^(M - MinExp): a / quantum, exactly
    const Floats x = w / scale;
    const Ints v_bits = bits(clamp_symmetric(x, max_finite));
    const Ints a_bits = v_bits & kAbsMask;
    const Ints subnormal = ((a_bits >> 23) - 127) < MinExp;
    const Ints quanta = round_half_even_small_ints(select(subnormal, floats(a_bits), Floats{}) * kPerQuantum);
    const UInts a_unsigned = UInts(a_bits);  // unsigned: no overflow to fear in the rounding add
    const Ints normal_bits = Ints((a_unsigned + ((1u << (kDrop - 1)) - 1u) + ((a_unsigned >> kDrop) & 1u)) &
                                  ~((1u << kDrop) - 1u));
    return {x != x, v_bits & kSignBit, subnormal, quanta, normal_bits};
}

// The rounded value, signed: round_to_fp8(clamp(x, -max, max)) (NaN lanes are the caller's).
template <int M, int MinExp>
SP_LANES Floats fp8_value(const Fp8Rounded& r) {
    constexpr float kQuantum = 1.0f / float(1u << (M - MinExp));  // 2^(MinExp - M), exact
    const Floats magnitude =
        select(r.subnormal, __builtin_convertvector(r.quanta, Floats) * kQuantum, floats(r.normal_bits));
    return floats(bits(magnitude) | r.sign);
}

// encode_fp8_*'s pattern of the rounded value (NaN -> 0x00, as the per-row quantizer stores it), in
// the low byte of each lane: k quanta have code k; a normal value's float bit pattern, shifted to M
// mantissa bits, is its code plus the difference of the exponent biases (127 - (1 - MinExp)).
template <int M, int MinExp>
SP_LANES Ints fp8_codes(const Fp8Rounded& r) {
    const Ints normal_code = (r.normal_bits >> (23 - M)) - ((126 + MinExp) << M);
    const Ints sign = Ints(UInts(r.sign) >> 24);
    return select_ints(r.nan, Ints{}, select_ints(r.subnormal, r.quanta, normal_code) | sign);
}

// round_to_bf16's bit pattern without its branch: every NaN becomes 0x7FC00000, the rest rounds on
// the bits. The rounding adds on unsigned lanes: a NaN's payload near INT32_MAX would overflow a
// signed one.
SP_LANES Ints bf16_bits(Floats v) {
    const Ints b = bits(v);
    const UInts u = UInts(b);
    const Ints rounded = Ints((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
    return select_ints((b & kAbsMask) > kInfBits, Ints{} + 0x7FC00000, rounded);
}

}  // namespace sp::detail::lanes
