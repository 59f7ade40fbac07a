// ChartsPanel driven as a person drives it (issue item 14), through real events: the wheel zooms the
// steps, a drag pans them, a double-click resets; a zoomed view holds while updates arrive; a chart
// enlarged alone and restored; its lines exported as CSV from its context menu; legends that name
// every line whole, with another run overlaid.
#include <QtTest>

#include <cmath>

#include <QAction>
#include <QApplication>
#include <QChart>
#include <QChartView>
#include <QFile>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QTemporaryDir>
#include <QTextDocument>
#include <QValueAxis>
#include <QWheelEvent>

#include "chart_test_data.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/telemetry_store.h"

using namespace sp::ui;
using sp::test::fill;
using sp::test::makeRecord;
using sp::test::seriesNamed;

namespace {

QValueAxis* xAxisOf(QChartView* view) {
    return qobject_cast<QValueAxis*>(view->chart()->axes(Qt::Horizontal).at(0));
}

// A point of the plot, `fraction` of its width from the left, in the view's viewport coordinates.
QPoint plotPoint(QChartView* view, double fraction, double height_fraction = 0.5) {
    const QRectF plot = view->chart()->plotArea();
    const QPointF at(plot.left() + fraction * plot.width(), plot.top() + height_fraction * plot.height());
    return view->mapFromScene(view->chart()->mapToScene(at));
}

// One notch of the mouse wheel (120 = one step of a usual wheel) at `pos`, as Qt delivers it.
void wheelAt(QChartView* view, QPoint pos, int delta) {
    QWheelEvent wheel(QPointF(pos), QPointF(view->viewport()->mapToGlobal(pos)), QPoint(), QPoint(0, delta),
                      Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(view->viewport(), &wheel);
}

void mouseAt(QChartView* view, QEvent::Type type, QPoint pos, Qt::MouseButtons buttons) {
    QMouseEvent event(type, QPointF(pos), QPointF(view->viewport()->mapToGlobal(pos)),
                      type == QEvent::MouseMove ? Qt::NoButton : Qt::LeftButton, buttons, Qt::NoModifier);
    QApplication::sendEvent(view->viewport(), &event);
}

// Drags with the left button from `from` to `to` (press, two moves, release).
void dragFrom(QChartView* view, QPoint from, QPoint to) {
    mouseAt(view, QEvent::MouseButtonPress, from, Qt::LeftButton);
    mouseAt(view, QEvent::MouseMove, (from + to) / 2, Qt::LeftButton);
    mouseAt(view, QEvent::MouseMove, to, Qt::LeftButton);
    mouseAt(view, QEvent::MouseButtonRelease, to, Qt::NoButton);
}

QAction* chartAction(QChartView* view, const char* name) {
    return view->findChild<QAction*>(QLatin1String(name));
}

}  // namespace

class TestChartInteraction : public QObject {
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
    // Zoom (issue item 14): the wheel zooms the step range around the mouse on every chart at once (they
    // share the x axis), a drag pans it, a double-click on the plot goes back to showing everything.
    void wheelZoomsDragPansDoubleClickResets() {
        fill(store_, 200);  // steps 0..796
        makePanel();
        QChartView* view = panel_->chartView(ChartsPanel::Chart::saving);
        QValueAxis* x = xAxisOf(view);
        const double lo = x->min(), hi = x->max();
        const double under_mouse = lo + 0.25 * (hi - lo);
        wheelAt(view, plotPoint(view, 0.25), 120);
        QTRY_VERIFY(x->max() - x->min() < 0.9 * (hi - lo));
        // The step under the mouse stays under it (to a pixel's worth of steps).
        const double now_under = x->min() + 0.25 * (x->max() - x->min());
        QVERIFY2(std::abs(now_under - under_mouse) <= (hi - lo) / view->chart()->plotArea().width(),
                 qPrintable(QStringLiteral("%1 vs %2").arg(now_under).arg(under_mouse)));
        for (QChartView* other : panel_->chartViews()) {
            QCOMPARE(xAxisOf(other)->min(), x->min());
            QCOMPARE(xAxisOf(other)->max(), x->max());
        }
        // The lines are drawn for the range shown: the estimate's points lie within it (plus one each side).
        const auto est = panel_->linePoints(ChartsPanel::Chart::saving, QStringLiteral("estimated"));
        QVERIFY(est && est->size() < 200);

        // Dragging to the left by a tenth of the plot shows later steps: the range moves right by a
        // tenth of its width (the view holds steps 40..676 of 0..796: there is room).
        const double zoomed_lo = x->min(), span = x->max() - x->min();
        dragFrom(view, plotPoint(view, 0.6), plotPoint(view, 0.5));
        QTRY_VERIFY(x->min() > zoomed_lo + 0.05 * span);
        QVERIFY2(std::abs((x->min() - zoomed_lo) - 0.1 * span) < 0.02 * span,
                 qPrintable(QStringLiteral("moved %1 of %2").arg(x->min() - zoomed_lo).arg(span)));
        QVERIFY(std::abs((x->max() - x->min()) - span) < 1e-6 * span);
        // At the start of the run the range stops: dragging right past it shows step 0 first.
        dragFrom(view, plotPoint(view, 0.1), plotPoint(view, 0.9));
        QTRY_COMPARE(x->min(), lo);
        QVERIFY(std::abs((x->max() - x->min()) - span) < 1e-6 * span);

        // Wheeling back out past everything, or a double-click, shows the whole run again.
        QTest::mouseDClick(view->viewport(), Qt::LeftButton, Qt::NoModifier, plotPoint(view, 0.5));
        QTRY_COMPARE(x->min(), lo);
        QCOMPARE(x->max(), hi);
    }

