// Block-swap whose k_slots hold the weights (a frozen base under adapters: the runtime's
// releases_weights()), driven through sp::agent::run_swapped_block as a model runs it:
//   - the schedule's discipline, checked on its event log: no slot is uploaded into while its block
//     has not been expanded from it or still holds its weights; every block is expanded from a slot
//     its own upload filled; the backward re-uploads exactly the blocks the forward released (all but
//     the last), in reverse order;
//   - a released block's parameters hold no slot (NaN broadcast, no storage) and the k_slots' peak is
//     K k_slots of the largest block (weights and payload);
//   - losses and adapter gradients bit for bit those of `streamed`, for K = 1, 2, 3;
//   - three faults planted in the schedule, each caught by those checks;
//   - the weights scope's BF16 parameters equal core's dequantized values rounded to BF16, bit for bit.
#include <torch/torch.h>

#include <QtTest>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../common/torch_reference.h"
#include "sp/agent/precision_runtime.h"
#include "sp/agent/swapped_block.h"
#include "sp/quantize.h"

using sp::Precision;
using sp::agent::AgentBlock;
using sp::agent::BlockSwapEvent;
using sp::agent::BlockSwapFault;
using sp::agent::ReferencePrecisionRuntime;
using sp::agent::WeightResidency;
using sp::test::route;

Q_DECLARE_METATYPE(BlockSwapFault)

namespace {

constexpr int kBlocks = 4;
constexpr std::int64_t kWidth = 24;

// A toy model of kBlocks residual blocks: x + W_b x + b_b + A_b x, W_b and b_b the frozen base (what
// is streamed), A_b the trainable adapter. Drawn from `seed`, so two models are identical.
struct Model {
    std::vector<torch::Tensor> weight, bias, adapter;
    std::vector<AgentBlock> blocks;

    explicit Model(std::uint64_t seed) {
        torch::manual_seed(seed);
        for (int b = 0; b < kBlocks; ++b) {
            weight.push_back(torch::randn({kWidth, kWidth}) * 0.2);
            bias.push_back(torch::randn({kWidth}) * 0.1);
            adapter.push_back((torch::randn({kWidth, kWidth}) * 0.05).requires_grad_(true));
            AgentBlock block;
            block.id = b;
            block.name = "blocks." + std::to_string(b);
            block.param_names = {"adapter"};
            block.params = {adapter.back()};
            block.stored_names = {"weight", "bias"};
            block.stored = {weight.back(), bias.back()};
            blocks.push_back(block);
        }
    }

    torch::Tensor block_forward(int b, const torch::Tensor& x) const {
        namespace F = torch::nn::functional;
        const auto dt = x.scalar_type();
        const auto& w = weight[std::size_t(b)];
        return x + torch::tanh(F::linear(x, w.to(dt), bias[std::size_t(b)].to(dt)) +
                               F::linear(x, adapter[std::size_t(b)].to(dt)));
    }

