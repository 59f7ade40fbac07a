// roundtrip() is vectorized (core/src/quantize_roundtrip.cpp); the scalar reference quantizers are
// its oracle: every format, odd sizes and vector tails, ties, signed zeros, NaN, infinities, float
// and FP8 subnormals, saturation, compared bit for bit.
#include <QtTest>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "quantize_fixtures.h"
#include "sp/quantize.h"

using namespace sp::test::quantize_fixtures;

namespace {

// What roundtrip(p, ...) is defined as: the scalar quantize then dequantize of each format.
std::vector<float> reference(sp::Precision p, const std::vector<float>& w, std::size_t rows, std::size_t cols,
                             std::size_t group) {
    std::vector<float> out(w.size());
    switch (p) {
        case sp::Precision::bf16:
            for (std::size_t i = 0; i < w.size(); ++i) out[i] = sp::round_to_bf16(w[i]);
            return out;
        case sp::Precision::int8:
            sp::dequantize_int8_rows(sp::quantize_int8_rows(w.data(), rows, cols), out.data());
            return out;
        case sp::Precision::int4:
            return dequantized(sp::quantize_int4_groups(w.data(), rows, cols, group));
        default:
            return dequantized(sp::quantize_fp8_rows(w.data(), rows, cols, p));
    }
}

}  // namespace

class TestQuantizeVector : public QObject {
    Q_OBJECT

    // Compares every format's roundtrip with the reference on one matrix; names the first difference.
    static void expect_reference(const std::vector<float>& w, std::size_t rows, std::size_t cols,
                                 std::size_t group, const char* what) {
        std::vector<float> out(w.size());
        for (sp::Precision p : sp::kAllPrecisions) {
            sp::roundtrip(p, w.data(), rows, cols, out.data(), group);
            const std::vector<float> expected = reference(p, w, rows, cols, group);
            for (std::size_t i = 0; i < w.size(); ++i)
                QVERIFY2(bits_of(out[i]) == bits_of(expected[i]),
                         qPrintable(
                             QString::asprintf("%s: %s %zux%zu group %zu, element %zu = %a: %a, expected %a",
                                               what, sp::to_string(p).data(), rows, cols, group, i,
                                               double(w[i]), double(out[i]), double(expected[i]))));
        }
    }

  private slots:
    // Every width from one element to several vectors and a tail, with specials anywhere.
    void odd_sizes_and_special_values() {
        Lcg rng;
        for (std::size_t rows : {1u, 2u, 3u})
            for (std::size_t cols = 1; cols <= 41; ++cols)
                for (std::size_t group : {std::size_t{1}, std::size_t{3}, std::size_t{8}, std::size_t{64}})
                    expect_reference(mixed_values(rng, rows * cols), rows, cols, group, "mixed");
        expect_reference(mixed_values(rng, 5 * 517), 5, 517, 64, "wide");
    }

    // Exact midpoints between codes (ties go to even in every format) and a sweep of float bit
    // patterns across the whole range (quantize_fixtures.h).
    void ties_and_bit_pattern_sweep() {
        for (const Matrix& m : sp::test::quantize_fixtures::ties_and_bit_pattern_sweep())
            expect_reference(m.w, m.rows, m.cols, m.group, m.what);
    }
};

QTEST_APPLESS_MAIN(TestQuantizeVector)
#include "test_quantize_vector.moc"
