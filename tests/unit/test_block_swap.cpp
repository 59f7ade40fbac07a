// Block-swap streaming (WeightResidency::block_swap): the double-buffered schedule's order (each
// block's upload, the next block's prefetch into the other slot, then the block's expansion, before
// the block computes), that no slot is written while its block has not been expanded from it, the
// values each block computes with (bit for bit those of `streamed`), and the bytes per step (the
// same figure as `streamed`, every block's payload once per upload).
#include <torch/torch.h>

#include <QtTest>

#include <cstdint>
#include <string>
#include <vector>

#include "../common/torch_reference.h"
#include "materialize.h"
#include "sp/agent/precision_runtime.h"

using sp::Precision;
using sp::agent::AgentBlock;
using sp::agent::BlockSwapEvent;
using sp::agent::ReferencePrecisionRuntime;
using sp::agent::WeightResidency;
using sp::test::route;

namespace {

constexpr int kBlocks = 4;

// kBlocks blocks of one Linear(24 -> 16) each, drawn from `seed`, so two models can be identical.
std::vector<torch::nn::Linear> make_layers(std::uint64_t seed) {
    torch::manual_seed(seed);
    std::vector<torch::nn::Linear> layers;
    layers.reserve(kBlocks);
    for (int b = 0; b < kBlocks; ++b) layers.emplace_back(24, 16);
    return layers;
}

std::vector<AgentBlock> blocks_of(const std::vector<torch::nn::Linear>& layers) {
    std::vector<AgentBlock> blocks;
    blocks.reserve(kBlocks);
    for (int b = 0; b < kBlocks; ++b)
        blocks.push_back(sp::test::block_of(b, "blocks." + std::to_string(b), *layers[std::size_t(b)]));
    return blocks;
}

// One map that takes every format's payload path.
const std::vector<Precision> kMap = {Precision::bf16, Precision::int8, Precision::int4, Precision::fp8_e4m3};

// The values block b must compute with: its masters materialized in its format.
bool holds_materialized(const ReferencePrecisionRuntime& runtime, const AgentBlock& block, std::size_t b) {
    for (std::size_t k = 0; k < block.params.size(); ++k) {
        const at::Tensor expected =
            sp::agent::detail::materialized(*runtime.master(b, k), runtime.precisions()[b], 0.0, 64);
        if (!torch::equal(block.params[k], expected)) return false;
    }
    return true;
}

// The double-buffering hazard, checked on the log alone: a slot is uploaded into only when the block
// it held has been expanded from it (or its unread prefetch was dropped).
QString first_overwrite_of_unread_slot(const std::vector<BlockSwapEvent>& events) {
    struct Held {
        bool pending = false;
        std::size_t block = 0;
    } held[2];
    for (std::size_t i = 0; i < events.size(); ++i) {
        const BlockSwapEvent& e = events[i];
        Held& slot = held[e.slot];
        if (e.kind == BlockSwapEvent::upload) {
            if (slot.pending)
                return QString(
                           "event %1: block %2 uploaded into slot %3 before block %4 was expanded from it")
                    .arg(i)
                    .arg(e.block)
                    .arg(e.slot)
                    .arg(slot.block);
            slot = Held{true, e.block};
        } else if (slot.pending && slot.block == e.block) {
            slot.pending = false;  // expanded, or its prefetch dropped
        }
    }
    return {};
}

QString describe(const std::vector<BlockSwapEvent>& events) {
    QString out;
    for (const BlockSwapEvent& e : events)
        out += QString("%1%2s%3 ")
                   .arg(e.kind == BlockSwapEvent::upload   ? "U"
                        : e.kind == BlockSwapEvent::expand ? "E"
                                                           : "D")
                   .arg(e.block)
                   .arg(e.slot);
    return out;
}

// A training step's forward: the hook before each block, then the block "computes": it must hold
// its own materialized values and the next block's upload must already be out (overlap).
// The runtime must be recording its events.
void forward(ReferencePrecisionRuntime& runtime, const std::vector<AgentBlock>& blocks,
             QStringList& failures) {
    const std::size_t start = runtime.block_swap_events().size();  // this forward's events follow
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        runtime.before_block_forward(b);
        const auto& log = runtime.block_swap_events();
        if (log.empty() || log.back().kind != BlockSwapEvent::expand || log.back().block != b)
            failures << QString("block %1 computes before its expansion: %2").arg(b).arg(describe(log));
        if (b + 1 < blocks.size()) {
            bool prefetched = false;
            for (std::size_t i = start; i < log.size(); ++i)
                prefetched |= log[i].kind == BlockSwapEvent::upload && log[i].block == b + 1;
            if (!prefetched)
                failures << QString("block %1 computes before block %2 is sent").arg(b).arg(b + 1);
        }
        if (!holds_materialized(runtime, blocks[b], b))
            failures << QString("block %1 computes with values other than its materialized masters").arg(b);
    }
}

// An optimizer step on the parameters: every value moves, so every payload changes.
void optimizer_step(ReferencePrecisionRuntime& runtime, const std::vector<AgentBlock>& blocks, double delta) {
    runtime.before_optimizer_step();
    torch::NoGradGuard no_grad;
    for (const AgentBlock& b : blocks)
        for (const at::Tensor& p : b.params) p.add_(delta);
    runtime.after_optimizer_step();
}

}  // namespace

class TestBlockSwap : public QObject {
    Q_OBJECT

  private slots:
    void schedule_is_double_buffered();
    void a_restarted_forward_drops_the_unread_prefetch();
    void values_and_bytes_match_streamed();
    void evaluation_uploads_count_in_no_step();
    void hook_inside_the_optimizer_window_is_refused();
};

