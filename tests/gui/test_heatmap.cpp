// HeatmapView over a store filled directly: cell colours, incremental image, selection, follow mode,
// tooltip, cursor, empty state. The incremental zoomed-out grid, the block filter and the marks are
// in test_heatmap_marks.cpp.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <vector>

#include <QMouseEvent>
#include <QScrollBar>

#include "heatmap_axis.h"
#include "heatmap_layout.h"
#include "heatmap_pooled.h"
#include "heatmap_pooling.h"
#include "heatmap_test_data.h"
#include "sp/ui/colormap.h"
#include "sp/ui/heatmap_legend.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_store.h"

using namespace sp::ui;
using namespace sp::ui::heatmap_test;

class TestHeatmap : public HeatmapFixture {
    Q_OBJECT
  private slots:
    // Ticks land on round steps even when the updates do not (every 10 steps from step 10 here), at
    // the fractional position between the updates that bracket them, and stay far enough apart.
    void axisTicksLandOnRoundSteps() {
        std::vector<sp::ui::UpdateRow> rows(240);
        for (std::size_t u = 0; u < rows.size(); ++u) rows[u].step = std::int64_t(10 * u + 10);  // 10..2400
        const auto ticks = sp::ui::stepAxisTicks(rows, 0, rows.size(), 2.0);  // 2 px per update
        QVERIFY(ticks.size() >= 3);
        for (const auto& t : ticks) {
            QVERIFY2(t.step % 500 == 0, qPrintable(QString::number(t.step)));  // 90 px = 450 steps: every 500
            QCOMPARE(t.update, double(t.step - 10) / 10.0);                    // step 500 sits at update 49
        }
        QCOMPARE(ticks.front().step, std::int64_t(500));
        // Zoomed in: 48 px per update, ticks every 20 steps (90 px = 18.75 steps).
        const auto close = sp::ui::stepAxisTicks(rows, 100, 120, 48.0);
        QCOMPARE(close.front().step, std::int64_t(1020));
        QCOMPARE(close[1].step - close[0].step, std::int64_t(20));
        // Between updates: steps 7, 13, 29 with ticks every 5 put step 10 halfway from 7 to 13.
        std::vector<sp::ui::UpdateRow> odd(3);
        odd[0].step = 7;
        odd[1].step = 13;
        odd[2].step = 29;
        const auto between = sp::ui::stepAxisTicks(odd, 0, 3, 200.0);
        QCOMPARE(between.front().step, std::int64_t(10));
        QCOMPARE(between.front().update, 0.5);
    }

    void cellColourMatchesSensitivity() {
        makeView(6);
        const QImage shot = view_->viewport()->grab().toImage();
        QCOMPARE(shot.size(), view_->viewport()->size());
        for (int b = 0; b < kBlocks; ++b) {
            for (std::size_t u = 0; u < 6; ++u) {
                const QRect r = view_->cellRect(b, u);
                QVERIFY2(!r.isEmpty(), qPrintable(QStringLiteral("cell %1,%2").arg(b).arg(u)));
                const QRgb expected = expectedColor(b, u) & 0xFFFFFF;
                // Every pixel of the cell, not only its centre (corner marks appear only on big cells;
                // here the INT8/FP8 rows' corner square is excluded by sampling the left half).
                for (int x = r.left(); x < r.left() + r.width() / 2; ++x) {
                    for (int y = r.top() + r.height() / 2; y <= r.bottom(); ++y) {
                        QCOMPARE(shot.pixel(x, y) & 0xFFFFFF, expected);
                    }
                }
            }
        }
        // The export renders the same view: at the widget's size, the same pixels.
        const QImage exported = view_->renderToImage(view_->viewport()->size());
        for (int b = 0; b < kBlocks; ++b) {
            for (std::size_t u = 0; u < 6; ++u) {
                const QPoint c = view_->cellRect(b, u).center();
                QCOMPARE(exported.pixel(c) & 0xFFFFFF, expectedColor(b, u) & 0xFFFFFF);
            }
        }
        // The backing image holds one pixel per cell with the same colours.
        for (int b = 0; b < kBlocks; ++b) {
            for (std::size_t u = 0; u < 6; ++u) QCOMPARE(view_->cellColor(b, u), expectedColor(b, u));
        }
    }

