// The CPU gradient statistics collector against a plain double-precision reference, and the block
// helpers (blocks_from_modules, layout_of). Every collector case runs on both inner kernels: the
// default one (AVX2 where the CPU has it) and the portable one (SP_GRAD_STATS_PORTABLE set).
//
// Tolerances: the reference sums the same float values in double in another order, so sums agree to
// about n * 2^-53 relative: 1e-9 for l2 and variance, 1e-9 of the spread for the mean (the mean of
// centred data is a cancelling sum, so relative-to-itself would be meaningless). max |g| is exact.
// <torch/torch.h> before Qt: Qt's `slots` macro would otherwise break LibTorch's headers.
#include <torch/torch.h>

#include <QtTest>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/reference_moments.h"
#include "sp/agent/block.h"
#include "sp/agent/grad_stats_collector.h"

// Counts operator new calls while armed: collect() must not allocate once its plan exists. (The
// replacement is global, so LibTorch's own allocations through operator new count too.)
namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<long> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
    if (g_count_allocations.load(std::memory_order_relaxed))
        g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
    return operator new(n);
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
// The nothrow forms too (std::stable_sort's temporary buffer uses them): the library's own would
// allocate with its operator new and release here with free (ASan: alloc-dealloc-mismatch).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return operator new(n);
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept {
    return operator new(n, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}

using sp::BlockGradStats;
using sp::agent::AgentBlock;

namespace {

constexpr double kRelTol = 1e-9;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The reference: plain loops in double over the values (bf16/fp16 -> float is exact), two-pass M2.
struct Ref : sp::test::ReferenceMoments {
    std::uint64_t numel = 0;
};

Ref reference(const std::vector<at::Tensor>& grads) {
    std::vector<double> v;
    std::uint64_t numel = 0, nonfinite = 0;
    for (const auto& g : grads) {
        if (!g.defined()) continue;
        const at::Tensor f = g.to(at::kFloat).contiguous();
        const float* p = f.data_ptr<float>();
        numel += std::uint64_t(f.numel());
        for (std::int64_t i = 0; i < f.numel(); ++i) {
            if (std::isfinite(p[i]))
                v.push_back(double(p[i]));
            else
                ++nonfinite;
        }
    }
    Ref r;
    static_cast<sp::test::ReferenceMoments&>(r) = sp::test::reference_moments(v, nonfinite);
    r.numel = numel;
    return r;
}

// Compares one block's statistics with the reference; failures name the case.
void check_block(const BlockGradStats& got, const Ref& want, const QString& what) {
    QVERIFY2(got.numel == want.numel,
             qPrintable(what + QString(": numel %1 != %2").arg(got.numel).arg(want.numel)));
    sp::test::check_moments({got.numel - got.nonfinite_count, got.nonfinite_count, got.max_abs, got.l2_norm,
                             got.mean, got.variance},
                            want, kRelTol, what);
}

// A parameter of `dtype` whose .grad() is `grad` (undefined: no grad).
at::Tensor param_with_grad(at::IntArrayRef shape, at::ScalarType dtype, const at::Tensor& grad) {
    at::Tensor p = torch::zeros(shape, torch::dtype(dtype)).requires_grad_(true);
    if (grad.defined()) p.mutable_grad() = grad;
    return p;
}

// Random gradient values ~ N(offset, scale^2) of `dtype`.
at::Tensor random_grad(at::IntArrayRef shape, at::ScalarType dtype, double scale = 1e-3,
                       double offset = 0.0) {
    return (torch::randn(shape, torch::kDouble) * scale + offset).to(dtype);
}

AgentBlock make_block(int id, const std::vector<at::Tensor>& params) {
    AgentBlock b;
    b.id = id;
    b.name = "blocks." + std::to_string(id);
    for (std::size_t i = 0; i < params.size(); ++i) {
        b.param_names.push_back("p" + std::to_string(i));
        b.params.push_back(params[i]);
    }
    return b;
}

std::vector<at::Tensor> grads_of(const AgentBlock& b) {
    std::vector<at::Tensor> g;
    for (const auto& p : b.params) g.push_back(p.grad());
    return g;
}

// A collector on the default kernel or, with `portable`, on the portable one (read at construction).
std::unique_ptr<sp::agent::GradStatsCollector> make_collector(bool portable) {
    if (portable)
        qputenv("SP_GRAD_STATS_PORTABLE", "1");
    else
        qunsetenv("SP_GRAD_STATS_PORTABLE");
    auto c = sp::agent::make_cpu_grad_stats_collector();
    qunsetenv("SP_GRAD_STATS_PORTABLE");
    return c;
}

QString kernel_name(bool portable) {
    return portable ? QStringLiteral("portable") : QStringLiteral("default");
}

// prepare + collect on both kernels; every block must report and match its reference.
void check_all(const std::vector<AgentBlock>& blocks, const QString& what) {
    for (bool portable : {false, true}) {
        auto c = make_collector(portable);
        c->prepare(blocks);
        c->collect();
        const auto& res = c->results();
        QVERIFY2(res.size() == blocks.size(), qPrintable(what + ": block count"));
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            QCOMPARE(res[i].block_id, blocks[i].id);
            check_block(res[i], reference(grads_of(blocks[i])),
                        QString("%1 [%2] block %3").arg(what, kernel_name(portable)).arg(blocks[i].id));
            if (QTest::currentTestFailed()) return;
        }
    }
}

std::uint64_t bits(double x) {
    std::uint64_t u = 0;
    std::memcpy(&u, &x, sizeof u);
    return u;
}

bool same_bits(const BlockGradStats& a, const BlockGradStats& b) {
    return a.block_id == b.block_id && a.numel == b.numel && a.nonfinite_count == b.nonfinite_count &&
           bits(a.l2_norm) == bits(b.l2_norm) && bits(a.max_abs) == bits(b.max_abs) &&
           bits(a.variance) == bits(b.variance) && bits(a.mean) == bits(b.mean);
}

}  // namespace

