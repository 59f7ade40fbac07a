// The fused CUDA gradient-statistics kernels (sp_cuda_stats) on raw device buffers (no LibTorch),
// against a float64 host reference and against their host model (grad_stats_host_model.h, which must
// agree bit for bit): random lists of fp32/bf16/fp16 tensors of odd sizes at odd offsets, with NaN and
// +-Inf, empty tensors and blocks, a tensor of more than 2^31 elements, determinism, stream switching,
// and launch() returning while the stream is blocked (no host synchronization).
// Skips (QSKIP) when the CUDA runtime reports no device.
#include <QtTest>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../common/grad_tensor_fixtures.h"
#include "sp/cuda/grad_stats_host_model.h"
#include "sp/cuda/grad_stats_launcher.h"
#include "stream_gate.h"

using sp::cuda::BlockMoments;
using sp::cuda::GradDType;
using sp::cuda::GradStatsLauncher;
using sp::cuda::GradTensorDesc;
using sp::test::bf16_value;
using sp::test::check_block;
using sp::test::HostTensor;
using sp::test::make_tensor;
using sp::test::reference;
using sp::test::rel_close;

namespace {

#define CUDA_OK(expr) QVERIFY2((expr) == cudaSuccess, #expr)

// The tensors, uploaded into one device arena at their lay_out() offsets. Frees on destruction.
struct DeviceArena {
    void* base = nullptr;
    ~DeviceArena() {
        if (base) (void)cudaFree(base);
    }
    std::vector<GradTensorDesc> upload(std::vector<HostTensor>& tensors) {
        const std::size_t bytes = sp::test::lay_out(tensors);
        if (cudaMalloc(&base, bytes + 256) != cudaSuccess) return {};
        auto* b = static_cast<unsigned char*>(base);
        for (const auto& t : tensors)
            if (!t.bytes.empty())
                (void)cudaMemcpy(b + t.offset, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice);
        return sp::test::descriptors(tensors, b);
    }
};

QString moments_text(const BlockMoments& m) {
    return QString("finite %1 nonfinite %2 mean %3 m2 %4 sumsq %5 max %6")
        .arg(m.finite)
        .arg(m.nonfinite)
        .arg(m.mean, 0, 'g', 17)
        .arg(m.m2, 0, 'g', 17)
        .arg(m.sumsq, 0, 'g', 17)
        .arg(m.max_abs, 0, 'g', 17);
}

}  // namespace