    void zoomedOutShowsEachPixelsHighestSensitivity() {
        // 3000 updates in ~500 px: pixel column x covers updates [floor(x / px), floor((x + 1) / px)),
        // and shows the highest sensitivity among them (the missing cell is skipped).
        makeView(3000);
        const double px = view_->pixelsPerUpdate();
        QVERIFY(px < 1.0);
        const QImage shot = view_->viewport()->grab().toImage();
        // Pixel column 0 is the one whose centre falls in update floor(0.5 / px).
        const auto first_centred = std::size_t(std::floor(0.5 / px));
        const int left = view_->cellRect(0, first_centred).left();
        int checked = 0;
        for (int b = 0; b < kBlocks; ++b) {
            const int y = view_->cellRect(b, first_centred).center().y();
            for (int x = 0;; ++x) {
                const auto first = std::size_t(std::floor(x / px));
                if (first >= 3000) break;
                const auto last =
                    std::min<std::size_t>(3000, std::max(first + 1, std::size_t(std::floor((x + 1) / px))));
                float hottest = -1.0f;
                for (std::size_t u = first; u < last; ++u)
                    if (presentAt(b, u)) hottest = std::max(hottest, sensitivityOf(b, u));
                QVERIFY2((shot.pixel(left + x, y) & 0xFFFFFF) == (sensitivityColor(hottest) & 0xFFFFFF),
                         qPrintable(QString("block %1 pixel %2 (updates %3..%4, grid from %5, %6 px/update)")
                                        .arg(b)
                                        .arg(x)
                                        .arg(first)
                                        .arg(last)
                                        .arg(left)
                                        .arg(px)));
                // The tooltip's cell is the one whose colour the pixel shows.
                const auto cell = view_->cellAt(QPoint(left + x, y));
                QVERIFY(cell && cell->block == b && cell->update >= first && cell->update < last);
                QCOMPARE(sensitivityOf(b, cell->update), hottest);
                ++checked;
            }
        }
        QVERIFY(checked > 4 * 400);
    }

    void oneUpdateSpikeSurvivesZoomOut_data() {
        QTest::addColumn<int>("blocks");
        QTest::addColumn<int>("spikeBlock");
        QTest::newRow("more updates than pixel columns") << kBlocks << 1;
        QTest::newRow("more blocks than pixel rows too") << 600 << 401;
    }
    void oneUpdateSpikeSurvivesZoomOut() {
        QFETCH(int, blocks);
        QFETCH(int, spikeBlock);
        // Every cell 0.1 except one: nearest-neighbour sampling would show it in about one zoom
        // level in twelve; the heatmap must show it in every pixel that covers it.
        constexpr std::size_t kUpdates = 5000, kSpikeAt = 2345;
        store_.reset(sp::uniform_layout(blocks));
        for (std::size_t u = 0; u < kUpdates; ++u) {
            sp::UpdateRecord r = makeRecord(u, 0, false);
            for (int b = 0; b < blocks; ++b) {
                sp::BlockDetail d;
                d.id = b;
                d.sensitivity = (b == spikeBlock && u == kSpikeAt) ? 0.9375f : 0.125f;  // fp16-exact
                r.block_details.push_back(d);
            }
            store_.append(r);
        }
        view_ = std::make_unique<HeatmapView>();
        view_->resize(QSize(420, 300));
        view_->setStore(&store_);
        view_->show();
        QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
        view_->refresh();
        QVERIFY(view_->pixelsPerUpdate() < 0.2);
        QCOMPARE(view_->pixelsPerBlock() < 1.0, blocks > 300);
        const QImage shot = view_->viewport()->grab().toImage();
        const QRgb hot = sensitivityColor(0.9375f) & 0xFFFFFF, calm = sensitivityColor(0.125f) & 0xFFFFFF;
        QSet<int> hot_columns;
        QPoint where;
        for (int y = 0; y < shot.height(); ++y)
            for (int x = 0; x < shot.width(); ++x)
                if ((shot.pixel(x, y) & 0xFFFFFF) == hot) {
                    hot_columns.insert(x);
                    where = QPoint(x, y);
                    // Every hot pixel is the spike's cell (tall rows repeat it down the row).
                    const auto cell = view_->cellAt(where);
                    QVERIFY(cell);
                    QCOMPARE(cell->block, spikeBlock);
                    QCOMPARE(cell->update, kSpikeAt);
                }
        QCOMPARE(hot_columns.size(), 1);  // one pixel column covers the spike's update, at any zoom
        // Its neighbours on the row are calm.
        QCOMPARE(shot.pixel(where + QPoint(1, 0)) & 0xFFFFFF, calm);
        QCOMPARE(shot.pixel(where - QPoint(1, 0)) & 0xFFFFFF, calm);
    }

