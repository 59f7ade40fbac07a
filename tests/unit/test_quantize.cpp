// The reference quantizers: INT8 per-row absmax, INT4 groups, the per-format entry points, BF16
// rounding and relative error. FP8 E4M3/E5M2 rounding and FP8 rows are in test_quantize_fp8.cpp.
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

std::vector<int> int4_codes(const sp::Int4Groups& m) {
    std::vector<int> out;
    for (std::size_t r = 0; r < m.rows; ++r)
        for (std::size_t c = 0; c < m.cols; ++c) out.push_back(sp::int4_code(m, r, c));
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
