// The Why column's history (decision_history.h) read from the store's event lists, against the scan
// back through every update that it replaced: the same answers on random runs with gaps, pins,
// changes by the policy and by others, and a retention that drops the oldest updates.
#include <QtTest>

#include <random>

#include "fake_telemetry_source.h"
#include "sp/ui/decision_history.h"
#include "sp/ui/telemetry_store.h"

using namespace sp::ui;
using sp::ForcedBy;
using sp::Precision;
using sp::Reason;
using sp::test::blockDetail;
using sp::test::updateRecord;

namespace {

// The scans decision_history.cpp made before the store kept event lists: O(updates) a call.
std::string scannedHoldHistory(const TelemetryStore& store, int block, std::size_t update) {
    const BlockCell now = store.cell(block, update);
    if (!now.present || now.reason != Reason::hold || now.forced != ForcedBy::none) return {};
    for (std::size_t u = update; u-- > 0;) {
        const BlockCell c = store.cell(block, u);
        if (!c.present) continue;
        if (c.precision != now.precision) return {};
        if (c.forced == ForcedBy::pin) {
            return "held at " + std::string(to_string(now.precision)) +
                   " since the pin was released at step " + std::to_string(store.row(u + 1).step);
        }
    }
    return {};
}

std::optional<std::int64_t> scannedMaySwitchAt(const TelemetryStore& store, int block, std::size_t update,
                                               std::int64_t min_steps) {
    for (std::size_t u = update + 1; u-- > 0;) {
        const BlockCell c = store.cell(block, u);
        if (!c.present || !c.changed || c.reason != Reason::policy) continue;
        const std::int64_t at = store.row(u).step + min_steps;
        return at > store.row(update).step ? std::optional<std::int64_t>(at) : std::nullopt;
    }
    return std::nullopt;
}

// A run of `updates` over `blocks` blocks: each block drifts between two precisions, is pinned now
// and then for a while, goes missing sometimes, and moves by the policy or by others.
void fillRandomRun(TelemetryStore& store, int blocks, std::size_t updates, std::mt19937& rng) {
    std::vector<Precision> at(std::size_t(blocks), Precision::bf16);
    std::vector<int> pinned_for(std::size_t(blocks), 0);
    for (std::size_t u = 0; u < updates; ++u) {
        std::vector<sp::BlockDetail> details;
        for (int b = 0; b < blocks; ++b) {
            if (rng() % 9 == 0) continue;  // missing at this update
            int& pin = pinned_for[std::size_t(b)];
            if (pin == 0 && rng() % 25 == 0) pin = 1 + int(rng() % 6);
            const bool pinned = pin > 0;
            pin = std::max(0, pin - 1);
            const Precision before = at[std::size_t(b)];
            if (rng() % 7 == 0)
                at[std::size_t(b)] = before == Precision::bf16 ? Precision::int8 : Precision::bf16;
            sp::BlockDetail d = blockDetail(b, at[std::size_t(b)], 0.5);
            d.forced = pinned ? ForcedBy::pin : (rng() % 40 == 0 ? ForcedBy::config : ForcedBy::none);
            d.changed = at[std::size_t(b)] != before;
            d.reason = pinned      ? Reason::pin
                       : d.changed ? (rng() % 3 ? Reason::policy : Reason::rollback)
                                   : Reason::hold;
            details.push_back(d);
        }
        store.append(updateRecord(std::int64_t(10 * u + 100), details));
    }
}

}  // namespace

class TestDecisionHistory : public QObject {
    Q_OBJECT
  private slots:
    void sameAsTheScanBackThroughEveryUpdate_data() {
        QTest::addColumn<std::size_t>("retain");
        QTest::newRow("every update kept") << std::size_t(0);
        QTest::newRow("a retention drops the oldest") << TelemetryStore::kMinRetainUpdates;
    }
    void sameAsTheScanBackThroughEveryUpdate() {
        QFETCH(std::size_t, retain);
        std::mt19937 rng(5);
        int held = 0, waiting = 0;
        for (int round = 0; round < 4; ++round) {
            TelemetryStore store;
            store.reset(sp::uniform_layout(6));
            store.setRetainUpdates(retain);
            fillRandomRun(store, 6, 3000, rng);
            if (retain > 0) QVERIFY(store.firstKept() > 0);
            for (int b = 0; b < 6; ++b) {
                for (std::size_t u = 0; u < store.updateCount(); ++u) {
                    const std::string hold = holdHistory(store, b, u);
                    QCOMPARE(QString::fromStdString(hold),
                             QString::fromStdString(scannedHoldHistory(store, b, u)));
                    const auto may = maySwitchAt(store, b, u, 40);
                    QCOMPARE(may, scannedMaySwitchAt(store, b, u, 40));
                    held += hold.empty() ? 0 : 1;
                    waiting += may ? 1 : 0;
                }
            }
        }
        // The runs exercise both answers, not only their empty cases.
        QVERIFY2(held > 100 && waiting > 1000, qPrintable(QStringLiteral("%1 %2").arg(held).arg(waiting)));
    }
};

QTEST_MAIN(TestDecisionHistory)
#include "test_decision_history.moc"
