// The window following a data-parallel job of two fake agents (real ZeroMQ sockets) as one run:
// rank 0 is the run (heatmap, table, log, commands), the Ranks panel lists both ranks, and the
// warning bar names the rank, the step and the blocks when rank 1's map differs from rank 0's, and
// says nothing while they agree.
#include <QAction>
#include <QDockWidget>
#include <QLabel>
#include <QSettings>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "fake_agent.h"  // make_update
#include "served_agent.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/connection_dialog.h"
#include "sp/ui/main_window.h"
#include "sp/ui/rank_job.h"
#include "sp/ui/rank_panel.h"
#include "sp/ui/rank_status_model.h"
#include "sp/ui/run_session.h"

using namespace sp::ui;

namespace {

// Two ranks of one job, each its own agent with its own sockets.
struct TwoRanks {
    TwoRanks() : rank0(dir0.path().toStdString(), {}), rank1(dir1.path().toStdString(), rankOne()) {
        rank0.start("dp-job");
        rank1.start("dp-job");
    }
    ~TwoRanks() {
        rank0.stop();
        rank1.stop();
    }
    QString spec() const { return QString::fromStdString(rank0.spec() + ";" + rank1.spec()); }
    // Both ranks publish their update at `step` (the same map unless `rank1_differs`) until both
    // were compared; what a job whose ranks apply one map does.
    void publish(std::int64_t step, bool rank1_differs = false) {
        const sp::UpdateRecord u = sp::test::make_update(4, step);
        sp::UpdateRecord other = u;
        if (rank1_differs) other.block_details[2].precision = sp::Precision::fp8_e4m3;
        rank0.publish_update(u);
        rank1.publish_update(other);
    }

    static sp::test::ServedAgent::Options rankOne() {
        sp::test::ServedAgent::Options o;
        o.rank = 1;
        return o;
    }
    QTemporaryDir dir0, dir1;
    sp::test::ServedAgent rank0, rank1;
};

QString logText(const RunSession& s) {
    QStringList lines;
    for (std::size_t i = 0; i < s.events().size(); ++i) lines << s.events().at(i).text;
    return lines.join('\n');
}

}  // namespace

