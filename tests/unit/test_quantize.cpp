// The reference quantizers: INT8 per-row absmax, FP8 E4M3/E5M2 rounding and relative error.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "sp/quantize.h"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<int> as_ints(const std::vector<std::int8_t>& q) {
    return {q.begin(), q.end()};
}

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

// Bitwise float equality: tells -0 from +0.
bool same_bits(float a, float b) {
    std::uint32_t x = 0, y = 0;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y;
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

// Every finite non-negative value of a format, in increasing order, by decoding all patterns.
std::vector<float> positive_values(float (*decode)(std::uint8_t)) {
    std::vector<float> out;
    for (unsigned p = 0; p < 0x80; ++p) {
        const float v = decode(static_cast<std::uint8_t>(p));
        if (std::isfinite(v)) out.push_back(v);
    }
    return out;
}

// Brute-force nearest representable value with ties to the even pattern and saturation: the
// independent oracle the fast rounding is compared against.
float brute_force_round(float x, float (*decode)(std::uint8_t), std::uint8_t (*encode)(float)) {
    const std::vector<float> values = positive_values(decode);
    const double a = std::fabs(static_cast<double>(x));
    float best = values.back();
    if (a < values.back()) {
        double best_distance = std::numeric_limits<double>::infinity();
        for (float v : values) {
            const double dist = std::fabs(a - v);
            if (dist < best_distance || (dist == best_distance && (encode(v) & 1u) == 0)) {
                best = v;
                best_distance = dist;
            }
        }
    }
    return std::copysign(best, x);
}

// The bits of a float, to check NaN patterns and signed zeros.
std::uint32_t bits_of(float x) {
    std::uint32_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
}
float from_bits(std::uint32_t b) {
    float x = 0.0f;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

std::vector<int> int4_codes(const sp::Int4Groups& m) {
    std::vector<int> out;
    for (std::size_t r = 0; r < m.rows; ++r)
        for (std::size_t c = 0; c < m.cols; ++c) out.push_back(sp::int4_code(m, r, c));
    return out;
}

std::vector<int> as_ints(const std::vector<std::uint8_t>& q) {
    return {q.begin(), q.end()};
}

std::vector<float> dequantized(const sp::Int4Groups& m) {
    std::vector<float> out(m.rows * m.cols);
    sp::dequantize_int4_groups(m, out.data());
    return out;
}

std::vector<float> dequantized(const sp::Fp8Rows& m) {
    std::vector<float> out(m.rows * m.cols);
    sp::dequantize_fp8_rows(m, out.data());
    return out;
}
}  // namespace

class TestQuantize : public QObject {
    Q_OBJECT

  private slots:
    // ---- INT8 ------------------------------------------------------------------------------
    void int8_required_vector_unit_scale() {
        const auto m = sp::quantize_int8({127.0f, 62.5f, -0.5f});
        QCOMPARE(m.rows, std::size_t(1));
        QCOMPARE(m.cols, std::size_t(3));
        EXPECT_EXACT(m.scales.at(0), 1.0f);
        QCOMPARE(as_ints(m.q), (std::vector<int>{127, 62, 0}));  // 62.5 and -0.5 round to even
    }

    void int8_required_vector_fractional_scale() {
        const auto m = sp::quantize_int8({1.0f, -0.5f, 0.25f});
        EXPECT_EXACT(m.scales.at(0), 1.0f / 127.0f);
        QCOMPARE(as_ints(m.q), (std::vector<int>{127, -64, 32}));
    }

    void int8_all_zero_row() {
        const auto m = sp::quantize_int8({0.0f, -0.0f, 0.0f, 0.0f});
        EXPECT_EXACT(m.scales.at(0), 1e-8f);
        EXPECT_EXACT(m.scales.at(0), sp::kInt8MinScale);
        QCOMPARE(as_ints(m.q), (std::vector<int>{0, 0, 0, 0}));
        const auto back = sp::dequantize_int8(m);
        for (float v : back) EXPECT_EXACT(v, 0.0f);
    }

    void int8_tiny_row_uses_min_scale() {
        // absmax / 127 < 1e-8: the scale clamps and the values saturate instead of blowing up.
        const auto m = sp::quantize_int8({1e-7f, -5e-7f});
        EXPECT_EXACT(m.scales.at(0), 1e-8f);
        QCOMPARE(as_ints(m.q), (std::vector<int>{10, -50}));
    }

    void int8_round_half_to_even() {
        const auto m = sp::quantize_int8({127.0f, 0.5f, 1.5f, 2.5f, -1.5f, -2.5f, 3.5f, 0.49f});
        EXPECT_EXACT(m.scales.at(0), 1.0f);
        QCOMPARE(as_ints(m.q), (std::vector<int>{127, 0, 2, 2, -2, -2, 4, 0}));
    }

    void int8_rows_are_independent() {
        const std::vector<float> w = {2.0f,    -1.0f,  0.5f,  // row 0: absmax 2
                                      0.0f,    0.0f,   0.0f,  // row 1: zero
                                      -254.0f, 127.0f, 1.0f};
        const auto m = sp::quantize_int8_rows(w.data(), 3, 3);
        QCOMPARE(m.rows, std::size_t(3));
        QCOMPARE(m.cols, std::size_t(3));
        QCOMPARE(m.scales, (std::vector<float>{2.0f / 127.0f, 1e-8f, 2.0f}));
        QCOMPARE(as_ints(m.q), (std::vector<int>{127, -64, 32, 0, 0, 0, -127, 64, 0}));
        std::vector<float> back(9);
        sp::dequantize_int8_rows(m, back.data());
        for (std::size_t i = 0; i < 9; ++i) EXPECT_EXACT(back[i], float(m.q[i]) * m.scales[i / 3]);
        EXPECT_EXACT(back[6], -254.0f);
        QCOMPARE(sp::int8_roundtrip_rows(w.data(), 3, 3), back);
    }

    void int8_error_is_at_most_half_a_step() {
        Lcg rng;
        const std::size_t rows = 16, cols = 64;
        std::vector<float> w(rows * cols);
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = rng.uniform(-1.0f, 1.0f) * float(1 + std::size_t(i / cols));  // row r: scale r + 1
        const auto m = sp::quantize_int8_rows(w.data(), rows, cols);
        const auto back = sp::dequantize_int8(m);
        for (std::size_t i = 0; i < w.size(); ++i) {
            QVERIFY(m.q[i] != -128);  // the range is symmetric
            const float step = m.scales[i / cols];
            QVERIFY2(std::fabs(w[i] - back[i]) <= 0.5f * step * 1.0001f, qPrintable(QString::number(i)));
        }
        // Uniform weights lose well under 1% in INT8.
        const double err = sp::relative_error(w, back);
        QVERIFY(err > 0.0);
        QVERIFY(err < 0.01);
    }

    void int8_non_finite_inputs() {
        // NaN -> 0, +-inf saturate; neither takes part in absmax (2.0 sets the scale).
        const auto m = sp::quantize_int8({kNaN, kInf, -kInf, 2.0f, -0.5f});
        EXPECT_EXACT(m.scales.at(0), 2.0f / 127.0f);
        QCOMPARE(as_ints(m.q), (std::vector<int>{0, 127, -127, 127, -32}));
        const auto only_bad = sp::quantize_int8({kNaN, kInf, -kInf});
        EXPECT_EXACT(only_bad.scales.at(0), 1e-8f);
        QCOMPARE(as_ints(only_bad.q), (std::vector<int>{0, 127, -127}));
    }

    void int8_empty_inputs() {
        const auto none = sp::quantize_int8_rows(nullptr, 0, 5);
        QCOMPARE(none.rows, std::size_t(0));
        QVERIFY(none.q.empty());
        QVERIFY(none.scales.empty());
        const auto empty_row = sp::quantize_int8({});
        QCOMPARE(empty_row.scales, std::vector<float>{1e-8f});
        QVERIFY(sp::dequantize_int8(empty_row).empty());
    }

    // ---- FP8 E4M3 --------------------------------------------------------------------------
    void e4m3_representable_values_are_fixed() {
        const float values[] = {0.0f,
                                1.0f,
                                1.125f,
                                1.875f,
                                2.0f,
                                3.5f,
                                240.0f,
                                256.0f,
                                416.0f,
                                448.0f,
                                std::ldexp(1.0f, -9),
                                std::ldexp(3.0f, -9),
                                std::ldexp(7.0f, -9),
                                std::ldexp(1.0f, -6),
                                std::ldexp(1.125f, -6)};
        for (float v : values) {
            EXPECT_EXACT(sp::round_to_fp8_e4m3(v), v);
            EXPECT_EXACT(sp::round_to_fp8_e4m3(-v), -v);
        }
    }

    void e4m3_midpoints_round_to_even() {
        EXPECT_EXACT(sp::round_to_fp8_e4m3(1.0625f), 1.0f);   // between 1.000 (m=0) and 1.125 (m=1)
        EXPECT_EXACT(sp::round_to_fp8_e4m3(1.1875f), 1.25f);  // between 1.125 (m=1) and 1.250 (m=2)
        EXPECT_EXACT(sp::round_to_fp8_e4m3(-1.1875f), -1.25f);
        EXPECT_EXACT(sp::round_to_fp8_e4m3(1.0626f), 1.125f);  // just past the midpoint
        EXPECT_EXACT(sp::round_to_fp8_e4m3(1.9375f), 2.0f);    // rounds up into the next binade
        EXPECT_EXACT(sp::round_to_fp8_e4m3(432.0f), 448.0f);   // 416 (m=5) / 448 (m=6): even is 448
        EXPECT_EXACT(sp::round_to_fp8_e4m3(400.0f), 384.0f);   // 384 (m=4) / 416 (m=5): even is 384
    }

    void e4m3_saturates() {
        for (float v :
             {448.0f, 449.0f, 464.0f, 480.0f, 500.0f, 1e6f, std::numeric_limits<float>::max(), kInf}) {
            EXPECT_EXACT(sp::round_to_fp8_e4m3(v), 448.0f);
            EXPECT_EXACT(sp::round_to_fp8_e4m3(-v), -448.0f);
        }
        QCOMPARE(sp::encode_fp8_e4m3(1e6f), std::uint8_t(0x7E));
        QCOMPARE(sp::encode_fp8_e4m3(-kInf), std::uint8_t(0xFE));
    }

    void e4m3_subnormals_and_zero() {
        const float tiny = std::ldexp(1.0f, -9);
        EXPECT_EXACT(sp::round_to_fp8_e4m3(0.5f * tiny), 0.0f);  // tie between 0 and 2^-9: even is 0
        EXPECT_EXACT(sp::round_to_fp8_e4m3(0.51f * tiny), tiny);
        EXPECT_EXACT(sp::round_to_fp8_e4m3(1.5f * tiny), 2.0f * tiny);  // tie 1 / 2: even is 2
        EXPECT_EXACT(sp::round_to_fp8_e4m3(2.5f * tiny), 2.0f * tiny);
        QVERIFY(same_bits(sp::round_to_fp8_e4m3(-1e-30f), -0.0f));  // sign survives underflow
        QVERIFY(same_bits(sp::round_to_fp8_e4m3(-0.0f), -0.0f));
        QVERIFY(same_bits(sp::round_to_fp8_e4m3(1e-30f), 0.0f));
        QCOMPARE(sp::encode_fp8_e4m3(tiny), std::uint8_t(0x01));
        QCOMPARE(sp::encode_fp8_e4m3(-0.0f), std::uint8_t(0x80));
        QCOMPARE(sp::encode_fp8_e4m3(0.0f), std::uint8_t(0x00));
    }

    void e4m3_patterns() {
        QCOMPARE(sp::encode_fp8_e4m3(1.0f), std::uint8_t(0x38));
        QCOMPARE(sp::encode_fp8_e4m3(-2.0f), std::uint8_t(0xC0));
        QCOMPARE(sp::encode_fp8_e4m3(448.0f), std::uint8_t(0x7E));
        QCOMPARE(sp::encode_fp8_e4m3(std::ldexp(1.0f, -6)), std::uint8_t(0x08));
        EXPECT_EXACT(sp::decode_fp8_e4m3(0x38), 1.0f);
        EXPECT_EXACT(sp::decode_fp8_e4m3(0x7E), 448.0f);
        EXPECT_EXACT(sp::decode_fp8_e4m3(0x07), std::ldexp(7.0f, -9));
        EXPECT_EXACT(sp::decode_fp8_e4m3(0x78), 256.0f);  // exponent all ones is still finite in FN
        QVERIFY(std::isnan(sp::decode_fp8_e4m3(0x7F)));
        QVERIFY(std::isnan(sp::decode_fp8_e4m3(0xFF)));
        QVERIFY(std::isnan(sp::round_to_fp8_e4m3(kNaN)));
        QCOMPARE(sp::encode_fp8_e4m3(kNaN), std::uint8_t(0x7F));
        QCOMPARE(sp::encode_fp8_e4m3(-kNaN), std::uint8_t(0xFF));
    }

    // ---- FP8 E5M2 --------------------------------------------------------------------------
    void e5m2_representable_values_are_fixed() {
        const float values[] = {0.0f,
                                1.0f,
                                1.25f,
                                1.5f,
                                1.75f,
                                0.75f,
                                49152.0f,
                                57344.0f,
                                std::ldexp(1.0f, -16),
                                std::ldexp(3.0f, -16),
                                std::ldexp(1.0f, -14),
                                std::ldexp(1.25f, -14)};
        for (float v : values) {
            EXPECT_EXACT(sp::round_to_fp8_e5m2(v), v);
            EXPECT_EXACT(sp::round_to_fp8_e5m2(-v), -v);
        }
    }

    void e5m2_midpoints_round_to_even() {
        EXPECT_EXACT(sp::round_to_fp8_e5m2(1.125f), 1.0f);  // 1.00 (m=0) / 1.25 (m=1)
        EXPECT_EXACT(sp::round_to_fp8_e5m2(1.375f), 1.5f);  // 1.25 (m=1) / 1.50 (m=2)
        EXPECT_EXACT(sp::round_to_fp8_e5m2(1.625f), 1.5f);  // 1.50 (m=2) / 1.75 (m=3)
        EXPECT_EXACT(sp::round_to_fp8_e5m2(1.875f), 2.0f);  // 1.75 (m=3) / 2.00 (next binade, m=0)
        EXPECT_EXACT(sp::round_to_fp8_e5m2(-1.375f), -1.5f);
        const float tiny = std::ldexp(1.0f, -16);
        EXPECT_EXACT(sp::round_to_fp8_e5m2(0.5f * tiny), 0.0f);
        EXPECT_EXACT(sp::round_to_fp8_e5m2(1.5f * tiny), 2.0f * tiny);
        EXPECT_EXACT(sp::round_to_fp8_e5m2(0.75f * tiny), tiny);
    }

    void e5m2_saturates_finite_keeps_infinity() {
        for (float v :
             {57344.0f, 57345.0f, 60000.0f, 61440.0f, 65536.0f, 1e6f, std::numeric_limits<float>::max()}) {
            EXPECT_EXACT(sp::round_to_fp8_e5m2(v), 57344.0f);
            EXPECT_EXACT(sp::round_to_fp8_e5m2(-v), -57344.0f);
        }
        EXPECT_EXACT(sp::round_to_fp8_e5m2(kInf), kInf);
        EXPECT_EXACT(sp::round_to_fp8_e5m2(-kInf), -kInf);
        QCOMPARE(sp::encode_fp8_e5m2(kInf), std::uint8_t(0x7C));
        QCOMPARE(sp::encode_fp8_e5m2(-kInf), std::uint8_t(0xFC));
        QCOMPARE(sp::encode_fp8_e5m2(1e9f), std::uint8_t(0x7B));
    }

    void e5m2_patterns() {
        QCOMPARE(sp::encode_fp8_e5m2(1.0f), std::uint8_t(0x3C));
        QCOMPARE(sp::encode_fp8_e5m2(-1.5f), std::uint8_t(0xBE));
        QCOMPARE(sp::encode_fp8_e5m2(std::ldexp(1.0f, -16)), std::uint8_t(0x01));
        QCOMPARE(sp::encode_fp8_e5m2(-0.0f), std::uint8_t(0x80));
        EXPECT_EXACT(sp::decode_fp8_e5m2(0x7B), 57344.0f);
        EXPECT_EXACT(sp::decode_fp8_e5m2(0x04), std::ldexp(1.0f, -14));
        EXPECT_EXACT(sp::decode_fp8_e5m2(0x7C), kInf);
        EXPECT_EXACT(sp::decode_fp8_e5m2(0xFC), -kInf);
        for (unsigned p : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFEu, 0xFFu})
            QVERIFY(std::isnan(sp::decode_fp8_e5m2(static_cast<std::uint8_t>(p))));
        QVERIFY(std::isnan(sp::round_to_fp8_e5m2(kNaN)));
        QCOMPARE(sp::encode_fp8_e5m2(kNaN), std::uint8_t(0x7F));
        QVERIFY(same_bits(sp::round_to_fp8_e5m2(-1e-30f), -0.0f));
    }

    // ---- FP8, exhaustive -------------------------------------------------------------------
    void fp8_all_patterns_are_fixed_points_data() {
        QTest::addColumn<bool>("e4m3");
        QTest::newRow("e4m3") << true;
        QTest::newRow("e5m2") << false;
    }
    void fp8_all_patterns_are_fixed_points() {
        QFETCH(bool, e4m3);
        const auto decode = e4m3 ? sp::decode_fp8_e4m3 : sp::decode_fp8_e5m2;
        const auto encode = e4m3 ? sp::encode_fp8_e4m3 : sp::encode_fp8_e5m2;
        const auto round = e4m3 ? sp::round_to_fp8_e4m3 : sp::round_to_fp8_e5m2;
        int nans = 0;
        for (unsigned p = 0; p < 256; ++p) {
            const auto bits = static_cast<std::uint8_t>(p);
            const float v = decode(bits);
            if (std::isnan(v)) {
                ++nans;
                continue;
            }
            QVERIFY2(encode(v) == bits, qPrintable(QString("pattern 0x%1").arg(p, 2, 16, QChar('0'))));
            QVERIFY2(same_bits(round(v), v), qPrintable(QString("pattern 0x%1").arg(p, 2, 16, QChar('0'))));
        }
        QCOMPARE(nans, e4m3 ? 2 : 6);
        // Positive patterns decode in strictly increasing order (no duplicates, no gaps in order).
        const auto values = positive_values(decode);
        for (std::size_t i = 1; i < values.size(); ++i) QVERIFY(values[i - 1] < values[i]);
        QCOMPARE(values.size(), std::size_t(e4m3 ? 127 : 124));  // E5M2: 0x7C is inf, 0x7D-0x7F NaN
    }

    void fp8_rounding_matches_brute_force_data() { fp8_all_patterns_are_fixed_points_data(); }
    void fp8_rounding_matches_brute_force() {
        QFETCH(bool, e4m3);
        const auto decode = e4m3 ? sp::decode_fp8_e4m3 : sp::decode_fp8_e5m2;
        const auto encode = e4m3 ? sp::encode_fp8_e4m3 : sp::encode_fp8_e5m2;
        const auto round = e4m3 ? sp::round_to_fp8_e4m3 : sp::round_to_fp8_e5m2;
        const auto values = positive_values(decode);
        std::vector<float> probes;
        Lcg rng;
        for (std::size_t i = 0; i + 1 < values.size(); ++i) {
            const float mid = 0.5f * (values[i] + values[i + 1]);  // exact: few significant bits
            probes.insert(probes.end(), {values[i], mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf),
                                         rng.uniform(values[i], values[i + 1])});
        }
        const float top = values.back();
        probes.insert(probes.end(), {top * 1.0625f, top * 1.125f, top * 1.5f, top * 4.0f});
        for (float x : probes) {
            for (float s : {x, -x}) {
                const float expected = brute_force_round(s, decode, encode);
                QVERIFY2(same_bits(round(s), expected), qPrintable(QString("x=%1 got %2 want %3")
                                                                       .arg(double(s), 0, 'g', 9)
                                                                       .arg(double(round(s)))
                                                                       .arg(double(expected))));
                EXPECT_EXACT(decode(encode(s)), expected);
            }
        }
    }

    // The rounding works on the float's bit pattern; a sweep over every 10007th pattern from 0 to
    // past the format's range (both signs) against the brute force catches an off-by-one in it.
    void fp8_rounding_sweep_matches_brute_force_data() { fp8_all_patterns_are_fixed_points_data(); }
    void fp8_rounding_sweep_matches_brute_force() {
        QFETCH(bool, e4m3);
        const auto decode = e4m3 ? sp::decode_fp8_e4m3 : sp::decode_fp8_e5m2;
        const auto encode = e4m3 ? sp::encode_fp8_e4m3 : sp::encode_fp8_e5m2;
        const auto round = e4m3 ? sp::round_to_fp8_e4m3 : sp::round_to_fp8_e5m2;
        const std::uint32_t end = bits_of(2.0f * positive_values(decode).back());
        for (std::uint32_t b = 0; b < end; b += 10007) {
            float x = 0.0f;
            std::memcpy(&x, &b, sizeof x);
            for (float s : {x, -x}) {
                const float expected = brute_force_round(s, decode, encode);
                QVERIFY2(same_bits(round(s), expected), qPrintable(QString("bits 0x%1: got %2 want %3")
                                                                       .arg(bits_of(s), 8, 16, QChar('0'))
                                                                       .arg(double(round(s)), 0, 'g', 9)
                                                                       .arg(double(expected), 0, 'g', 9)));
            }
        }
    }

    // ---- INT4 groups -----------------------------------------------------------------------
    void int4_packing_order() {
        // One group, absmax 7: scale 1, codes are the values. Low nibble = even column.
        const std::vector<float> w = {7.0f, -7.0f, 1.0f, -1.0f, 0.0f, 3.0f};
        const auto m = sp::quantize_int4_groups(w.data(), 1, 6, 6);
        QCOMPARE(m.rows, std::size_t(1));
        QCOMPARE(m.cols, std::size_t(6));
        QCOMPARE(m.group, std::size_t(6));
        QCOMPARE(m.scales, std::vector<float>{1.0f});
        QCOMPARE(as_ints(m.packed), (std::vector<int>{0x97, 0xF1, 0x30}));
        QCOMPARE(int4_codes(m), (std::vector<int>{7, -7, 1, -1, 0, 3}));
        QCOMPARE(dequantized(m), w);
    }

    void int4_odd_cols_rows_start_on_a_byte() {
        // Row 0: absmax 14 -> scale 2: 7, -3.5 -> -4 (even), 1.75 -> 2.
        // Row 1: absmax 1.75 -> scale 0.25: 0, -7, 3.5 -> 4 (even).
        const std::vector<float> w = {14.0f, -7.0f, 3.5f, 0.0f, -1.75f, 0.875f};
        const auto m = sp::quantize_int4_groups(w.data(), 2, 3, 3);
        QCOMPARE(m.scales, (std::vector<float>{2.0f, 0.25f}));
        QCOMPARE(as_ints(m.packed),
                 (std::vector<int>{0xC7, 0x02, 0x90, 0x04}));  // high nibble of byte 1 and 3 is 0
        QCOMPARE(int4_codes(m), (std::vector<int>{7, -4, 2, 0, -7, 4}));
        QCOMPARE(dequantized(m), (std::vector<float>{14.0f, -8.0f, 4.0f, 0.0f, -1.75f, 1.0f}));
    }

    void int4_short_last_group() {
        // cols 5, group 2: groups {7, 1} (scale 1), {-14, 2} (scale 2), {0.5} (scale 0.5/7).
        const std::vector<float> w = {7.0f, 1.0f, -14.0f, 2.0f, 0.5f};
        const auto m = sp::quantize_int4_groups(w.data(), 1, 5, 2);
        QCOMPARE(m.scales, (std::vector<float>{1.0f, 2.0f, 0.5f / 7.0f}));
        QCOMPARE(int4_codes(m), (std::vector<int>{7, 1, -7, 1, 7}));
        QCOMPARE(as_ints(m.packed), (std::vector<int>{0x17, 0x19, 0x07}));
        const auto back = dequantized(m);
        EXPECT_EXACT(back[2], -14.0f);
        EXPECT_EXACT(back[4], 7.0f * (0.5f / 7.0f));
        QVERIFY(std::fabs(back[4] - 0.5f) < 1e-7f);
    }

    void int4_group_of_one_and_group_past_cols() {
        // group 1: every element is its own group, so every finite non-zero element maps to +-7.
        const std::vector<float> w = {3.0f, -0.5f, 0.0f, kNaN};
        const auto m = sp::quantize_int4_groups(w.data(), 1, 4, 1);
        QCOMPARE(m.scales, (std::vector<float>{3.0f / 7.0f, 0.5f / 7.0f, 1e-8f, 1e-8f}));
        QCOMPARE(int4_codes(m), (std::vector<int>{7, -7, 0, 0}));
        // group >= cols: one group per row, the same as group == cols.
        const std::vector<float> v = {1.0f, -3.5f, 0.75f, 7.0f, 3.0f, -3.5f};
        const auto whole = sp::quantize_int4_groups(v.data(), 2, 3, 3);
        const auto wider = sp::quantize_int4_groups(v.data(), 2, 3, 100);
        QCOMPARE(whole.scales, (std::vector<float>{0.5f, 1.0f}));
        QCOMPARE(wider.scales, whole.scales);
        QCOMPARE(wider.packed, whole.packed);
        QCOMPARE(int4_codes(whole), (std::vector<int>{2, -7, 2, 7, 3, -4}));  // 1.5 -> 2, -3.5 -> -4
    }

    void int4_all_zero_group() {
        const std::vector<float> w = {0.0f, -0.0f, 1.0f, -1.0f};
        const auto m = sp::quantize_int4_groups(w.data(), 1, 4, 2);
        QCOMPARE(m.scales, (std::vector<float>{sp::kInt4MinScale, 1.0f / 7.0f}));
        EXPECT_EXACT(m.scales[0], 1e-8f);
        QCOMPARE(int4_codes(m), (std::vector<int>{0, 0, 7, -7}));
        const auto back = dequantized(m);
        EXPECT_EXACT(back[0], 0.0f);
        EXPECT_EXACT(back[1], 0.0f);
    }

    void int4_non_finite_inputs() {
        // NaN -> 0, +-inf saturate, neither takes part in absmax (3.5 sets scale 0.5).
        const std::vector<float> w = {kNaN, kInf, -kInf, 3.5f, -1.0f};
        const auto m = sp::quantize_int4_groups(w.data(), 1, 5, 5);
        QCOMPARE(m.scales, std::vector<float>{0.5f});
        QCOMPARE(int4_codes(m), (std::vector<int>{0, 7, -7, 7, -2}));
        QCOMPARE(dequantized(m), (std::vector<float>{0.0f, 3.5f, -3.5f, 3.5f, -1.0f}));
        const std::vector<float> bad = {kNaN, kInf, -kInf};
        const auto only_bad = sp::quantize_int4_groups(bad.data(), 1, 3, 8);
        QCOMPARE(only_bad.scales, std::vector<float>{1e-8f});
        QCOMPARE(int4_codes(only_bad), (std::vector<int>{0, 7, -7}));
    }

    void int4_invalid_and_empty() {
        const std::vector<float> w = {1.0f, 2.0f};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::quantize_int4_groups(w.data(), 1, 2, 0));
        const auto none = sp::quantize_int4_groups(nullptr, 0, 7, 4);
        QVERIFY(none.packed.empty());
        QVERIFY(none.scales.empty());
        const auto no_cols = sp::quantize_int4_groups(nullptr, 3, 0, 4);
        QVERIFY(no_cols.packed.empty());
        QVERIFY(no_cols.scales.empty());
    }

    void int4_error_is_at_most_half_a_step() {
        Lcg rng;
        const std::size_t rows = 9, cols = 77, group = 16;  // 5 groups per row, the last one 13 wide
        std::vector<float> w(rows * cols);
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = rng.uniform(-1.0f, 1.0f) * float(1 + i % 11);
        const auto m = sp::quantize_int4_groups(w.data(), rows, cols, group);
        QCOMPARE(m.packed.size(), rows * 39);
        QCOMPARE(m.scales.size(), rows * 5);
        const auto back = dequantized(m);
        for (std::size_t r = 0; r < rows; ++r) {
            for (std::size_t c = 0; c < cols; ++c) {
                const int code = sp::int4_code(m, r, c);
                QVERIFY(code >= -7 && code <= 7);  // -8 never appears
                const float step = m.scales[r * 5 + c / group];
                QVERIFY(std::fabs(w[r * cols + c] - back[r * cols + c]) <= 0.5f * step * 1.0001f);
            }
        }
    }

    // ---- FP8 rows --------------------------------------------------------------------------
    void fp8_rows_e4m3_hand_computed() {
        // absmax 896 -> scale 896 / 448 = 2: x = {448, -0.5, 0.25, 1.5}.
        const std::vector<float> w = {896.0f, -1.0f, 0.5f, 3.0f};
        const auto m = sp::quantize_fp8_rows(w.data(), 1, 4, sp::Precision::fp8_e4m3);
        QCOMPARE(m.format, sp::Precision::fp8_e4m3);
        QCOMPARE(m.scales, std::vector<float>{2.0f});
        QCOMPARE(as_ints(m.q), (std::vector<int>{0x7E, 0xB0, 0x28, 0x3C}));
        QCOMPARE(dequantized(m), w);
    }

    void fp8_rows_e5m2_hand_computed() {
        // absmax 4 * 57344 -> scale 4: x = {57344, 1.375 -> 1.5 (tie to even), -1, 2^-16}.
        const std::vector<float> w = {4.0f * 57344.0f, 5.5f, -4.0f, std::ldexp(1.0f, -14)};
        const auto m = sp::quantize_fp8_rows(w.data(), 1, 4, sp::Precision::fp8_e5m2);
        QCOMPARE(m.scales, std::vector<float>{4.0f});
        QCOMPARE(as_ints(m.q), (std::vector<int>{0x7B, 0x3E, 0xBC, 0x01}));
        QCOMPARE(dequantized(m), (std::vector<float>{4.0f * 57344.0f, 6.0f, -4.0f, std::ldexp(1.0f, -14)}));
    }

    void fp8_rows_absmax_maps_to_the_format_max_data() { fp8_all_patterns_are_fixed_points_data(); }
    void fp8_rows_absmax_maps_to_the_format_max() {
        QFETCH(bool, e4m3);
        const auto format = e4m3 ? sp::Precision::fp8_e4m3 : sp::Precision::fp8_e5m2;
        const float fmt_max = e4m3 ? sp::kFp8E4M3Max : sp::kFp8E5M2Max;
        const int max_code = e4m3 ? 0x7E : 0x7B;
        Lcg rng;
        const std::size_t rows = 64, cols = 33;
        std::vector<float> w(rows * cols);
        for (std::size_t i = 0; i < w.size(); ++i)
            w[i] = rng.uniform(-1.0f, 1.0f) * std::ldexp(1.0f, int(i / cols % 40) - 20);
        const auto m = sp::quantize_fp8_rows(w.data(), rows, cols, format);
        const auto back = dequantized(m);
        for (std::size_t r = 0; r < rows; ++r) {
            float absmax = 0.0f;
            std::size_t arg = 0;  // the column of the row's absmax
            for (std::size_t c = 0; c < cols; ++c) {
                if (std::fabs(w[r * cols + c]) > absmax) {
                    absmax = std::fabs(w[r * cols + c]);
                    arg = c;
                }
            }
            EXPECT_EXACT(m.scales[r], absmax / fmt_max);
            QCOMPARE(int(m.q[r * cols + arg] & 0x7F), max_code);
            EXPECT_EXACT(back[r * cols + arg], std::copysign(fmt_max * m.scales[r], w[r * cols + arg]));
            QVERIFY(std::fabs(back[r * cols + arg] - w[r * cols + arg]) <= 1e-6f * absmax);
        }
    }

    void fp8_rows_zero_rows() {
        const std::vector<float> w = {0.0f, -0.0f, 0.0f, 1.0f, 0.0f, 0.0f};
        for (auto format : {sp::Precision::fp8_e4m3, sp::Precision::fp8_e5m2}) {
            const auto m = sp::quantize_fp8_rows(w.data(), 2, 3, format);
            EXPECT_EXACT(m.scales[0], sp::kFp8MinScale);
            EXPECT_EXACT(m.scales[0], 1e-12f);
            QCOMPARE(as_ints(m.q).at(0), 0x00);
            QCOMPARE(as_ints(m.q).at(1), 0x80);  // the sign of -0 survives
            const auto back = dequantized(m);
            QVERIFY(same_bits(back[0], 0.0f));
            QVERIFY(same_bits(back[1], -0.0f));
            QVERIFY(std::fabs(back[3] - 1.0f) < 1e-6f);  // the absmax maps to the format max and back
        }
    }

    void fp8_rows_subnormal_region() {
        // scale 1 (absmax is the format max): the format's own subnormals, tie to even at the bottom.
        const float t4 = std::ldexp(1.0f, -9);  // E4M3 smallest subnormal
        const std::vector<float> w4 = {448.0f, t4, 0.5f * t4, 1.5f * t4, 3.0f * t4, -2.5f * t4};
        const auto m4 = sp::quantize_fp8_rows(w4.data(), 1, 6, sp::Precision::fp8_e4m3);
        QCOMPARE(m4.scales, std::vector<float>{1.0f});
        QCOMPARE(as_ints(m4.q), (std::vector<int>{0x7E, 0x01, 0x00, 0x02, 0x03, 0x82}));
        QCOMPARE(dequantized(m4), (std::vector<float>{448.0f, t4, 0.0f, 2 * t4, 3 * t4, -2 * t4}));
        const float t5 = std::ldexp(1.0f, -16);  // E5M2 smallest subnormal
        const std::vector<float> w5 = {57344.0f, t5, 0.5f * t5, 0.75f * t5, 1.5f * t5};
        const auto m5 = sp::quantize_fp8_rows(w5.data(), 1, 5, sp::Precision::fp8_e5m2);
        QCOMPARE(m5.scales, std::vector<float>{1.0f});
        QCOMPARE(as_ints(m5.q), (std::vector<int>{0x7B, 0x01, 0x00, 0x01, 0x02}));
    }

    void fp8_rows_non_finite_inputs() {
        // NaN -> code 0, +-inf saturate (E5M2 too: no infinity comes out), absmax over finite values.
        const std::vector<float> w = {kInf, -kInf, kNaN, 2.0f * 57344.0f};
        const auto m = sp::quantize_fp8_rows(w.data(), 1, 4, sp::Precision::fp8_e5m2);
        QCOMPARE(m.scales, std::vector<float>{2.0f});
        QCOMPARE(as_ints(m.q), (std::vector<int>{0x7B, 0xFB, 0x00, 0x7B}));
        QCOMPARE(dequantized(m), (std::vector<float>{114688.0f, -114688.0f, 0.0f, 114688.0f}));
        const std::vector<float> v = {kNaN, -kInf, 448.0f};
        const auto e4 = sp::quantize_fp8_rows(v.data(), 1, 3, sp::Precision::fp8_e4m3);
        QCOMPARE(as_ints(e4.q), (std::vector<int>{0x00, 0xFE, 0x7E}));
    }

    void fp8_rows_rejects_other_formats() {
        const std::vector<float> w = {1.0f};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::quantize_fp8_rows(w.data(), 1, 1, sp::Precision::int8));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::quantize_fp8_rows(w.data(), 1, 1, sp::Precision::bf16));
    }

    // ---- per-format entry points -----------------------------------------------------------
    void stored_bytes_per_format() {
        QCOMPARE(sp::stored_bytes(sp::Precision::bf16, 3, 5), std::uint64_t(30));
        QCOMPARE(sp::stored_bytes(sp::Precision::int8, 3, 5), std::uint64_t(15 + 12));
        QCOMPARE(sp::stored_bytes(sp::Precision::fp8_e4m3, 3, 5), std::uint64_t(27));
        QCOMPARE(sp::stored_bytes(sp::Precision::fp8_e5m2, 3, 5), std::uint64_t(27));
        QCOMPARE(sp::stored_bytes(sp::Precision::int4, 3, 5, 2), std::uint64_t(3 * 3 + 4 * 3 * 3));
        QCOMPARE(sp::stored_bytes(sp::Precision::int4, 3, 5, 5), std::uint64_t(9 + 12));
        // 4096 x 4096 at the default group of 64: 8 MiB of codes + 1 MiB of scales.
        QCOMPARE(sp::stored_bytes(sp::Precision::int4, 4096, 4096), std::uint64_t(8388608 + 1048576));
        QCOMPARE(sp::stored_bytes(sp::Precision::bf16, 4096, 4096), std::uint64_t(33554432));
        QCOMPARE(sp::stored_bytes(sp::Precision::int8, 0, 7), std::uint64_t(0));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::stored_bytes(sp::Precision::int4, 3, 5, 0));
        // The packed buffers are exactly that size.
        std::vector<float> w(3 * 5, 1.0f);
        const auto m = sp::quantize_int4_groups(w.data(), 3, 5, 2);
        QCOMPARE(std::uint64_t(m.packed.size() + 4 * m.scales.size()),
                 sp::stored_bytes(sp::Precision::int4, 3, 5, 2));
    }

    void roundtrip_matches_the_per_format_functions() {
        Lcg rng;
        const std::size_t rows = 7, cols = 13, group = 4;
        std::vector<float> w(rows * cols);
        for (float& x : w) x = rng.uniform(-3.0f, 3.0f);
        w[5] = kNaN;
        w[17] = 1e-30f;
        w[30] = kInf;  // row 2: the absmax ignores it, the element saturates
        w[41] = -0.0f;
        w[55] = 1e-41f;  // a float subnormal
        w[70] = -3e38f;  // row 5: everything else rounds to zero in the integer formats
        std::vector<float> out(w.size());
        for (sp::Precision p : sp::kAllPrecisions) {
            std::vector<float> expected(w.size());
            switch (p) {
                case sp::Precision::bf16:
                    for (std::size_t i = 0; i < w.size(); ++i) expected[i] = sp::round_to_bf16(w[i]);
                    break;
                case sp::Precision::int8:
                    expected = sp::int8_roundtrip_rows(w.data(), rows, cols);
                    break;
                case sp::Precision::int4:
                    expected = dequantized(sp::quantize_int4_groups(w.data(), rows, cols, group));
                    break;
                default:
                    expected = dequantized(sp::quantize_fp8_rows(w.data(), rows, cols, p));
            }
            sp::roundtrip(p, w.data(), rows, cols, out.data(), group);
            for (std::size_t i = 0; i < w.size(); ++i)
                QVERIFY2(bits_of(out[i]) == bits_of(expected[i]), qPrintable(QString::number(i)));
            QCOMPARE(std::isnan(out[5]), p == sp::Precision::bf16);  // only BF16 keeps the NaN
        }
        // The default INT4 group is 64.
        std::vector<float> a(w.size()), b(w.size());
        w[5] = 0.25f;
        sp::roundtrip(sp::Precision::int4, w.data(), rows, cols, a.data());
        sp::roundtrip(sp::Precision::int4, w.data(), rows, cols, b.data(), 64);
        QCOMPARE(a, b);
    }

    void round_to_bf16_values() {
        EXPECT_EXACT(sp::round_to_bf16(1.0f), 1.0f);
        EXPECT_EXACT(sp::round_to_bf16(-3.0f), -3.0f);
        // Ties: 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7 (odd): goes down.
        EXPECT_EXACT(sp::round_to_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
        // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): goes up.
        EXPECT_EXACT(sp::round_to_bf16(1.0f + 3.0f * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
        EXPECT_EXACT(sp::round_to_bf16(-(1.0f + 3.0f * std::ldexp(1.0f, -8))),
                     -(1.0f + std::ldexp(1.0f, -6)));
        // Just past the midpoint goes up, just below goes down.
        EXPECT_EXACT(sp::round_to_bf16(from_bits(0x3F808001u)), from_bits(0x3F810000u));
        EXPECT_EXACT(sp::round_to_bf16(from_bits(0x3F817FFFu)), from_bits(0x3F810000u));
        QVERIFY(same_bits(sp::round_to_bf16(-0.0f), -0.0f));
        // Subnormals round on the same bits: tie to even (0), odd neighbour goes up.
        QCOMPARE(bits_of(sp::round_to_bf16(from_bits(0x00008000u))), 0x00000000u);
        QCOMPARE(bits_of(sp::round_to_bf16(from_bits(0x00018000u))), 0x00020000u);
    }

    void round_to_bf16_non_finite_and_max() {
        QCOMPARE(bits_of(sp::round_to_bf16(kNaN)), 0x7FC00000u);
        QCOMPARE(bits_of(sp::round_to_bf16(-kNaN)), 0x7FC00000u);                   // sign dropped, like c10
        QCOMPARE(bits_of(sp::round_to_bf16(from_bits(0x7F800001u))), 0x7FC00000u);  // signalling payload
        QCOMPARE(bits_of(sp::round_to_bf16(from_bits(0xFFFFFFFFu))), 0x7FC00000u);
        EXPECT_EXACT(sp::round_to_bf16(kInf), kInf);
        EXPECT_EXACT(sp::round_to_bf16(-kInf), -kInf);
        // bf16's largest finite value stays; the float max is past the midpoint and overflows.
        QCOMPARE(bits_of(sp::round_to_bf16(from_bits(0x7F7F0000u))), 0x7F7F0000u);
        QCOMPARE(bits_of(sp::round_to_bf16(from_bits(0x7F7F7FFFu))), 0x7F7F0000u);
        QCOMPARE(bits_of(sp::round_to_bf16(from_bits(0x7F7F8000u))), 0x7F800000u);  // tie, odd -> up -> inf
        EXPECT_EXACT(sp::round_to_bf16(std::numeric_limits<float>::max()), kInf);
        EXPECT_EXACT(sp::round_to_bf16(-std::numeric_limits<float>::max()), -kInf);
    }

    // ---- relative error --------------------------------------------------------------------
    void relative_error_values() {
        QCOMPARE(sp::relative_error({3.0f, 4.0f}, {3.0f, 4.0f}), 0.0);
        QCOMPARE(sp::relative_error({3.0f, 4.0f}, {0.0f, 0.0f}), 1.0);
        QCOMPARE(sp::relative_error({3.0f, 4.0f}, {3.0f, 5.0f}), 0.2);
        QCOMPARE(sp::relative_error({3.0f, 4.0f}, {6.0f, 8.0f}), 1.0);
        // Accumulated in double: squares of 1e30 overflow float but not double.
        QCOMPARE(sp::relative_error({3e30f, 4e30f}, {0.0f, 0.0f}), 1.0);
    }

    void relative_error_zero_reference() {
        QCOMPARE(sp::relative_error({0.0f, 0.0f}, {0.0f, -0.0f}), 0.0);
        QCOMPARE(sp::relative_error({0.0f, 0.0f}, {0.0f, 1e-20f}), std::numeric_limits<double>::infinity());
        QCOMPARE(sp::relative_error(nullptr, nullptr, 0), 0.0);
        QVERIFY(std::isnan(sp::relative_error({0.0f}, {kNaN})));
    }

    void relative_error_non_finite_and_sizes() {
        QVERIFY(std::isnan(sp::relative_error({1.0f, 2.0f}, {1.0f, kNaN})));
        QVERIFY(std::isnan(sp::relative_error({1.0f, kNaN}, {1.0f, 2.0f})));
        QCOMPARE(sp::relative_error({1.0f, 0.0f}, {1.0f, kInf}), std::numeric_limits<double>::infinity());
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::relative_error({1.0f}, {1.0f, 2.0f}));
    }
};

QTEST_APPLESS_MAIN(TestQuantize)
#include "test_quantize.moc"