    // Zoomed on a live run, new updates do not pull the view back: a range in the middle stays where it
    // is; a range that reaches the live edge keeps its width and follows the edge.
    void zoomedViewHoldsWhileUpdatesArrive() {
        fill(store_, 200);
        makePanel();
        QChartView* view = panel_->chartView(ChartsPanel::Chart::loss);
        QValueAxis* x = xAxisOf(view);
        wheelAt(view, plotPoint(view, 0.5), 240);
        QTRY_VERIFY(x->max() < 796.0);
        const double lo = x->min(), hi = x->max();
        for (std::size_t u = 200; u < 220; ++u) store_.append(makeRecord(u, {}));
        panel_->refresh();
        QCOMPARE(x->min(), lo);
        QCOMPARE(x->max(), hi);

        // Pan to the live edge (drag left far enough), then updates move the view along.
        dragFrom(view, plotPoint(view, 0.9), plotPoint(view, 0.0));
        dragFrom(view, plotPoint(view, 0.9), plotPoint(view, 0.0));
        QTRY_COMPARE(x->max(), 876.0);  // the last step
        const double width = x->max() - x->min();
        for (std::size_t u = 220; u < 230; ++u) store_.append(makeRecord(u, {}));
        panel_->refresh();
        QCOMPARE(x->max(), 916.0);
        QVERIFY(std::abs((x->max() - x->min()) - width) < 1e-6 * width);
    }

    // Enlarging (issue item 14): the chart's context menu (or a double-click on its title) shows it
    // alone in the panel; Restore brings the others back.
    void enlargeShowsOneChartAlone() {
        fill(store_, 60);
        makePanel();
        QChartView* loss = panel_->chartView(ChartsPanel::Chart::loss);
        QCOMPARE(loss->contextMenuPolicy(), Qt::ActionsContextMenu);
        QAction* enlarge = chartAction(loss, "chartEnlarge");
        QVERIFY(enlarge != nullptr);
        QVERIFY(loss->actions().contains(enlarge));
        const int width_before = loss->width();
        enlarge->trigger();
        QTRY_VERIFY(loss->width() > 2 * width_before);
        for (QChartView* other : panel_->chartViews()) QCOMPARE(other, loss);
        QVERIFY(enlarge->isChecked());
        enlarge->trigger();  // restore
        QTRY_COMPARE(panel_->chartViews().size(), std::size_t(5));
        QTRY_VERIFY(loss->width() < width_before + 4);

        // A double-click on a chart's title does the same, and again restores.
        QChartView* saving = panel_->chartView(ChartsPanel::Chart::saving);
        const QPoint title = saving->mapFromScene(saving->chart()->mapToScene(
            QPointF(saving->chart()->plotArea().center().x(), saving->chart()->plotArea().top() / 3)));
        QTest::mouseDClick(saving->viewport(), Qt::LeftButton, Qt::NoModifier, title);
        QTRY_COMPARE(panel_->chartViews().size(), std::size_t(1));
        QCOMPARE(panel_->chartViews().front(), saving);
        QTest::mouseDClick(saving->viewport(), Qt::LeftButton, Qt::NoModifier, title);
        QTRY_COMPARE(panel_->chartViews().size(), std::size_t(5));
    }

