// pack_rows() is vectorized (core/src/quantize_pack.cpp); the scalar reference quantizers are its
// oracle: the codes and scales of every format, compared byte for byte, over the whole matrix and
// over row ranges packed one after the other into the same storage (what a caller splitting the rows
// over threads does), on odd sizes and vector tails, short last INT4 groups, ties, signed zeros, NaN,
// infinities, all-zero rows, float and FP8 subnormals and a sweep of float bit patterns. Bytes
// outside the rows packed so far must stay untouched.
#include <QtTest>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../common/reference_pack.h"
#include "quantize_fixtures.h"
#include "sp/quantize.h"

using namespace sp::test::quantize_fixtures;

namespace {

constexpr std::uint8_t kUntouched = 0xA5;
constexpr std::uint32_t kUntouchedScale = 0x7FA5A5A5u;  // a NaN pattern no quantizer writes

using sp::test::Packed;

// Storage of the size of `like`'s, filled with the bytes and scales no packer writes.
Packed untouched(const Packed& like) {
    return {std::vector<std::uint8_t>(like.codes.size(), kUntouched),
            std::vector<float>(like.scales.size(), from_bits(kUntouchedScale))};
}

// The index of the first element whose bits differ, or the size when there is none.
std::size_t first_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    return std::size_t(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
}
std::size_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
        if (bits_of(a[i]) != bits_of(b[i])) return i;
    return a.size();
}

using Range = std::pair<std::size_t, std::size_t>;  // rows [first, second)

// The ways a caller may split `rows` rows: all at once; two parts at the first, middle and last
// row, the back part first; one row at a time from the last, with empty ranges at both ends.
std::vector<std::vector<Range>> splits(std::size_t rows) {
    std::vector<std::vector<Range>> out = {{{0, rows}}};
    for (const std::size_t k : {std::size_t{1}, rows / 2, rows - 1})
        if (k > 0 && k < rows) out.push_back({{k, rows}, {0, k}});
    std::vector<Range> singles = {{rows, rows}};
    for (std::size_t r = rows; r-- > 0;) singles.emplace_back(r, r + 1);
    singles.emplace_back(0, 0);
    out.push_back(singles);
    return out;
}

}  // namespace

class TestQuantizePack : public QObject {
    Q_OBJECT

    // Packs each of `ranges` in turn into one storage; after each, the rows packed so far must hold
    // the reference's codes and scales and every other byte must be untouched. Names the first
    // difference.
    static void expect_ranges(sp::Precision p, const std::vector<float>& w, std::size_t rows,
                              std::size_t cols, std::size_t group, const std::vector<Range>& ranges,
                              const char* what) {
        const Packed expected = sp::test::reference_pack(p, w.data(), rows, cols, group);
        const sp::PackedRow row = sp::packed_row(p, cols, group);
        QCOMPARE(expected.codes.size(), rows * row.code_bytes);
        QCOMPARE(expected.scales.size(), rows * row.scales);
        Packed got = untouched(expected), want = untouched(expected);
        for (const auto& [begin, end] : ranges) {
            sp::pack_rows(p, w.data(), cols, begin, end, got.codes.data(), got.scales.data(), group);
            std::copy(expected.codes.begin() + std::ptrdiff_t(begin * row.code_bytes),
                      expected.codes.begin() + std::ptrdiff_t(end * row.code_bytes),
                      want.codes.begin() + std::ptrdiff_t(begin * row.code_bytes));
            std::copy(expected.scales.begin() + std::ptrdiff_t(begin * row.scales),
                      expected.scales.begin() + std::ptrdiff_t(end * row.scales),
                      want.scales.begin() + std::ptrdiff_t(begin * row.scales));
            const QString where = QString::asprintf("%s: %s %zux%zu group %zu, after rows [%zu, %zu)", what,
                                                    sp::to_string(p).data(), rows, cols, group, begin, end);
            const std::size_t b = first_difference(got.codes, want.codes);
            if (b != got.codes.size())
                QFAIL(qPrintable(where +
                                 QString::asprintf(": code byte %zu (row %zu) = 0x%02x, expected 0x%02x", b,
                                                   b / row.code_bytes, unsigned(got.codes[b]),
                                                   unsigned(want.codes[b]))));
            const std::size_t s = first_difference(got.scales, want.scales);
            if (s != got.scales.size())
                QFAIL(qPrintable(where + QString::asprintf(": scale %zu (row %zu) = 0x%08x, expected 0x%08x",
                                                           s, s / row.scales, bits_of(got.scales[s]),
                                                           bits_of(want.scales[s]))));
        }
    }

    // Every format, every way of splitting the rows.
    static void expect_reference(const std::vector<float>& w, std::size_t rows, std::size_t cols,
                                 std::size_t group, const char* what) {
        for (sp::Precision p : sp::kAllPrecisions)
            for (const std::vector<Range>& ranges : splits(rows)) {
                expect_ranges(p, w, rows, cols, group, ranges, what);
                if (QTest::currentTestFailed()) return;
            }
    }

