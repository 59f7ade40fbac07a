// The what-if panel: a recorded run re-simulated under other thresholds routes exactly as
// `sp-ctl simulate --config` does with the same settings, and differs from the recording.
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLineSeries>
#include <QProcess>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chart_layout_checks.h"
#include "fake_telemetry_source.h"
#include "sp/jsonl.h"
#include "sp/simulator.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/main_window.h"
#include "sp/ui/replay_source.h"
#include "sp/ui/run_session.h"
#include "sp/ui/what_if_panel.h"

using namespace sp::ui;

namespace {

constexpr int kBlocks = 4;
constexpr int kSteps = 120;

sp::Config recordedConfig() {
    sp::Config c;
    c.warmup_steps = 5;
    c.update_interval_steps = 5;
    c.min_steps_between_switches = 10;
    c.run_calibration = false;
    return c;
}

// A run recorded with per-step statistics: block b's gradient norm grows with b and wobbles with
// the step, so the blocks sit at different sensitivities and some cross the thresholds. The
// recorded update records are the policy's own on these statistics (core's simulate), interleaved
// as the agent writes them.
void writeRecordedRun(const std::string& path) {
    sp::RunHeader h;
    h.run_id = "what-if-run";
    h.producer = "test";
    h.blocks = sp::uniform_layout(kBlocks, 4096);
    h.config_json = sp::to_json(recordedConfig()).dump();
    std::vector<sp::StepStatsRecord> stats;
    for (int step = 0; step < kSteps; ++step) {
        sp::StepStatsRecord s;
        s.step = step;
        s.timestamp = 1.7e9 + step;
        for (int b = 0; b < kBlocks; ++b) {
            const double l2 = (0.2 + 0.5 * b) * (1.0 + 0.3 * std::sin(0.1 * step + b));
            s.blocks.push_back({b, l2, l2 / 50, l2 * l2 / 4096, 0.0, 4096, 0});
        }
        stats.push_back(std::move(s));
    }
    std::stringstream only_stats;
    only_stats << sp::to_json_line(sp::TelemetryRecord(h)) << '\n';
    for (const auto& s : stats) only_stats << sp::to_json_line(s) << '\n';
    const sp::SimulationResult recorded = sp::simulate(only_stats, "stats", sp::SimulationOptions{});
    sp::JsonlWriter out(path, sp::JsonlWriter::OpenMode::truncate);
    out.write(h);
    std::size_t next = 0;
    for (const auto& s : stats) {
        out.write(s);
        if (next < recorded.records.size() && recorded.records[next].step_id == s.step)
            out.write(recorded.records[next++]);
    }
}

}  // namespace