    void appendWritesOnlyNewColumns() {
        makeView(6);
        QCOMPARE(view_->cellsWritten(), std::uint64_t(6 * kBlocks));
        view_->refresh();  // nothing new: nothing written
        QCOMPARE(view_->cellsWritten(), std::uint64_t(6 * kBlocks));
        fill(store_, 6, 9);
        view_->refresh();
        QCOMPARE(view_->cellsWritten(), std::uint64_t(9 * kBlocks));
        QCOMPARE(view_->shownUpdateCount(), std::size_t(9));
        for (int b = 0; b < kBlocks; ++b) {
            for (std::size_t u = 0; u < 9; ++u) QCOMPARE(view_->cellColor(b, u), expectedColor(b, u));
        }
        const QImage shot = view_->viewport()->grab().toImage();
        QCOMPARE(shot.pixel(view_->cellRect(3, 8).center()) & 0xFFFFFF, expectedColor(3, 8) & 0xFFFFFF);
        // A reset rebuilds from scratch.
        store_.reset(sp::uniform_layout(kBlocks));
        fill(store_, 0, 2);
        view_->refresh();
        QCOMPARE(view_->cellsWritten(), std::uint64_t(11 * kBlocks));
        QCOMPARE(view_->shownUpdateCount(), std::size_t(2));
    }

    void clickSelection() {
        makeView(6);
        QSignalSpy spy(view_.get(), &HeatmapView::selectionChanged);
        QWidget* vp = view_->viewport();
        QTest::mouseClick(vp, Qt::LeftButton, Qt::NoModifier, view_->cellRect(2, 1).center());
        QCOMPARE(spy.count(), 1);
        QCOMPARE(lastSelection(spy), std::vector<int>({2}));
        QTest::mouseClick(vp, Qt::LeftButton, Qt::ControlModifier, view_->cellRect(0, 4).center());
        QCOMPARE(lastSelection(spy), std::vector<int>({0, 2}));
        QTest::mouseClick(vp, Qt::LeftButton, Qt::ControlModifier, view_->cellRect(2, 4).center());
        QCOMPARE(lastSelection(spy), std::vector<int>({0}));
        QTest::mouseClick(vp, Qt::LeftButton, Qt::NoModifier, view_->cellRect(1, 0).center());
        QTest::mouseClick(vp, Qt::LeftButton, Qt::ShiftModifier, view_->cellRect(3, 5).center());
        QCOMPARE(lastSelection(spy), std::vector<int>({1, 2, 3}));
        QCOMPARE(view_->selection(), std::vector<int>({1, 2, 3}));
        // From outside: no signal.
        const qsizetype before = spy.count();
        view_->setSelection({3, 0, 3});
        QCOMPARE(view_->selection(), std::vector<int>({0, 3}));
        QCOMPARE(spy.count(), before);
    }

    void rubberBandSelectsRows() {
        makeView(6);
        QSignalSpy spy(view_.get(), &HeatmapView::selectionChanged);
        QWidget* vp = view_->viewport();
        const QPoint from = view_->cellRect(1, 1).center();
        const QPoint to = view_->cellRect(3, 4).center();
        sendMouse(vp, QEvent::MouseButtonPress, from, Qt::LeftButton, Qt::LeftButton);
        sendMouse(vp, QEvent::MouseMove, (from + to) / 2, Qt::NoButton, Qt::LeftButton);
        sendMouse(vp, QEvent::MouseMove, to, Qt::NoButton, Qt::LeftButton);
        sendMouse(vp, QEvent::MouseButtonRelease, to, Qt::LeftButton, Qt::NoButton);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(lastSelection(spy), std::vector<int>({1, 2, 3}));
    }