class TestGradStats : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() { torch::manual_seed(20240601); }

    // Several blocks of one dtype, shapes like a small transformer block's.
    void single_dtype_data() {
        QTest::addColumn<int>("dtype");
        QTest::newRow("fp32") << int(at::kFloat);
        QTest::newRow("bf16") << int(at::kBFloat16);
        QTest::newRow("fp16") << int(at::kHalf);
    }
    void single_dtype() {
        QFETCH(int, dtype);
        const auto t = static_cast<at::ScalarType>(dtype);
        std::vector<AgentBlock> blocks;
        blocks.reserve(3);
        for (int b = 0; b < 3; ++b) {
            blocks.push_back(
                make_block(b, {param_with_grad({96, 64}, t, random_grad({96, 64}, t, 1e-3 * (b + 1))),
                               param_with_grad({96}, t, random_grad({96}, t, 1e-2, 1e-3)),
                               param_with_grad({64, 200}, t, random_grad({64, 200}, t, 0.5))}));
        }
        check_all(blocks, "single_dtype");
    }

    void mixed_dtypes_in_one_block() {
        std::vector<AgentBlock> blocks;
        blocks.push_back(
            make_block(0, {param_with_grad({300, 7}, at::kFloat, random_grad({300, 7}, at::kFloat)),
                           param_with_grad({1000}, at::kBFloat16, random_grad({1000}, at::kBFloat16)),
                           param_with_grad({513}, at::kHalf, random_grad({513}, at::kHalf, 0.1))}));
        blocks.push_back(
            make_block(1, {param_with_grad({70000}, at::kHalf, random_grad({70000}, at::kHalf, 2.0)),
                           param_with_grad({5, 5}, at::kFloat, random_grad({5, 5}, at::kFloat, 3.0))}));
        check_all(blocks, "mixed");
    }

    // Sizes around the vector widths (8, 16, 32 lanes) and the 65536-element chunk.
    void odd_sizes() {
        for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
            std::vector<AgentBlock> blocks;
            int id = 0;
            for (std::int64_t n : {1, 3, 7, 15, 17, 31, 33, 65535, 65536, 65537, 131073}) {
                blocks.push_back(make_block(id++, {param_with_grad({n}, t, random_grad({n}, t, 1.0, 0.25))}));
            }
            check_all(blocks, QString("odd_sizes %1").arg(c10::toString(t)));
            if (QTest::currentTestFailed()) return;
        }
    }

    // NaN and +-Inf at the first element, across a chunk boundary, in the tail and mid-vector.
    void non_finite() {
        for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
            at::Tensor big = random_grad({200000}, t, 1e-2);
            big[0].fill_(kNaN);
            big[65535].fill_(kInf);
            big[65536].fill_(-kInf);
            big[100001].fill_(kNaN);
            big[199999].fill_(kInf);
            at::Tensor small = random_grad({37}, t);
            small[5].fill_(-kInf);
            small[36].fill_(kNaN);
            at::Tensor all_bad = torch::full({9}, kNaN, torch::dtype(t));
            all_bad[3].fill_(kInf);
            const at::Tensor clean = random_grad({1000}, t);
            std::vector<AgentBlock> blocks;
            blocks.push_back(
                make_block(0, {param_with_grad({200000}, t, big), param_with_grad({37}, t, small)}));
            blocks.push_back(make_block(1, {param_with_grad({9}, t, all_bad)}));
            blocks.push_back(
                make_block(2, {param_with_grad({9}, t, all_bad.clone()), param_with_grad({1000}, t, clean)}));
            check_all(blocks, QString("non_finite %1").arg(c10::toString(t)));
            if (QTest::currentTestFailed()) return;

            // The counts and the all-non-finite block, spelled out.
            auto c = make_collector(false);
            c->prepare(blocks);
            c->collect();
            const auto& r = c->results();
            QCOMPARE(quint64(r[0].nonfinite_count), quint64(7));
            QCOMPARE(quint64(r[0].numel), quint64(200037));
            QVERIFY(!r[0].finite());
            QCOMPARE(quint64(r[1].nonfinite_count), quint64(9));
            QCOMPARE(r[1].l2_norm, 0.0);
            QCOMPARE(r[1].max_abs, 0.0);
            QCOMPARE(r[1].mean, 0.0);
            QCOMPARE(r[1].variance, 0.0);
            QCOMPARE(quint64(r[2].nonfinite_count), quint64(9));
        }
    }

    // An empty grad counts as a defined grad of 0 elements.
    void empty_tensors() {
        std::vector<AgentBlock> blocks;
        blocks.push_back(make_block(0, {param_with_grad({0}, at::kFloat, torch::zeros({0}))}));
        blocks.push_back(
            make_block(1, {param_with_grad({0, 4}, at::kHalf, torch::zeros({0, 4}, torch::kHalf)),
                           param_with_grad({50}, at::kFloat, random_grad({50}, at::kFloat))}));
        check_all(blocks, "empty");
        if (QTest::currentTestFailed()) return;
        auto c = make_collector(false);
        c->prepare(blocks);
        c->collect();
        QCOMPARE(int(c->results().size()), 2);
        const auto& r0 = c->results()[0];
        QCOMPARE(quint64(r0.numel), quint64(0));
        QCOMPARE(r0.l2_norm, 0.0);
        QCOMPARE(r0.variance, 0.0);
        QCOMPARE(r0.mean, 0.0);
        QCOMPARE(quint64(c->results()[1].numel), quint64(50));
    }

    // Transposed and channels-last (dense: read in place), strided slices and an expanded (stride 0)
    // grad (copied); then the same grads changed in place.
    void non_contiguous() {
        for (at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
            const at::Tensor transposed = random_grad({300, 257}, t, 1e-2).t();
            const at::Tensor sliced = random_grad({90, 2 * 301}, t).slice(1, 0, 2 * 301, 2);
            const at::Tensor expanded = random_grad({1, 129}, t, 1.0, 0.5).expand({40, 129});
            const at::Tensor offset = random_grad({1000}, t).slice(0, 3, 1000);  // contiguous, offset storage
            const at::Tensor channels_last =
                random_grad({3, 5, 7, 9}, t, 1.0, -0.5).contiguous(at::MemoryFormat::ChannelsLast);
            QVERIFY(!transposed.is_contiguous() && !sliced.is_contiguous() && !expanded.is_contiguous());
            QVERIFY(!channels_last.is_contiguous());
            std::vector<AgentBlock> blocks;
            blocks.push_back(make_block(0, {param_with_grad({257, 300}, t, transposed)}));
            blocks.push_back(make_block(
                1, {param_with_grad({90, 301}, t, sliced), param_with_grad({40, 129}, t, expanded),
                    param_with_grad({997}, t, offset), param_with_grad({3, 5, 7, 9}, t, channels_last)}));
            check_all(blocks, QString("non_contiguous %1").arg(c10::toString(t)));
            if (QTest::currentTestFailed()) return;

            auto c = make_collector(false);
            c->prepare(blocks);
            c->collect();
            transposed.mul_(-3.0);  // in place, through the strided views: the next collect must see it
            sliced.add_(1.0);
            channels_last.mul_(0.5);
            c->collect();
            check_block(c->results()[0], reference(grads_of(blocks[0])), "non_contiguous, changed in place");
            check_block(c->results()[1], reference(grads_of(blocks[1])), "non_contiguous, changed in place");
            if (QTest::currentTestFailed()) return;
        }
    }

    // Magnitudes at the ends of each format: squares that overflow float (but not double), subnormals,
    // and the largest magnitude on the negative side (max |g| must see through the sign).
    void extreme_values() {
        struct Case {
            at::ScalarType t;
            double big, tiny;
        };
        for (const Case& k : {Case{at::kFloat, 3.0e38, 1.0e-44}, Case{at::kBFloat16, 3.0e38, 1.0e-40},
                              Case{at::kHalf, 65504.0, 6.0e-8}}) {
            at::Tensor g = random_grad({1000}, k.t, 1.0);
            g[17].fill_(-k.big);
            g[500].fill_(k.big / 2);
            g[999].fill_(k.tiny);
            g[3].fill_(-k.tiny);
            at::Tensor tiny_only = torch::full({40}, k.tiny, torch::dtype(k.t));
            tiny_only[33].fill_(-2 * k.tiny);
            std::vector<AgentBlock> blocks = {make_block(0, {param_with_grad({1000}, k.t, g)}),
                                              make_block(1, {param_with_grad({40}, k.t, tiny_only)})};
            check_all(blocks, QString("extreme %1").arg(c10::toString(k.t)));
            if (QTest::currentTestFailed()) return;
            auto c = make_collector(false);
            c->prepare(blocks);
            c->collect();
            QVERIFY(c->results()[0].finite());
            QCOMPARE(c->results()[0].max_abs, double(g[17].abs().item<float>()));
            QVERIFY(c->results()[0].l2_norm > 1.1 * c->results()[0].max_abs);
            QVERIFY(c->results()[1].max_abs > 0.0);
        }
    }

    // A block is absent only when none of its parameters has a grad.
    void missing_grads() {
        std::vector<AgentBlock> blocks;
        blocks.push_back(make_block(0, {param_with_grad({10}, at::kFloat, random_grad({10}, at::kFloat))}));
        blocks.push_back(make_block(1, {param_with_grad({10}, at::kFloat, at::Tensor()),
                                        param_with_grad({4, 4}, at::kFloat, at::Tensor())}));
        blocks.push_back(
            make_block(2, {param_with_grad({10}, at::kFloat, at::Tensor()),
                           param_with_grad({20}, at::kBFloat16, random_grad({20}, at::kBFloat16))}));
        blocks.push_back(make_block(3, {}));
        auto c = make_collector(false);
        c->prepare(blocks);
        c->collect();
        const auto& r = c->results();
        QCOMPARE(int(r.size()), 2);
        QCOMPARE(r[0].block_id, 0);
        QCOMPARE(r[1].block_id, 2);
        QCOMPARE(quint64(r[1].numel), quint64(20));  // only the defined grad counts
        check_block(r[1], reference(grads_of(blocks[2])), "missing_grads block 2");
    }

    // Many chunks of one tensor plus small ones: the merge across chunks.
    void large_tensor() {
        std::vector<AgentBlock> blocks;
        blocks.push_back(
            make_block(0, {param_with_grad({3000017}, at::kFloat, random_grad({3000017}, at::kFloat)),
                           param_with_grad({3}, at::kFloat, random_grad({3}, at::kFloat, 5.0))}));
        blocks.push_back(make_block(1, {param_with_grad({1500, 1001}, at::kBFloat16,
                                                        random_grad({1500, 1001}, at::kBFloat16, 0.3))}));
        check_all(blocks, "large");
    }

    // Mean far larger than the spread (mean^2 / variance = 1e12 in block 0): sumsq - sum * mean keeps
    // only ~3 of M2's 16 digits there, so this fails unless the two-pass route is taken.
    void large_mean_small_spread() {
        std::vector<AgentBlock> blocks;
        blocks.push_back(make_block(
            0, {param_with_grad({200003}, at::kFloat, random_grad({200003}, at::kFloat, 1e-3, 1000.0))}));
        blocks.push_back(
            make_block(1, {param_with_grad({5000}, at::kFloat, random_grad({5000}, at::kFloat, 1.0, -30.0)),
                           param_with_grad({7000}, at::kFloat, random_grad({7000}, at::kFloat, 1.0, 30.0))}));
        check_all(blocks, "largeMean");
        if (QTest::currentTestFailed()) return;
        auto c = make_collector(false);
        c->prepare(blocks);
        c->collect();
        QVERIFY(c->results()[0].variance > 0.5e-6 && c->results()[0].variance < 2e-6);
    }

    // Same input, same bits: twice in a row, at 1 and 2 threads, on a fresh collector.
    void determinism() {
        std::vector<AgentBlock> blocks;
        blocks.reserve(4);
        for (int b = 0; b < 4; ++b) {
            blocks.push_back(
                make_block(b, {param_with_grad({700001}, at::kFloat, random_grad({700001}, at::kFloat)),
                               param_with_grad({333, 333}, at::kHalf, random_grad({333, 333}, at::kHalf))}));
        }
        const int threads = at::get_num_threads();
        auto c = make_collector(false);
        c->prepare(blocks);
        at::set_num_threads(2);
        c->collect();
        const std::vector<BlockGradStats> first = c->results();
        c->collect();
        const std::vector<BlockGradStats> second = c->results();
        at::set_num_threads(1);
        auto fresh = make_collector(false);
        fresh->prepare(blocks);
        fresh->collect();
        const std::vector<BlockGradStats> third = fresh->results();
        at::set_num_threads(threads);
        QCOMPARE(int(first.size()), 4);
        QCOMPARE(int(second.size()), 4);
        QCOMPARE(int(third.size()), 4);
        for (std::size_t i = 0; i < first.size(); ++i) {
            QVERIFY(same_bits(first[i], second[i]));
            QVERIFY(same_bits(first[i], third[i]));
        }
    }

    // Grads replaced by new tensors (storage moved; the old ones kept alive and overwritten, so a
    // stale pointer would show), grads that vanish and come back, and a changed dtype.
    void replaced_grads() {
        at::Tensor w = param_with_grad({500, 300}, at::kFloat, random_grad({500, 300}, at::kFloat));
        at::Tensor b = param_with_grad({300}, at::kFloat, random_grad({300}, at::kFloat));
        at::Tensor v = param_with_grad({1000}, at::kFloat, random_grad({1000}, at::kFloat));
        std::vector<AgentBlock> blocks = {make_block(0, {w, b}), make_block(1, {v})};
        for (bool portable : {false, true}) {
            auto c = make_collector(portable);
            c->prepare(blocks);
            c->collect();
            check_block(c->results()[0], reference(grads_of(blocks[0])), "replaced: before");
            if (QTest::currentTestFailed()) return;

            // A copy of the handle on purpose: a reference would follow w's grad to the new tensor.
            const at::Tensor old_w = w.grad();  // NOLINT(performance-unnecessary-copy-initialization)
            w.mutable_grad() = random_grad({500, 300}, at::kFloat, 2.0, 1.0);
            QVERIFY(old_w.data_ptr() != w.grad().data_ptr());
            old_w.fill_(1e6);
            c->collect();
            check_block(c->results()[0], reference(grads_of(blocks[0])), "replaced: new storage");
            if (QTest::currentTestFailed()) return;

            v.mutable_grad() = at::Tensor();  // gone: block 1 absent
            c->collect();
            QCOMPARE(int(c->results().size()), 1);
            QCOMPARE(c->results()[0].block_id, 0);

            v.mutable_grad() = random_grad({1000}, at::kFloat, 0.1).to(at::kBFloat16);  // back, as bf16
            b.mutable_grad() = at::Tensor();
            c->collect();
            QCOMPARE(int(c->results().size()), 2);
            check_block(c->results()[0], reference(grads_of(blocks[0])), "replaced: one grad gone");
            check_block(c->results()[1], reference(grads_of(blocks[1])), "replaced: back as bf16");
            if (QTest::currentTestFailed()) return;
            b.mutable_grad() = random_grad({300}, at::kFloat);
            v.mutable_grad() = random_grad({1000}, at::kFloat);
        }
    }

    // After the first collect, a step allocates nothing, even when a grad's storage moved (same size),
    // a chunk holds a NaN, or a grad is transposed (dense: read in place). Grads that are not dense
    // are left out: their staging copy_ is LibTorch's.
    void no_allocation_per_step() {
        at::Tensor nan_grad = random_grad({70000}, at::kHalf);
        nan_grad[66000].fill_(kNaN);
        std::vector<AgentBlock> blocks;
        blocks.push_back(
            make_block(0, {param_with_grad({300000}, at::kFloat, random_grad({300000}, at::kFloat)),
                           param_with_grad({70000}, at::kHalf, nan_grad)}));
        blocks.push_back(
            make_block(1, {param_with_grad({8}, at::kFloat, at::Tensor()),
                           param_with_grad({64, 48}, at::kFloat, random_grad({48, 64}, at::kFloat).t()),
                           param_with_grad({5000}, at::kBFloat16, random_grad({5000}, at::kBFloat16))}));
        const int threads = at::get_num_threads();
        for (bool portable : {false, true}) {
            auto c = make_collector(portable);
            c->prepare(blocks);
            for (int t : {1, 2}) {
                at::set_num_threads(t);
                c->collect();  // a first collect at this thread count: pools are warm afterwards
                blocks[0].params[0].mutable_grad() = random_grad({300000}, at::kFloat);  // storage moves
                g_allocations = 0;
                g_count_allocations = true;
                c->collect();
                const auto& r = c->results();
                g_count_allocations = false;
                QCOMPARE(g_allocations.load(), 0L);
                QCOMPARE(int(r.size()), 2);
            }
            check_block(c->results()[0], reference(grads_of(blocks[0])), "noAllocation: block 0");
            if (QTest::currentTestFailed()) break;
        }
        at::set_num_threads(threads);
    }

    // results() ascend by block id whatever order prepare() got the blocks in.
    void results_sorted_by_id() {
        std::vector<AgentBlock> blocks;
        for (int id : {2, 0, 1}) {
            blocks.push_back(
                make_block(id, {param_with_grad({10}, at::kFloat, random_grad({10}, at::kFloat, id + 1.0))}));
        }
        auto c = make_collector(false);
        c->prepare(blocks);
        c->collect();
        const auto& r = c->results();
        QCOMPARE(int(r.size()), 3);
        for (int i = 0; i < 3; ++i) QCOMPARE(r[std::size_t(i)].block_id, i);
        check_block(r[2], reference(grads_of(blocks[0])), "sorted: id 2");
    }

    void unsupported_dtype_throws() {
        std::vector<AgentBlock> blocks = {
            make_block(0, {param_with_grad({10}, at::kDouble, torch::ones({10}, torch::kDouble))})};
        auto c = make_collector(false);
        c->prepare(blocks);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, c->collect());
    }

    void blocks_from_modules() {
        torch::nn::Sequential seq(torch::nn::Linear(4, 3), torch::nn::ReLU(), torch::nn::Linear(3, 2));
        torch::nn::Linear lone(torch::nn::LinearOptions(5, 7).bias(false));
        const auto blocks =
            sp::agent::blocks_from_modules({{"blocks.0", seq.ptr().get()}, {"head", lone.ptr().get()}});
        QCOMPARE(int(blocks.size()), 2);
        QCOMPARE(blocks[0].id, 0);
        QCOMPARE(blocks[0].name, std::string("blocks.0"));
        const std::vector<std::string> names = {"0.weight", "0.bias", "2.weight", "2.bias"};
        QCOMPARE(blocks[0].param_names, names);
        QCOMPARE(int(blocks[0].params.size()), 4);
        QCOMPARE(blocks[1].id, 1);
        QCOMPARE(blocks[1].param_names, std::vector<std::string>{"weight"});
        // The parameters themselves: same tensor, so backward's grads are visible through them.
        QVERIFY(blocks[0].params[0].is_same(seq->named_parameters()["0.weight"]));
        QVERIFY(blocks[1].params[0].is_same(lone->weight));
        QCOMPARE(blocks[0].params[2].sizes().vec(), (std::vector<std::int64_t>{2, 3}));

        const auto layout = sp::agent::layout_of(blocks);
        QCOMPARE(int(layout.size()), 2);
        QCOMPARE(layout[0].id, 0);
        QCOMPARE(layout[0].name, std::string("blocks.0"));
        QCOMPARE(quint64(layout[0].bytes_bf16), quint64(2 * (12 + 3 + 6 + 2)));
        QCOMPARE(layout[1].name, std::string("head"));
        QCOMPARE(quint64(layout[1].bytes_bf16), quint64(2 * 35));

        // End to end: backward through the module, then the collector reads the same grads.
        const at::Tensor x = torch::randn({8, 4});
        seq->forward(x).pow(2).sum().backward();
        auto c = make_collector(false);
        c->prepare(blocks);
        c->collect();
        QCOMPARE(int(c->results().size()), 1);  // head has no grads yet
        check_block(c->results()[0], reference(grads_of(blocks[0])), "module grads");

        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::agent::blocks_from_modules({{"null", nullptr}}));
    }
};

QTEST_APPLESS_MAIN(TestGradStats)
#include "test_grad_stats.moc"
