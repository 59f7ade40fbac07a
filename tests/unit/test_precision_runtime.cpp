// The reference precision runtime: byte accounting, materialization in the routed precision,
// the straight-through update of the fp32 masters, and that parameters keep their storage.
#include <torch/torch.h>

#include <QtTest>

#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/reference_pack.h"
#include "../common/torch_reference.h"
#include "materialize.h"
#include "payload.h"
#include "sp/agent/precision_runtime.h"
#include "sp/quantize.h"

using sp::Precision;
using sp::agent::AgentBlock;
using sp::agent::PrecisionHints;
using sp::agent::ReferencePrecisionRuntime;
using sp::test::block_of;
using sp::test::ref_bf16;
using sp::test::ref_int8;

namespace {

// FP8 with row scales and INT4 in groups, from the per-format core quantizers.
torch::Tensor ref_format(const torch::Tensor& t, Precision p, std::size_t group = 64) {
    const torch::Tensor c = t.detach().to(torch::kFloat).contiguous();
    const auto rows = static_cast<std::size_t>(c.dim() >= 2 ? c.size(0) : 1);
    const auto cols = static_cast<std::size_t>(c.numel()) / rows;
    std::vector<float> v(c.numel());
    if (p == Precision::int4)
        sp::dequantize_int4_groups(sp::quantize_int4_groups(c.data_ptr<float>(), rows, cols, group),
                                   v.data());
    else
        sp::dequantize_fp8_rows(sp::quantize_fp8_rows(c.data_ptr<float>(), rows, cols, p), v.data());
    return torch::from_blob(v.data(), c.sizes(), torch::kFloat).clone();
}

PrecisionHints hints_of(std::vector<Precision> p) {
    PrecisionHints h;
    h.updated = true;
    h.precision = std::move(p);
    h.reason.assign(h.precision.size(), sp::Reason::policy);
    return h;
}

bool same(const torch::Tensor& a, const torch::Tensor& b) {
    return a.sizes() == b.sizes() && torch::equal(a, b);
}

// Linear(64 -> 32): weight [32, 64] + bias [32].
constexpr std::uint64_t kLinearBf16 = 2 * (2048 + 32);
constexpr std::uint64_t kLinearInt8 = (2048 + 4 * 32) + (32 + 4 * 1);

}  // namespace

class TestPrecisionRuntime : public QObject {
    Q_OBJECT

  private slots:
    void init() { torch::manual_seed(7); }

    void initial_load_is_bf16_and_not_a_step() {
        torch::nn::Linear lin(64, 32);
        const torch::Tensor w0 = lin->weight.detach().clone(), b0 = lin->bias.detach().clone();
        ReferencePrecisionRuntime rt({block_of(0, "blocks.0", *lin)});
        QCOMPARE(rt.precisions(), std::vector<Precision>{Precision::bf16});
        QCOMPARE(rt.total_bytes().copied, kLinearBf16);
        QCOMPARE(rt.total_bytes().bf16, kLinearBf16);
        QCOMPARE(rt.step_bytes().copied, std::uint64_t{0});
        QCOMPARE(rt.step_bytes().bf16, std::uint64_t{0});
        QCOMPARE(rt.step_bytes().saving_pct(), 0.0);
        QCOMPARE(rt.step_bytes_per_block().size(), std::size_t{1});
        QVERIFY(same(lin->weight, ref_bf16(w0)));
        QVERIFY(same(lin->bias, ref_bf16(b0)));
        QVERIFY(!same(lin->weight, w0));  // random normal weights are not all bf16-representable
    }

