// The fused CUDA gradient-statistics kernels (sp_cuda_stats) against a float64 host reference, on raw
// device buffers (no LibTorch): random lists of fp32/bf16/fp16 tensors of odd sizes at odd offsets,
// with NaN and +-Inf, empty tensors and blocks, a tensor of more than 2^31 elements, determinism,
// stream switching, and launch() returning while the stream is blocked (no host synchronization).
// Skips (QSKIP) when the CUDA runtime reports no device.
//
// Tolerances as in test_grad_stats: the kernel sums the same float values in fp64 in another order
// (shifted by one element per chunk), so l2 and variance agree to ~1e-9 relative and the mean to
// 1e-9 of |mean| + rms. max |g|, counts and non-finite counts are exact.
#include <QtTest>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "../common/reference_moments.h"
#include "sp/cuda/grad_stats_launcher.h"

using sp::cuda::BlockMoments;
using sp::cuda::GradDType;
using sp::cuda::GradStatsLauncher;
using sp::cuda::GradTensorDesc;

namespace {

constexpr double kRelTol = 1e-9;

#define CUDA_OK(expr) QVERIFY2((expr) == cudaSuccess, #expr)

float float_from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
// Host encoders (round toward zero: the reference decodes the stored bits, so any rounding will do)
// and exact decoders.
std::uint16_t bf16_bits(float f) {
    return std::uint16_t(bits_of(f) >> 16);
}
float bf16_value(std::uint16_t b) {
    return float_from_bits(std::uint32_t(b) << 16);
}
std::uint16_t f16_bits(float f) {
    const std::uint32_t u = bits_of(f);
    const auto sign = std::uint16_t((u >> 16) & 0x8000u);
    if (std::isnan(f)) return std::uint16_t(sign | 0x7e00u);
    const int e = int((u >> 23) & 0xffu) - 112;
    const std::uint32_t mant = (u & 0x7fffffu) | 0x800000u;
    if (e >= 31) return std::uint16_t(sign | 0x7c00u);  // overflow and Inf
    if (e <= 0) {
        const int shift = 14 - e;
        return std::uint16_t(sign | (shift > 24 ? 0u : mant >> shift));
    }
    return std::uint16_t(sign | std::uint32_t(e) << 10 | ((u & 0x7fffffu) >> 13));
}
float f16_value(std::uint16_t h) {
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    float v;
    if (e == 0)
        v = std::ldexp(float(m), -24);
    else if (e == 31)
        v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else
        v = std::ldexp(float(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

// One host tensor: its values as the device will see them, and its raw bytes.
struct HostTensor {
    GradDType dtype = GradDType::f32;
    int block = 0;
    std::vector<float> values;  // decoded
    std::vector<unsigned char> bytes;
    std::size_t device_offset = 0;  // bytes from the arena start (any element-aligned offset)
};

HostTensor make_tensor(std::mt19937_64& rng, GradDType dtype, int block, std::int64_t n, double scale,
                       double offset, int n_nonfinite) {
    HostTensor t;
    t.dtype = dtype;
    t.block = block;
    std::normal_distribution<double> normal(offset, scale);
    std::vector<float> raw(static_cast<std::size_t>(n));
    for (auto& x : raw) x = float(normal(rng));
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
    for (int i = 0; i < n_nonfinite && n > 0; ++i)
        raw[std::size_t(rng() % std::uint64_t(n))] = specials[i % 3];
    const std::size_t es = sp::cuda::element_size(dtype);
    t.bytes.resize(raw.size() * es);
    t.values.resize(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (dtype == GradDType::f32) {
            std::memcpy(&t.bytes[4 * i], &raw[i], 4);
            t.values[i] = raw[i];
        } else {
            const std::uint16_t b = dtype == GradDType::bf16 ? bf16_bits(raw[i]) : f16_bits(raw[i]);
            std::memcpy(&t.bytes[2 * i], &b, 2);
            t.values[i] = dtype == GradDType::bf16 ? bf16_value(b) : f16_value(b);
        }
    }
    return t;
}

using Ref = sp::test::ReferenceMoments;
using sp::test::rel_close;

Ref reference(const std::vector<HostTensor>& tensors, int block) {
    std::vector<double> v;
    std::uint64_t nonfinite = 0;
    for (const auto& t : tensors) {
        if (t.block != block) continue;
        for (float x : t.values) {
            if (std::isfinite(x))
                v.push_back(x);
            else
                ++nonfinite;
        }
    }
    return sp::test::reference_moments(v, nonfinite);
}

void check_block(const BlockMoments& got, const Ref& want, const QString& what) {
    QVERIFY2(got.finite == want.finite,
             qPrintable(what + QString(": finite %1 != %2").arg(got.finite).arg(want.finite)));
    QVERIFY2(got.nonfinite == want.nonfinite,
             qPrintable(what + QString(": nonfinite %1 != %2").arg(got.nonfinite).arg(want.nonfinite)));
    QVERIFY2(
        got.max_abs == want.max_abs,
        qPrintable(what +
                   QString(": max_abs %1 != %2").arg(got.max_abs, 0, 'g', 17).arg(want.max_abs, 0, 'g', 17)));
    QVERIFY2(
        rel_close(std::sqrt(got.sumsq), want.l2, kRelTol),
        qPrintable(what +
                   QString(": l2 %1 != %2").arg(std::sqrt(got.sumsq), 0, 'g', 17).arg(want.l2, 0, 'g', 17)));
    QVERIFY2(
        std::fabs(got.mean - want.mean) <= kRelTol * (std::fabs(want.mean) + want.rms),
        qPrintable(what + QString(": mean %1 != %2").arg(got.mean, 0, 'g', 17).arg(want.mean, 0, 'g', 17)));
    const double var = got.finite ? got.m2 / double(got.finite) : 0.0;
    QVERIFY2(rel_close(var, want.variance, kRelTol),
             qPrintable(what +
                        QString(": variance %1 != %2").arg(var, 0, 'g', 17).arg(want.variance, 0, 'g', 17)));
}

// The tensors, uploaded into one device arena at their offsets. Frees on destruction.
struct DeviceArena {
    void* base = nullptr;
    ~DeviceArena() {
        if (base) (void)cudaFree(base);
    }
    std::vector<GradTensorDesc> upload(std::vector<HostTensor>& tensors) {
        std::size_t bytes = 0;
        for (auto& t : tensors) {
            const std::size_t es = sp::cuda::element_size(t.dtype);
            // Some tensors start off the 16-byte grid (storage offsets), all on their element size.
            const std::size_t misalign = t.values.size() % 3 == 0 ? es * (t.values.size() % (16 / es)) : 0;
            t.device_offset = (bytes + 255) / 256 * 256 + misalign;
            bytes = t.device_offset + t.bytes.size();
        }
        if (cudaMalloc(&base, bytes + 256) != cudaSuccess) return {};
        std::vector<GradTensorDesc> d;
        for (const auto& t : tensors) {
            auto* p = static_cast<unsigned char*>(base) + t.device_offset;
            if (!t.bytes.empty()) (void)cudaMemcpy(p, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice);
            d.push_back(GradTensorDesc{p, std::int64_t(t.values.size()), t.dtype, t.block});
        }
        return d;
    }
};

// Host callback that holds its stream until `open` is set (or 20 s pass, so a bug cannot hang CI).
struct Gate {
    std::atomic<bool> open{false};
    std::atomic<bool> timed_out{false};
    static void CUDART_CB hold(void* self) {
        auto* g = static_cast<Gate*>(self);
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!g->open.load()) {
            if (std::chrono::steady_clock::now() > until) {
                g->timed_out = true;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
};

}  // namespace

class TestCudaGradStatsKernel : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        if (!sp::cuda::cuda_device_available()) QSKIP("no CUDA device: the kernel is only compiled here");
    }

    void random_lists_match_float64_reference() {
        std::mt19937_64 rng(20240611);
        const std::int64_t sizes[] = {0, 1, 2, 3, 7, 9, 15, 33, 1000, 4097, 65535, 65536, 65537, 300001};
        const GradDType dtypes[] = {GradDType::f32, GradDType::bf16, GradDType::f16};
        for (int round = 0; round < 6; ++round) {
            constexpr int kBlocks = 7;
            std::vector<HostTensor> host;
            for (int i = 0; i < 24; ++i) {
                const int block = int(rng() % (kBlocks - 1));  // the last block stays empty
                const GradDType d = dtypes[rng() % 3];
                const std::int64_t n = sizes[rng() % std::size(sizes)];
                // Mostly gradient-like values; some blocks far from zero mean (cancellation).
                const double offset = round % 2 ? 0.0 : 0.5;
                host.push_back(make_tensor(rng, d, block, n, 1e-3 * double(1 + rng() % 100), offset,
                                           int(rng() % 4) - 1));
            }
            DeviceArena arena;
            const auto desc = arena.upload(host);
            QVERIFY(arena.base);
            GradStatsLauncher l;
            l.set_plan(sp::cuda::build_grad_stats_plan(desc, kBlocks), nullptr);
            l.launch(nullptr);
            const auto& got = l.results();
            QCOMPARE(int(got.size()), kBlocks);
            for (int b = 0; b < kBlocks; ++b) {
                check_block(got[std::size_t(b)], reference(host, b),
                            QString("round %1 block %2").arg(round).arg(b));
                if (QTest::currentTestFailed()) return;
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
            QVERIFY(std::memcmp(first.data(), second.data(), first.size() * sizeof(BlockMoments)) == 0);
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
            Gate gate;
            CUDA_OK(cudaLaunchHostFunc(s, &Gate::hold, &gate));
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