    // The loss of one batch, every block through run_swapped_block (a no-op wrapper in `streamed`).
    torch::Tensor loss(ReferencePrecisionRuntime& runtime, const torch::Tensor& input, bool bf16) const {
        torch::Tensor x = input;
        for (int b = 0; b < kBlocks; ++b) {
            const sp::agent::BlockForward forward = [this, b, bf16](const at::Tensor& in, bool) {
                return block_forward(b, bf16 ? in.to(torch::kBFloat16) : in).to(in.scalar_type());
            };
            x = sp::agent::run_swapped_block(runtime, std::size_t(b), x, forward);
        }
        return x.pow(2).mean();
    }
};

const std::vector<Precision> kMap = {Precision::int8, Precision::bf16, Precision::int4, Precision::fp8_e4m3};

QString describe(const std::vector<BlockSwapEvent>& events) {
    QString out;
    for (const BlockSwapEvent& e : events) {
        const char* kind = e.kind == BlockSwapEvent::upload   ? "U"
                           : e.kind == BlockSwapEvent::expand ? "E"
                           : e.kind == BlockSwapEvent::drop   ? "D"
                                                              : "R";
        out += QString("%1%2s%3 ").arg(kind).arg(e.block).arg(e.slot);
    }
    return out;
}

// The slot discipline, on the log alone: an upload only into a free slot (its last block expanded
// and released, or its prefetch dropped); an expansion only from a slot its own block's upload filled.
QStringList slot_discipline(const std::vector<BlockSwapEvent>& events, std::size_t k_slots) {
    enum class Use { free, loaded, holding };
    struct Slot {
        Use use = Use::free;
        std::size_t block = 0;
    };
    std::vector<Slot> state(k_slots);
    QStringList failures;
    for (std::size_t i = 0; i < events.size(); ++i) {
        const BlockSwapEvent& e = events[i];
        Slot& s = state.at(e.slot);
        const QString at = QString("event %1 (%2%3s%4)").arg(i).arg(int(e.kind)).arg(e.block).arg(e.slot);
        switch (e.kind) {
            case BlockSwapEvent::upload:
                if (s.use != Use::free)
                    failures << at + QString(": upload over block %1, not done with the slot").arg(s.block);
                s = Slot{Use::loaded, e.block};
                break;
            case BlockSwapEvent::expand:
                if (s.use != Use::loaded || s.block != e.block)
                    failures << at + ": expansion from a slot its upload did not fill";
                s = Slot{Use::holding, e.block};
                break;
            case BlockSwapEvent::drop:
            case BlockSwapEvent::release:
                s.use = Use::free;
                break;
        }
    }
    return failures;
}

// One training step's log: every block is uploaded before its forward; the forward releases all but
// the last; the backward re-uploads exactly the released ones, each once, after its release (with
// K > 2 a prefetch may send one before the forward is over), and releases everything.
QStringList step_order(const std::vector<BlockSwapEvent>& events) {
    std::vector<int> uploads(kBlocks, 0), releases(kBlocks, 0);
    QStringList failures;
    for (const BlockSwapEvent& e : events) {
        if (e.kind == BlockSwapEvent::upload && ++uploads[e.block] == 2 && releases[e.block] != 1)
            failures << QString("block %1 uploaded again before its release: ").arg(e.block) +
                            describe(events);
        if (e.kind == BlockSwapEvent::release) ++releases[e.block];
    }
    for (std::size_t b = 0; b < kBlocks; ++b) {
        const int expected = b + 1 < kBlocks ? 2 : 1;  // the last block stays for its backward
        if (uploads[b] != expected || releases[b] != expected)
            failures << QString("block %1: %2 uploads and %3 releases, not %4: ")
                                .arg(b)
                                .arg(uploads[b])
                                .arg(releases[b])
                                .arg(expected) +
                            describe(events);
    }
    return failures;
}

// What a released block must look like: parameters with their shape and no storage of a slot.
QStringList released_hold_nothing(const Model& model) {
    QStringList failures;
    for (int b = 0; b < kBlocks; ++b)
        for (const torch::Tensor& t : model.blocks[std::size_t(b)].stored)
            if (t.storage().nbytes() > std::size_t(t.element_size()) || !torch::isnan(t).all().item<bool>())
                failures << QString("block %1 keeps weights after its release").arg(b);
    return failures;
}

struct Setup {
    Model model{7};
    ReferencePrecisionRuntime runtime{model.blocks, 64};
    Setup(WeightResidency residency, std::size_t k_slots, bool bf16) {
        if (bf16) runtime.compute_frozen_in_bf16();
        runtime.set_weight_residency(residency, k_slots);
        route(runtime, kMap);
    }
};

// A few training steps (SGD on the adapters); returns the losses and the adapters' last gradients,
// and in `failures` what the checks of a block-swapped run found.
std::vector<double> train(Setup& s, bool bf16, int steps, QStringList& failures, std::size_t k_slots,
                          std::vector<torch::Tensor>* grads = nullptr) {
    torch::manual_seed(11);
    const torch::Tensor input = torch::randn({5, 3, kWidth});
    std::vector<double> losses;
    const bool swapped = s.runtime.weight_residency() == WeightResidency::block_swap;
    for (int step = 0; step < steps; ++step) {
        s.runtime.record_block_swap_events(true);
        s.runtime.clear_block_swap_events();
        for (auto& a : s.model.adapter) a.mutable_grad() = torch::Tensor();
        try {
            const torch::Tensor loss = s.model.loss(s.runtime, input, bf16);
            loss.backward();
            losses.push_back(loss.item<double>());
        } catch (const std::exception& e) {
            failures << QString("step %1 threw: %2").arg(step).arg(e.what());
            if (swapped)
                failures << slot_discipline(s.runtime.block_swap_events(), k_slots);  // the log so far
            return losses;
        }
        if (swapped) {
            failures << slot_discipline(s.runtime.block_swap_events(), k_slots);
            failures << step_order(s.runtime.block_swap_events());
            failures << released_hold_nothing(s.model);
        }
        s.runtime.before_optimizer_step();
        {
            torch::NoGradGuard no_grad;
            for (auto& a : s.model.adapter) a.sub_(a.grad() * 0.5);
        }
        s.runtime.after_optimizer_step();
    }
    if (grads)
        for (auto& a : s.model.adapter) grads->push_back(a.grad().clone());
    return losses;
}

// Bits of a bf16 tensor as uint16 values.
std::vector<std::uint16_t> bf16_bits(const torch::Tensor& t) {
    const torch::Tensor c = t.contiguous();
    std::vector<std::uint16_t> out(std::size_t(c.numel()));
    std::memcpy(out.data(), c.data_ptr(), out.size() * 2);
    return out;
}

// core's dequantized values of `master` in `p`, rounded to BF16 with core's round_to_bf16.
std::vector<std::uint16_t> core_bf16(const torch::Tensor& master, Precision p) {
    const torch::Tensor m = master.contiguous();
    const auto rows = std::size_t(m.dim() >= 2 ? m.size(0) : 1);
    const auto cols = std::size_t(m.numel()) / rows;
    const float* w = m.data_ptr<float>();
    std::vector<float> values(rows * cols);
    switch (p) {
        case Precision::bf16:
            for (std::size_t i = 0; i < values.size(); ++i) values[i] = w[i];
            break;
        case Precision::int8:
            sp::dequantize_int8_rows(sp::quantize_int8_rows(w, rows, cols), values.data());
            break;
        case Precision::int4:
            sp::dequantize_int4_groups(sp::quantize_int4_groups(w, rows, cols, 64), values.data());
            break;
        default:
            sp::dequantize_fp8_rows(sp::quantize_fp8_rows(w, rows, cols, p), values.data());
    }
    std::vector<std::uint16_t> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
        const float r = sp::round_to_bf16(values[i]);
        std::uint32_t bits = 0;
        std::memcpy(&bits, &r, 4);
        out[i] = std::uint16_t(bits >> 16);
    }
    return out;
}

}  // namespace