void TestBlockSwap::schedule_is_double_buffered() {
    const auto layers = make_layers(1);
    const auto blocks = blocks_of(layers);
    ReferencePrecisionRuntime runtime(blocks);
    route(runtime, kMap);
    runtime.set_weight_residency(WeightResidency::block_swap);
    runtime.record_block_swap_events(true);
    QStringList failures;
    for (int step = 0; step < 2; ++step) {
        runtime.clear_block_swap_events();
        forward(runtime, blocks, failures);
        // U: upload, E: expansion; block, slot. Block b+1 goes out before block b is expanded.
        QCOMPARE(describe(runtime.block_swap_events()), QString("U0s0 U1s1 E0s0 U2s0 E1s1 U3s1 E2s0 E3s1 "));
        QCOMPARE(first_overwrite_of_unread_slot(runtime.block_swap_events()), QString());
        optimizer_step(runtime, blocks, 0.01);
    }
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join("; ")));
}

void TestBlockSwap::a_restarted_forward_drops_the_unread_prefetch() {
    const auto layers = make_layers(2);
    const auto blocks = blocks_of(layers);
    ReferencePrecisionRuntime runtime(blocks);
    route(runtime, kMap);
    runtime.set_weight_residency(WeightResidency::block_swap);
    runtime.record_block_swap_events(true);
    runtime.before_block_forward(0);
    runtime.before_block_forward(1);  // block 2 is prefetched into slot 0, then the forward stops
    QStringList failures;
    forward(runtime, blocks, failures);
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join("; ")));
    const auto& log = runtime.block_swap_events();
    QCOMPARE(describe(log),
             QString("U0s0 U1s1 E0s0 U2s0 E1s1 D2s0 U0s0 U1s1 E0s0 U2s0 E1s1 U3s1 E2s0 E3s1 "));
    QCOMPARE(first_overwrite_of_unread_slot(log), QString());
}

void TestBlockSwap::values_and_bytes_match_streamed() {
    const auto streamed_layers = make_layers(3), swapped_layers = make_layers(3);
    const auto streamed_blocks = blocks_of(streamed_layers), swapped_blocks = blocks_of(swapped_layers);
    ReferencePrecisionRuntime streamed(streamed_blocks), swapped(swapped_blocks);
    route(streamed, kMap);
    route(swapped, kMap);
    swapped.set_weight_residency(WeightResidency::block_swap);
    swapped.record_block_swap_events(true);
    QStringList failures;
    std::uint64_t payload_bytes = 0;
    for (std::size_t b = 0; b < kBlocks; ++b) payload_bytes += streamed.block_bytes(b, kMap[b]).copied;
    for (int step = 0; step < 3; ++step) {
        forward(swapped, swapped_blocks, failures);  // streamed's parameters hold the values already
        for (std::size_t b = 0; b < kBlocks; ++b)
            for (std::size_t k = 0; k < streamed_blocks[b].params.size(); ++k)
                if (!torch::equal(streamed_blocks[b].params[k], swapped_blocks[b].params[k]))
                    failures << QString("step %1 block %2: values differ from streamed").arg(step).arg(b);
        optimizer_step(streamed, streamed_blocks, 0.01 * (step + 1));
        optimizer_step(swapped, swapped_blocks, 0.01 * (step + 1));
        QCOMPARE(swapped.step_bytes().copied, streamed.step_bytes().copied);
        QCOMPARE(swapped.step_bytes().bf16, streamed.step_bytes().bf16);
        // Every block once (step 0 also carries the map's first materialization, before the swap).
        if (step > 0) QCOMPARE(swapped.step_bytes().copied, payload_bytes);
        for (std::size_t b = 0; b < kBlocks; ++b)
            QCOMPARE(swapped.step_bytes_per_block()[b].copied, streamed.step_bytes_per_block()[b].copied);
    }
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join("; ")));
}

void TestBlockSwap::evaluation_uploads_count_in_no_step() {
    const auto layers = make_layers(4);
    const auto blocks = blocks_of(layers);
    ReferencePrecisionRuntime runtime(blocks);
    route(runtime, kMap);
    runtime.set_weight_residency(WeightResidency::block_swap);
    runtime.record_block_swap_events(true);
    std::uint64_t payload_bytes = 0;
    for (std::size_t b = 0; b < kBlocks; ++b) payload_bytes += runtime.block_bytes(b, kMap[b]).copied;
    QStringList failures;
    forward(runtime, blocks, failures);
    optimizer_step(runtime, blocks, 0.01);
    const std::uint64_t total = runtime.total_bytes().copied;
    {
        torch::NoGradGuard evaluation;
        forward(runtime, blocks, failures);
    }
    forward(runtime, blocks, failures);
    optimizer_step(runtime, blocks, 0.01);
    QVERIFY2(failures.isEmpty(), qPrintable(failures.join("; ")));
    QCOMPARE(runtime.step_bytes().copied, payload_bytes);
    QCOMPARE(runtime.total_bytes().copied, total + 2 * payload_bytes);  // the evaluation's and the step's
}

void TestBlockSwap::hook_inside_the_optimizer_window_is_refused() {
    const auto layers = make_layers(5);
    const auto blocks = blocks_of(layers);
    ReferencePrecisionRuntime runtime(blocks);
    runtime.set_weight_residency(WeightResidency::block_swap);
    runtime.before_optimizer_step();
    QVERIFY_THROWS_EXCEPTION(std::logic_error, runtime.before_block_forward(0));
    runtime.after_optimizer_step();
    runtime.before_block_forward(0);
    QVERIFY(holds_materialized(runtime, blocks[0], 0));
}

QTEST_APPLESS_MAIN(TestBlockSwap)
#include "test_block_swap.moc"