    void step_bytes_bf16_and_int8() {
        torch::nn::Linear lin(64, 32);
        ReferencePrecisionRuntime rt({block_of(0, "blocks.0", *lin)});

        // A step in BF16: only the after-step materialization.
        rt.before_optimizer_step();
        rt.after_optimizer_step();
        QCOMPARE(rt.step_bytes().copied, kLinearBf16);
        QCOMPARE(rt.step_bytes().bf16, kLinearBf16);
        QCOMPARE(rt.step_bytes().saving_pct(), 0.0);

        // A step with a switch to INT8: the switch's copy plus the after-step materialization.
        rt.on_hints(hints_of({Precision::int8}));
        QCOMPARE(rt.step_bytes().copied, kLinearBf16);  // still the last completed step
        rt.before_optimizer_step();
        rt.after_optimizer_step();
        QCOMPARE(rt.step_bytes().copied, 2 * kLinearInt8);
        QCOMPARE(rt.step_bytes().bf16, 2 * kLinearBf16);
        QCOMPARE(rt.step_bytes_per_block()[0].copied, 2 * kLinearInt8);

        // A steady INT8 step.
        rt.before_optimizer_step();
        rt.after_optimizer_step();
        QCOMPARE(rt.step_bytes().copied, kLinearInt8);
        QCOMPARE(rt.step_bytes().bf16, kLinearBf16);
        const double expected = 100.0 * (1.0 - 2212.0 / 4160.0);  // 46.83 %
        QVERIFY(std::abs(rt.step_bytes().saving_pct() - expected) < 1e-12);

        QCOMPARE(rt.total_bytes().copied, kLinearBf16 + kLinearBf16 + 2 * kLinearInt8 + kLinearInt8);
        QCOMPARE(rt.total_bytes().bf16, kLinearBf16 + kLinearBf16 + 2 * kLinearBf16 + kLinearBf16);
    }

    void rows_of_every_rank() {
        // 0-D: one row of one; 1-D: one row; 3-D: size(0) rows.
        const torch::Tensor s = torch::tensor(0.7f), v = torch::randn({5}), t = torch::randn({4, 3, 2});
        const torch::Tensor s0 = s.clone(), v0 = v.clone(), t0 = t.clone();  // the masters
        AgentBlock b{0, "odd", {"s", "v", "t"}, {s, v, t}};
        ReferencePrecisionRuntime rt({b});
        QCOMPARE(rt.total_bytes().copied, std::uint64_t{2 * (1 + 5 + 24)});
        rt.on_hints(hints_of({Precision::int8}));
        rt.before_optimizer_step();
        rt.after_optimizer_step();
        QCOMPARE(rt.step_bytes().copied, std::uint64_t{2 * ((1 + 4) + (5 + 4) + (24 + 4 * 4))});
        QVERIFY(same(t, ref_int8(t0)));
        QVERIFY(same(v, ref_int8(v0)));
        QVERIFY(same(s, ref_int8(s0)));
        QCOMPARE(s.dim(), std::int64_t{0});
        // Per-row scales of the 3-D tensor: its 4 rows of 6 quantize independently.
        const torch::Tensor by_row = ref_int8(t0.reshape({4, 6})).reshape({4, 3, 2});
        QVERIFY(same(t, by_row));
    }

    void per_block_bytes() {
        torch::nn::Linear a(64, 32), b(16, 8);
        ReferencePrecisionRuntime rt({block_of(0, "blocks.0", *a), block_of(1, "blocks.1", *b)});
        rt.on_hints(hints_of({Precision::bf16, Precision::int8}));
        rt.before_optimizer_step();
        rt.after_optimizer_step();
        const auto& per = rt.step_bytes_per_block();
        QCOMPARE(per.size(), std::size_t{2});
        QCOMPARE(per[0].copied, kLinearBf16);
        QCOMPARE(per[0].bf16, kLinearBf16);
        const std::uint64_t small_int8 = (128 + 4 * 8) + (8 + 4);
        const std::uint64_t small_bf16 = 2 * (128 + 8);
        QCOMPARE(per[1].copied, 2 * small_int8);
        QCOMPARE(per[1].bf16, 2 * small_bf16);
        QCOMPARE(rt.step_bytes().copied, kLinearBf16 + 2 * small_int8);
        QCOMPARE(rt.step_bytes().bf16, kLinearBf16 + 2 * small_bf16);
    }

