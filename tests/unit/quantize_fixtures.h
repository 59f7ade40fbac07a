#pragma once
// What the quantizer suites share (test_quantize, test_quantize_fp8, test_quantize_vector,
// test_quantize_pack): exact float checks, bit patterns, a small deterministic generator, the codes
// and values a quantized matrix holds, and the hard inputs the vectorized kernels are checked on.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "sp/quantize.h"

namespace sp::test::quantize_fixtures {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline std::vector<int> as_ints(const std::vector<std::int8_t>& q) {
    return {q.begin(), q.end()};
}

inline std::vector<int> as_ints(const std::vector<std::uint8_t>& q) {
    return {q.begin(), q.end()};
}

// Bitwise float equality: tells -0 from +0.
inline bool same_bits(float a, float b) {
    std::uint32_t x = 0, y = 0;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y;
}

// The bits of a float, to check NaN patterns and signed zeros.
inline std::uint32_t bits_of(float x) {
    std::uint32_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

// Small deterministic generator so failures reproduce.
struct Lcg {
    std::uint64_t s = 0x9E3779B97F4A7C15ull;
    float uniform(float lo, float hi) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float u = static_cast<float>(s >> 40) / static_cast<float>(1u << 24);
        return lo + (hi - lo) * u;
    }
};

inline float from_bits(std::uint32_t b) {
    float x = 0.0f;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

// Random values over many binades (FP8 subnormals and float subnormals included) with random signs,
// and the special values at positions the generator picks.
inline std::vector<float> mixed_values(Lcg& rng, std::size_t n) {
    const float specials[] = {kNaN, -kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-41f, -1e-45f, 3.4e38f, -3e38f};
    std::vector<float> w(n);
    for (float& x : w) {
        const float magnitude = std::exp2(rng.uniform(-40.0f, 20.0f));
        x = rng.uniform(-1.0f, 1.0f) < 0 ? -magnitude : magnitude;
        if (rng.uniform(0.0f, 1.0f) < 0.08f)
            x = specials[std::size_t(rng.uniform(0.0f, 9.999f))];
        else if (rng.uniform(0.0f, 1.0f) < 0.3f)
            x = rng.uniform(-3.0f, 3.0f);
    }
    return w;
}

// A row-major matrix and the INT4 group to quantize it with.
struct Matrix {
    std::vector<float> w;
    std::size_t rows, cols, group;
    const char* what;
};

// Inputs that are hard to get right bit for bit:
// - ties: rows whose absmax makes the scale exactly 1 hold exact midpoints between codes, which must
//   go to even: INT8's and INT4's codes, and neighbouring FP8 values in the normal and the subnormal
//   range (quantum 2^-9 or 2^-16 at scale 1) with BF16 midpoints (1 + 2^-8 (2k + 1));
// - a sweep: float bit patterns across the whole range (both signs, every exponent, NaN payloads) in
//   rows of 1023, each anchored by a first element (448, 57344 or 127 make the FP8 or INT8 scale 1):
//   every binade of both FP8 formats and of BF16.
inline std::vector<Matrix> ties_and_bit_pattern_sweep() {
    std::vector<Matrix> out;
    std::vector<float> w;
    for (int k = -127; k <= 126; ++k) w.push_back(float(k) + 0.5f);  // INT8 ties (scale 127/127)
    w.push_back(127.0f);
    out.push_back({w, 1, w.size(), 64, "int8 ties"});
    w.clear();
    for (int k = -7; k <= 6; ++k) w.push_back(float(k) + 0.5f);  // INT4 ties (scale 7/7)
    w.push_back(7.0f);
    out.push_back({w, 1, w.size(), w.size(), "int4 ties"});
    for (const float max_code : {sp::kFp8E4M3Max, sp::kFp8E5M2Max}) {
        w.assign({max_code, -max_code, 1.0625f, 1.1875f, -1.0625f, 1.125f, 1.375f, -2.75f});
        for (int k = 0; k < 16; ++k) {
            w.push_back(std::ldexp(float(k) + 0.5f, -9));
            w.push_back(-std::ldexp(float(k) + 0.5f, -16));
            w.push_back(1.0f + std::ldexp(float(2 * k + 1), -8));
        }
        out.push_back({w, 1, w.size(), 64, "fp8 and bf16 ties"});
    }
    constexpr std::size_t kCols = 1023;
    for (const float anchor : {sp::kFp8E4M3Max, sp::kFp8E5M2Max, 127.0f}) {
        w.clear();
        for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 0x10003ull) {
            if (w.size() % kCols == 0) w.push_back(anchor);
            w.push_back(from_bits(std::uint32_t(b)));
        }
        w.resize(w.size() / kCols * kCols);  // whole rows
        out.push_back({w, w.size() / kCols, kCols, 64, "sweep"});
    }
    return out;
}

inline std::vector<float> dequantized(const sp::Int4Groups& m) {
    std::vector<float> out(m.rows * m.cols);
    sp::dequantize_int4_groups(m, out.data());
    return out;
}

inline std::vector<float> dequantized(const sp::Fp8Rows& m) {
    std::vector<float> out(m.rows * m.cols);
    sp::dequantize_fp8_rows(m, out.data());
    return out;
}

}  // namespace sp::test::quantize_fixtures

// QCOMPARE on floats is fuzzy; rounding results must match exactly (0 == -0 here, signs are
// checked separately with same_bits).
#define EXPECT_EXACT(actual, expected)                                                                   \
    do {                                                                                                 \
        const float a_ = (actual);                                                                       \
        const float e_ = (expected);                                                                     \
        QVERIFY2(a_ == e_ || (std::isnan(a_) && std::isnan(e_)),                                         \
                 qPrintable(QString::asprintf("%s = %a (%.9g), expected %a (%.9g)", #actual, double(a_), \
                                              double(a_), double(e_), double(e_))));                     \
    } while (false)
