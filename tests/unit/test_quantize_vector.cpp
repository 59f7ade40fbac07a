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

float from_bits(std::uint32_t b) {
    float x = 0;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

// Random values over many binades (FP8 subnormals and float subnormals included) with random signs,
// and the special values at positions the generator picks.
std::vector<float> mixed_values(Lcg& rng, std::size_t n) {
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

    // A row whose absmax makes the scale exactly 1 holds exact midpoints between codes: ties go to
    // even in every format.
    void ties_round_to_even() {
        std::vector<float> w;
        for (int k = -127; k <= 126; ++k) w.push_back(float(k) + 0.5f);  // INT8 ties (scale 127/127)
        w.push_back(127.0f);
        expect_reference(w, 1, w.size(), 64, "int8 ties");
        w.clear();
        for (int k = -7; k <= 6; ++k) w.push_back(float(k) + 0.5f);  // INT4 ties (scale 7/7)
        w.push_back(7.0f);
        expect_reference(w, 1, w.size(), w.size(), "int4 ties");
        for (const float max_code : {sp::kFp8E4M3Max, sp::kFp8E5M2Max}) {
            // Midpoints between neighbouring FP8 values in the normal and the subnormal range
            // (quantum 2^-9 or 2^-16 at scale 1), and BF16 midpoints (1 + 2^-8 (2k + 1)).
            w.assign({max_code, -max_code, 1.0625f, 1.1875f, -1.0625f, 1.125f, 1.375f, -2.75f});
            for (int k = 0; k < 16; ++k) {
                w.push_back(std::ldexp(float(k) + 0.5f, -9));
                w.push_back(-std::ldexp(float(k) + 0.5f, -16));
                w.push_back(1.0f + std::ldexp(float(2 * k + 1), -8));
            }
            expect_reference(w, 1, w.size(), 64, "fp8 and bf16 ties");
        }
    }

    // Float bit patterns swept across the whole range (both signs, every exponent, NaN payloads),
    // each row anchored so the FP8 scale is 1: every binade of both FP8 formats and of BF16.
    void bit_pattern_sweep() {
        for (const float anchor : {sp::kFp8E4M3Max, sp::kFp8E5M2Max, 127.0f}) {
            std::vector<float> w;
            for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 0x10003ull) {
                if (w.size() % 1023 == 0) w.push_back(anchor);
                w.push_back(from_bits(std::uint32_t(b)));
            }
            const std::size_t cols = 1023, rows = w.size() / cols;
            w.resize(rows * cols);
            expect_reference(w, rows, cols, 64, "sweep");
        }
    }
};

QTEST_APPLESS_MAIN(TestQuantizeVector)
#include "test_quantize_vector.moc"