class TestBlockSwapBounded : public QObject {
    Q_OBJECT

  private slots:
    void same_losses_as_streamed_data();
    void same_losses_as_streamed();
    void planted_faults_are_caught_data();
    void planted_faults_are_caught();
    void peak_is_k_slots_of_the_largest_block();
    void evaluation_releases_every_block();
    void bf16_weights_equal_core_dequantized();
};

void TestBlockSwapBounded::same_losses_as_streamed_data() {
    QTest::addColumn<int>("k_slots");
    QTest::addColumn<bool>("bf16");
    for (const bool bf16 : {false, true})
        for (const int k_slots : {1, 2, 3})
            QTest::addRow("K=%d %s", k_slots, bf16 ? "bf16" : "fp32") << k_slots << bf16;
}

void TestBlockSwapBounded::same_losses_as_streamed() {
    QFETCH(int, k_slots);
    QFETCH(bool, bf16);
    QStringList failures;
    Setup streamed(WeightResidency::streamed, 2, bf16);
    std::vector<torch::Tensor> streamed_grads, swapped_grads;
    const std::vector<double> expected = train(streamed, bf16, 3, failures, 2, &streamed_grads);
    Setup swapped(WeightResidency::block_swap, std::size_t(k_slots), bf16);
    QVERIFY(swapped.runtime.releases_weights());
    const std::vector<double> losses =
        train(swapped, bf16, 3, failures, std::size_t(k_slots), &swapped_grads);
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join("; ")));
    QCOMPARE(losses, expected);  // exactly: the same values computed, only moved at other times
    for (std::size_t b = 0; b < streamed_grads.size(); ++b)
        QVERIFY(torch::equal(swapped_grads[b], streamed_grads[b]));
    // 2N - 1 uploads a step: each block's payload once in the forward, and again in the backward but
    // for the last block's, which stays.
    std::uint64_t expected_bytes = 0;
    for (std::size_t b = 0; b < kBlocks; ++b)
        expected_bytes += swapped.runtime.block_bytes(b, kMap[b]).copied * (b + 1 < kBlocks ? 2 : 1);
    QCOMPARE(swapped.runtime.step_bytes().copied, expected_bytes);
}