    void hints_materialize_at_once() {
        torch::nn::Linear lin(64, 32);
        const torch::Tensor w0 = lin->weight.detach().clone(), b0 = lin->bias.detach().clone();
        const void* w_ptr = lin->weight.data_ptr();
        ReferencePrecisionRuntime rt({block_of(0, "blocks.0", *lin)});

        rt.on_hints(hints_of({Precision::int8}));
        QCOMPARE(rt.precisions()[0], Precision::int8);
        QVERIFY(same(lin->weight, ref_int8(w0)));
        QVERIFY(same(lin->bias, ref_int8(b0)));
        QVERIFY(!same(ref_int8(w0), ref_bf16(w0)));

        // An unchanged map copies nothing more.
        rt.on_hints(hints_of({Precision::int8}));
        rt.on_hints(hints_of({Precision::bf16}));
        QVERIFY(same(lin->weight, ref_bf16(w0)));  // from the master, not from the INT8 values
        QVERIFY(same(lin->bias, ref_bf16(b0)));
        rt.before_optimizer_step();
        QVERIFY(same(lin->weight, w0));
        rt.after_optimizer_step();
        QCOMPARE(rt.step_bytes().copied, kLinearInt8 + kLinearBf16 + kLinearBf16);
        QVERIFY(lin->weight.data_ptr() == w_ptr);
    }

    void straight_through() {
        torch::nn::Linear lin(torch::nn::LinearOptions(8, 4).bias(false));
        torch::Tensor& w = lin->weight;
        const torch::Tensor master0 = w.detach().clone();
        const void* ptr = w.data_ptr();
        const auto* impl = w.unsafeGetTensorImpl();
        torch::optim::SGD opt({w}, torch::optim::SGDOptions(1.0));

        ReferencePrecisionRuntime rt({block_of(0, "blocks.0", *lin)});
        rt.on_hints(hints_of({Precision::int8}));
        const torch::Tensor w_q = ref_int8(master0);
        QVERIFY(same(w, w_q));

        // y = ||x W^T||^2 / 2: dy/dW = (x W^T)^T x depends on W, so it tells where it was taken.
        const torch::Tensor x = torch::randn({3, 8});
        opt.zero_grad();
        const torch::Tensor h = lin->forward(x);
        (h * h).sum().mul(0.5).backward();
        const torch::Tensor grad = w.grad().clone();
        const torch::Tensor at_quantized = torch::matmul(torch::matmul(x, w_q.t()).t(), x);
        const torch::Tensor at_master = torch::matmul(torch::matmul(x, master0.t()).t(), x);
        QVERIFY(torch::allclose(grad, at_quantized, 1e-5, 1e-6));
        QVERIFY(!torch::allclose(grad, at_master, 1e-5, 1e-6));

        rt.before_optimizer_step();
        QVERIFY(same(w, master0));
        opt.step();
        const torch::Tensor master1 = master0 - grad;
        QVERIFY(same(w, master1));
        rt.after_optimizer_step();
        QVERIFY(same(w, ref_int8(master1)));

        // The master kept the exact fp32 result of the step.
        rt.before_optimizer_step();
        QVERIFY(same(w, master1));
        rt.after_optimizer_step();
        QVERIFY(same(w, ref_int8(master1)));

        QVERIFY(w.data_ptr() == ptr);
        QVERIFY(w.unsafeGetTensorImpl() == impl);
        QVERIFY(w.requires_grad());
        QVERIFY(w.is_leaf());
    }

