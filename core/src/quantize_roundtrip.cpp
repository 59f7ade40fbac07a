// roundtrip(): every format's quantize-then-dequantize in one pass, on vectors of eight floats
// (GCC/Clang vector extensions, so the code is vectorized whatever the optimizer decides; with
// SP_AVX2_AND_BASELINE one AVX2 register or two SSE2 ones). The scalar reference quantizers
// (quantize_*_rows, dequantize_*, round_to_fp8_*, round_to_bf16) stay the definition:
// test_quantize_vector checks these kernels against them bit for bit. How they stay equal: each lane
// runs the reference's own sequence of IEEE float operations (division, comparisons,
// round_half_even_small's conversions, one multiplication: nothing contracts into a fused
// multiply-add), with the branches turned into selects; a lane whose branch the reference would not
// take computes a harmless value (never a float-to-int conversion out of range) that is then
// discarded. The absmax is a maximum, which does not depend on the order it is taken in. A row's
// tail shorter than a vector goes through the same code in a zero-padded vector.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "simd_clones.h"
#include "sp/quantize.h"

namespace sp {
namespace {

// Every helper is inlined into roundtrip_kernel, so each of its clones compiles them for its own
// instruction set. No vector crosses a call, so GCC's note that passing 32-byte vectors without AVX
// differs between ABIs concerns nothing here (core/CMakeLists.txt builds this file with -Wno-psabi).
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
SP_LANES void store(float* y, Floats v, std::size_t n) {
    std::memcpy(y, &v, n * sizeof(float));
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

// detail::round_half_even_small lane by lane (|x| < 2^22): the same conversions and comparisons.
SP_LANES Floats round_half_even_small(Floats x) {
    Ints t = __builtin_convertvector(x, Ints);    // toward zero
    t += __builtin_convertvector(t, Floats) > x;  // -1 where t > x: floor
    const Floats diff = x - __builtin_convertvector(t, Floats);
    t -= (diff > 0.5f) | ((diff == 0.5f) & -(t & 1));
    return __builtin_convertvector(t, Floats);
}

// std::clamp(v, -bound, bound) as the reference evaluates it (NaN passes through).
SP_LANES Floats clamp_symmetric(Floats v, float bound) {
    return select(v < -bound, splat(-bound), select(bound < v, splat(bound), v));
}

SP_LANES Ints select_ints(Ints mask, Ints a, Ints b) {
    return (mask & a) | (~mask & b);
}

// Applies `lanes` (Floats -> Floats) to x[0, n) into y: whole vectors, then the tail in a
// zero-padded one (lanes are independent, so the padding changes nothing).
template <typename Lanes>
SP_LANES void for_each_vector(const float* x, std::size_t n, float* y, Lanes lanes) {
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) store(y + i, lanes(load(x + i, kLanes)), kLanes);
    if (i < n) store(y + i, lanes(load(x + i, n - i)), n - i);
}

// Largest |value| over the finite elements of x[0, n); 0 when there are none. On bit patterns: for
// non-negative floats the integer order is the float order (padding lanes are +0).
SP_LANES Ints finite_max_bits(Floats v, Ints max_bits) {
    const Ints a = bits(v) & kAbsMask;
    const Ints finite = (a < kInfBits) & a;
    return select_ints(finite > max_bits, finite, max_bits);
}

SP_LANES float finite_absmax(const float* x, std::size_t n) {
    Ints max_bits = {};
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) max_bits = finite_max_bits(load(x + i, kLanes), max_bits);
    if (i < n) max_bits = finite_max_bits(load(x + i, n - i), max_bits);
    std::int32_t m = 0;
    for (std::size_t k = 0; k < kLanes; ++k) m = std::max(m, max_bits[k]);
    float out = 0;
    std::memcpy(&out, &m, sizeof out);
    return out;
}

// INT8/INT4 lanes: round_half_even_small(clamp(x / scale)) * scale, NaN -> +0. A NaN lane rounds 0
// instead (no conversion of a NaN), which gives the same +0.
SP_LANES Floats integer_lanes(Floats x, float scale, float max_code) {
    const Floats v = x / scale;
    return round_half_even_small(select(v == v, clamp_symmetric(v, max_code), Floats{})) * scale;
}

// The lanes for_each_vector applies, as functors whose call is always inlined: a lambda is a
// function of its own, compiled for the default target, and a 32-byte vector passed to it from the
// AVX2 clone would cross the two ABIs GCC's -Wpsabi note is about.
struct IntegerLanes {
    float scale, max_code;
    SP_LANES Floats operator()(Floats v) const { return integer_lanes(v, scale, max_code); }
};

SP_LANES void integer_roundtrip_rows(const float* w, std::size_t rows, std::size_t cols, std::size_t group,
                                     float max_code, float min_scale, float* out) {
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t begin = 0; begin < cols; begin += group) {
            const std::size_t n = std::min(group, cols - begin);
            const float* x = w + r * cols + begin;
            const float scale = std::max(finite_absmax(x, n) / max_code, min_scale);
            for_each_vector(x, n, out + r * cols + begin, IntegerLanes{scale, max_code});
        }
    }
}

