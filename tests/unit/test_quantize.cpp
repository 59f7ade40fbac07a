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
    return std::memcmp(&a, &b, sizeof a) == 0;
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
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = rng.uniform(-1.0f, 1.0f) * float(1 + i / cols);
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