    void hints_while_masters_are_in_the_parameters() {
        torch::nn::Linear lin(64, 32);
        const torch::Tensor w0 = lin->weight.detach().clone();
        ReferencePrecisionRuntime rt({block_of(0, "blocks.0", *lin)});
        rt.before_optimizer_step();
        rt.on_hints(hints_of({Precision::int8}));  // recorded only: the optimizer steps the masters
        QCOMPARE(rt.precisions()[0], Precision::int8);
        QVERIFY(same(lin->weight, w0));
        rt.after_optimizer_step();
        QVERIFY(same(lin->weight, ref_int8(w0)));
        QCOMPARE(rt.step_bytes().copied, kLinearInt8);
    }

    void every_format_is_materialized_as_the_reference() {
        // Each format, computed here from the core quantizers directly (not through roundtrip(), the
        // runtime's path), and bytes counted as stored: codes plus fp32 scales.
        for (Precision p : {Precision::fp8_e4m3, Precision::fp8_e5m2, Precision::int4}) {
            torch::nn::Linear lin(70, 32);  // 70 columns: INT4 groups of 64 leave a short last group
            const torch::Tensor w0 = lin->weight.detach().clone(), b0 = lin->bias.detach().clone();
            ReferencePrecisionRuntime rt({block_of(0, "a", *lin)}, 64);
            rt.on_hints(hints_of({p}));
            QVERIFY2(same(lin->weight, ref_format(w0, p)), sp::to_string(p).data());
            QVERIFY2(same(lin->bias, ref_format(b0, p)), sp::to_string(p).data());
            rt.before_optimizer_step();
            rt.after_optimizer_step();
            const std::uint64_t stored = p == Precision::int4 ? (32 * 35 + 4 * 32 * 2) + (16 + 4 * 1)
                                                              : (32 * 70 + 4 * 32) + (32 + 4 * 1);
            QCOMPARE(rt.step_bytes().copied, 2 * stored);  // on_hints' materialization and the step's
            QCOMPARE(rt.step_bytes().bf16, 2 * std::uint64_t(2 * (32 * 70 + 32)));
        }
    }

