// The run picker across agent restarts, through the window against the real AgentServer
// (tests/common/served_agent): the run before a restart keeps an entry with its data, the new run is
// the agent's entry and stays current, and at most RunSession::kEarlierRunsKept earlier runs stay.
#include <QComboBox>
#include <QLabel>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "served_agent.h"
#include "sp/ui/block_table_panel.h"
#include "sp/ui/connection_dialog.h"
#include "sp/ui/event_log_panel.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"

using namespace sp::ui;
using sp::test::ServedAgent;

namespace {

ServedAgent::Options quickHello() {
    ServedAgent::Options o;
    o.hello_interval_s = 0.2;  // a restarted agent announces its run soon after a subscriber joins
    return o;
}

// Publishes update after update (10 steps apart, from `step`) until `session` holds `run_id` with at
// least `updates` updates, then waits for the last one published to arrive too; its step (-1: it
// never came).
std::int64_t publishUntil(ServedAgent& agent, const RunSession& session, const std::string& run_id,
                          std::size_t updates, std::int64_t step) {
    const auto done = [&] {
        return session.header().run_id == run_id && session.store().updateCount() >= updates;
    };
    for (QElapsedTimer t; !done();) {
        if (!t.isValid()) t.start();
        if (t.elapsed() > 10000) return -1;
        agent.publish_update(step += 10);
        QTest::qWait(20);
    }
    const bool arrived = QTest::qWaitFor([&] { return session.store().rows().back().step == step; }, 5000);
    return arrived ? step : -1;
}

}  // namespace

class TestRunPicker : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        registerUiMetaTypes();
    }

    void restartedAgentKeepsTheEarlierRun() {
        QTemporaryDir dir;
        ServedAgent agent(dir.path().toStdString(), quickHello());
        agent.start("before-restart");
        MainWindow w;
        w.show();
        QString error;
        QVERIFY2(w.connectTo({QString::fromStdString(agent.spec()), {}, {}, 0}, &error), qPrintable(error));
        RunSession* live = w.currentSession();
        const std::int64_t last_before = publishUntil(agent, *live, "before-restart", 3, 0);
        QVERIFY(last_before > 0);
        const std::size_t updates_before = live->store().updateCount();

        agent.stop();
        agent.start("after-restart");
        QVERIFY(publishUntil(agent, *live, "after-restart", 1, 1000) > 1000);

        auto* picker = w.findChild<QComboBox*>(QStringLiteral("runPicker"));
        QCOMPARE(picker->count(), 2);
        QCOMPARE(w.sessions().size(), std::size_t(2));
        RunSession* earlier = w.sessions().front();
        QCOMPARE(earlier->header().run_id, std::string("before-restart"));
        QCOMPARE(earlier->store().updateCount(), updates_before);
        QCOMPARE(earlier->store().rows().back().step, last_before);
        // The new run is the agent's entry and the one shown; the earlier run sits just above it.
        QCOMPARE(w.currentSession(), live);
        QCOMPARE(picker->currentIndex(), 1);
        // Named by its run id (the endpoint is the entry below, and in its tooltip), its state whole.
        QCOMPARE(
            picker->itemData(0, Qt::ToolTipRole).toString(),
            QString::fromStdString(agent.telemetry_endpoint()) +
                QStringLiteral(" · run before-restart — restarted after step %1 (then run after-restart)")
                    .arg(last_before));
        QVERIFY2(picker->itemText(0) ==
                     QStringLiteral("run before-restart — restarted after step %1").arg(last_before),
                 qPrintable(picker->itemText(0)));
        QVERIFY2(picker->itemText(1).endsWith(QStringLiteral("live")), qPrintable(picker->itemText(1)));

        // The user picks the earlier run: every view shows it, read-only, while the new run goes on.
        picker->setCurrentIndex(0);
        QCOMPARE(w.currentSession(), earlier);
        w.refreshViews();
        QCOMPARE(w.findChild<BlockTablePanel*>()->sourceModel()->rowCount(), 4);
        QCOMPARE(std::size_t(w.findChild<EventLogPanel*>()->view()->model()->rowCount()),
                 earlier->events().size());
        QVERIFY(!earlier->canControl());
        QVERIFY(publishUntil(agent, *live, "after-restart", 3, 2000) > 2000);
        QCOMPARE(earlier->store().updateCount(), updates_before);
        picker->setCurrentIndex(1);
        QCOMPARE(w.currentSession(), live);
        agent.stop();
    }

    // An agent in a restart loop: the picker keeps the latest kEarlierRunsKept runs before the current
    // one; the oldest goes, and one the user was looking at gives way to the agent's current run.
    void restartLoopKeepsABoundedHistory() {
        QTemporaryDir dir;
        ServedAgent agent(dir.path().toStdString(), quickHello());
        agent.start("run-0");
        MainWindow w;
        w.show();
        QString error;
        QVERIFY2(w.connectTo({QString::fromStdString(agent.spec()), {}, {}, 0}, &error), qPrintable(error));
        RunSession* live = w.currentSession();
        QVERIFY(publishUntil(agent, *live, "run-0", 1, 0) > 0);
        auto* picker = w.findChild<QComboBox*>(QStringLiteral("runPicker"));
        const int restarts = int(RunSession::kEarlierRunsKept) + 1;
        for (int r = 1; r <= restarts; ++r) {
            if (r == restarts) picker->setCurrentIndex(0);  // looking at run-0 when it is dropped
            agent.stop();
            const std::string id = "run-" + std::to_string(r);
            agent.start(id);
            QVERIFY2(publishUntil(agent, *live, id, 1, 0) > 0, id.c_str());
        }
        QTRY_COMPARE(picker->count(), int(RunSession::kEarlierRunsKept) + 1);
        QCOMPARE(w.sessions().size(), RunSession::kEarlierRunsKept + 1);
        QCOMPARE(w.sessions().front()->header().run_id, std::string("run-1"));
        QCOMPARE(w.currentSession(), live);
        QCOMPARE(picker->currentIndex(), picker->count() - 1);
        agent.stop();
    }
};

QTEST_MAIN(TestRunPicker)
#include "test_run_picker.moc"