    // Export (issue item 14): the chart's context menu writes its lines as CSV, at full resolution
    // (not the decimated points): a "step" column, a column per line named as its legend names it,
    // one row per step, the cell empty where a line has no value (the sparse eval loss).
    void contextMenuExportsTheSeriesAsCsv() {
        fill(store_, 3000);  // more updates than the plot has pixel columns: drawn decimated
        makePanel();
        panel_->setLossSmoothing(0.0);
        QTemporaryDir dir;
        QString path = dir.filePath(QStringLiteral("loss.csv"));
        QString suggested;
        panel_->setCsvPathPrompt([&](const QString& name) {
            suggested = name;
            return path;
        });
        QChartView* view = panel_->chartView(ChartsPanel::Chart::loss);
        QAction* export_csv = chartAction(view, "chartExportCsv");
        QVERIFY(export_csv != nullptr);
        QVERIFY(view->actions().contains(export_csv));
        QVERIFY(panel_->linePoints(ChartsPanel::Chart::loss, QStringLiteral("train loss"))->size() < 3000);
        export_csv->trigger();
        QCOMPARE(suggested, QStringLiteral("loss.csv"));
        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly | QIODevice::Text));
        const QStringList rows =
            QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(rows.size(), 3001);
        QCOMPARE(rows.front(), QStringLiteral("step,train loss,eval loss"));
        for (std::size_t u : {std::size_t(0), std::size_t(7), std::size_t(10), std::size_t(2999)}) {
            const QStringList cells = rows[qsizetype(u) + 1].split(QLatin1Char(','));
            QCOMPARE(cells.size(), 3);
            QCOMPARE(cells[0].toDouble(), double(store_.row(u).step));
            QCOMPARE(cells[1].toFloat(), store_.row(u).train_loss);
            if (u % 10 == 0)
                QCOMPARE(cells[2].toFloat(), store_.row(u).eval_loss);
            else
                QVERIFY(cells[2].isEmpty());
        }
        // The saving chart of a run without a budget: estimated and measured, no target column.
        QCOMPARE(panel_->seriesCsv(ChartsPanel::Chart::saving).section(QLatin1Char('\n'), 0, 0),
                 QStringLiteral("step,estimated,measured"));
        // Zoomed in, the export still holds every step.
        panel_->setXView(100.0, 200.0);
        QCOMPARE(panel_->seriesCsv(ChartsPanel::Chart::loss).count(QLatin1Char('\n')), 3001);
    }

    // The legend under each chart names every line drawn, whole (Qt's own legend is hidden: it cut
    // names to "estim..."), and an overlaid run's lines are dashed in their counterpart's colour, its
    // name in the key under the controls.
    void legendNamesEveryLineWhole() {
        fill(store_, 60);
        makePanel();
        panel_->setSelectedBlocks({1});
        TelemetryStore other;
        fill(other, 30);
        panel_->setOverlayRuns({{QStringLiteral("baseline.jsonl"), &other}});
        const auto legend_of = [&](ChartsPanel::Chart chart) {
            for (QLabel* label : panel_->findChildren<QLabel*>(QStringLiteral("chartLegend")))
                if (label->parentWidget() == panel_->chartView(chart)->parentWidget()) return label;
            return static_cast<QLabel*>(nullptr);
        };
        const auto plain = [](const QLabel* label) {
            QTextDocument doc;
            doc.setHtml(label->text());
            return doc.toPlainText()
                .replace(QChar::Nbsp, QLatin1Char(' '))
                .replace(QChar(0x2011), QLatin1Char('-'));
        };
        QVERIFY(!panel_->chartView(ChartsPanel::Chart::saving)->chart()->legend()->isVisible());
        QCOMPARE(plain(legend_of(ChartsPanel::Chart::saving)), QStringLiteral("━━ estimated   ━━ measured"));
        QVERIFY(plain(legend_of(ChartsPanel::Chart::sensitivity)).contains(QStringLiteral("blocks.1")));
        QVERIFY(plain(legend_of(ChartsPanel::Chart::loss)).contains(QStringLiteral("eval loss")));
        QVERIFY(!plain(legend_of(ChartsPanel::Chart::loss)).contains(QStringLiteral("raw")));
        auto* key = panel_->findChild<QLabel*>(QStringLiteral("overlayRunsKey"));
        QVERIFY(key && key->isVisible());
        QVERIFY(plain(key).contains(QStringLiteral("baseline.jsonl")));
        // The other run's block, by name, dashed in the selected block's colour.
        QChart* sens = panel_->chartView(ChartsPanel::Chart::sensitivity)->chart();
        auto* own = qobject_cast<QLineSeries*>(seriesNamed(sens, QStringLiteral("blocks.1")));
        auto* theirs =
            qobject_cast<QLineSeries*>(seriesNamed(sens, QStringLiteral("baseline.jsonl: blocks.1")));
        QVERIFY(own && theirs);
        QCOMPARE(theirs->pen().color(), own->pen().color());
        QCOMPARE(own->pen().style(), Qt::SolidLine);
        QCOMPARE(theirs->pen().style(), Qt::DashLine);
        QCOMPARE(theirs->count(), 30);
        panel_->setOverlayRuns({});
        QVERIFY(!key->isVisible());
        QVERIFY(!seriesNamed(sens, QStringLiteral("baseline.jsonl: blocks.1")));
    }

    void cleanup() { panel_.reset(); }
};

QTEST_MAIN(TestChartInteraction)
#include "test_chart_interaction.moc"
