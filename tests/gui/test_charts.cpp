// ChartsPanel over a store filled directly: series match the store, decimation bounds long runs,
// the loss chart disappears when the run has no loss, refresh is a no-op when nothing changed.
// Then the extras: eval loss at its eval_step, hover readout, loss smoothing, log scales, axis titles,
// tooltips, and (over a replayed session) the thresholds and the switch/command/rollback marks.
#include <QtTest>

#include <cmath>
#include <fstream>
#include <vector>

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QSlider>
#include <QTemporaryDir>
#include <QValueAxis>

#include "chart_test_data.h"
#include "sp/jsonl.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/replay_source.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_store.h"

using namespace sp::ui;
using sp::test::fill;
using sp::test::kBlocks;
using sp::test::makeRecord;
using sp::test::Options;
using sp::test::seriesNamed;

namespace {

bool attachedToLogAxis(QAbstractSeries* s) {
    for (QAbstractAxis* a : s->attachedAxes())
        if (a->orientation() == Qt::Vertical) return qobject_cast<QLogValueAxis*>(a) != nullptr;
    return false;
}

// TensorBoard's debiased EMA, written out independently of the panel's.
std::vector<double> tensorBoardEma(const std::vector<double>& v, double w) {
    std::vector<double> out;
    double last = 0.0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        last = last * w + (1.0 - w) * v[i];
        out.push_back(last / (1.0 - std::pow(w, double(i + 1))));
    }
    return out;
}

// A small recorded run: a header whose config moves the thresholds, updates every 4 steps with
// precision changes at steps 8 and 24, an applied command at step 12, a rejected one at 16 and a
// rollback at step 20.
void writeSyntheticRun(const QString& path) {
    std::ofstream out(path.toStdString());
    sp::RunHeader h;
    h.run_id = "charts-test";
    h.blocks = sp::uniform_layout(kBlocks);
    h.config_json = R"({"bf16_threshold":0.7,"int8_threshold":0.4,"hysteresis_margin":0.05})";
    out << sp::to_json_line(h) << '\n';
    for (std::size_t u = 0; u < 10; ++u) {
        sp::UpdateRecord r = makeRecord(u, {});
        r.precision_changes = r.step_id == 8 || r.step_id == 24 ? 2 : 0;
        out << sp::to_json_line(r) << '\n';
        if (r.step_id == 12)
            out << R"({"type":"event","kind":"command","step":12,"timestamp":61.0,"id":"a","ok":true})"
                << '\n';
        if (r.step_id == 16)
            out << R"({"type":"event","kind":"command","step":16,"timestamp":62.0,"id":"b","ok":false,)"
                << R"("error":"no"})" << '\n';
        if (r.step_id == 20)
            out << R"({"type":"event","kind":"rollback","step":20,"timestamp":63.0,"trigger":"spike","blocks":[1]})"
                << '\n';
    }
}

}  // namespace

class TestCharts : public QObject {
    Q_OBJECT
  private:
    TelemetryStore store_;
    std::unique_ptr<ChartsPanel> panel_;

    void makePanel() {
        panel_ = std::make_unique<ChartsPanel>();
        panel_->resize(900, 1100);
        panel_->show();
        QVERIFY(QTest::qWaitForWindowExposed(panel_.get()));
        panel_->setStore(&store_);
        panel_->refresh();
    }

