// Budget mode moving a block a pin would ask about (sensitivity at or above bf16_threshold) below
// BF16: the session warns once when it starts, names the block, the format and the SNR against its
// threshold, and warns again only after the block left that state.
#include <QtTest>

#include "fake_telemetry_source.h"
#include "sp/ui/budget_risk.h"
#include "sp/ui/run_session.h"

using sp::Precision;
using sp::ui::EventCategory;
using sp::ui::RunSession;
using sp::ui::SourceState;
using namespace sp::test;

namespace {

// Four blocks in budget mode: block 3 (sensitivity 0.72) at `p3`, the others INT4 and insensitive.
sp::UpdateRecord budgetUpdate(std::int64_t step, Precision p3, sp::ForcedBy forced3 = sp::ForcedBy::none,
                              sp::Mode mode = sp::Mode::budget) {
    std::vector<sp::BlockDetail> details;
    details.reserve(4);
    for (int i = 0; i < 3; ++i) details.push_back(blockDetail(i, Precision::int4, 0.1));
    details.push_back(blockDetail(3, p3, 0.72, forced3));
    details[3].snr_db[std::size_t(Precision::int4)] = 16.5;
    sp::UpdateRecord r = updateRecord(step, std::move(details));
    r.mode = mode;
    return r;
}

QStringList warnings(const RunSession& s) {
    QStringList out;
    for (std::size_t i = 0; i < s.events().size(); ++i)
        if (s.events().at(i).category == EventCategory::warning) out << s.events().at(i).text;
    return out;
}

}  // namespace

class TestBudgetRisk : public QObject {
    Q_OBJECT
  private slots:
    void budgetModeMovingASensitiveBlockBelowBf16WarnsOnce();
    void aPinAForceOrAnotherModeIsNotWarnedAbout();
};

void TestBudgetRisk::budgetModeMovingASensitiveBlockBelowBf16WarnsOnce() {
    auto owned = std::make_unique<FakeTelemetrySource>(false);
    FakeTelemetrySource* source = owned.get();
    RunSession session(std::move(owned));
    source->header(runHeader("budget-run", 4));
    source->records({budgetUpdate(100, Precision::bf16)});
    QVERIFY(warnings(session).isEmpty());
    source->records({budgetUpdate(200, Precision::int4), budgetUpdate(300, Precision::int4)});
    QCOMPARE(warnings(session).size(), 1);
    const QString text = warnings(session).first();
    QVERIFY2(text.startsWith("budget mode put blocks.3 in int4 with sensitivity 0.720, at or above "
                             "bf16_threshold 0.6 (a pin there asks first): estimated int4 SNR 16.5 dB, below "
                             "its threshold 18.0 dB"),
             qPrintable(text));
    QVERIFY2(text.endsWith("; pin it to BF16 to keep it"), qPrintable(text));
    // The entry sits at the update that made the move.
    for (std::size_t i = 0; i < session.events().size(); ++i)
        if (session.events().at(i).category == EventCategory::warning)
            QCOMPARE(session.events().at(i).step, 200);
    // Back at BF16, then down again: a second warning.
    source->records({budgetUpdate(400, Precision::bf16), budgetUpdate(500, Precision::int8)});
    QCOMPARE(warnings(session).size(), 2);
    QVERIFY2(warnings(session).last().startsWith("budget mode put blocks.3 in int8"),
             qPrintable(warnings(session).last()));
}

void TestBudgetRisk::aPinAForceOrAnotherModeIsNotWarnedAbout() {
    sp::ui::BudgetRiskWatch watch;
    QVERIFY(watch.observe(budgetUpdate(1, Precision::int4, sp::ForcedBy::pin), 0.6).empty());
    QVERIFY(watch.observe(budgetUpdate(2, Precision::int4, sp::ForcedBy::config), 0.6).empty());
    QVERIFY(
        watch.observe(budgetUpdate(3, Precision::int4, sp::ForcedBy::none, sp::Mode::dynamic), 0.6).empty());
    // Released from its pin and still low under budget mode: now the policy's choice, so warned.
    const auto risks = watch.observe(budgetUpdate(4, Precision::int4), 0.6);
    QCOMPARE(risks.size(), std::size_t(1));
    QCOMPARE(risks[0].block, 3);
    QCOMPARE(risks[0].precision, Precision::int4);
    // A higher threshold: not a block the policy would keep at BF16.
    sp::ui::BudgetRiskWatch other;
    QVERIFY(other.observe(budgetUpdate(5, Precision::int4), 0.8).empty());
}

QTEST_MAIN(TestBudgetRisk)
#include "test_budget_risk.moc"
