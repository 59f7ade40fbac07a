// Pins that end by themselves, end to end through the window against the fake agent: the terms the
// operator sets go out with the pin, the table says how the pin will end, and the agent's
// pin_release event ends it in the table and the log.
#include <QAction>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "fake_agent.h"  // make_update
#include "find_action.h"
#include "served_agent.h"
#include "sp/ui/block_table_model.h"
#include "sp/ui/block_table_panel.h"
#include "sp/ui/connection_dialog.h"
#include "sp/ui/control_actions.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"

using namespace sp::ui;
using sp::test::actionNamed;

namespace {

QString forcedText(MainWindow& w, int block) {
    auto* model = w.findChild<BlockTableModel*>();
    return model->index(block, BlockTableModel::ForcedColumn).data().toString();
}

// The routing commands the agent's server accepted, in order.
std::vector<sp::Command> commandsSent(const sp::test::ServedAgent& agent) {
    std::vector<sp::Command> out;
    for (const auto& [id, command] : agent.submitted()) out.push_back(command);
    return out;
}

bool logHas(const RunSession& s, const QString& text) {
    for (std::size_t i = 0; i < s.events().size(); ++i)
        if (s.events().at(i).text.contains(text)) return true;
    return false;
}

}  // namespace

class TestPinTerms : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

  private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QStandardPaths::setTestModeEnabled(true);  // QSettings go to a throwaway location
        registerUiMetaTypes();
    }

    void termsAreSetSentShownAndEndedByTheAgent() {
        sp::test::ServedAgent agent(dir_.path().toStdString());
        agent.start("terms-run");
        MainWindow w;
        w.show();
        QString error;
        QVERIFY2(w.connectTo({QString::fromStdString(agent.spec()), {}, {}}, &error), qPrintable(error));
        RunSession* s = w.currentSession();
        QTRY_VERIFY_WITH_TIMEOUT((agent.publish_update(20), s->store().updateCount() >= 1 && s->canControl()),
                                 10000);
        w.refreshViews();

        // The operator's terms: asked through the prompt, shown on the actions.
        auto* control = w.findChild<ControlActions*>();
        control->setLifetimePrompt([](std::int64_t& steps) {
            steps = 200;
            return true;
        });
        control->pinLifetime()->trigger();
        control->releaseOnSpike()->setChecked(true);
        QCOMPARE(control->pinLifetime()->text(), QStringLiteral("Pin lifetime: for 200 steps…"));
        QVERIFY2(
            actionNamed(w, QStringLiteral("Pin INT8"))->toolTip().contains("for 200 steps or a loss spike"),
            qPrintable(actionNamed(w, QStringLiteral("Pin INT8"))->toolTip()));

        // Sent with the pin.
        w.findChild<BlockTablePanel*>()->view()->selectRow(2);
        actionNamed(w, QStringLiteral("Pin INT8"))->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(!commandsSent(agent).empty(), 5000);
        const sp::Command sent = commandsSent(agent).back();
        QCOMPARE(sent.blocks, std::vector<int>{2});
        QCOMPARE(sent.for_steps, std::int64_t(200));
        QVERIFY(sent.release_on_spike);

        // Applied at the agent's next boundary: the table says how it ends.
        sp::UpdateRecord pinned = sp::test::make_update(4, 30);
        pinned.block_details[2].precision = sp::Precision::int8;
        pinned.block_details[2].forced = sp::ForcedBy::pin;
        pinned.block_details[2].reason = sp::Reason::pin;
        agent.publish_update(pinned);
        QTRY_VERIFY_WITH_TIMEOUT((w.refreshViews(), forcedText(w, 2).contains("until")), 5000);
        QCOMPARE(forcedText(w, 2), QStringLiteral("pin: int8 (until step 221 or a loss spike)"));
        QVERIFY(logHas(*s, QStringLiteral("pin blocks.2 → int8 for 200 steps (ends at a loss spike)")));

        // A loss spike ends it: the agent's event, then an update without the pin.
        agent.publish_event(sp::event_from_json_text(
            "pin_release", 40, 1.7e9 + 40,
            R"({"trigger":"spike","loss":9.0,"z":40.0,"blocks":[2],"names":["blocks.2"],"cooldown_until":90})"));
        sp::UpdateRecord after = sp::test::make_update(4, 40);
        after.block_details[2].precision = sp::Precision::bf16;
        after.block_details[2].reason = sp::Reason::cooldown;
        agent.publish_update(after);
        QTRY_VERIFY_WITH_TIMEOUT(
            (w.refreshViews(), logHas(*s, QStringLiteral("pin released by a spiking loss"))), 5000);
        QVERIFY(logHas(*s, QStringLiteral("pin released by a spiking loss at step 40: blocks.2")));
        QTRY_COMPARE_WITH_TIMEOUT((w.refreshViews(), forcedText(w, 2)), QString(), 5000);
        QCOMPARE(s->pinTermsFor(2), QString());

        // Back to pins until released: nothing more goes out with the next pin.
        control->setPinTerms(0, false);
        QCOMPARE(control->pinLifetime()->text(), QStringLiteral("Pin lifetime: until released…"));
        actionNamed(w, QStringLiteral("Pin INT8"))->trigger();
        QTRY_COMPARE_WITH_TIMEOUT(commandsSent(agent).size(), std::size_t(2), 5000);
        QCOMPARE(commandsSent(agent).back().for_steps, std::int64_t(0));
        QVERIFY(!commandsSent(agent).back().release_on_spike);
    }
};

QTEST_MAIN(TestPinTerms)
#include "test_pin_terms.moc"