class TestCudaGradStatsKernel : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        if (!sp::cuda::cuda_device_available()) QSKIP("no CUDA device: the kernel is only compiled here");
    }

    void random_lists_match_float64_reference_and_host_model() {
        std::mt19937_64 rng(20240611);
        for (int round = 0; round < 6; ++round) {
            constexpr int kBlocks = 7;
            std::vector<HostTensor> host = sp::test::random_tensor_list(rng, kBlocks, 24, round % 2 == 0);
            DeviceArena arena;
            const auto desc = arena.upload(host);
            QVERIFY(arena.base);
            GradStatsLauncher l;
            l.set_plan(sp::cuda::build_grad_stats_plan(desc, kBlocks), nullptr);
            l.launch(nullptr);
            const auto& got = l.results();
            QCOMPARE(int(got.size()), kBlocks);
            sp::test::HostArena on_host;
            const auto model =
                sp::cuda::grad_stats_on_host(sp::cuda::build_grad_stats_plan(on_host.place(host), kBlocks));
            for (int b = 0; b < kBlocks; ++b) {
                const auto i = std::size_t(b);
                const QString what = QString("round %1 block %2").arg(round).arg(b);
                check_block(got[i], reference(host, b), what);
                if (QTest::currentTestFailed()) return;
                QVERIFY2(sp::test::same_bits(got[i], model[i]),
                         qPrintable(what + ": device " + moments_text(got[i]) + " != host model " +
                                    moments_text(model[i])));
            }
        }
    }

    void all_nonfinite_and_empty_blocks() {
        std::mt19937_64 rng(7);
        std::vector<HostTensor> host;
        host.push_back(make_tensor(rng, GradDType::bf16, 0, 100, 1.0, 0.0, 0));
        for (auto& v : host[0].values) v = std::numeric_limits<float>::quiet_NaN();
        for (std::size_t i = 0; i < 100; ++i) {
            const std::uint16_t nan = 0x7fc0;
            std::memcpy(&host[0].bytes[2 * i], &nan, 2);
        }
        host.push_back(make_tensor(rng, GradDType::f32, 1, 0, 1.0, 0.0, 0));
        DeviceArena arena;
        const auto desc = arena.upload(host);
        GradStatsLauncher l;
        l.set_plan(sp::cuda::build_grad_stats_plan(desc, 3), nullptr);
        l.launch(nullptr);
        const auto& got = l.results();
        QCOMPARE(got[0].finite, std::uint64_t{0});
        QCOMPARE(got[0].nonfinite, std::uint64_t{100});
        for (int b = 0; b < 3; ++b)
            check_block(got[std::size_t(b)], reference(host, b), QString("block %1").arg(b));
    }

    void more_than_2_pow_31_elements() {
        // 2^31 + 1001 bf16 elements (4 GiB), all 0x3f3f except two written past element 2^31.
        const std::int64_t n = (std::int64_t{1} << 31) + 1001;
        std::size_t free_bytes = 0, total = 0;
        CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
        if (free_bytes < std::size_t(n) * 2 + (std::size_t{1} << 30))
            QSKIP("not enough device memory for 4 GiB");
        void* p = nullptr;
        CUDA_OK(cudaMalloc(&p, std::size_t(n) * 2));
        CUDA_OK(cudaMemset(p, 0x3f, std::size_t(n) * 2));
        const std::uint16_t two = 0x4000, nan = 0x7fc0;  // bf16 2.0 and NaN
        const std::int64_t at_two = (std::int64_t{1} << 31) + 5, at_nan = n - 1;
        CUDA_OK(cudaMemcpy(static_cast<std::uint16_t*>(p) + at_two, &two, 2, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(static_cast<std::uint16_t*>(p) + at_nan, &nan, 2, cudaMemcpyHostToDevice));
        GradStatsLauncher l;
        l.set_plan(sp::cuda::build_grad_stats_plan({GradTensorDesc{p, n, GradDType::bf16, 0}}, 1), nullptr);
        l.launch(nullptr);
        const BlockMoments got = l.results().at(0);
        (void)cudaFree(p);
        // n - 2 copies of v and one 2.0: exact mean and M2 in long double.
        const long double v = bf16_value(0x3f3f), k = (long double)(n - 2), cnt = k + 1;
        const long double mean = (k * v + 2.0L) / cnt;
        const long double m2 = k * (v - mean) * (v - mean) + (2.0L - mean) * (2.0L - mean);
        QCOMPARE(got.finite, std::uint64_t(n - 1));
        QCOMPARE(got.nonfinite, std::uint64_t{1});
        QCOMPARE(got.max_abs, 2.0);
        QVERIFY2(std::fabs(got.mean - double(mean)) <= 1e-9 * double(mean),
                 qPrintable(QString::number(got.mean, 'g', 17)));
        QVERIFY2(rel_close(got.m2, double(m2), 1e-6), qPrintable(QString::number(got.m2, 'g', 17)));
        QVERIFY(rel_close(got.sumsq, double(k * v * v + 4.0L), 1e-9));
    }

    void deterministic_and_stream_switching() {
        std::mt19937_64 rng(99);
        std::vector<HostTensor> host;
        host.reserve(12);
        for (int i = 0; i < 12; ++i)
            host.push_back(make_tensor(rng, GradDType(i % 3), i % 4, 200003 + i, 1e-2, 0.0, i % 2));
        DeviceArena arena;
        const auto desc = arena.upload(host);
        cudaStream_t a = nullptr, b = nullptr;
        CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
        CUDA_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
        {
            GradStatsLauncher l;
            l.set_plan(sp::cuda::build_grad_stats_plan(desc, 4), a);
            l.launch(a);
            const std::vector<BlockMoments> first = l.results();
            l.launch(b);
            const std::vector<BlockMoments>& second = l.results();
            QCOMPARE(second.size(), first.size());
            QVERIFY(std::equal(first.begin(), first.end(), second.begin(), sp::test::same_bits));
            for (int blk = 0; blk < 4; ++blk)
                check_block(first[std::size_t(blk)], reference(host, blk), QString("block %1").arg(blk));
        }
        (void)cudaStreamDestroy(a);
        (void)cudaStreamDestroy(b);
    }

    void launch_does_not_wait_for_the_device() {
        // A host callback holds the stream; if launch() synchronized with the device or the stream
        // it would not return until the gate times out.
        std::mt19937_64 rng(5);
        std::vector<HostTensor> host = {make_tensor(rng, GradDType::bf16, 0, 1 << 20, 1e-3, 0.0, 0)};
        DeviceArena arena;
        const auto desc = arena.upload(host);
        cudaStream_t s = nullptr;
        CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        {
            GradStatsLauncher l;
            l.set_plan(sp::cuda::build_grad_stats_plan(desc, 1), s);
            l.launch(s);
            (void)l.results();  // warm: the first launch loads the module
            sp::test::StreamGate gate;
            CUDA_OK(cudaLaunchHostFunc(s, &sp::test::StreamGate::hold, &gate));
            l.launch(s);
            const bool ready_while_held = l.ready();
            gate.open = true;
            QVERIFY2(!gate.timed_out, "launch() waited for the stream");
            QVERIFY(!ready_while_held);
            check_block(l.results().at(0), reference(host, 0), "after gate");
            QVERIFY(l.ready());
        }
        (void)cudaStreamDestroy(s);
    }
};

QTEST_GUILESS_MAIN(TestCudaGradStatsKernel)
#include "test_cuda_grad_stats_kernel.moc"