// FP8 lanes of a row with scale `scale`: the reference's
//   isnan(x) ? 0 : round_to_fp8(clamp(x, -max, max)) * scale,   x = w / scale,
// where round_to_fp8 keeps the sign and rounds the magnitude a: below the smallest normal 2^MinExp
// to a multiple of the subnormal quantum 2^(MinExp - M), else on the bit pattern to M mantissa
// bits; then saturates at max. Both roundings are computed and one is selected; the subnormal one
// gets 0 in lanes that are normal (a / quantum could leave int's range there).
template <int M, int MinExp>
SP_LANES Floats fp8_lanes(Floats w, float scale, float max_finite) {
    constexpr int kDrop = 23 - M;
    constexpr float kQuantum = 1.0f / float(1u << (M - MinExp));  // 2^(MinExp - M), exact
    const Floats x = w / scale;
    const Ints v_bits = bits(clamp_symmetric(x, max_finite));
    const Ints a_bits = v_bits & kAbsMask;
    const Ints subnormal = ((a_bits >> 23) - 127) < MinExp;
    const Floats sub =
        round_half_even_small(select(subnormal, floats(a_bits), Floats{}) / kQuantum) * kQuantum;
    const UInts a_unsigned = UInts(a_bits);  // unsigned: no overflow to fear in the rounding add
    const Ints normal_bits = Ints((a_unsigned + ((1u << (kDrop - 1)) - 1u) + ((a_unsigned >> kDrop) & 1u)) &
                                  ~((1u << kDrop) - 1u));
    const Floats r = select(subnormal, sub, floats(normal_bits));
    const Floats magnitude = select(max_finite < r, splat(max_finite), r);
    return select(x != x, Floats{}, floats(bits(magnitude) | (v_bits & kSignBit)) * scale);
}

template <int M, int MinExp>
struct Fp8Lanes {
    float scale, max_finite;
    SP_LANES Floats operator()(Floats v) const { return fp8_lanes<M, MinExp>(v, scale, max_finite); }
};

template <int M, int MinExp>
SP_LANES void fp8_roundtrip_rows(const float* w, std::size_t rows, std::size_t cols, float max_finite,
                                 float* out) {
    for (std::size_t r = 0; r < rows; ++r) {
        const float* x = w + r * cols;
        const float scale = std::max(finite_absmax(x, cols) / max_finite, kFp8MinScale);
        for_each_vector(x, cols, out + r * cols, Fp8Lanes<M, MinExp>{scale, max_finite});
    }
}

// round_to_bf16 without its branch: every NaN becomes 0x7FC00000, the rest rounds on the bits.
// The rounding adds on unsigned lanes: a NaN's payload near INT32_MAX would overflow a signed one.
struct Bf16Lanes {
    SP_LANES Floats operator()(Floats v) const {
        const Ints b = bits(v);
        const UInts u = UInts(b);
        const Ints rounded = Ints((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
        return floats(select_ints((b & kAbsMask) > kInfBits, Ints{} + 0x7FC00000, rounded));
    }
};

SP_LANES void bf16_roundtrip(const float* w, std::size_t n, float* out) {
    for_each_vector(w, n, out, Bf16Lanes{});
}

SP_AVX2_AND_BASELINE void roundtrip_kernel(Precision p, const float* w, std::size_t rows, std::size_t cols,
                                           float* out, std::size_t int4_group) {
    switch (p) {
        case Precision::bf16:
            bf16_roundtrip(w, rows * cols, out);
            return;
        case Precision::int8:
            if (cols > 0) integer_roundtrip_rows(w, rows, cols, cols, float(kInt8Max), kInt8MinScale, out);
            return;
        case Precision::int4:
            integer_roundtrip_rows(w, rows, cols, int4_group, float(kInt4Max), kInt4MinScale, out);
            return;
        case Precision::fp8_e4m3:
            fp8_roundtrip_rows<3, -6>(w, rows, cols, kFp8E4M3Max, out);
            return;
        case Precision::fp8_e5m2:
            fp8_roundtrip_rows<2, -14>(w, rows, cols, kFp8E5M2Max, out);
            return;
    }
}

}  // namespace

void roundtrip(Precision p, const float* w, std::size_t rows, std::size_t cols, float* out,
               std::size_t int4_group) {
    switch (p) {
        case Precision::bf16:
        case Precision::int8:
        case Precision::fp8_e4m3:
        case Precision::fp8_e5m2:
            break;
        case Precision::int4:
            if (int4_group == 0)
                throw std::invalid_argument("INT4 groups: the group size must be at least 1");
            break;
        default:
            throw std::invalid_argument("roundtrip: unknown precision");
    }
    roundtrip_kernel(p, w, rows, cols, out, int4_group);
}

}  // namespace sp
