// TelemetryStore: the dashboard's columnar copy of a run (ui/model/include/sp/ui/telemetry_store.h).
#include <cmath>
#include <limits>
#include <random>

#include <QtTest>

#include "fake_telemetry_source.h"
#include "sp/ui/telemetry_store.h"

using sp::ForcedBy;
using sp::Precision;
using sp::ui::BlockField;
using sp::ui::TelemetryStore;
using namespace sp::test;

namespace {
// What the store keeps of a sensitivity: fp16 (telemetry_store.h).
float fp16(float v) {
    return sp::ui::fromHalf(sp::ui::toHalf(v));
}
}  // namespace

class TestUiStore : public QObject {
    Q_OBJECT
  private slots:
    void appendFillsRowsAndColumns() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(3));
        auto r =
            updateRecord(10, {blockDetail(0, Precision::int8, 0.2, ForcedBy::config, true),
                              blockDetail(1, Precision::bf16, 0.7), blockDetail(2, Precision::bf16, 0.5)});
        r.mean_sensitivity = 0.45;
        r.train_loss = 2.5;
        store.append(r);
        store.append(updateRecord(20, {blockDetail(0, Precision::int8, 0.25, ForcedBy::config),
                                       blockDetail(1, Precision::int8, 0.3, ForcedBy::pin, true),
                                       blockDetail(2, Precision::bf16, 0.55)}));
        QCOMPARE(store.updateCount(), std::size_t(2));
        QCOMPARE(store.blockCount(), 3);
        QCOMPARE(store.row(0).step, std::int64_t(10));
        QCOMPARE(store.row(0).blocks_int8, 1);
        QCOMPARE(store.row(0).mean_sensitivity, 0.45f);
        QCOMPARE(store.row(0).train_loss, 2.5f);
        QVERIFY(std::isnan(store.row(0).eval_loss));
        QVERIFY(store.row(0).has_details);

        const auto& s1 = store.series(1, BlockField::sensitivity);
        QCOMPARE(s1.size(), std::size_t(2));
        QCOMPARE(s1[0], fp16(0.7f));
        QCOMPARE(s1[1], fp16(0.3f));
        QCOMPARE(store.value(1, 1, BlockField::grad_score), 0.15f);
        QCOMPARE(store.value(2, 0, BlockField::relative_magnitude), 3.0f);

        const auto c = store.cell(1, 1);
        QVERIFY(c.present);
        QCOMPARE(c.precision, Precision::int8);
        QCOMPARE(c.forced, ForcedBy::pin);
        QCOMPARE(c.reason, sp::Reason::pin);
        QVERIFY(c.changed);
        QCOMPARE(store.cell(0, 0).forced, ForcedBy::config);
        QVERIFY(!store.cell(2, 1).changed);
        // Out of range reads are missing, not crashes.
        QVERIFY(!store.cell(7, 0).present);
        QVERIFY(std::isnan(store.value(1, 5, BlockField::sensitivity)));
        QVERIFY(store.series(9, BlockField::sensitivity).empty());

        const sp::BlockDetail d = store.detail(1, 1);
        QCOMPARE(d.precision, Precision::int8);
        QCOMPARE(d.forced, ForcedBy::pin);
        QCOMPARE(float(d.sensitivity), fp16(0.3f));
        QCOMPARE(d.switches, 1);
        QCOMPARE(d.last_change_step, std::int64_t(20));
    }

    void everyFormatWithItsFlagsAndTheLatestReason() {
        // Every format survives the packed state byte next to the forced and changed flags.
        TelemetryStore store;
        store.reset(sp::uniform_layout(5));
        std::vector<sp::BlockDetail> details;
        details.reserve(sp::kAllPrecisions.size());
        for (Precision p : sp::kAllPrecisions)
            details.push_back(blockDetail(int(details.size()), p, 0.1, ForcedBy::pin, true));
        auto r = updateRecord(10, details);
        r.blocks_int4 = 1;
        r.budget_target_pct = 60.0;
        r.block_details[4].reason_text = "int4 24.0 dB >= 18.0 dB: int4";
        r.block_details[4].snr_db[std::size_t(Precision::int4)] = 24.0;
        store.append(r);
        for (Precision p : sp::kAllPrecisions) {
            const auto c = store.cell(int(p), 0);
            QCOMPARE(c.precision, p);
            QCOMPARE(c.forced, ForcedBy::pin);
            QVERIFY(c.changed && c.present);
        }
        QCOMPARE(store.row(0).blocks_int4, 1);
        QCOMPARE(store.row(0).budget_target_pct, 60.0f);
        QCOMPARE(store.reasonText(4, 0), std::string("int4 24.0 dB >= 18.0 dB: int4"));
        QCOMPARE(store.snr(4, 0)[std::size_t(Precision::int4)], 24.0);
        store.append(updateRecord(20, details));
        QCOMPARE(store.reasonText(4, 1), std::string());  // the later record had none
        QCOMPARE(store.reasonText(4, 0), std::string());  // kept for the latest update only
    }

    void switchesAndLastChangeStep() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(2));
        const Precision seq[] = {Precision::bf16, Precision::int8, Precision::int8, Precision::bf16,
                                 Precision::bf16};
        for (int u = 0; u < 5; ++u) {
            const bool changed = u > 0 && seq[u] != seq[u - 1];
            store.append(updateRecord(100 + 10 * u, {blockDetail(0, seq[u], 0.5, ForcedBy::none, changed),
                                                     blockDetail(1, Precision::bf16, 0.9)}));
        }
        QCOMPARE(store.switchesUpTo(0, 0), 0);
        QCOMPARE(store.switchesUpTo(0, 1), 1);
        QCOMPARE(store.switchesUpTo(0, 2), 1);
        QCOMPARE(store.switchesUpTo(0, 4), 2);
        QCOMPARE(store.lastChangeStep(0, 0), std::int64_t(-1));
        QCOMPARE(store.lastChangeStep(0, 2), std::int64_t(110));
        QCOMPARE(store.lastChangeStep(0, 4), std::int64_t(130));
        QCOMPARE(store.switchesUpTo(1, 4), 0);
        QCOMPARE(store.lastChangeStep(1, 4), std::int64_t(-1));
    }

    void changeSeenWithoutChangedFlag() {
        // A lost record in between: the next one says changed=false, but the store saw int8 before.
        TelemetryStore store;
        store.reset(sp::uniform_layout(1));
        store.append(updateRecord(10, {blockDetail(0, Precision::int8, 0.2)}));
        store.append(updateRecord(30, {blockDetail(0, Precision::bf16, 0.8)}));
        QCOMPARE(store.switchesUpTo(0, 1), 1);
        QCOMPARE(store.lastChangeStep(0, 1), std::int64_t(30));
    }

    void lateJoinKeepsRecordHistory() {
        // The first record the store sees (a snapshot's) says 4 switches, the last at step 40.
        TelemetryStore store;
        store.reset(sp::uniform_layout(1));
        auto d = blockDetail(0, Precision::int8, 0.2);
        d.switches = 4;
        d.last_change_step = 40;
        store.append(updateRecord(100, {d}));
        QCOMPARE(store.switchesUpTo(0, 0), 4);
        QCOMPARE(store.lastChangeStep(0, 0), std::int64_t(40));
        auto e = blockDetail(0, Precision::bf16, 0.9, ForcedBy::none, true);
        e.switches = 5;
        e.last_change_step = 110;
        store.append(updateRecord(110, {e}));
        QCOMPARE(store.switchesUpTo(0, 1), 5);
        QCOMPARE(store.lastChangeStep(0, 1), std::int64_t(110));
    }

    void updateAtOrBefore() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(1));
        QVERIFY(!store.updateAtOrBefore(100));
        for (int s : {10, 20, 30}) store.append(updateRecord(s, {blockDetail(0, Precision::bf16, 0.5)}));
        QVERIFY(!store.updateAtOrBefore(5));
        QCOMPARE(*store.updateAtOrBefore(10), std::size_t(0));
        QCOMPARE(*store.updateAtOrBefore(25), std::size_t(1));
        QCOMPARE(*store.updateAtOrBefore(30), std::size_t(2));
        QCOMPARE(*store.updateAtOrBefore(1000), std::size_t(2));
    }

    // The charts' change marks read this list instead of every row; a reset starts it over.
    void updatesWithChangesListsTheRowsThatChanged() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(1));
        for (int u = 0; u < 6; ++u) {
            sp::UpdateRecord r = updateRecord(10 * (u + 1), {blockDetail(0, Precision::bf16, 0.5)});
            r.precision_changes = (u == 1 || u == 4 || u == 5) ? u : 0;
            store.append(r);
        }
        QCOMPARE(store.updatesWithChanges(), (std::vector<std::uint32_t>{1, 4, 5}));
        store.reset(sp::uniform_layout(1));
        QVERIFY(store.updatesWithChanges().empty());
    }

    void layoutGrowsWithRecords() {
        TelemetryStore store;
        store.reset({});
        store.append(uniformUpdate(10, 2));
        QCOMPARE(store.blockCount(), 2);
        QCOMPARE(store.layout()[1].name, std::string("blocks.1"));
        store.append(uniformUpdate(20, 4));
        QCOMPARE(store.blockCount(), 4);
        QCOMPARE(store.layout()[3].name, std::string("blocks.3"));
        QCOMPARE(store.layout()[3].id, 3);
        // The new blocks read as missing at the earlier update, and every column has one value
        // per update.
        QVERIFY(!store.cell(3, 0).present);
        QVERIFY(std::isnan(store.value(3, 0, BlockField::sensitivity)));
        QCOMPARE(store.value(3, 1, BlockField::sensitivity), fp16(0.4f));
        for (int b = 0; b < 4; ++b) QCOMPARE(store.series(b, BlockField::l2_norm).size(), std::size_t(2));
        // A header arriving later names the blocks without dropping the data.
        sp::BlockLayout named = sp::uniform_layout(5, 64);
        for (auto& info : named) info.name = "layer" + std::to_string(info.id);
        store.adoptLayout(named);
        QCOMPARE(store.blockCount(), 5);
        QCOMPARE(store.layout()[2].name, std::string("layer2"));
        QCOMPARE(store.updateCount(), std::size_t(2));
        QCOMPARE(store.value(1, 1, BlockField::sensitivity), fp16(0.2f));
        QVERIFY(!store.cell(4, 1).present);
        // The block the header added has no detail fields yet: missing, not read out of range.
        QVERIFY(std::isnan(store.value(4, 1, BlockField::grad_score)));
        QVERIFY(std::isnan(store.value(4, 1, BlockField::max_abs)));
    }

    void missingDetails() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(3));
        // Block 1 absent, and details out of order (still placed by id).
        store.append(
            updateRecord(10, {blockDetail(2, Precision::int8, 0.3), blockDetail(0, Precision::bf16, 0.6)}));
        QVERIFY(store.cell(0, 0).present);
        QVERIFY(!store.cell(1, 0).present);
        QCOMPARE(store.cell(2, 0).precision, Precision::int8);
        QCOMPARE(store.value(2, 0, BlockField::sensitivity), fp16(0.3f));
        QVERIFY(std::isnan(store.value(1, 0, BlockField::sensitivity)));
        // The original tool: no details at all.
        sp::UpdateRecord original;
        original.step_id = 20;
        original.blocks_bf16 = 2;
        original.blocks_int8 = 1;
        store.append(original);
        QVERIFY(!store.row(1).has_details);
        QCOMPARE(store.row(1).blocks_int8, 1);
        for (int b = 0; b < 3; ++b) QVERIFY(!store.cell(b, 1).present);
    }

    void blockIdOutsideTheLayoutIsABadRecord() {
        // With a header's layout, an id beyond it rejects the whole record, named; the store
        // does not grow and the next good record goes on.
        TelemetryStore store;
        store.reset(sp::uniform_layout(3));
        QVERIFY(!store.append(uniformUpdate(10, 3)));
        const auto bad = store.append(
            updateRecord(20, {blockDetail(1, Precision::int8, 0.4), blockDetail(3, Precision::bf16, 0.1)}));
        QVERIFY(bad);
        QCOMPARE(QString::fromStdString(*bad),
                 QStringLiteral("step 20: block id 3 is outside the header's layout of 3 blocks"));
        QCOMPARE(store.blockCount(), 3);
        QCOMPARE(store.updateCount(), std::size_t(1));
        QCOMPARE(store.rejectedCount(), std::uint64_t(1));
        QVERIFY(!store.append(uniformUpdate(30, 3)));
        QCOMPARE(store.updateCount(), std::size_t(2));
        // Without a header, blocks appear as records name them, up to kMaxBlocksWithoutLayout.
        store.reset({});
        QVERIFY(!store.append(updateRecord(10, {blockDetail(99, Precision::int8, 0.4)})));
        QCOMPARE(store.blockCount(), 100);
        const int absurd = TelemetryStore::kMaxBlocksWithoutLayout;
        QVERIFY(store.append(updateRecord(20, {blockDetail(absurd, Precision::bf16, 0.1)})));
        QCOMPARE(store.blockCount(), 100);
        QCOMPARE(store.updateCount(), std::size_t(1));
        // A header that arrives later fixes the layout: ids beyond it are bad from then on.
        store.adoptLayout(sp::uniform_layout(100));
        QVERIFY(store.append(updateRecord(30, {blockDetail(100, Precision::bf16, 0.1)})));
        QCOMPARE(store.rejectedCount(), std::uint64_t(2));
    }

    void fieldsKeepTheirStatedPrecision() {
        // sensitivity fp16 (relative error <= 2^-11), l2_norm bf16 (<= 2^-8), the other four float
        // for the latest kDetailWindow updates; NaN (missing) stays NaN.
        TelemetryStore store;
        store.reset(sp::uniform_layout(2));
        const std::size_t updates = TelemetryStore::kDetailWindow + 10;
        for (std::size_t u = 0; u < updates; ++u) {
            sp::BlockDetail d = blockDetail(0, Precision::int8, 0.001 + 0.998 * double(u) / double(updates));
            d.l2_norm = 1e-3 * std::pow(1.1, double(u % 300));  // 1e-3 .. 2e9
            d.grad_score = 0.123456789 + double(u);
            d.max_abs = u % 2 ? sp::kNoValue : 1e-7;
            store.append(updateRecord(std::int64_t(u), {d, blockDetail(1, Precision::bf16, sp::kNoValue)}));
        }
        for (std::size_t u = 0; u < updates; ++u) {
            const double s = 0.001 + 0.998 * double(u) / double(updates);
            QVERIFY(std::abs(store.value(0, u, BlockField::sensitivity) - s) <= s * 0x1p-11);
            const double l2 = 1e-3 * std::pow(1.1, double(u % 300));
            QVERIFY(std::abs(store.value(0, u, BlockField::l2_norm) - l2) <= l2 * 0x1p-8);
            QVERIFY(std::isnan(store.value(1, u, BlockField::sensitivity)));
            QVERIFY(store.cell(1, u).present);
            const bool kept = updates - u <= TelemetryStore::kDetailWindow;
            QCOMPARE(std::isnan(store.value(0, u, BlockField::grad_score)), !kept);
            if (!kept) continue;
            QCOMPARE(store.value(0, u, BlockField::grad_score), float(0.123456789 + double(u)));
            QCOMPARE(std::isnan(store.value(0, u, BlockField::max_abs)), u % 2 == 1);
        }
        // Absent blocks read as missing everywhere.
        store.append(updateRecord(std::int64_t(updates), {}));
        QVERIFY(std::isnan(store.value(0, updates, BlockField::l2_norm)));
        QVERIFY(std::isnan(store.value(0, updates, BlockField::grad_score)));
        // The codecs at their edges: exact small integers, subnormals, saturation, signs.
        QCOMPARE(sp::ui::fromHalf(sp::ui::toHalf(1.0f)), 1.0f);
        QCOMPARE(sp::ui::fromHalf(sp::ui::toHalf(65504.0f)), 65504.0f);
        QVERIFY(std::isinf(sp::ui::fromHalf(sp::ui::toHalf(65520.0f))));
        QCOMPARE(sp::ui::fromHalf(sp::ui::toHalf(-0x1p-24f)), -0x1p-24f);
        QCOMPARE(sp::ui::fromHalf(sp::ui::toHalf(0x1p-26f)), 0.0f);
        QCOMPARE(sp::ui::fromHalf(sp::ui::toHalf(1.0f + 0x1p-11f)), 1.0f);  // a tie rounds to even
        QCOMPARE(sp::ui::fromBfloat16(sp::ui::toBfloat16(-3.0f)), -3.0f);
        QVERIFY(std::isinf(sp::ui::fromBfloat16(sp::ui::toBfloat16(std::numeric_limits<float>::infinity()))));
        QVERIFY(std::isnan(sp::ui::fromBfloat16(sp::ui::toBfloat16(sp::ui::kMissing))));
        QVERIFY(std::isnan(sp::ui::fromHalf(sp::ui::toHalf(sp::ui::kMissing))));
    }

    void summaryMatchesTheValues() {
        // Every [first, last) of a series with gaps: the summary's min/max/mean are the values'.
        sp::ui::SeriesSummary summary;
        std::vector<float> values;
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> unit(0.0f, 1.0f);
        for (int u = 0; u < 3000; ++u) {
            const float v = u % 97 < 5 || (u >= 1024 && u < 1300) ? sp::ui::kMissing : unit(rng);
            values.push_back(v);
            summary.append(v);
        }
        QVERIFY(summary.levelCount() >= 4);
        const auto raw = [&](std::size_t u) { return values[u]; };
        for (int trial = 0; trial < 400; ++trial) {
            std::size_t first = rng() % values.size(), last = rng() % (values.size() + 1);
            if (first > last) std::swap(first, last);
            sp::ui::SpanStats want;
            for (std::size_t u = first; u < last; ++u) want.add(values[u]);
            const sp::ui::SpanStats got = summary.stats(first, last, raw);
            QCOMPARE(got.count, want.count);
            if (!want.count) {
                QVERIFY(std::isnan(got.max));
                continue;
            }
            QCOMPARE(got.min, want.min);
            QCOMPARE(got.max, want.max);
            QVERIFY(std::abs(got.mean() - want.mean()) < 1e-5f);
        }
        // The store keeps one per drawn field.
        TelemetryStore store;
        store.reset(sp::uniform_layout(1));
        for (std::size_t u = 0; u < 300; ++u)
            store.append(updateRecord(std::int64_t(u), {blockDetail(0, Precision::int8, double(u) / 300.0)}));
        const sp::ui::SpanStats s = store.stats(0, BlockField::sensitivity, 10, 290);
        QCOMPARE(s.count, std::uint64_t(280));
        QCOMPARE(s.max, fp16(float(289.0 / 300.0)));  // an edge value: read from the fp16 column
    }

    void retentionKeepsTheLatestUpdatesAndTheSummary() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(2));
        const std::size_t retain = TelemetryStore::kMinRetainUpdates;
        store.setRetainUpdates(10);  // raised to the minimum
        QCOMPARE(store.retainUpdates(), retain);
        const std::size_t updates = 4 * retain;
        for (std::size_t u = 0; u < updates; ++u) {
            sp::BlockDetail d = blockDetail(0, Precision::int8, 0.25, sp::ForcedBy::none, u == 7);
            if (u >= 2 * retain) d.sensitivity = 0.75;
            store.append(updateRecord(std::int64_t(u), {d}));
            QVERIFY(store.updateCount() - store.firstKept() <= retain + retain / 4);
        }
        QCOMPARE(store.updateCount(), updates);  // rows are all kept
        QVERIFY(store.firstKept() >= updates - retain - retain / 4);
        QVERIFY(store.memoryBytes() <
                std::size_t(2) * (retain + retain / 4) * TelemetryStore::kBytesPerBlockUpdate +
                    updates * sizeof(sp::ui::UpdateRow) + 2 * 40000);
        const std::size_t old = 100;
        QVERIFY(!store.cell(0, old).present);
        QVERIFY(std::isnan(store.value(0, old, BlockField::sensitivity)));
        // Drawn, a dropped update reads as its summary span's mean; the kept ones as they were.
        const sp::ui::FieldSeries s = store.series(0, BlockField::sensitivity);
        QCOMPARE(s.size(), updates);
        QCOMPARE(s[old], 0.25f);
        QVERIFY(std::isnan(store.series(1, BlockField::sensitivity)[old]));
        QCOMPARE(s[updates - 1], 0.75f);
        QVERIFY(store.cell(0, updates - 1).present);
        const sp::ui::SpanStats all = store.stats(0, BlockField::sensitivity, 0, updates);
        QCOMPARE(all.count, std::uint64_t(updates));
        QCOMPARE(all.min, 0.25f);
        QCOMPARE(all.max, 0.75f);
        // The precision-change history outlives the columns.
        QCOMPARE(store.switchesUpTo(0, updates - 1), 1);
        QCOMPARE(store.lastChangeStep(0, updates - 1), std::int64_t(7));
    }

    void memoryIsColumnBytesPlusRows() {
        const int blocks = 100;
        const std::size_t updates = 50;
        TelemetryStore store;
        store.reset(sp::uniform_layout(blocks));
        store.reserve(updates);
        for (std::size_t u = 0; u < updates; ++u) store.append(uniformUpdate(std::int64_t(u), blocks));
        const std::size_t columns = std::size_t(blocks) * updates * TelemetryStore::kBytesPerBlockUpdate;
        const std::size_t rows = updates * sizeof(sp::ui::UpdateRow);
        QVERIFY2(store.memoryBytes() >= columns + rows, qPrintable(QString::number(store.memoryBytes())));
        // Reserved exactly: only the per-block bookkeeping comes on top (no doubling).
        const std::size_t window = TelemetryStore::kDetailWindow * 4 * sizeof(float);
        QVERIFY2(store.memoryBytes() <= columns + rows + std::size_t(blocks) * (window + 512),
                 qPrintable(QString::number(store.memoryBytes())));
        store.reset({});
        QVERIFY(store.memoryBytes() < 1024);
    }
};

QTEST_MAIN(TestUiStore)
#include "test_ui_store.moc"
