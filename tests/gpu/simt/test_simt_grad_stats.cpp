// The real CUDA kernels (agent/cuda/src/grad_stats_kernels.cu, compiled as C++) and their real launcher,
// run on the CPU by the SIMT emulator (README.md): bit for bit against their host model and within
// 1e-9 of the float64 reference, on random lists of fp32/bf16/fp16 tensors of odd sizes at odd
// offsets with NaN and +-Inf, empty tensors and blocks, at chunk sizes down to 8 elements, so that
// blocks hold hundreds of chunk partials (every merge thread a strided share, every tree level used).
// Device memory is host memory here: the kernels and the host model read the same arena.
#include <QtTest>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../../common/grad_tensor_fixtures.h"
#include "sp/cuda/grad_stats_host_model.h"
#include "sp/cuda/grad_stats_launcher.h"

using sp::cuda::BlockMoments;
using sp::cuda::GradDType;
using sp::test::HostTensor;
using sp::test::make_tensor;

namespace {

// Every field's bits, for a failed bit-for-bit comparison.
QString bits_text(const BlockMoments& m) {
    return QString::asprintf("{finite %llu, nonfinite %llu, mean %a, m2 %a, sumsq %a, max %a}",
                             static_cast<unsigned long long>(m.finite),
                             static_cast<unsigned long long>(m.nonfinite), m.mean, m.m2, m.sumsq, m.max_abs);
}

// The kernels through the launcher and the host model, on one plan over `tensors` laid out in host
// memory (`shift` bytes off the 256-byte grid); checks both against each other bit for bit, and the
// kernels' results against the float64 reference.
void check_kernels(std::vector<HostTensor>& tensors, int n_blocks, std::int64_t chunk_elems,
                   const QString& what, std::size_t shift = 0) {
    sp::test::HostArena arena;
    const sp::cuda::GradStatsPlan plan =
        sp::cuda::build_grad_stats_plan(arena.place(tensors, shift), n_blocks, chunk_elems);
    const std::vector<BlockMoments> model = sp::cuda::grad_stats_on_host(plan);
    sp::cuda::GradStatsLauncher launcher;
    launcher.set_plan(plan, nullptr);
    launcher.launch(nullptr);
    const std::vector<BlockMoments>& got = launcher.results();
    QCOMPARE(int(got.size()), n_blocks);
    for (int b = 0; b < n_blocks; ++b) {
        const auto i = std::size_t(b);
        const QString where = what + QString(" block %1").arg(b);
        QVERIFY2(sp::test::same_bits(got[i], model[i]), qPrintable(where + ": kernels " + bits_text(got[i]) +
                                                                   " != host model " + bits_text(model[i])));
        sp::test::check_block(got[i], sp::test::reference(tensors, b), where);
        if (QTest::currentTestFailed()) return;
    }
}

}  // namespace

class TestSimtGradStats : public QObject {
    Q_OBJECT

  private slots:
    void random_lists_data() {
        QTest::addColumn<qint64>("chunk_elems");
        QTest::addColumn<bool>("small_tensors");
        QTest::newRow("64K-element chunks") << qint64(sp::cuda::kDefaultChunkElems) << false;
        QTest::newRow("1000-element chunks") << qint64(1000) << true;
        QTest::newRow("64-element chunks") << qint64(64) << true;
        QTest::newRow("8-element chunks") << qint64(8) << true;
    }
    void random_lists() {
        QFETCH(qint64, chunk_elems);
        QFETCH(bool, small_tensors);
        std::mt19937_64 rng(20240611);
        for (int round = 0; round < 2; ++round) {
            constexpr int kBlocks = 7;
            // Small tensors keep small chunks to a few thousand blocks (each block is 256 fibers).
            std::vector<HostTensor> host =
                small_tensors ? sp::test::random_tensor_list(rng, kBlocks, 24, round % 2 == 0,
                                                             {0, 1, 3, 8, 9, 17, 33, 1000, 2051})
                              : sp::test::random_tensor_list(rng, kBlocks, 24, round % 2 == 0);
            check_kernels(host, kBlocks, chunk_elems, QString("round %1").arg(round));
            if (QTest::currentTestFailed()) return;
        }
    }

    void many_chunks_per_block() {
        // At 8 elements per chunk block 0 has 382 partials: every merge thread takes one, threads 0-125
        // a second (the strided share), and each level of the tree merges live data. Block 1 has 3.
        std::mt19937_64 rng(17);
        std::vector<HostTensor> host = {make_tensor(rng, GradDType::bf16, 0, 2051, 0.3, 0.1, 2),
                                        make_tensor(rng, GradDType::f32, 0, 1000, 2.0, -1.0, 0),
                                        make_tensor(rng, GradDType::f16, 1, 17, 0.5, 0.0, 1)};
        check_kernels(host, 2, 8, "8-element chunks");
    }

    void every_alignment_of_every_dtype() {
        sp::test::for_every_alignment([](std::vector<HostTensor>& host, std::size_t shift,
                                         const QString& what) { check_kernels(host, 2, 64, what, shift); });
    }

    void nonfinite_and_empty() {
        // Block 0 all NaN, block 1 one empty tensor, block 2 nothing; a chunk starting with Inf
        // (shift K = 0) and a lone -Inf in block 3.
        std::mt19937_64 rng(7);
        std::vector<HostTensor> host = {make_tensor(rng, GradDType::bf16, 0, 100, 1.0, 0.0, 0),
                                        make_tensor(rng, GradDType::f32, 1, 0, 1.0, 0.0, 0),
                                        make_tensor(rng, GradDType::f32, 3, 70, 1.0, 5.0, 0),
                                        make_tensor(rng, GradDType::f16, 3, 1, 1.0, 0.0, 0)};
        const float inf = std::numeric_limits<float>::infinity();
        for (std::size_t i = 0; i < 100; ++i)
            sp::test::set_element(host[0], i, std::numeric_limits<float>::quiet_NaN());
        sp::test::set_element(host[2], 0, inf);
        sp::test::set_element(host[3], 0, -inf);
        check_kernels(host, 4, 64, "non-finite");
    }

    void only_empty_tensors() {
        // No chunk at all: the launcher skips the chunk kernel and the merge kernel reports zeros.
        std::mt19937_64 rng(1);
        std::vector<HostTensor> host = {make_tensor(rng, GradDType::f32, 0, 0, 1.0, 0.0, 0),
                                        make_tensor(rng, GradDType::bf16, 1, 0, 1.0, 0.0, 0)};
        check_kernels(host, 2, 64, "empty");
    }
};

QTEST_GUILESS_MAIN(TestSimtGradStats)
#include "test_simt_grad_stats.moc"