void TestBlockSwapBounded::planted_faults_are_caught_data() {
    QTest::addColumn<BlockSwapFault>("fault");
    QTest::addRow("prefetch into a busy slot") << BlockSwapFault::prefetch_into_busy_slot;
    QTest::addRow("reuse a stale slot") << BlockSwapFault::reuse_stale_slot;
    QTest::addRow("keep released weights") << BlockSwapFault::keep_released_weights;
}

void TestBlockSwapBounded::planted_faults_are_caught() {
    QFETCH(BlockSwapFault, fault);
    for (const std::size_t k_slots : {std::size_t(2), std::size_t(3)}) {
        QStringList failures;
        Setup swapped(WeightResidency::block_swap, k_slots, false);
        swapped.runtime.plant_block_swap_fault(fault);
        train(swapped, false, 2, failures, k_slots);
        // Caught by the checks above, not by an exception of the runtime's own.
        QStringList checks;
        for (const QString& f : failures)
            if (!f.contains("threw")) checks << f;
        QVERIFY2(!checks.isEmpty(),
                 qPrintable(QString("K=%1: nothing caught; %2").arg(k_slots).arg(failures.join("; "))));
        qInfo("K=%zu: caught by: %s", k_slots, qPrintable(checks.first().left(110)));
    }
}

void TestBlockSwapBounded::peak_is_k_slots_of_the_largest_block() {
    for (const std::size_t k_slots : {std::size_t(1), std::size_t(2), std::size_t(3)}) {
        QStringList failures;
        Setup swapped(WeightResidency::block_swap, k_slots, true);
        train(swapped, true, 2, failures, k_slots);
        QVERIFY2(failures.isEmpty(), qPrintable(failures.join("; ")));
        // A slot: the block's BF16 weights, and its largest payload (BF16 before the map: as large).
        const std::uint64_t block_bf16 = swapped.runtime.block_bytes(0, Precision::bf16).bf16;
        const std::uint64_t peak = swapped.runtime.weights_peak_bytes();
        QVERIFY2(
            peak <= k_slots * (2 * block_bf16 + 64),
            qPrintable(QString("peak %1 for %2 k_slots of %3 bytes").arg(peak).arg(k_slots).arg(block_bf16)));
        QVERIFY(peak >= k_slots * block_bf16);
    }
}

void TestBlockSwapBounded::evaluation_releases_every_block() {
    Setup swapped(WeightResidency::block_swap, 2, true);
    torch::NoGradGuard no_grad;
    const torch::Tensor loss = swapped.model.loss(swapped.runtime, torch::randn({2, 3, kWidth}), true);
    QVERIFY(std::isfinite(loss.item<double>()));
    QCOMPARE(released_hold_nothing(swapped.model), QStringList());
    QCOMPARE(swapped.runtime.step_bytes().copied,
             std::uint64_t(0));  // an evaluation's bytes count in no step
}

void TestBlockSwapBounded::bf16_weights_equal_core_dequantized() {
    for (const WeightResidency residency : {WeightResidency::streamed, WeightResidency::block_swap}) {
        Setup s(residency, 2, true);
        for (std::size_t b = 0; b < kBlocks; ++b) {
            if (residency == WeightResidency::block_swap) s.runtime.before_block_forward(b);
            for (std::size_t k = 0; k < 2; ++k) {
                const torch::Tensor& param = s.model.blocks[b].stored[k];
                QCOMPARE(param.scalar_type(), torch::kBFloat16);
                QVERIFY2(
                    bf16_bits(param) == core_bf16(*s.runtime.master(b, k), kMap[b]),
                    qPrintable(
                        QString("block %1 tensor %2 in %3").arg(b).arg(k).arg(to_string(kMap[b]).data())));
            }
            if (residency == WeightResidency::block_swap) s.runtime.after_block_forward(b);
        }
    }
}

QTEST_GUILESS_MAIN(TestBlockSwapBounded)
#include "test_block_swap_bounded.moc"