class TestWhatIf : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);  // the window's QSettings go to a throwaway location
        registerUiMetaTypes();
    }

    // Issue 30, defect 10: a what-if still running when the run shown changes is cancelled, and
    // its result (the old run's) is never presented on the new one. The worker's result reaches
    // the panel through the GUI thread's event loop, so switching right after run() always comes
    // first; `running()` turning false is the event that the result was handled.
    void switchingRunsDropsTheRunningWhatIf() {
        QTemporaryDir dir;
        const QString first = dir.filePath("first.jsonl"), second = dir.filePath("second.jsonl");
        writeRecordedRun(first.toStdString());
        writeRecordedRun(second.toStdString());
        RunSession a(std::make_unique<ReplaySource>(first)), b(std::make_unique<ReplaySource>(second));
        for (RunSession* s : {&a, &b}) {
            QSignalSpy loaded(s, &RunSession::loadFinished);
            s->start();
            QVERIFY(loaded.wait(20000));
        }
        WhatIfPanel panel;
        panel.setSession(&a);
        QSignalSpy finished(&panel, &WhatIfPanel::finished);
        panel.run();
        QVERIFY(panel.running());
        panel.setSession(&b);
        QTRY_VERIFY_WITH_TIMEOUT(!panel.running(), 20000);
        QCOMPARE(finished.count(), 0);
        QVERIFY(!panel.result().has_value());
        // The new run re-simulates normally.
        panel.run();
        QVERIFY(finished.wait(20000));
        QVERIFY(panel.result().has_value() && panel.result()->error.empty());
    }

    // The budget box starts at the run's target in force (a set_budget the run applied, not the
    // header's config) and follows it while the operator has not typed another (issue 45, item 7).
    void budgetBoxFollowsTheTargetInForce() {
        auto owned = std::make_unique<sp::test::FakeTelemetrySource>(true);
        sp::test::FakeTelemetrySource* source = owned.get();
        RunSession session(std::move(owned));
        source->state(SourceState::live);
        sp::RunHeader header = sp::test::runHeader("budget-run", kBlocks);
        header.config_json = R"({"mode":"budget","budget_target_pct":50.0})";
        source->header(header);
        const auto update_with_target = [](std::int64_t step, double target) {
            sp::UpdateRecord r = sp::test::uniformUpdate(step, kBlocks);
            r.mode = sp::Mode::budget;
            r.budget_target_pct = target;
            return r;
        };
        source->records({update_with_target(10, 70.0)});
        WhatIfPanel panel;
        panel.setSession(&session);
        QCOMPARE(panel.settings().budget_target_pct, 70.0);
        source->records({update_with_target(20, 80.0)});
        panel.refresh();
        QCOMPARE(panel.settings().budget_target_pct, 80.0);
        WhatIfSettings mine = panel.settings();
        mine.budget_target_pct = 60.0;  // the operator's own value stays
        panel.setSettings(mine);
        source->records({update_with_target(30, 90.0)});
        panel.refresh();
        QCOMPARE(panel.settings().budget_target_pct, 60.0);
    }

    // Cancelling stops the simulation itself, not only its presentation.
    void aCancelledSimulationStops() {
        QTemporaryDir dir;
        const QString file = dir.filePath("recorded.jsonl");
        writeRecordedRun(file.toStdString());
        auto cancel = std::make_shared<std::atomic<bool>>(true);
        const WhatIfResult r = simulateWhatIf(file.toStdString(), recordedConfig(), cancel);
        QVERIFY(r.cancelled);
        QVERIFY(r.records.empty());
        QVERIFY2(r.error.find("cancelled") != std::string::npos, r.error.c_str());
    }

    void routingEqualsSpCtlSimulateUnderTheSameSettings() {
        QTemporaryDir dir;
        const QString file = dir.filePath("recorded.jsonl");
        writeRecordedRun(file.toStdString());
        RunSession session(std::make_unique<ReplaySource>(file));
        QSignalSpy loaded(&session, &RunSession::loadFinished);
        session.start();
        QVERIFY(loaded.wait(20000));
        QCOMPARE(session.stepStatsSeen(), std::uint64_t(kSteps));

        WhatIfPanel panel;
        panel.setSession(&session);
        QCOMPARE(panel.settings().bf16_threshold, recordedConfig().bf16_threshold);  // the run's own
        WhatIfSettings lower = panel.settings();
        lower.bf16_threshold = 0.9;  // fewer blocks kept at BF16
        lower.int8_threshold = 0.8;
        lower.hysteresis_margin = 0.05;
        panel.setSettings(lower);
        QSignalSpy finished(&panel, &WhatIfPanel::finished);
        panel.run();
        QVERIFY(finished.wait(20000));
        QVERIFY(panel.result().has_value());
        QVERIFY2(panel.result()->error.empty(), panel.result()->error.c_str());
        const std::vector<sp::UpdateRecord>& what_if = panel.result()->records;

        // sp-ctl simulate with the same config gives the same routing, update by update.
        const QString config = dir.filePath("what_if_config.json");
        std::ofstream(config.toStdString()) << sp::to_json(applyWhatIf(session.runConfig(), lower)).dump();
        QProcess sim;
        sim.start(QStringLiteral(SP_CTL_PATH), {"simulate", "--config", config, "--stats", file});
        QVERIFY(sim.waitForFinished(120000));
        QVERIFY2(sim.exitStatus() == QProcess::NormalExit && sim.exitCode() == 0,
                 sim.readAllStandardError().constData());
        const QList<QByteArray> lines = sim.readAllStandardOutput().trimmed().split('\n');
        QCOMPARE(std::size_t(lines.size()), what_if.size());
        bool differs = false;
        for (std::size_t u = 0; u < what_if.size(); ++u) {
            const auto j = nlohmann::json::parse(lines[int(u)].toStdString());
            QCOMPARE(j["step_id"].get<std::int64_t>(), what_if[u].step_id);
            for (const sp::BlockDetail& d : what_if[u].block_details) {
                const std::string p = j["block_details"][std::to_string(d.id)]["precision"];
                QCOMPARE(QString::fromStdString(p), QString::fromLatin1(sp::to_string(d.precision).data()));
            }
            const std::size_t recorded =
                u < session.store().updateCount() ? u : session.store().updateCount() - 1;
            for (const sp::BlockDetail& d : what_if[u].block_details)
                differs |= session.store().cell(d.id, recorded).precision != d.precision;
        }
        QVERIFY2(differs, "the changed thresholds should route differently from the recording");

        // The panel says so: the summary compares, the table marks each block's final precision.
        QVERIFY(panel.summaryLabel()->text().contains("what-if"));
        QCOMPARE(panel.table()->rowCount(), kBlocks);
        QCOMPARE(panel.table()->item(0, 0)->text(), QString("blocks.0"));
    }

    // In the window, the what-if's saving is drawn over the recorded one on the saving chart.
    void theWindowOverlaysTheWhatIfSaving() {
        QTemporaryDir dir;
        const QString file = dir.filePath("recorded.jsonl");
        writeRecordedRun(file.toStdString());
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(file);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        auto* panel = w.findChild<WhatIfPanel*>();
        auto* charts = w.findChild<ChartsPanel*>();
        const QString name = QStringLiteral("what-if: estimated");
        QVERIFY(!charts->linePoints(ChartsPanel::Chart::saving, name));
        WhatIfSettings s = panel->settings();
        s.bf16_threshold = 0.9;
        s.int8_threshold = 0.8;
        panel->setSettings(s);
        QSignalSpy finished(panel, &WhatIfPanel::finished);
        panel->run();
        QVERIFY(finished.wait(20000));
        w.refreshViews();
        const auto points = charts->linePoints(ChartsPanel::Chart::saving, name);
        QVERIFY(points && !points->isEmpty());
        QCOMPARE(points->last().x(), double(panel->result()->records.back().step_id));
        // Its colour is another colour than every other line's and mark's on the chart (issue item 7:
        // a light orange beside the orange "measured"): CIE76 distance at least 40.
        QChart* chart = charts->chartView(ChartsPanel::Chart::saving)->chart();
        QColor what_if;
        for (QAbstractSeries* series : chart->series())
            if (series->name() == name) what_if = qobject_cast<QLineSeries*>(series)->pen().color();
        QVERIFY(what_if.isValid());
        for (QAbstractSeries* series : chart->series()) {
            if (series->name() == name || series->name().isEmpty()) continue;
            auto* line = qobject_cast<QLineSeries*>(series);
            auto* marks = qobject_cast<QScatterSeries*>(series);
            const QColor other = marks ? marks->color() : line ? line->pen().color() : QColor();
            if (!other.isValid()) continue;
            const double distance = sp::test::colorDistance(what_if, other);
            QVERIFY2(
                distance >= 40,
                qPrintable(QStringLiteral("%1 is %2 from the what-if").arg(series->name()).arg(distance)));
        }
    }

    void aLiveRunOrAFileWithoutStatisticsCannotBeTried() {
        QTemporaryDir dir;
        const QString file = dir.filePath("no_stats.jsonl");
        {
            sp::JsonlWriter out(file.toStdString(), sp::JsonlWriter::OpenMode::truncate);
            sp::RunHeader h;
            h.run_id = "r";
            h.blocks = sp::uniform_layout(2, 1024);
            out.write(h);
        }
        RunSession session(std::make_unique<ReplaySource>(file));
        QSignalSpy loaded(&session, &RunSession::loadFinished);
        session.start();
        QVERIFY(loaded.wait(20000));
        WhatIfPanel panel;
        panel.setSession(&session);
        QSignalSpy finished(&panel, &WhatIfPanel::finished);
        panel.run();
        QCOMPARE(finished.count(), 0);
        QVERIFY(!panel.result().has_value());
        QVERIFY(panel.summaryLabel()->text().contains("--every-step-stats"));
    }
};

QTEST_MAIN(TestWhatIf)
#include "test_what_if.moc"
