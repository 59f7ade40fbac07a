#pragma once
// What the quantizer suites share (test_quantize, test_quantize_fp8): exact float checks, bit
// patterns, a small deterministic generator, and the codes and values a quantized matrix holds.
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
