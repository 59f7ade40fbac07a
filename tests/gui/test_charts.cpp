// ChartsPanel over a store filled directly: series match the store, decimation bounds long runs,
// the loss chart disappears when the run has no loss, refresh is a no-op when nothing changed.
#include <QtTest>

#include <cmath>
#include <vector>

#include <QChart>
#include <QChartView>
#include <QLineSeries>

#include "sp/ui/charts_panel.h"
#include "sp/ui/telemetry_store.h"

using namespace sp::ui;

namespace {

constexpr int kBlocks = 5;

struct Options {
    bool measured = true;
    bool loss = true;
};

sp::UpdateRecord makeRecord(std::size_t u, Options o) {
    sp::UpdateRecord r;
    r.step_id = std::int64_t(u) * 4;
    r.timestamp = 50.0 + double(u);
    r.estimated_bandwidth_saving_pct = 10.0 + double(u % 17);
    if (o.measured) r.measured_bandwidth_saving_pct = 5.0 + double(u % 11);
    r.blocks_int8 = int(u % 3);
    r.blocks_fp8 = int(u % 2);
    r.blocks_bf16 = kBlocks - r.blocks_int8 - r.blocks_fp8;
    if (o.loss) {
        r.train_loss = 3.0 - double(u) * 0.001;
        if (u % 10 == 0) r.eval_loss = 3.2 - double(u) * 0.001;  // sparse
    }
    for (int b = 0; b < kBlocks; ++b) {
        sp::BlockDetail d;
        d.id = b;
        d.sensitivity = double((b * 13 + int(u) * 7) % 50) / 49.0;
        d.l2_norm = 0.5 + double(b) + double(u % 5) * 0.25;
        r.block_details.push_back(d);
    }
    return r;
}

void fill(TelemetryStore& store, std::size_t n, Options o = {}) {
    store.reset(sp::uniform_layout(kBlocks));
    store.reserve(n);
    for (std::size_t u = 0; u < n; ++u) store.append(makeRecord(u, o));
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
        // Every line of every chart is bounded: 2 sav + 3 prec + 3 + 3 selected + 2 loss lines.
        QVERIFY2(panel_->drawnPointCount() <= 13 * (2 * (width + 16) + 2),
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

    void cleanup() { panel_.reset(); }
};

QTEST_MAIN(TestCharts)
#include "test_charts.moc"
