// The reference FP8 quantizers: E4M3/E5M2 rounding (fixed values, ties, saturation, subnormals,
// patterns, exhaustive checks against a brute force) and FP8 rows with a per-row absmax scale.
// INT8, INT4, BF16 and relative error are in test_quantize.cpp.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "quantize_fixtures.h"
#include "sp/quantize.h"

namespace {

using namespace sp::test::quantize_fixtures;

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

class TestQuantizeFp8 : public QObject {
    Q_OBJECT

  private slots:
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
};

QTEST_APPLESS_MAIN(TestQuantizeFp8)
#include "test_quantize_fp8.moc"