  private slots:
    void seriesMatchTheStore() {
        fill(store_, 60);
        makePanel();
        const auto est = panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("estimated"));
        QVERIFY(est);
        QCOMPARE(est->size(), qsizetype(60));
        for (std::size_t u = 0; u < 60; ++u) {
            QCOMPARE(est->at(qsizetype(u)).x(), double(store_.row(u).step));
            QCOMPARE(est->at(qsizetype(u)).y(), double(store_.row(u).estimated_saving_pct));
        }
        const auto meas = panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("measured"));
        QVERIFY(meas);
        QCOMPARE(meas->at(7).y(), 5.0 + 7.0);
        const auto int8 = panel_->linePoints(ChartsPanel::Chart::precision, QStringLiteral("INT8"));
        const auto bf16 = panel_->linePoints(ChartsPanel::Chart::precision, QStringLiteral("BF16"));
        const auto fp8 = panel_->linePoints(ChartsPanel::Chart::precision, QStringLiteral("FP8"));
        QVERIFY(int8 && bf16 && fp8);
        for (std::size_t u = 0; u < 60; ++u) {
            QCOMPARE(int8->at(qsizetype(u)).y(), double(u % 3));
            QCOMPARE(fp8->at(qsizetype(u)).y(), double(u % 2));
            QCOMPARE(bf16->at(qsizetype(u)).y(), double(store_.row(u).blocks_bf16));
        }
        // Eval loss is sparse: its line joins the evaluated updates only.
        const auto eval = panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("eval loss"));
        QVERIFY(eval);
        QCOMPARE(eval->size(), qsizetype(6));
        QVERIFY(!panel_->chartView(ChartsPanel::Chart::loss)->isHidden());
        QCOMPARE(panel_->chartViews().size(), std::size_t(5));
    }

    void selectedBlocksAreDrawn() {
        fill(store_, 40);
        makePanel();
        QVERIFY(!panel_->linePoints(ChartsPanel::Chart::sensitivity, QStringLiteral("blocks.1")));
        panel_->setSelectedBlocks({3, 1});
        for (int b : {1, 3}) {
            const QString name = QStringLiteral("blocks.%1").arg(b);
            const auto sens = panel_->linePoints(ChartsPanel::Chart::sensitivity, name);
            const auto l2 = panel_->linePoints(ChartsPanel::Chart::gradient, name);
            QVERIFY(sens && l2);
            QCOMPARE(sens->size(), qsizetype(40));
            for (std::size_t u = 0; u < 40; ++u) {
                QCOMPARE(float(sens->at(qsizetype(u)).y()), store_.value(b, u, BlockField::sensitivity));
                QCOMPARE(float(l2->at(qsizetype(u)).y()), store_.value(b, u, BlockField::l2_norm));
            }
        }
        panel_->setSelectedBlocks({1});
        QVERIFY(!panel_->linePoints(ChartsPanel::Chart::sensitivity, QStringLiteral("blocks.3")));
        QVERIFY(panel_->linePoints(ChartsPanel::Chart::gradient, QStringLiteral("blocks.1")));
    }

    void newUpdatesAndCursor() {
        fill(store_, 30);
        makePanel();
        for (std::size_t u = 30; u < 45; ++u) store_.append(makeRecord(u, {}));
        panel_->refresh();
        QCOMPARE(panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("estimated"))->size(),
                 qsizetype(45));
        panel_->setTimelineCursor(10);
        const auto est = panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("estimated"));
        QCOMPARE(est->size(), qsizetype(10));
        QCOMPARE(est->back().x(), double(store_.row(9).step));
        panel_->setTimelineCursor(ChartsPanel::kNoCursor);
        QCOMPARE(panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("estimated"))->size(),
                 qsizetype(45));
    }

    void refreshIsANoOpWhenNothingChanged() {
        fill(store_, 30);
        makePanel();
        auto* series = qobject_cast<QLineSeries*>(
            panel_->chartView(ChartsPanel::Chart::saving)->chart()->series().at(0));
        QVERIFY(series);
        QSignalSpy replaced(series, &QLineSeries::pointsReplaced);
        panel_->refresh();
        panel_->refresh();
        QCOMPARE(replaced.count(), 0);
        store_.append(makeRecord(30, {}));
        panel_->refresh();
        QCOMPARE(replaced.count(), 1);
    }

    void decimationBoundsLongRuns() {
        fill(store_, 100000);
        makePanel();
        panel_->setSelectedBlocks({0, 2, 4});
        const auto est = panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("estimated"));
        QVERIFY(est);
        const auto width =
            qsizetype(panel_->chartView(ChartsPanel::Chart::saving)->chart()->plotArea().width());
        QVERIFY(width > 100);
        QVERIFY2(est->size() <= 2 * (width + 16) + 2, qPrintable(QString::number(est->size())));
        // The extremes survive: the estimate's range is 10..26 (u % 17).
        double lo = 1e9, hi = -1e9;
        for (const QPointF& p : *est) {
            lo = std::min(lo, p.y());
            hi = std::max(hi, p.y());
        }
        QCOMPARE(lo, 10.0);
        QCOMPARE(hi, 26.0);
        // Every line of every chart is bounded: 2 sav + 3 prec + 3 + 3 selected + 2 loss lines, each
        // loss line twice (smoothed and raw).
        QVERIFY2(panel_->drawnPointCount() <= 15 * (2 * (width + 16) + 2),
                 qPrintable(QString::number(panel_->drawnPointCount())));
        QVERIFY(panel_->drawnPointCount() > 1000);
    }

    void lossChartAbsentWithoutLoss() {
        fill(store_, 50, Options{false, false});
        makePanel();
        QVERIFY(panel_->chartView(ChartsPanel::Chart::loss)->isHidden());
        QCOMPARE(panel_->chartViews().size(), std::size_t(4));
        QVERIFY(!panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("train loss")));
        // Without measured bytes the measured line is not drawn (nor in the legend).
        QVERIFY(!panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("measured")));
        QVERIFY(panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("estimated")));
        // A run with loss brings the chart back.
        fill(store_, 50);
        panel_->resetData();
        QVERIFY(!panel_->chartView(ChartsPanel::Chart::loss)->isHidden());
        QCOMPARE(panel_->chartViews().size(), std::size_t(5));
    }

    void themeAndExport() {
        fill(store_, 20);
        makePanel();
        panel_->setDarkTheme(true);
        QVERIFY(panel_->darkTheme());
        QCOMPARE(panel_->chartView(ChartsPanel::Chart::saving)->chart()->theme(), QChart::ChartThemeDark);
        // Theme changes keep our colours (the theme would otherwise recolour the series).
        auto* series = qobject_cast<QLineSeries*>(
            panel_->chartView(ChartsPanel::Chart::saving)->chart()->series().at(0));
        QCOMPARE(series->pen().color(), QColor(0x00, 0x72, 0xB2));
        const QImage image = panel_->renderToImage();
        QCOMPARE(image.size(), panel_->size() * panel_->devicePixelRatio());
    }

    // The eval loss measured before training (eval_step 0) rides on the first update record (step 10)
    // and is drawn at step 0; a record without eval_step keeps its eval at its own step.
    void evalLossDrawnAtItsEvalStep() {
        store_.reset(sp::uniform_layout(kBlocks));
        for (std::int64_t step : {10, 20, 30}) {
            sp::UpdateRecord r;
            r.step_id = step;
            r.timestamp = 50.0 + double(step);
            r.train_loss = 3.0;
            if (step == 10) {
                r.eval_loss = 3.5;
                r.eval_step = 0;
            }
            if (step == 30) r.eval_loss = 2.5;  // older files: no eval_step
            store_.append(r);
        }
        makePanel();
        panel_->setLossSmoothing(0.0);
        const auto eval = panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("eval loss"));
        QVERIFY(eval);
        QCOMPARE(*eval, (QList<QPointF>{{0.0, 3.5}, {30.0, 2.5}}));
        // The x axis reaches back to it.
        auto* x = qobject_cast<QValueAxis*>(
            panel_->chartView(ChartsPanel::Chart::loss)->chart()->axes(Qt::Horizontal).at(0));
        QVERIFY(x && x->min() <= 0.0);
    }

    void readoutNamesEveryLineAtTheNearestStep() {
        fill(store_, 60);  // steps 0, 4, 8, ...
        makePanel();
        panel_->setLossSmoothing(0.0);
        panel_->setSelectedBlocks({1});
        using C = ChartsPanel::Chart;
        // 41 is nearest to step 40 (update 10): estimated 10 + 10 % 17, measured 5 + 10 % 11.
        QCOMPARE(panel_->readoutAt(C::saving, 41.0),
                 QStringLiteral("step 40 · estimated 20.0% · measured 15.0%"));
        QCOMPARE(panel_->readoutAt(C::precision, 42.5),
                 QStringLiteral("step 44 · BF16 2 · INT8 2 · FP8 1 · INT4 0"));
        const float sens = store_.value(1, 10, BlockField::sensitivity);
        QCOMPARE(panel_->readoutAt(C::sensitivity, 40.0),
                 QStringLiteral("step 40 · blocks.1 %1").arg(double(sens), 0, 'g', 4));
        QCOMPARE(panel_->readoutAt(C::gradient, 40.0), QStringLiteral("step 40 · blocks.1 1.5"));
        // Eval loss is sparse: the latest measured, with its step when it is another.
        QCOMPARE(panel_->readoutAt(C::loss, 40.0),
                 QStringLiteral("step 40 · train loss 2.99 · eval loss 3.19"));
        QCOMPARE(panel_->readoutAt(C::loss, 44.0),
                 QStringLiteral("step 44 · train loss 2.989 · eval loss 3.19 (step 40)"));
        QCOMPARE(panel_->readoutAt(C::saving, -100.0).left(7), QStringLiteral("step 0 "));
        QCOMPARE(panel_->readoutAt(C::saving, 1e9).left(9), QStringLiteral("step 236 "));

        // The mouse over a plot shows it; leaving hides it.
        QChartView* view = panel_->chartView(C::saving);
        const QRectF plot = view->chart()->plotArea();
        const QPoint inside = view->mapFromScene(view->chart()->mapToScene(plot.center()));
        QTest::mouseMove(view->viewport(), inside);
        QTRY_VERIFY(panel_->hoverText(C::saving).startsWith(QStringLiteral("step ")));
        QVERIFY(panel_->hoverText(C::saving).contains(QStringLiteral("estimated")));
        QEvent leave(QEvent::Leave);
        QCoreApplication::sendEvent(view->viewport(), &leave);
        QVERIFY(panel_->hoverText(C::saving).isEmpty());
    }

    void lossSmoothingIsTheTensorBoardEma() {
        fill(store_, 60);
        makePanel();
        QCOMPARE(panel_->lossSmoothing(), ChartsPanel::kDefaultSmoothing);
        std::vector<double> raw;
        for (std::size_t u = 0; u < 60; ++u) raw.push_back(double(store_.row(u).train_loss));
        for (double w : {ChartsPanel::kDefaultSmoothing, 0.9}) {
            panel_->setLossSmoothing(w);
            const std::vector<double> expected = tensorBoardEma(raw, w);
            const auto smoothed = panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("train loss"));
            const auto faint =
                panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("train loss (raw)"));
            QVERIFY(smoothed && faint);
            QCOMPARE(smoothed->size(), qsizetype(60));
            for (std::size_t u = 0; u < 60; ++u) {
                QCOMPARE(float(smoothed->at(qsizetype(u)).y()), float(expected[u]));
                QCOMPARE(faint->at(qsizetype(u)).y(), raw[u]);
            }
        }
        // Another run's loss (compare) is smoothed alike.
        panel_->setLossSmoothing(0.5);
        panel_->setOverlays({{ChartsPanel::Chart::loss,
                              QStringLiteral("other: train loss"),
                              {0.0, 4.0, 8.0},
                              {3.0f, 2.0f, 1.0f},
                              0xFF000000u}});
        const auto other = panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("other: train loss"));
        QVERIFY(other);
        const std::vector<double> other_expected = tensorBoardEma({3.0, 2.0, 1.0}, 0.5);
        QCOMPARE(other->size(), qsizetype(3));
        for (qsizetype i = 0; i < 3; ++i)
            QCOMPARE(float(other->at(i).y()), float(other_expected[std::size_t(i)]));
        // The slider drives it; 0 draws the raw line alone.
        panel_->smoothingSlider()->setValue(0);
        QCOMPARE(panel_->lossSmoothing(), 0.0);
        QVERIFY(!panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("train loss (raw)")));
        QCOMPARE(panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("train loss"))->at(5).y(),
                 raw[5]);
        panel_->setLossSmoothing(5.0);  // clamped
        QCOMPARE(panel_->lossSmoothing(), ChartsPanel::kMaxSmoothing);
        QCOMPARE(panel_->smoothingSlider()->value(), 99);
    }

    void logScaleSwitchesTheAxis() {
        fill(store_, 40);
        store_.append([] {  // a non-positive loss has no place on a log axis
            sp::UpdateRecord r = makeRecord(40, {});
            r.train_loss = 0.0;
            return r;
        }());
        makePanel();
        panel_->setLossSmoothing(0.0);
        panel_->setSelectedBlocks({0});
        using C = ChartsPanel::Chart;
        QChart* loss = panel_->chartView(C::loss)->chart();
        QVERIFY(!attachedToLogAxis(seriesNamed(loss, QStringLiteral("train loss"))));
        panel_->setLogScale(C::loss, true);
        QVERIFY(panel_->logScale(C::loss));
        QVERIFY(panel_->logScaleBox(C::loss)->isChecked());
        QVERIFY(attachedToLogAxis(seriesNamed(loss, QStringLiteral("train loss"))));
        QCOMPARE(panel_->linePoints(C::loss, QStringLiteral("train loss"))->size(), qsizetype(40));
        for (QAbstractAxis* a : loss->axes(Qt::Vertical))
            QCOMPARE(a->isVisible(), qobject_cast<QLogValueAxis*>(a) != nullptr);
        // The check box switches back; the gradient chart has its own.
        panel_->logScaleBox(C::loss)->setChecked(false);
        QVERIFY(!panel_->logScale(C::loss));
        QVERIFY(!attachedToLogAxis(seriesNamed(loss, QStringLiteral("train loss"))));
        QCOMPARE(panel_->linePoints(C::loss, QStringLiteral("train loss"))->size(), qsizetype(41));
        panel_->logScaleBox(C::gradient)->setChecked(true);
        QVERIFY(attachedToLogAxis(
            seriesNamed(panel_->chartView(C::gradient)->chart(), QStringLiteral("blocks.0"))));
        panel_->setLogScale(C::saving, true);  // not offered there
        QVERIFY(!panel_->logScale(C::saving));
        QVERIFY(!panel_->logScaleBox(C::saving));
    }

    void axesAreTitledAndChartsExplained() {
        fill(store_, 10);
        makePanel();
        using C = ChartsPanel::Chart;
        const std::vector<std::pair<C, QString>> titles = {{C::saving, QStringLiteral("saving (%)")},
                                                           {C::precision, QStringLiteral("blocks")},
                                                           {C::sensitivity, QStringLiteral("sensitivity")},
                                                           {C::gradient, QStringLiteral("gradient L2")},
                                                           {C::loss, QStringLiteral("loss")}};
        for (const auto& [chart, title] : titles) {
            QChart* c = panel_->chartView(chart)->chart();
            QAbstractAxis* x = c->axes(Qt::Horizontal).at(0);
            QAbstractAxis* y = c->axes(Qt::Vertical).at(0);
            QCOMPARE(x->titleText(), QStringLiteral("step"));
            QCOMPARE(y->titleText(), title);
            QTRY_VERIFY(x->isTitleVisible() && y->isTitleVisible());  // fitted once laid out
            QVERIFY(!panel_->chartView(chart)->toolTip().isEmpty());
        }
        const QString saving = panel_->chartView(C::saving)->toolTip();
        for (const char* word :
             {"estimated: from element widths", "measured: from the bytes", "budget target"})
            QVERIFY2(saving.contains(QLatin1String(word)), word);
    }

    // Over a replayed session: the thresholds of the run's config (POLICY.md rule 6: BF16 → INT8
    // below int8_threshold − margin, INT8 → BF16 at bf16_threshold, hold between) and the marks.
    void thresholdsAndMarkersFromASession() {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("run.jsonl"));
        writeSyntheticRun(path);
        RunSession session(std::make_unique<ReplaySource>(path));
        QSignalSpy finished(&session, &RunSession::loadFinished);
        session.start();
        QVERIFY(finished.count() > 0 || finished.wait(20000));
        makePanel();
        panel_->setSession(&session);
        panel_->refresh();
        using C = ChartsPanel::Chart;
        const auto t = panel_->thresholds();
        QCOMPARE(t.size(), std::size_t(3));
        QCOMPARE(t[0].y, 0.7);
        QCOMPARE(t[1].y, 0.4 - 0.05);
        QCOMPARE(t[2].y, 0.4);
        QCOMPARE(panel_->holdBand(), (std::optional<std::pair<double, double>>{{0.4 - 0.05, 0.7}}));
        QChart* sens = panel_->chartView(C::sensitivity)->chart();
        auto* band = qobject_cast<QAreaSeries*>(seriesNamed(sens, QStringLiteral("hold band")));
        QVERIFY(band && band->isVisible());
        QCOMPARE(band->upperSeries()->at(0).y(), 0.7);
        QCOMPARE(band->lowerSeries()->at(0).y(), 0.4 - 0.05);
        auto* bf16 = qobject_cast<QLineSeries*>(seriesNamed(sens, t[0].name));
        QVERIFY(bf16 && bf16->isVisible());
        QCOMPARE(bf16->at(1).y(), 0.7);

        for (C chart : {C::saving, C::loss}) {
            QCOMPARE(panel_->markerSteps(chart, ChartsPanel::Marker::precision_switch),
                     (std::vector<double>{8.0, 24.0}));
            QCOMPARE(panel_->markerSteps(chart, ChartsPanel::Marker::command), std::vector<double>{12.0});
            QCOMPARE(panel_->markerSteps(chart, ChartsPanel::Marker::rollback), std::vector<double>{20.0});
        }
        QVERIFY(panel_->markerSteps(C::precision, ChartsPanel::Marker::rollback).empty());
        // Replay cursor: marks after the shown updates are not drawn yet.
        panel_->setTimelineCursor(4);  // steps 0..12
        QCOMPARE(panel_->markerSteps(C::saving, ChartsPanel::Marker::precision_switch),
                 std::vector<double>{8.0});
        QVERIFY(panel_->markerSteps(C::saving, ChartsPanel::Marker::rollback).empty());

        // Without a session there is no config: no thresholds, no band.
        panel_->setStore(&store_);
        QVERIFY(panel_->thresholds().empty());
        QVERIFY(!band->isVisible());
    }

    void markersAreBoundedOnLongRuns() {
        store_.reset(sp::uniform_layout(kBlocks));
        for (std::size_t u = 0; u < 5000; ++u) {
            sp::UpdateRecord r = makeRecord(u, {});
            r.precision_changes = 1;  // a switch at every update
            store_.append(r);
        }
        makePanel();
        const auto steps =
            panel_->markerSteps(ChartsPanel::Chart::saving, ChartsPanel::Marker::precision_switch);
        QVERIFY(!steps.empty());
        QVERIFY2(steps.size() <= std::size_t(ChartsPanel::kMaxMarkers),
                 qPrintable(QString::number(steps.size())));
        QCOMPARE(steps.front(), 0.0);
        QVERIFY(std::is_sorted(steps.begin(), steps.end()));
    }

    void cleanup() { panel_.reset(); }
};

QTEST_MAIN(TestCharts)
#include "test_charts.moc"