class TestJobWindow : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        registerUiMetaTypes();
    }
    void init() { QSettings().clear(); }  // each test starts from the default layout

    void agreeingRanksShowNoWarning() {
        TwoRanks job;
        MainWindow w;
        w.show();
        QString error;
        QVERIFY2(w.connectTo({job.spec(), {}, {}, 0}, &error), qPrintable(error));
        QCOMPARE(w.sessions().size(), std::size_t(1));  // one job, one run
        RunSession* s = w.currentSession();
        RankJob* rank_job = w.jobOf(s);
        QVERIFY(rank_job != nullptr);
        QCOMPARE(rank_job->rankCount(), 2);
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("RanksDock"));
        QVERIFY(dock != nullptr && dock->isVisible());
        auto* panel = w.findChild<RankPanel*>();
        QCOMPARE(panel->view()->model()->rowCount(), 2);
        const RankStatusModel* model = rank_job->model();
        std::int64_t step = 10;
        QTRY_VERIFY_WITH_TIMEOUT((job.publish(step += 10), model->status(1).compared_step.has_value() &&
                                                               s->store().updateCount() >= 1),
                                 10000);
        for (int i = 0; i < 3; ++i) job.publish(step += 10);
        QTRY_COMPARE_WITH_TIMEOUT(model->status(1).compared_step, std::optional<std::int64_t>(step), 5000);
        QVERIFY(model->status(1).agrees);
        QCOMPARE(model->index(1, RankStatusModel::MapColumn).data().toString(),
                 QStringLiteral("agrees (step %1)").arg(step));
        QCOMPARE(model->index(1, RankStatusModel::EndpointColumn).data().toString(),
                 QString::fromStdString(job.rank1.telemetry_endpoint()));
        QCOMPARE(model->index(1, RankStatusModel::StateColumn).data().toString(), QStringLiteral("live"));
        auto* bar = w.findChild<QLabel*>(QStringLiteral("JobWarning"));
        QVERIFY(bar != nullptr);
        QVERIFY2(!bar->isVisible(), qPrintable(bar->text()));
        QVERIFY2(!logText(*s).contains(QStringLiteral("rank 1")), qPrintable(logText(*s)));
        // Rank 0's stream is the run: the store holds rank 0's updates, once each.
        w.refreshViews();
        QCOMPARE(s->store().rows().back().step, step);
    }

    void differingMapShowsTheWarning() {
        TwoRanks job;
        MainWindow w;
        w.show();
        QString error;
        QVERIFY2(w.connectTo({job.spec(), {}, {}, 0}, &error), qPrintable(error));
        RunSession* s = w.currentSession();
        const RankStatusModel* model = w.jobOf(s)->model();
        std::int64_t step = 10;
        QTRY_VERIFY_WITH_TIMEOUT((job.publish(step += 10), model->status(1).compared_step.has_value()),
                                 10000);
        auto* bar = w.findChild<QLabel*>(QStringLiteral("JobWarning"));
        QVERIFY(!bar->isVisible());

        // make_update: block 2 is INT8 at even steps; rank 1 applies FP8 E4M3 there instead.
        const std::int64_t bad = step += 10;
        job.publish(bad, true);
        const QString expected = QStringLiteral(
                                     "rank 1's map at step %1 differs from rank 0's: blocks.2 "
                                     "fp8_e4m3 on rank 1, int8 on rank 0")
                                     .arg(bad);
        QTRY_VERIFY_WITH_TIMEOUT(bar->isVisible(), 5000);
        QCOMPARE(bar->text(), expected);
        QVERIFY2(logText(*s).contains(expected), qPrintable(logText(*s)));
        QCOMPARE(model->index(1, RankStatusModel::MapColumn).data().toString(),
                 QStringLiteral("differs (step %1)").arg(bad));

        // It stays while rank 1 has no later update that agrees, and clears with one.
        job.rank0.publish_update(step += 10);
        // Rank 0's update has arrived (an event, not a wait): with no answer from rank 1 at that step
        // the warning stays.
        QTRY_COMPARE_WITH_TIMEOUT(model->status(0).update_step, std::optional<std::int64_t>(step), 5000);
        QVERIFY(bar->isVisible());
        job.rank1.publish_update(step);
        QTRY_VERIFY_WITH_TIMEOUT(!bar->isVisible(), 5000);
        QVERIFY2(logText(*s).contains(
                     QStringLiteral("rank 1's map agrees with rank 0's again at step %1").arg(step)),
                 qPrintable(logText(*s)));
    }

    // Following a 2-rank job brings the Ranks panel as a tab beside the event log, in front, and the
    // charts keep their height (under them, the panel took a seventh of it).
    void ranksPanelLeavesTheChartsTheirHeight() {
        TwoRanks job;
        MainWindow w;
        w.resize(MainWindow::kDefaultSize);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        auto* charts = w.findChild<ChartsPanel*>();
        const int charts_height = charts->height();
        QVERIFY(charts_height > 0);
        QString error;
        QVERIFY2(w.connectTo({job.spec(), {}, {}, 0}, &error), qPrintable(error));
        auto* dock = w.findChild<QDockWidget*>(QStringLiteral("RanksDock"));
        // Laid out and in front: the panel's table has its size and is not behind another tab.
        QTRY_VERIFY(dock->isVisible() && !dock->widget()->visibleRegion().isEmpty());
        QCOMPARE(w.findChild<RankPanel*>()->view()->model()->rowCount(), 2);
        QCOMPARE(charts->height(), charts_height);
        QVERIFY(
            w.tabifiedDockWidgets(dock).contains(w.findChild<QDockWidget*>(QStringLiteral("EventsDock"))));
        QCOMPARE(w.dockWidgetArea(dock), Qt::RightDockWidgetArea);
    }

    // Where the user puts the Ranks panel, and whether they closed it, outlasts the window; a layout
    // saved before the panel became a tab (no layout version) gets the tab back.
    void ranksPanelRemembersTheUsersChoice() {
        TwoRanks job;
        const auto follow = [&job](MainWindow& w) {
            QString error;
            QVERIFY2(w.connectTo({job.spec(), {}, {}, 0}, &error), qPrintable(error));
        };
        const auto ranks_dock = [](MainWindow& w) {
            return w.findChild<QDockWidget*>(QStringLiteral("RanksDock"));
        };
        {
            MainWindow w;
            w.show();
            follow(w);
            QTRY_VERIFY(ranks_dock(w)->isVisible());
            w.addDockWidget(Qt::BottomDockWidgetArea, ranks_dock(w));  // what dragging it there does
            w.close();                                                 // saves the layout
        }
        {
            MainWindow w;
            w.show();
            follow(w);
            QTRY_VERIFY(ranks_dock(w)->isVisible());
            QCOMPARE(w.dockWidgetArea(ranks_dock(w)), Qt::BottomDockWidgetArea);
            ranks_dock(w)->close();  // its close button
            QVERIFY(!ranks_dock(w)->isVisible());
            w.close();
        }
        {
            MainWindow w;
            w.show();
            follow(w);
            QAction* toggle = ranks_dock(w)->toggleViewAction();
            QTRY_VERIFY(toggle->isEnabled());  // the job is current
            QVERIFY(!ranks_dock(w)->isVisible());
            QVERIFY(!toggle->isChecked());
            toggle->trigger();  // View ▸ Ranks
            QVERIFY(ranks_dock(w)->isVisible());
            w.close();
        }
        QSettings().remove(QStringLiteral("window/layout_version"));  // as the previous version saved it
        MainWindow w;
        w.show();
        follow(w);
        QTRY_VERIFY(ranks_dock(w)->isVisible());
        QCOMPARE(w.dockWidgetArea(ranks_dock(w)), Qt::RightDockWidgetArea);
    }

    // A single agent is no job: no Ranks panel, no warning bar.
    void singleAgentShowsNoRankPanel() {
        QTemporaryDir dir;
        sp::test::ServedAgent agent(dir.path().toStdString());
        agent.start("solo");
        MainWindow w;
        w.show();
        QString error;
        QVERIFY2(w.connectTo({QString::fromStdString(agent.spec()), {}, {}, 0}, &error), qPrintable(error));
        QVERIFY(w.jobOf(w.currentSession()) == nullptr);
        QVERIFY(!w.findChild<QDockWidget*>(QStringLiteral("RanksDock"))->isVisible());
        QVERIFY(!w.findChild<QLabel*>(QStringLiteral("JobWarning"))->isVisible());
        // --ranks over ipc has no ports to offset: refused with the reason.
        QVERIFY(!w.connectTo({QString::fromStdString(agent.spec()), {}, {}, 2}, &error));
        QVERIFY2(error.contains(QStringLiteral("has no port")), qPrintable(error));
        agent.stop();
    }
};

QTEST_MAIN(TestJobWindow)
#include "test_job_window.moc"
