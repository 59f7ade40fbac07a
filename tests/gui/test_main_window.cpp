// The main window over a replayed file: table, heatmap and charts agree with the file, selection
// is shared between heatmap and table, control is disabled in replay, exports write what is shown,
// and the window renders legibly at the two sizes we support.
#include <QAction>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QRegularExpression>
#include <QScreen>
#include <QSettings>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QToolButton>
#include <QtTest>

#include "dashboard_fixture.h"
#include "fake_agent.h"
#include "find_action.h"
#include "sp/ui/block_table_model.h"
#include "sp/ui/block_table_panel.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/colormap.h"
#include "sp/ui/connection_dialog.h"
#include "sp/ui/control_actions.h"
#include "sp/ui/event_log_model.h"
#include "sp/ui/event_log_panel.h"
#include "sp/ui/export.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/main_window.h"
#include "sp/ui/replay_bar.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_source.h"
#include "sp/ui/timeline.h"

using namespace sp::ui;
using sp::test::actionNamed;

class TestMainWindow : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixture_;

  private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QStandardPaths::setTestModeEnabled(true);  // QSettings go to a throwaway location
        QSettings().clear();
        registerUiMetaTypes();
        fixture_ = dir_.filePath(QStringLiteral("run.jsonl"));
        sp::test::writeDashboardFixture(fixture_.toStdString(), 6, 40);
    }

    // Nothing saved yet (the first launch): the default size, within the screen, not the layouts'
    // minimum. Runs first, before any window saved its geometry.
    void firstLaunchOpensAtTheDefaultSize() {
        MainWindow w;
        const QSize screen = QGuiApplication::primaryScreen()->availableGeometry().size();
        QCOMPARE(w.size(), MainWindow::kDefaultSize.boundedTo(screen));
    }

    void replayFillsEveryView() {
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        QCOMPARE(w.sessions().size(), std::size_t(1));
        RunSession* s = w.currentSession();
        QTRY_VERIFY_WITH_TIMEOUT(s->state() == SourceState::loaded, 10000);
        w.refreshViews();
        QCOMPARE(s->store().updateCount(), std::size_t(40));
        auto* panel = w.findChild<BlockTablePanel*>();
        QVERIFY(panel != nullptr);
        QAbstractItemModel* table = panel->sourceModel();
        QCOMPARE(table->rowCount(), 6);
        // Block 1 is pinned INT8 and block 5 forced BF16 by config in the last update.
        QVERIFY(
            table->index(1, BlockTableModel::ForcedColumn).data().toString().contains(QStringLiteral("pin")));
        QVERIFY(table->index(5, BlockTableModel::ForcedColumn)
                    .data()
                    .toString()
                    .contains(QStringLiteral("config")));
        QCOMPARE(table->index(1, BlockTableModel::PrecisionColumn).data().toString(), QStringLiteral("int8"));

        // Replay is read-only: every routing action is disabled, even with a selection.
        panel->view()->selectRow(0);
        for (const char* name : {"Pin BF16", "Pin INT8", "Pin INT4", "Pin FP8 E4M3", "Pin FP8 E5M2",
                                 "Release", "Release all", "Mode: budget", "Budget target…"}) {
            QAction* a = actionNamed(w, QString::fromUtf8(name));
            QVERIFY2(a != nullptr, name);
            QVERIFY2(!a->isEnabled(), name);
        }
        // ... and so are the Pin menu button and the pins' terms, which look usable otherwise.
        auto* pin_button = w.findChild<QToolButton*>(QStringLiteral("pinButton"));
        QVERIFY(pin_button != nullptr);
        QVERIFY(!pin_button->isEnabled());
        QVERIFY(!actionNamed(w, QStringLiteral("Pins release on a loss spike"))->isEnabled());

        // Play, then pause: the button shows the pause icon while playing and the play icon once
        // paused, although a pause moves nothing the repaint would redraw for.
        QToolButton* play = nullptr;
        for (QToolButton* b : w.findChild<ReplayBar*>()->findChildren<QToolButton*>())
            if (b->toolTip().startsWith(QStringLiteral("Play / pause"))) play = b;
        QVERIFY(play != nullptr);
        const auto shows = [play](QStyle::StandardPixmap icon) {
            return play->icon().pixmap(16).toImage() ==
                   play->style()->standardIcon(icon).pixmap(16).toImage();
        };
        w.refreshViews();
        play->click();
        QVERIFY(shows(QStyle::SP_MediaPause));
        play->click();
        QVERIFY(shows(QStyle::SP_MediaPlay));
    }

    // Double-clicking an event moves the timeline to its step; away from the live edge the event
    // list and the status bar follow the cursor, and back at the edge everything shows again.
    // The status bar names the run's mode only where the run says it: a file whose updates carry no
    // mode and whose header no config reads "mode unknown", not the default "mode dynamic" (issue 45,
    // item 7).
    void statusBarSaysModeUnknownWhereNoneIsRecorded() {
        const QString no_mode = dir_.filePath(QStringLiteral("no-mode.jsonl"));
        sp::test::writeDashboardFixture(no_mode.toStdString(), 4, 10, false, 10, /*record_mode=*/false);
        const auto status_of = [](MainWindow& w) {
            QStringList status;
            for (const QLabel* label : w.statusBar()->findChildren<QLabel*>()) status << label->text();
            return status.join(QLatin1Char('|'));
        };
        for (const auto& [file, expected] : {std::pair{no_mode, QStringLiteral("mode unknown ·")},
                                             std::pair{fixture_, QStringLiteral("mode dynamic ·")}}) {
            MainWindow w;
            w.openFile(file);
            RunSession* s = w.currentSession();
            QTRY_VERIFY_WITH_TIMEOUT(s->state() == SourceState::loaded, 10000);
            w.refreshViews();
            QVERIFY2(status_of(w).contains(expected), qPrintable(status_of(w)));
        }
    }

    // "Follow live edge" is for live runs: a replay does not offer it (nor its End key), a live run
    // does, and switching between the two shows and hides it (issue 45, item 7).
    void followLiveEdgeOnlyLive() {
        MainWindow w;
        w.show();
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        QAction* follow = actionNamed(w, QStringLiteral("&Follow live edge"));
        QVERIFY(follow != nullptr);
        QVERIFY(!follow->isVisible());
        RunSession* replay = w.currentSession();
        sp::test::FakeAgent agent(dir_.path().toStdString());
        agent.start("follow-run");
        QString error;
        QVERIFY2(w.connectTo({QString::fromStdString(agent.spec()), {}, {}}, &error), qPrintable(error));
        QVERIFY(w.currentSession()->isLive());
        QVERIFY(follow->isVisible());
        w.setCurrentSession(replay);
        QVERIFY(!follow->isVisible());
    }

    void doubleClickingAnEventMovesTheCursor() {
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        QTableView* log = w.findChild<EventLogPanel*>()->view();
        QAbstractItemModel* rows = log->model();
        const int all = rows->rowCount();
        const auto step_of = [rows](int r) {
            return rows->index(r, 0).data(EventLogModel::StepRole).toLongLong();
        };
        int command = -1, cut = -1;
        for (int r = 0; r < all; ++r) {
            if (step_of(r) == 60) command = r;
            if (step_of(r) == 400) cut = r;
        }
        QVERIFY2(command >= 0, "the fixture's command event (step 60) is not in the log");
        QVERIFY2(cut >= 0, "the fixture ends at step 400 without a run_end: a warning there");

        const QModelIndex cell = rows->index(command, EventLogModel::MessageColumn);
        log->scrollTo(cell);
        // A view reports a double click on the index its first press selected.
        QTest::mouseClick(log->viewport(), Qt::LeftButton, {}, log->visualRect(cell).center());
        QTest::mouseDClick(log->viewport(), Qt::LeftButton, {}, log->visualRect(cell).center());
        auto* timeline = w.findChild<Timeline*>();
        QCOMPARE(timeline->position(), std::size_t(6));  // updates at steps 10..60
        QVERIFY(!timeline->following());
        w.refreshViews();
        QVERIFY(rows->rowCount() < all);
        for (int r = 0; r < rows->rowCount(); ++r)
            QVERIFY2(step_of(r) <= 60, qPrintable(QString::number(step_of(r))));
        bool status = false;
        for (const QLabel* label : w.findChildren<QLabel*>())
            status |= label->text().contains("step 60 of 400");
        QVERIFY(status);

        timeline->setFollowing(true);
        w.refreshViews();
        QCOMPARE(rows->rowCount(), all);
    }

    // Two files open: View ▸ Overlay other runs draws the other run's saving and loss over the
    // current one's charts, and the x range covers the longer run.
    void otherRunsAreOverlaid() {
        const QString longer = dir_.filePath(QStringLiteral("longer.jsonl"));
        sp::test::writeDashboardFixture(longer.toStdString(), 6, 60);
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        w.openFile(longer);  // the newest is current
        for (RunSession* s : w.sessions()) QTRY_VERIFY_WITH_TIMEOUT(s->state() == SourceState::loaded, 10000);
        QCOMPARE(w.currentSession()->source().label(), longer);
        w.refreshViews();
        auto* charts = w.findChild<ChartsPanel*>();
        QVERIFY(!charts->linePoints(ChartsPanel::Chart::saving, QStringLiteral("run.jsonl: estimated")));

        actionNamed(w, QStringLiteral("&Overlay other runs"))->trigger();
        w.refreshViews();
        const auto saving =
            charts->linePoints(ChartsPanel::Chart::saving, QStringLiteral("run.jsonl: estimated"));
        const auto loss =
            charts->linePoints(ChartsPanel::Chart::loss, QStringLiteral("run.jsonl: train loss"));
        QVERIFY(saving && !saving->isEmpty());
        QVERIFY(loss && !loss->isEmpty());
        QCOMPARE(saving->last().x(), 400.0);  // the other run's last update, inside the longer one's range

        actionNamed(w, QStringLiteral("&Overlay other runs"))->trigger();
        w.refreshViews();
        QVERIFY(!charts->linePoints(ChartsPanel::Chart::saving, QStringLiteral("run.jsonl: estimated")));
    }

    // Overlaying another run reaches every chart that plots a series of the run (issue item 14): the
    // other run's block counts, its selected blocks (by name) on the sensitivity and gradient charts,
    // its measured saving and eval loss too, each named after the run.
    void everyPerRunChartOverlaysTheOtherRun() {
        const QString longer = dir_.filePath(QStringLiteral("longer-overlay.jsonl"));
        sp::test::writeDashboardFixture(longer.toStdString(), 6, 60);
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        w.openFile(longer);
        for (RunSession* s : w.sessions()) QTRY_VERIFY_WITH_TIMEOUT(s->state() == SourceState::loaded, 10000);
        w.findChild<BlockTablePanel*>()->view()->selectRow(2);  // blocks.2, as a user selects it
        actionNamed(w, QStringLiteral("&Overlay other runs"))->trigger();
        w.refreshViews();
        auto* charts = w.findChild<ChartsPanel*>();
        QCOMPARE(charts->selectedBlocks(), std::vector<int>{2});
        using C = ChartsPanel::Chart;
        const RunSession& other = *w.sessions().front();
        const std::vector<std::pair<C, QString>> lines = {
            {C::saving, QStringLiteral("run.jsonl: measured")},
            {C::precision, QStringLiteral("run.jsonl: BF16")},
            {C::precision, QStringLiteral("run.jsonl: INT8")},
            {C::sensitivity, QStringLiteral("run.jsonl: blocks.2")},
            {C::gradient, QStringLiteral("run.jsonl: blocks.2")},
            {C::loss, QStringLiteral("run.jsonl: eval loss")}};
        for (const auto& [chart, name] : lines) {
            const auto points = charts->linePoints(chart, name);
            QVERIFY2(points && !points->isEmpty(), qPrintable(name));
            QCOMPARE(points->last().x(), double(other.store().rows().back().step));
        }
        const auto int8 = charts->linePoints(C::precision, QStringLiteral("run.jsonl: INT8"));
        for (qsizetype i = 0; i < int8->size(); ++i)
            QCOMPARE(int8->at(i).y(), double(other.store().row(std::size_t(i)).blocks_int8));
        const auto sens = charts->linePoints(C::sensitivity, QStringLiteral("run.jsonl: blocks.2"));
        QCOMPARE(float(sens->at(3).y()), other.store().value(2, 3, BlockField::sensitivity));
    }

    void selectionIsSharedBetweenTableAndHeatmap() {
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        auto* panel = w.findChild<BlockTablePanel*>();
        auto* heatmap = w.findChild<HeatmapView*>();
        QSignalSpy from_heatmap(heatmap, &HeatmapView::selectionChanged);
        panel->setSelectedBlocks({2, 3});  // programmatic: no echo back
        QCOMPARE(panel->selectedBlocks(), (std::vector<int>{2, 3}));
        panel->view()->selectRow(4);  // a user selection in the table reaches the heatmap
        QCOMPARE(heatmap->selection(), (std::vector<int>{4}));
    }

    // View > Heatmap by precision: the cells take their format's colour, and back.
    void precisionViewColoursTheHeatmapByFormat() {
        MainWindow w;
        w.show();
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        auto* heatmap = w.findChild<HeatmapView*>();
        QAction* precision = actionNamed(w, QStringLiteral("Heatmap by &precision"));
        QVERIFY(precision != nullptr);
        precision->trigger();
        QCOMPARE(heatmap->colorMode(), HeatmapView::ColorMode::precision);
        w.refreshViews();
        const TelemetryStore& store = w.currentSession()->store();
        for (int b = 0; b < store.blockCount(); ++b) {
            const BlockCell c = store.cell(b, 10);
            QCOMPARE(heatmap->cellColor(b, 10) & 0xFFFFFFu, precisionColor(c.precision) & 0xFFFFFFu);
        }
        precision->trigger();
        QCOMPARE(heatmap->colorMode(), HeatmapView::ColorMode::sensitivity);
    }

    // Typing in the block table's filter limits the heatmap to the same blocks.
    void tableFilterAlsoFiltersTheHeatmap() {
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        auto* panel = w.findChild<BlockTablePanel*>();
        auto* heatmap = w.findChild<HeatmapView*>();
        QCOMPARE(heatmap->shownRowCount(), 6);
        QTest::keyClicks(panel->filterEdit(), QStringLiteral("blocks.3"));
        QCOMPARE(heatmap->shownRowCount(), 1);
        QCOMPARE(heatmap->blockOfRow(0), 3);
        panel->filterEdit()->clear();
        QCOMPARE(heatmap->shownRowCount(), 6);
    }

    void exportsWriteWhatIsShown() {
        MainWindow w;
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        auto* panel = w.findChild<BlockTablePanel*>();
        const QString csv = dir_.filePath(QStringLiteral("blocks.csv"));
        QCOMPARE(exportCsv(*panel->sourceModel(), csv), QString());
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 7);  // header + 6 blocks
        QVERIFY(lines[0].startsWith(panel->sourceModel()->headerData(0, Qt::Horizontal).toString()));
        QVERIFY(lines[2].contains(QStringLiteral("blocks.1")));
        QCOMPARE(csvField(QStringLiteral("a,b")), QStringLiteral("\"a,b\""));
        QCOMPARE(csvField(QStringLiteral("say \"x\"")), QStringLiteral("\"say \"\"x\"\"\""));
        // An unwritable path is reported, not silently ignored.
        QVERIFY(exportCsv(*panel->sourceModel(), QStringLiteral("/nonexistent-dir/x.csv"))
                    .contains(QStringLiteral("/nonexistent-dir/x.csv")));
    }

    // File ▸ Export event log as CSV… (the same action in the log's context menu) saves the shown
    // run's whole log through the path prompt: the header, then one line per entry in order, with
    // the step (empty when none), the time in UTC and the kind; fields are quoted where needed.
    void eventLogExportsAsCsv() {
        MainWindow w;
        w.show();
        w.openFile(fixture_);
        RunSession* s = w.currentSession();
        QTRY_VERIFY_WITH_TIMEOUT(s->state() == SourceState::loaded, 10000);
        w.refreshViews();
        const QString path = dir_.filePath(QStringLiteral("exported-events.csv"));
        QString suggested;
        w.setSavePathPrompt([&](const QString&, const QString& suggestion, const QString&) {
            suggested = suggestion;
            return QString(path);
        });
        QAction* action = actionNamed(w, QStringLiteral("Export &event log as CSV…"));
        QVERIFY(action != nullptr);
        QVERIFY(w.findChild<EventLogPanel*>()->view()->actions().contains(action));
        QVERIFY(action->isEnabled());
        action->trigger();
        QCOMPARE(suggested, QStringLiteral("fixture-run-events.csv"));
        QFile f(path);
        QVERIFY(f.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList lines = QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.value(0), QString::fromLatin1(kEventLogCsvHeader));
        const EventLog& log = s->events();
        QVERIFY(log.size() >= 2);  // the load, the replayed pin command
        QCOMPARE(std::size_t(lines.size()), log.size() + 1);
        const QRegularExpression utc(QStringLiteral("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$"));
        bool command_seen = false;
        for (std::size_t i = 0; i < log.size(); ++i) {
            const EventEntry& e = log.at(i);
            const QStringList fields = lines[int(i) + 1].split(QLatin1Char(','));
            QCOMPARE(fields.value(0), e.step >= 0 ? QString::number(e.step) : QString());
            QVERIFY2(utc.match(fields.value(1)).hasMatch(), qPrintable(lines[int(i) + 1]));
            QCOMPARE(fields.value(2), toString(e.category));
            command_seen |= e.category == EventCategory::command && fields.value(0) == QStringLiteral("60");
        }
        QVERIFY(command_seen);

        // Fields holding a comma, a quote or a line break are quoted (RFC 4180); no step, no time: empty.
        EventLog quoted;
        quoted.append({0.0,
                       -1,
                       EventCategory::warning,
                       QStringLiteral("a, b"),
                       {},
                       CommandState::none,
                       QStringLiteral("line 1\nline \"2\"")});
        const QString small = dir_.filePath(QStringLiteral("quoted-events.csv"));
        QCOMPARE(exportEventLogCsv(quoted, small), QString());
        QFile q(small);
        QVERIFY(q.open(QIODevice::ReadOnly | QIODevice::Text));
        QCOMPARE(QString::fromUtf8(q.readAll()),
                 QString::fromLatin1(kEventLogCsvHeader) +
                     QStringLiteral("\n,,warning,,\"a, b\",\"line 1\nline \"\"2\"\"\"\n"));
        // An unwritable path is reported.
        QVERIFY(exportEventLogCsv(quoted, QStringLiteral("/nonexistent-dir/e.csv"))
                    .contains(QStringLiteral("/nonexistent-dir")));
    }

    // The operator's path end to end: select a block in the table, press Pin INT8, the agent (a fake
    // ROUTER) gets exactly that command, and the log shows it pending, then applied; a rejection
    // shows the agent's reason.
    void pinFromTheUiReachesTheAgent() {
        sp::test::FakeAgent agent(dir_.path().toStdString());
        agent.start("ui-run");
        MainWindow w;
        w.show();
        QString error;
        QVERIFY2(w.connectTo({QString::fromStdString(agent.spec()), {}, {}}, &error), qPrintable(error));
        RunSession* s = w.currentSession();
        std::int64_t step = 10;
        QTRY_VERIFY_WITH_TIMEOUT((agent.publish_update(step += 10), s->store().updateCount() >= 2), 10000);
        w.refreshViews();
        QVERIFY(s->canControl());

        auto* panel = w.findChild<BlockTablePanel*>();
        panel->view()->selectRow(2);
        QAction* pin_int8 = actionNamed(w, QStringLiteral("Pin INT8"));
        QVERIFY(pin_int8->isEnabled());
        pin_int8->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(
            !agent.requests().empty() && agent.requests().back().find("\"cmd\":\"pin\"") != std::string::npos,
            5000);
        const std::string request = agent.requests().back();
        QVERIFY2(request.find("\"blocks\":[2]") != std::string::npos, request.c_str());
        QVERIFY2(request.find("\"precision\":\"int8\"") != std::string::npos, request.c_str());

        const EventLog& log = s->events();
        auto last_command = [&log]() -> const EventEntry* {
            for (std::size_t i = log.size(); i-- > 0;)
                if (!log.at(i).request_id.isEmpty()) return &log.at(i);
            return nullptr;
        };
        QVERIFY(last_command() != nullptr);
        QTRY_VERIFY_WITH_TIMEOUT(last_command()->state == CommandState::applied, 5000);

        // A pin per format: FP8 E5M2 reaches the agent as such.
        actionNamed(w, QStringLiteral("Pin FP8 E5M2"))->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(
            agent.requests().back().find("\"precision\":\"fp8_e5m2\"") != std::string::npos, 5000);
        QTRY_VERIFY_WITH_TIMEOUT(last_command()->state == CommandState::applied, 5000);
        // The mode switch and the budget target (the dialog answered by the test).
        actionNamed(w, QStringLiteral("Mode: budget"))->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(agent.requests().back().find("\"mode\":\"budget\"") != std::string::npos,
                                 5000);
        auto* control = w.findChild<sp::ui::ControlActions*>();
        QVERIFY(control != nullptr);
        // Once applied, the Mode menu checks budget (and nothing else).
        QTRY_VERIFY_WITH_TIMEOUT(last_command()->state == CommandState::applied, 5000);
        w.refreshViews();
        QVERIFY(actionNamed(w, QStringLiteral("Mode: budget"))->isChecked());
        QVERIFY(!actionNamed(w, QStringLiteral("Mode: dynamic"))->isChecked());
        double offered = -1;
        control->setTargetPrompt([&offered](double& target) {
            offered = target;  // the dialog opens at the agent's target, not at a constant
            target = 62.5;
            return true;
        });
        actionNamed(w, QStringLiteral("Budget target…"))->trigger();
        QCOMPARE(offered, s->budgetTargetPct());
        QTRY_VERIFY_WITH_TIMEOUT(agent.requests().back().find("\"cmd\":\"set_budget\"") != std::string::npos,
                                 5000);
        QVERIFY2(agent.requests().back().find("\"target_pct\":62.5") != std::string::npos,
                 agent.requests().back().c_str());
        // Applied: the status bar names the mode and the target in force.
        QTRY_VERIFY_WITH_TIMEOUT(last_command()->state == CommandState::applied, 5000);
        w.refreshViews();
        QCOMPARE(s->budgetTargetPct(), 62.5);
        QStringList status;
        for (const QLabel* label : w.statusBar()->findChildren<QLabel*>()) status << label->text();
        QVERIFY2(status.join(QLatin1Char('|')).contains(QStringLiteral("mode budget, target 62.5%")),
                 qPrintable(status.join(QLatin1Char('|'))));
        // The tolerance mode and its loss tolerance, from the Control menu (POLICY.md rule 23).
        actionNamed(w, QStringLiteral("Mode: tolerance"))->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(agent.requests().back().find("\"mode\":\"tolerance\"") != std::string::npos,
                                 5000);
        QTRY_VERIFY_WITH_TIMEOUT(last_command()->state == CommandState::applied, 5000);
        double offered_tolerance = -1;
        control->setTolerancePrompt([&offered_tolerance](double& pct) {
            offered_tolerance = pct;
            pct = 0.3;
            return true;
        });
        actionNamed(w, QStringLiteral("Loss tolerance…"))->trigger();
        QCOMPARE(offered_tolerance, s->lossTolerancePct());  // the agent's tolerance (the config's 0.5)
        QTRY_VERIFY_WITH_TIMEOUT(
            agent.requests().back().find("\"cmd\":\"set_tolerance\"") != std::string::npos, 5000);
        QVERIFY2(agent.requests().back().find("\"loss_tolerance_pct\":0.3") != std::string::npos,
                 agent.requests().back().c_str());
        QTRY_VERIFY_WITH_TIMEOUT(last_command()->state == CommandState::applied, 5000);
        w.refreshViews();
        QCOMPARE(s->lossTolerancePct(), 0.3);
        QVERIFY(actionNamed(w, QStringLiteral("Mode: tolerance"))->isChecked());
        status.clear();
        for (const QLabel* label : w.statusBar()->findChildren<QLabel*>()) status << label->text();
        QVERIFY2(status.join(QLatin1Char('|'))
                     .contains(QStringLiteral("mode tolerance, loss tolerance 0.3% · compute scope")),
                 qPrintable(status.join(QLatin1Char('|'))));

        agent.set_command_behaviour(sp::test::FakeAgent::CommandBehaviour::reject, "block 2 is busy");
        actionNamed(w, QStringLiteral("Pin BF16"))->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(last_command()->state == CommandState::rejected, 5000);
        QVERIFY2(last_command()->detail.contains(QStringLiteral("block 2 is busy")) ||
                     last_command()->text.contains(QStringLiteral("block 2 is busy")),
                 qPrintable(last_command()->detail));
        for (RunSession* session : w.sessions()) session->stop();
        agent.stop();
    }

    // Pinning a block the policy keeps at BF16 to a cheaper format asks first, saying how sensitive
    // the block is and what the pin saves; cancelled, nothing is sent, confirmed, the pin goes out.
    void riskyPinAsksFirst() {
        sp::test::FakeAgent agent(dir_.path().toStdString());
        agent.start("risky-run");
        MainWindow w;
        w.show();
        QString error;
        QVERIFY2(w.connectTo({QString::fromStdString(agent.spec()), {}, {}}, &error), qPrintable(error));
        RunSession* s = w.currentSession();
        sp::UpdateRecord hot = sp::test::make_update(4, 20);
        hot.block_details[1].precision = sp::Precision::bf16;
        hot.block_details[1].sensitivity = 0.9;  // above the default bf16_threshold, 0.6
        QTRY_VERIFY_WITH_TIMEOUT(
            (agent.publish_update(hot), s->store().updateCount() >= 1 && s->canControl()), 10000);
        w.refreshViews();
        const auto pins = [&agent] {
            std::vector<std::vector<int>> out;
            for (const auto& r : agent.parsed_requests())
                if (r.kind == sp::protocol::Request::Kind::command) out.push_back(r.command.blocks);
            return out;
        };
        QStringList asked;
        bool confirm = false;
        w.findChild<ControlActions*>()->setConfirmPrompt([&](const QString& text) {
            asked << text;
            return confirm;
        });
        auto* panel = w.findChild<BlockTablePanel*>();
        panel->view()->selectRow(0);  // a calm block: no question
        actionNamed(w, QStringLiteral("Pin INT8"))->trigger();
        QVERIFY(asked.isEmpty());
        QTRY_VERIFY_WITH_TIMEOUT(pins().size() == 1, 5000);

        panel->view()->selectRow(1);
        actionNamed(w, QStringLiteral("Pin INT8"))->trigger();
        QCOMPARE(asked.size(), 1);
        QVERIFY2(asked[0].contains("blocks.1: sensitivity 0.900") &&
                     asked[0].contains("bf16_threshold 0.6") && asked[0].contains("-> ") &&
                     asked[0].contains("no calibrated INT8 error or SNR estimate in this run"),
                 qPrintable(asked[0]));
        QTest::qWait(200);
        QCOMPARE(pins().size(), std::size_t(1));  // cancelled: nothing sent

        confirm = true;
        actionNamed(w, QStringLiteral("Pin INT8"))->trigger();
        QTRY_VERIFY_WITH_TIMEOUT(pins().size() == 2, 5000);
        QCOMPARE(pins().back(), std::vector<int>{1});
    }

    void rendersAtBothSizes() {
        for (const QSize& size : {QSize(1600, 1000), QSize(1280, 800)}) {
            MainWindow w;
            w.resize(size);
            w.show();
            w.openFile(fixture_);
            QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
            const QImage image = w.renderWindow();
            QCOMPARE(image.size(), size * w.devicePixelRatio());
            if (qEnvironmentVariableIsSet("SP_SCREENSHOT_DIR"))  // for looking at it
                image.save(QStringLiteral("%1/main_window_%2x%3.png")
                               .arg(qEnvironmentVariable("SP_SCREENSHOT_DIR"))
                               .arg(size.width())
                               .arg(size.height()));
        }
    }
};

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
