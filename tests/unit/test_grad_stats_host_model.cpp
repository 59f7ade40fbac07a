// The gradient-statistics kernels' algorithm, run on the CPU through their host model
// (grad_stats_host_model.h: the kernels' own per-thread code, their reduction order): against a
// float64 reference on random lists of fp32/bf16/fp16 tensors of odd sizes at odd offsets, with NaN
// and +-Inf, empty tensors and blocks, many chunks per block (the merge kernel's strided share and
// tree), values far from zero, and every fp16 bit pattern through the kernels' decoder. The kernels
// themselves need a GPU (tests/gpu); this is what a machine without one can check of them.
#include <QtTest>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../common/grad_tensor_fixtures.h"
#include "grad_stats_kernel_math.h"
#include "sp/cuda/grad_stats_host_model.h"

using sp::cuda::BlockMoments;
using sp::cuda::GradDType;
using sp::test::check_block;
using sp::test::HostTensor;
using sp::test::make_tensor;
using sp::test::reference;

namespace {

std::vector<BlockMoments> run(std::vector<HostTensor>& tensors, int n_blocks,
                              std::int64_t chunk_elems = sp::cuda::kDefaultChunkElems,
                              std::size_t shift = 0) {
    sp::test::HostArena arena;
    return sp::cuda::grad_stats_on_host(
        sp::cuda::build_grad_stats_plan(arena.place(tensors, shift), n_blocks, chunk_elems));
}

HostTensor from_floats(const std::vector<float>& values, int block) {
    HostTensor t;
    t.block = block;
    t.values = values;
    t.bytes.resize(values.size() * 4);
    if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
}

}  // namespace

class TestGradStatsHostModel : public QObject {
    Q_OBJECT

  private slots:
    void small_exact_values() {
        // 1, 2, 3, 4 and a NaN: mean 2.5, M2 5, sum of squares 30, max 4, one non-finite.
        std::vector<HostTensor> t = {
            from_floats({1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f, 4.0f}, 0)};
        const auto got = run(t, 1);
        QCOMPARE(got.size(), std::size_t{1});
        QCOMPARE(got[0].finite, std::uint64_t{4});
        QCOMPARE(got[0].nonfinite, std::uint64_t{1});
        QCOMPARE(got[0].mean, 2.5);
        QCOMPARE(got[0].m2, 5.0);
        QCOMPARE(got[0].sumsq, 30.0);
        QCOMPARE(got[0].max_abs, 4.0);
    }

    void random_lists_match_float64_reference_data() {
        QTest::addColumn<qint64>("chunk_elems");
        QTest::newRow("64K-element chunks") << qint64(sp::cuda::kDefaultChunkElems);
        // Small chunks: hundreds to tens of thousands of partials per block, so every merge thread
        // takes a strided share and the tree merges full levels; most chunks have heads and tails.
        QTest::newRow("1000-element chunks") << qint64(1000);
        QTest::newRow("8-element chunks") << qint64(8);
    }
    void random_lists_match_float64_reference() {
        QFETCH(qint64, chunk_elems);
        std::mt19937_64 rng(20240611);
        for (int round = 0; round < 4; ++round) {
            constexpr int kBlocks = 7;
            std::vector<HostTensor> host = sp::test::random_tensor_list(rng, kBlocks, 24, round % 2 == 0);
            const auto got = run(host, kBlocks, chunk_elems);
            QCOMPARE(int(got.size()), kBlocks);
            for (int b = 0; b < kBlocks; ++b) {
                check_block(got[std::size_t(b)], reference(host, b),
                            QString("round %1 block %2").arg(round).arg(b));
                if (QTest::currentTestFailed()) return;
            }
        }
    }

    void every_alignment_of_every_dtype() {
        // The same values at every element-aligned shift of the arena.
        sp::test::for_every_alignment(
            [](std::vector<HostTensor>& host, std::size_t shift, const QString& what) {
                const auto got = run(host, 2, 64, shift);
                for (int b = 0; b < 2; ++b)
                    check_block(got[std::size_t(b)], reference(host, b), what + QString(" block %1").arg(b));
            });
    }

    void far_from_zero_keeps_the_variance() {
        // 1000 + N(0, 1e-3) in fp32: sum of squares ~1e6 per element, variance ~1e-6. Naive
        // sumsq/n - mean^2 in fp64 would keep about four digits of it; the shifted sums keep the nine asked.
        std::mt19937_64 rng(11);
        std::vector<HostTensor> host = {make_tensor(rng, GradDType::f32, 0, 200001, 1e-3, 1000.0, 0)};
        check_block(run(host, 1).at(0), reference(host, 0), "offset 1000");
    }

    void all_nonfinite_and_empty_blocks() {
        std::mt19937_64 rng(7);
        std::vector<HostTensor> host;
        host.push_back(make_tensor(rng, GradDType::bf16, 0, 100, 1.0, 0.0, 0));
        const std::uint16_t nan = 0x7fc0;
        for (std::size_t i = 0; i < 100; ++i) {
            host[0].values[i] = std::numeric_limits<float>::quiet_NaN();
            std::memcpy(&host[0].bytes[2 * i], &nan, 2);
        }
        host.push_back(make_tensor(rng, GradDType::f32, 1, 0, 1.0, 0.0, 0));
        const auto got = run(host, 3);
        QCOMPARE(got.size(), std::size_t{3});
        QCOMPARE(got[0].finite, std::uint64_t{0});
        QCOMPARE(got[0].nonfinite, std::uint64_t{100});
        for (int b = 0; b < 3; ++b)
            check_block(got[std::size_t(b)], reference(host, b), QString("block %1").arg(b));
    }

    void first_element_not_finite() {
        // K falls back to 0 when a chunk starts with Inf; the rest of the chunk is still summed.
        std::vector<HostTensor> host = {
            from_floats({std::numeric_limits<float>::infinity(), 5.0f, 7.0f, -1.0f, 2.0f}, 0)};
        const auto got = run(host, 1);
        check_block(got.at(0), reference(host, 0), "leading Inf");
        QCOMPARE(got[0].nonfinite, std::uint64_t{1});
        QCOMPARE(got[0].max_abs, 7.0);
    }

    void fp16_decoder_is_exact_for_every_bit_pattern() {
        for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
            const float got = sp::cuda::kernel::decode16<2>(std::uint16_t(h));
            const float want = sp::test::f16_value(std::uint16_t(h));
            if (std::isnan(want)) {
                QVERIFY2(std::isnan(got), qPrintable(QString("0x%1").arg(h, 4, 16)));
            } else {
                QVERIFY2(sp::test::bits_of(got) == sp::test::bits_of(want),
                         qPrintable(QString("0x%1: %2 != %3").arg(h, 4, 16).arg(got).arg(want)));
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestGradStatsHostModel)
#include "test_grad_stats_host_model.moc"