    void int4_group_size_is_honoured() {
        torch::nn::Linear lin(64, 8);
        const torch::Tensor w0 = lin->weight.detach().clone();
        ReferencePrecisionRuntime rt({block_of(0, "a", *lin)}, 16);
        rt.on_hints(hints_of({Precision::int4}));
        QVERIFY(same(lin->weight, ref_format(w0, Precision::int4, 16)));
        QVERIFY(!same(lin->weight, ref_format(w0, Precision::int4, 64)));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 ReferencePrecisionRuntime({block_of(0, "a", *lin)}, 0));
    }

    void bad_maps_throw() {
        torch::nn::Linear lin(64, 32);
        const torch::Tensor w0 = lin->weight.detach().clone();
        ReferencePrecisionRuntime rt({block_of(0, "a", *lin), block_of(1, "b", *torch::nn::Linear(4, 4))});
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, rt.on_hints(hints_of({Precision::int8})));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 rt.on_hints(hints_of({Precision::int8, static_cast<Precision>(9)})));
        // Nothing changed: not the map, not the weights, not the bytes.
        QCOMPARE(rt.precisions(), (std::vector<Precision>{Precision::bf16, Precision::bf16}));
        QVERIFY(same(lin->weight, ref_bf16(w0)));
        rt.before_optimizer_step();
        rt.after_optimizer_step();
        QCOMPARE(rt.step_bytes().copied, kLinearBf16 + std::uint64_t{2 * (16 + 4)});
        QCOMPARE(rt.formats(), sp::kAllFormats);
    }

    void misuse_throws() {
        torch::nn::Linear lin(4, 4);
        ReferencePrecisionRuntime rt({block_of(0, "a", *lin)});
        QVERIFY_THROWS_EXCEPTION(std::logic_error, rt.after_optimizer_step());
        rt.before_optimizer_step();
        rt.after_optimizer_step();
        QVERIFY_THROWS_EXCEPTION(std::logic_error, rt.after_optimizer_step());

        AgentBlock d{0, "double", {"w"}, {torch::randn({2, 2}, torch::kDouble)}};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ReferencePrecisionRuntime({d}));
    }

    // The packed payload, expanded with ATen (the code the CUDA upload runs on the device), gives
    // materialized()'s values bit for bit, in every format, shape and INT4 group, and its size is
    // the bytes the runtime counts.
    void payload_expands_bit_for_bit() {
        torch::manual_seed(7);
        const sp::agent::detail::PayloadExpander expander(torch::kCPU);
        const std::vector<std::vector<std::int64_t>> shapes = {{7, 131}, {45}, {3, 4, 5}, {1, 1}, {0, 8}};
        for (const auto& shape : shapes)
            for (Precision p : sp::kAllPrecisions)
                for (std::size_t group : {std::size_t{64}, std::size_t{5}}) {
                    torch::Tensor master = torch::randn(shape) * 3;
                    if (master.numel() > 2) {
                        master.view(-1)[0] = 1e-30f;  // below every format's smallest step
                        master.view(-1)[1] = -std::numeric_limits<float>::infinity();
                    }
                    const auto payload = sp::agent::detail::pack_payload(master, p, group);
                    QCOMPARE(payload.bytes(), sp::agent::detail::materialized_bytes(master, p, group));
                    torch::Tensor values =
                        torch::from_blob(const_cast<std::uint8_t*>(payload.values.data()),
                                         {std::int64_t(payload.values.size())}, torch::kByte);
                    torch::Tensor scales =
                        torch::from_blob(const_cast<float*>(payload.scales.data()),
                                         {std::int64_t(payload.scales.size())}, torch::kFloat);
                    torch::Tensor param = torch::full(shape, 42.0f);
                    expander.expand(values, scales, payload, param);
                    const torch::Tensor expected = sp::agent::detail::materialized(master, p, 0.0, group);
                    QVERIFY2(torch::equal(param, expected),
                             (std::string(sp::to_string(p)) + " group " + std::to_string(group) +
                              " shape of " + std::to_string(master.numel()))
                                 .c_str());
                }
        torch::Tensor param = torch::zeros({3});
        const auto payload = sp::agent::detail::pack_payload(torch::ones({4}), Precision::int8);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, expander.expand(torch::zeros({4}, torch::kByte),
                                                                        torch::ones({1}), payload, param));
    }

    // pack_payload's bytes are the ones it wrote before it packed on threads: the core reference's
    // codes and scales, and for BF16 ATen's to(kBFloat16) (a NaN aside, which is round_to_bf16's
    // 0x7FC0 now), also on tensors large enough to be split over two intra-op threads.
    void payload_bytes_are_the_reference_on_threads() {
        struct RestoreThreads {
            int n = at::get_num_threads();
            ~RestoreThreads() { at::set_num_threads(n); }
        } restore;
        at::set_num_threads(2);
        torch::manual_seed(11);
        for (const std::vector<std::int64_t>& shape :
             std::vector<std::vector<std::int64_t>>{{301, 999}, {5, 70001}, {2, 3, 40000}, {7, 13}})
            for (Precision p : sp::kAllPrecisions) {
                const torch::Tensor master = torch::randn(shape) * 3;
                const auto payload = sp::agent::detail::pack_payload(master, p, 40);
                const auto rows = std::size_t(shape[0]), cols = std::size_t(master.numel()) / rows;
                const float* w = master.data_ptr<float>();
                sp::test::Packed expected = sp::test::reference_pack(p, w, rows, cols, 40);
                if (p == Precision::bf16) {  // ATen's to(kBFloat16), what pack_payload wrote before
                    const torch::Tensor b = master.to(torch::kBFloat16);
                    std::memcpy(expected.codes.data(), b.data_ptr(), expected.codes.size());
                }
                const std::string what =
                    std::string(sp::to_string(p)) + " of " + std::to_string(master.numel());
                QVERIFY2(payload.values == expected.codes, what.c_str());
                // memcmp never sees BF16's empty vectors (their data() may be null).
                QVERIFY2(
                    payload.scales.size() == expected.scales.size() &&
                        (expected.scales.empty() || std::memcmp(payload.scales.data(), expected.scales.data(),
                                                                expected.scales.size() * sizeof(float)) == 0),
                    what.c_str());
            }
        const torch::Tensor nan = torch::full({3, 9}, std::numeric_limits<float>::quiet_NaN());
        const auto payload = sp::agent::detail::pack_payload(nan, Precision::bf16);
        for (std::size_t i = 0; i < payload.values.size(); i += 2) {
            std::uint16_t half = 0;
            std::memcpy(&half, payload.values.data() + i, sizeof half);
            QCOMPARE(half, std::uint16_t{0x7FC0});
        }
    }

    // A frozen block (a fine-tune's base) is streamed every step by default and sent once when
    // resident; its values stay the reference materialization of the untouched master, and its
    // master is never read back from the compute copy.
    void frozen_blocks_and_residency() {
        torch::manual_seed(3);
        torch::nn::Linear frozen_layer(64, 32), trained_layer(64, 32);
        for (auto& p : frozen_layer->parameters()) p.requires_grad_(false);
        const torch::Tensor original = frozen_layer->weight.detach().clone();
        ReferencePrecisionRuntime rt(
            {block_of(0, "frozen", *frozen_layer), block_of(1, "trained", *trained_layer)});
        rt.on_hints(hints_of({Precision::int8, Precision::bf16}));
        auto step = [&](bool restore_frozen) {
            rt.before_optimizer_step(restore_frozen);
            {
                torch::NoGradGuard no_grad;
                trained_layer->weight.add_(0.01);
            }
            rt.after_optimizer_step();
        };
        step(false);
        // Streamed: both blocks, after the map's own INT8 materialization (counted into this step).
        QCOMPARE(rt.step_bytes().copied, 2 * kLinearInt8 + kLinearBf16);
        step(false);
        QCOMPARE(rt.step_bytes().copied, kLinearInt8 + kLinearBf16);
        QVERIFY(same(frozen_layer->weight, ref_int8(original)));

        rt.set_weight_residency(sp::agent::WeightResidency::resident);
        step(false);
        QCOMPARE(rt.step_bytes().copied, kLinearBf16);  // the frozen block stays where it is
        QVERIFY(same(frozen_layer->weight, ref_int8(original)));
        step(true);  // restored for a reader: sent again
        QCOMPARE(rt.step_bytes().copied, kLinearInt8 + kLinearBf16);
        rt.before_optimizer_step(false);
        rt.on_hints(hints_of({Precision::int4, Precision::bf16}));  // a new format inside the window
        rt.after_optimizer_step();
        QCOMPARE(rt.step_bytes().copied,
                 sp::agent::detail::materialized_bytes(frozen_layer->weight, Precision::int4) +
                     sp::agent::detail::materialized_bytes(frozen_layer->bias, Precision::int4) +
                     kLinearBf16);
        QVERIFY(same(frozen_layer->weight, ref_format(original, Precision::int4)));
        rt.before_optimizer_step();
        QVERIFY(same(frozen_layer->weight, original));  // the master is the pristine weight
        rt.after_optimizer_step();
    }

    void no_blocks() {
        ReferencePrecisionRuntime rt(std::vector<AgentBlock>{});
        rt.on_hints(hints_of({}));
        rt.before_optimizer_step();
        rt.after_optimizer_step();
        QCOMPARE(rt.total_bytes().copied, std::uint64_t{0});
        QCOMPARE(rt.step_bytes().saving_pct(), 0.0);
    }
};

QTEST_APPLESS_MAIN(TestPrecisionRuntime)
#include "test_precision_runtime.moc"