    void contextMenuCarriesTheSelection() {
        makeView(6);
        QSignalSpy spy(view_.get(), &HeatmapView::contextMenuRequested);
        const QPoint at = view_->cellRect(2, 2).center();
        QContextMenuEvent event(QContextMenuEvent::Mouse, at, view_->viewport()->mapToGlobal(at));
        QCoreApplication::sendEvent(view_->viewport(), &event);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.last().at(0).value<std::vector<int>>(), std::vector<int>({2}));
    }

    void followLiveEdgeTurnsOffWhenPanningAway() {
        makeView(400);
        QSignalSpy spy(view_.get(), &HeatmapView::followLiveEdgeChanged);
        QVERIFY(view_->followsLiveEdge());
        view_->zoomUpdates(8.0);  // following: zoom keeps the newest update at the right edge
        QVERIFY(view_->followsLiveEdge());
        const std::size_t first = view_->firstVisibleUpdate();
        QVERIFY(first > 0);
        QVERIFY(view_->cellRect(0, 399).isValid());
        QVERIFY(!view_->cellRect(0, 0).isValid());
        // New updates scroll the view along.
        fill(store_, 400, 420);
        view_->refresh();
        QCOMPARE(view_->firstVisibleUpdate(), first + 20);
        // The user drags the scroll bar to the start: following stops and stays stopped.
        view_->horizontalScrollBar()->setValue(0);
        QCOMPARE(spy.count(), 1);
        QCOMPARE(spy.last().at(0).toBool(), false);
        QVERIFY(!view_->followsLiveEdge());
        fill(store_, 420, 440);
        view_->refresh();
        QCOMPARE(view_->firstVisibleUpdate(), std::size_t(0));
        // The way back.
        view_->setFollowLiveEdge(true);
        QCOMPARE(spy.last().at(0).toBool(), true);
        QVERIFY(view_->cellRect(0, 439).isValid());
        // Scrolling to the right end by hand also resumes following.
        view_->horizontalScrollBar()->setValue(0);
        QVERIFY(!view_->followsLiveEdge());
        view_->horizontalScrollBar()->setValue(view_->horizontalScrollBar()->maximum());
        QVERIFY(view_->followsLiveEdge());
        view_->fitAll();
        QVERIFY(view_->cellRect(0, 0).isValid());
        QVERIFY(view_->cellRect(0, 439).isValid() || view_->pixelsPerUpdate() < 1.0);
    }

    void wheelPanAndCtrlWheelZoom() {
        makeView(400);
        const double fit = view_->pixelsPerUpdate();
        const QPoint at = view_->cellRect(1, 200).center();
        QWheelEvent zoom(QPointF(at), view_->viewport()->mapToGlobal(QPointF(at)), QPoint(), QPoint(0, 240),
                         Qt::NoButton, Qt::ControlModifier, Qt::NoScrollPhase, false);
        QCoreApplication::sendEvent(view_->viewport(), &zoom);
        QVERIFY(view_->pixelsPerUpdate() > fit * 1.4);
        // The update under the mouse stays under it (not the newest one): the view left the live edge.
        QVERIFY(!view_->followsLiveEdge());
        QVERIFY2(
            view_->cellRect(1, 200).contains(at) ||
                std::abs(view_->cellRect(1, 200).center().x() - at.x()) <= 2 * view_->pixelsPerUpdate(),
            qPrintable(
                QString("cell at %1, mouse at %2").arg(view_->cellRect(1, 200).center().x()).arg(at.x())));
        QWheelEvent pan(QPointF(at), view_->viewport()->mapToGlobal(QPointF(at)), QPoint(), QPoint(0, 120),
                        Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
        const std::size_t before = view_->firstVisibleUpdate();
        QCoreApplication::sendEvent(view_->viewport(), &pan);
        QVERIFY(view_->firstVisibleUpdate() < before);
        QVERIFY(!view_->followsLiveEdge());
    }

    void tooltipDescribesTheCell() {
        makeView(6);
        const QString text = view_->cellToolTip(1, 2);
        QVERIFY2(text.contains(QStringLiteral("blocks.1")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("step 120")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("INT8")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("sensitivity: ") +
                               QString::number(double(sensitivityOf(1, 2)), 'g', 4)),
                 qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("grad score: 0.25")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("error score: 0.125")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("relative magnitude: 0.5")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("l2: 3.5")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("max |g|: 0.75")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("pinned")), qPrintable(text));
        QVERIFY2(text.contains(QStringLiteral("reason: pin")), qPrintable(text));
        QVERIFY(view_->cellToolTip(0, 0).contains(QStringLiteral("config")));
        QVERIFY(view_->cellToolTip(2, 3).contains(QStringLiteral("no detail")));
        QVERIFY(view_->cellToolTip(9, 0).isEmpty());
        // The cell under a point is the one whose tooltip the hover shows.
        const auto cell = view_->cellAt(view_->cellRect(3, 5).center());
        QVERIFY(cell);
        QCOMPARE(cell->block, 3);
        QCOMPARE(cell->update, std::size_t(5));
    }

    void timelineCursorLimitsTheView() {
        makeView(6);
        view_->setTimelineCursor(3);
        QCOMPARE(view_->shownUpdateCount(), std::size_t(3));
        QCOMPARE(*view_->displayedUpdate(), std::size_t(2));
        QVERIFY(view_->cellRect(0, 2).isValid());
        QVERIFY(!view_->cellRect(0, 3).isValid());
        view_->setTimelineCursor(0);
        QVERIFY(!view_->emptyStateText().isEmpty());
        view_->clearTimelineCursor();
        QCOMPARE(view_->shownUpdateCount(), std::size_t(6));
        QVERIFY(view_->emptyStateText().isEmpty());
    }

    void emptyStateSaysWhy() {
        HeatmapView view;
        QVERIFY(view.emptyStateText().contains(QStringLiteral("No run")));
        TelemetryStore store;
        store.reset(sp::uniform_layout(3));
        view.resize(500, 300);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.setStore(&store);
        QVERIFY(view.emptyStateText().contains(QStringLiteral("Waiting")));
        for (std::size_t u = 0; u < 5; ++u) store.append(makeRecord(u, 3, false));
        view.refresh();
        QVERIFY2(view.emptyStateText().contains(QStringLiteral("per-block details")),
                 qPrintable(view.emptyStateText()));
        // The message is painted (not a blank area): text pixels differ from the background.
        const QImage shot = view.viewport()->grab().toImage();
        const QRgb bg = shot.pixel(2, 2);
        int differing = 0;
        for (int y = 0; y < shot.height(); ++y) {
            for (int x = 0; x < shot.width(); ++x) differing += shot.pixel(x, y) != bg ? 1 : 0;
        }
        QVERIFY(differing > 50);
    }

    void precisionModeColoursByPrecision() {
        makeView(6);
        view_->setColorMode(HeatmapView::ColorMode::precision);
        QCOMPARE(view_->cellColor(1, 2), precisionColor(sp::Precision::int8));
        QCOMPARE(view_->cellColor(3, 2), precisionColor(sp::Precision::fp8_e4m3));
        QCOMPARE(view_->cellColor(2, 3), kMissingColor);
        const QImage shot = view_->viewport()->grab().toImage();
        QCOMPARE(shot.pixel(view_->cellRect(0, 0).center()), precisionColor(sp::Precision::bf16));
    }

    void legendPaints() {
        HeatmapLegend legend;
        legend.resize(legend.sizeHint());
        const QImage shot = legend.grab().toImage();
        QVERIFY(!shot.isNull());
        // The colour bar contains both ends of the colormap.
        bool low = false, high = false;
        for (int y = 0; y < shot.height(); ++y) {
            for (int x = 0; x < shot.width(); ++x) {
                low |= (shot.pixel(x, y) & 0xFFFFFF) == (sensitivityColor(0.0f) & 0xFFFFFF);
                high |= (shot.pixel(x, y) & 0xFFFFFF) == (sensitivityColor(1.0f) & 0xFFFFFF);
            }
        }
        QVERIFY(low && high);
        QVERIFY(legend.noteShown());
        // Squeezed to its minimum, the note is left out rather than cut mid-sentence.
        legend.resize(legend.minimumSizeHint());
        legend.grab();
        QVERIFY(!legend.noteShown());
    }

    void cleanup() { view_.reset(); }
};

QTEST_MAIN(TestHeatmap)
#include "test_heatmap.moc"