  private slots:
    // Every width from one element to several vectors and a tail, INT4 groups that end mid-byte or
    // leave a shorter last group, specials anywhere.
    void odd_sizes_and_special_values() {
        Lcg rng;
        for (std::size_t rows : {1u, 2u, 3u, 5u})
            for (std::size_t cols = 1; cols <= 41; ++cols)
                for (std::size_t group : {1u, 3u, 5u, 8u, 16u, 64u}) {
                    expect_reference(mixed_values(rng, rows * cols), rows, cols, group, "mixed");
                    if (QTest::currentTestFailed()) return;
                }
        for (std::size_t group : {64u, 100u, 7u})
            expect_reference(mixed_values(rng, 4 * 517), 4, 517, group, "wide");
    }

    // Rows of one kind each: all zero (the minimum scale), zeros of both signs, NaN or infinities
    // only, NaN and infinities among finite values, float subnormals only (every format's codes 0 or
    // its minimum scale), the largest floats (BF16 overflows to infinity).
    void edge_rows() {
        const std::size_t cols = 37;
        std::vector<float> w;
        auto add_row = [&](auto value_at) {
            for (std::size_t c = 0; c < cols; ++c) w.push_back(value_at(c));
        };
        add_row([](std::size_t) { return 0.0f; });
        add_row([](std::size_t c) { return c % 2 == 0 ? -0.0f : 0.0f; });
        add_row([](std::size_t c) { return c % 3 == 0 ? -kNaN : kNaN; });
        add_row([](std::size_t c) { return c % 2 == 0 ? kInf : -kInf; });
        add_row([](std::size_t c) {
            return c % 4 == 0 ? kNaN : c % 4 == 1 ? kInf : c % 4 == 2 ? -kInf : 0.3f * float(c);
        });
        add_row(
            [](std::size_t c) { return from_bits((c % 2 == 0 ? 0u : 0x80000000u) | std::uint32_t(c + 1)); });
        add_row([](std::size_t c) { return from_bits(std::uint32_t(0x007FFFFF - c)); });
        add_row([](std::size_t c) { return c % 2 == 0 ? 3.4028235e38f : -3.39e38f; });
        const std::size_t rows = w.size() / cols;
        for (std::size_t group : {1u, 2u, 5u, 36u, 37u, 64u})
            expect_reference(w, rows, cols, group, "edge rows");
    }

    // Exact midpoints between codes (ties go to even in every format) and a sweep of float bit
    // patterns across the whole range (quantize_fixtures.h).
    void ties_and_bit_pattern_sweep() {
        for (const Matrix& m : sp::test::quantize_fixtures::ties_and_bit_pattern_sweep())
            expect_reference(m.w, m.rows, m.cols, m.group, m.what);
    }

    // The layout pack_rows writes, and stored_bytes as its sum.
    void packed_row_layout() {
        using sp::Precision;
        QCOMPARE(sp::packed_row(Precision::bf16, 5).code_bytes, std::size_t{10});
        QCOMPARE(sp::packed_row(Precision::bf16, 5).scales, std::size_t{0});
        for (Precision p : {Precision::int8, Precision::fp8_e4m3, Precision::fp8_e5m2}) {
            QCOMPARE(sp::packed_row(p, 5).code_bytes, std::size_t{5});
            QCOMPARE(sp::packed_row(p, 5).scales, std::size_t{1});
        }
        QCOMPARE(sp::packed_row(Precision::int4, 5, 2).code_bytes, std::size_t{3});
        QCOMPARE(sp::packed_row(Precision::int4, 5, 2).scales, std::size_t{3});
        QCOMPARE(sp::packed_row(Precision::int4, 130).scales, std::size_t{3});
        for (Precision p : sp::kAllPrecisions)
            for (std::size_t cols : {0u, 1u, 7u, 130u}) {
                const sp::PackedRow row = sp::packed_row(p, cols, 3);
                QCOMPARE(sp::stored_bytes(p, 6, cols, 3), 6 * (row.code_bytes + sizeof(float) * row.scales));
            }
    }

    // Bad arguments throw before anything is written.
    void invalid_arguments_write_nothing() {
        const std::vector<float> w(12, 1.0f);
        std::vector<std::uint8_t> codes(24, kUntouched);
        std::vector<float> scales(12, from_bits(kUntouchedScale));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::packed_row(sp::Precision::int4, 4, 0));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::packed_row(static_cast<sp::Precision>(99), 4));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::pack_rows(sp::Precision::int4, w.data(), 4, 0, 3,
                                                                      codes.data(), scales.data(), 0));
        QVERIFY_THROWS_EXCEPTION(
            std::invalid_argument,
            sp::pack_rows(static_cast<sp::Precision>(99), w.data(), 4, 0, 3, codes.data(), scales.data()));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::pack_rows(sp::Precision::int8, w.data(), 4, 2, 1,
                                                                      codes.data(), scales.data()));
        for (std::uint8_t b : codes) QCOMPARE(b, kUntouched);
        for (float s : scales) QCOMPARE(bits_of(s), kUntouchedScale);
    }
};

QTEST_APPLESS_MAIN(TestQuantizePack)
#include "test_quantize_pack.moc"
