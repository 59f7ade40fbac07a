// HeatmapView beyond the cells: the incremental zoomed-out grid against a full resample (and a view
// that followed the appends against a fresh one), the block filter, pinned periods, pending commands
// and the precision marks at every zoom.
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

class TestHeatmapMarks : public HeatmapFixture {
    Q_OBJECT
  private slots:
    // The zoomed-out grid is kept incrementally (heatmap_pooled.h): after every append, at the
    // fitted zoom, scrolled, zoomed in, filtered and with more rows than pixels, it equals a full
    // resample by the reference (heatmap_pooling.h), and most appends compute one column.
    void pooledGridMatchesAFullResampleAfterAppends() {
        constexpr int kRows = 50;
        TelemetryStore store;
        store.reset(sp::uniform_layout(kRows));
        auto append = [&store](std::size_t u) {
            store.append(
                shapedRecord(u, kRows, [u](int b, sp::BlockDetail& d) { return variedDetail(b, u, d); }));
        };
        for (std::size_t u = 0; u < 2000; ++u) append(u);
        PooledSensitivity pooled;
        QImage dst(300, 80, QImage::Format_RGB32), ref(300, 80, QImage::Format_RGB32);
        std::vector<int> all(kRows);
        for (int b = 0; b < kRows; ++b) all[std::size_t(b)] = b;
        const QRgb bg = 0xFF123456u;
        auto check = [&](double first_col, double px, const std::vector<int>& rows, double first_row,
                         double py) {
            pooled.sync(store, 1);
            pooled.sampleInto(dst, first_col, px, store.updateCount(), rows, first_row, py, bg);
            sampleMaxSensitivityInto(ref, store, first_col, px, store.updateCount(), rows, first_row, py, bg);
            for (int y = 0; y < dst.height(); ++y)
                for (int x = 0; x < dst.width(); ++x)
                    QVERIFY2(dst.pixel(x, y) == ref.pixel(x, y),
                             qPrintable(QString("pixel %1,%2 at %3 px/update from %4, %5 updates")
                                            .arg(x)
                                            .arg(y)
                                            .arg(px)
                                            .arg(first_col)
                                            .arg(store.updateCount())));
        };
        int one_column = 0;
        for (std::size_t u = 2000; u < 2040; ++u) {
            append(u);
            check(0.0, fitPxPerUpdate(300.0, store.updateCount()), all, 0.0, 80.0 / kRows);
            if (pooled.lastColumnsComputed() <= 1) ++one_column;
        }
        QVERIFY2(one_column >= 30,
                 qPrintable(QString::number(one_column)));  // the zoom moves 1 in ~7 appends
        // Following at 4 updates per pixel (updatesPerPixel): the first update a multiple of 4,
        // so the view moves one pixel column every 4 appends and the columns shift.
        int shifted = 0;
        for (std::size_t u = 2040; u < 2080; ++u) {
            append(u);
            const std::size_t max_first = store.updateCount() - 300 * 4;
            const std::size_t aligned = (max_first + 3) / 4 * 4;  // the next multiple of 4
            check(double(aligned), 0.25, all, 0.0, 80.0 / kRows);
            if (pooled.lastColumnsWritten() <= 2) ++shifted;
        }
        QVERIFY2(shifted >= 38, qPrintable(QString::number(shifted)));
        check(100.0, 0.3, all, 0.0, 1.6);  // scrolled
        check(104.0, 0.3, all, 0.0, 1.6);
        check(1000.0, 3.0, all, 0.0, 1.6);           // zoomed in on updates, pooled rows below
        check(0.0, 0.2, {49, 3, 7, 20}, 0.0, 20.0);  // the block filter, in its order
        check(0.0, 0.2, all, 5.0, 0.5);              // more rows than pixel rows, scrolled down
    }

    // The same through the widget: a view that followed appends paints what a fresh view does.
    void incrementalViewMatchesAFreshOne() {
        store_.reset(sp::uniform_layout(30));
        auto append = [this](std::size_t u) {
            store_.append(shapedRecord(u, 30, [u](int b, sp::BlockDetail& d) {
                d.forced = b == 4 && u % 700 < 420 ? sp::ForcedBy::pin : sp::ForcedBy::none;  // ends at 2520
                d.precision =
                    b % 5 == 1 && u % 300 < 120 ? sp::Precision::int8 : sp::Precision::bf16;  // 2520: BF16
                return variedDetail(b, u, d);
            }));
        };
        for (std::size_t u = 0; u < 2500; ++u) append(u);
        view_ = std::make_unique<HeatmapView>();
        view_->resize(QSize(520, 300));
        view_->setStore(&store_);
        view_->show();
        QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
        view_->refresh();
        (void)grabOf(*view_);
        for (std::size_t u = 2500; u < 2530; ++u) {
            append(u);
            view_->refresh();
            (void)grabOf(*view_);
        }
        QVERIFY(view_->pixelsPerUpdate() < 1.0);
        HeatmapView fresh;
        fresh.resize(QSize(520, 300));
        fresh.setStore(&store_);
        fresh.show();
        QVERIFY(QTest::qWaitForWindowExposed(&fresh));
        fresh.refresh();
        QCOMPARE(fresh.pixelsPerUpdate(), view_->pixelsPerUpdate());
        QVERIFY(grabOf(fresh) == grabOf(*view_));
        // Zoomed in from the fit, still following: a whole number of updates per pixel, the first
        // shown a multiple of it; appends shift the columns and still paint what a full resample does.
        view_->zoomUpdates(1.5);
        fresh.zoomUpdates(1.5);
        const double k = 1.0 / view_->pixelsPerUpdate();
        QCOMPARE(k, std::round(k));
        QVERIFY(view_->followsLiveEdge());
        for (std::size_t u = 2530; u < 2560; ++u) {
            append(u);
            view_->refresh();
            QCOMPARE(view_->firstVisibleUpdate() % std::size_t(k), std::size_t(0));
            (void)grabOf(*view_);
        }
        fresh.refresh();
        QCOMPARE(fresh.firstVisibleUpdate(), view_->firstVisibleUpdate());
        QVERIFY(grabOf(fresh) == grabOf(*view_));
    }

    // The block filter: only the given blocks, in the given order, for painting, hit tests,
    // selection, scrolling and tooltips; nullopt brings every block back.
    void blockFilterLimitsTheRows() {
        makeView(6);
        QSignalSpy spy(view_.get(), &HeatmapView::selectionChanged);
        view_->setShownBlocks(std::vector<int>{3, 1, 9});  // 9 does not exist: no row
        QCOMPARE(view_->shownRowCount(), 2);
        QCOMPARE(view_->blockOfRow(0), 3);
        QCOMPARE(view_->rowOfBlock(1), 1);
        QCOMPARE(view_->rowOfBlock(0), -1);
        QVERIFY(!view_->cellRect(0, 2).isValid());
        QVERIFY(view_->cellRect(3, 2).bottom() < view_->cellRect(1, 2).top());
        const QImage shot = grabOf(*view_);
        for (int b : {3, 1}) {
            for (std::size_t u = 0; u < 6; ++u) {
                const QRect r = view_->cellRect(b, u);
                QVERIFY(sameRgb(shot.pixel(r.left() + 1, r.center().y()), expectedColor(b, u)));
                const auto cell = view_->cellAt(QPoint(r.left() + 1, r.center().y()));
                QVERIFY(cell && cell->block == b && cell->update == u);
                QCOMPARE(view_->rowAt(r.center()), b);
            }
        }
        QVERIFY(view_->rowToolTip(1).contains(QStringLiteral("blocks.1")));
        // A rubber band over the two rows selects their blocks, not the hidden ones between.
        const QPoint from = view_->cellRect(3, 1).center(), to = view_->cellRect(1, 4).center();
        sendMouse(view_->viewport(), QEvent::MouseButtonPress, from, Qt::LeftButton, Qt::LeftButton);
        sendMouse(view_->viewport(), QEvent::MouseMove, to, Qt::NoButton, Qt::LeftButton);
        sendMouse(view_->viewport(), QEvent::MouseButtonRelease, to, Qt::LeftButton, Qt::NoButton);
        QCOMPARE(lastSelection(spy), std::vector<int>({1, 3}));
        const QImage exported = view_->renderToImage(view_->viewport()->size());
        QVERIFY(sameRgb(exported.pixel(view_->cellRect(1, 0).left() + 1, view_->cellRect(1, 0).center().y()),
                        expectedColor(1, 0)));
        view_->setShownBlocks(std::vector<int>{});
        QVERIFY(view_->emptyStateText().contains(QStringLiteral("filter")));
        view_->setShownBlocks(std::nullopt);
        QCOMPARE(view_->shownRowCount(), kBlocks);
        QVERIFY(view_->cellRect(0, 2).isValid());
    }

    // Zoomed out with more blocks than pixel rows, a pixel pools only the blocks shown.
    void pooledRowsUseOnlyShownBlocks() {
        constexpr int kMany = 600, kSpike = 401;
        store_.reset(sp::uniform_layout(kMany));
        for (std::size_t u = 0; u < 3000; ++u) {
            store_.append(shapedRecord(u, kMany, [u](int b, sp::BlockDetail& d) {
                d.sensitivity = b == kSpike && u == 1234 ? 0.95 : 0.1;
                return true;
            }));
        }
        view_ = std::make_unique<HeatmapView>();
        view_->resize(QSize(420, 300));
        view_->setStore(&store_);
        view_->show();
        QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
        view_->refresh();
        auto hot_pixels = [this](QPoint* where) {
            const QImage shot = grabOf(*view_);
            int hot = 0;
            for (int y = 0; y < shot.height(); ++y)
                for (int x = 0; x < shot.width(); ++x)
                    if (sameRgb(shot.pixel(x, y), sensitivityColor(0.95f))) {
                        ++hot;
                        *where = QPoint(x, y);
                    }
            return hot;
        };
        QPoint where;
        QVERIFY(hot_pixels(&where) > 0);
        std::vector<int> even;
        for (int b = 0; b < kMany; b += 2) even.push_back(b);
        view_->setShownBlocks(even);  // the spike's block is odd: hidden
        QVERIFY(view_->pixelsPerBlock() < 1.0);
        QCOMPARE(hot_pixels(&where), 0);
        even.push_back(kSpike);  // shown, as the last row
        view_->setShownBlocks(even);
        QVERIFY(hot_pixels(&where) > 0);
        const auto cell = view_->cellAt(where);
        QVERIFY(cell);
        QCOMPARE(cell->block, kSpike);
        QCOMPARE(cell->update, std::size_t(1234));
    }

    // Pinned periods are a band along the top of the row across exactly those updates, zoomed
    // out (a pixel column showing any pinned update) and zoomed in; config periods likewise.
    void pinnedPeriodsAreMarkedAtEveryZoom() {
        store_.reset(sp::uniform_layout(kBlocks));
        for (std::size_t u = 0; u < 3000; ++u) {
            store_.append(shapedRecord(u, kBlocks, [u](int b, sp::BlockDetail& d) {
                d.sensitivity = 0.3;
                if (b == 2 && u >= 1000 && u < 1003) d.forced = sp::ForcedBy::pin;
                if (b == 0) d.forced = sp::ForcedBy::config;
                return true;
            }));
        }
        view_ = std::make_unique<HeatmapView>();
        view_->resize(QSize(640, 360));
        view_->setStore(&store_);
        view_->show();
        QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
        view_->refresh();
        const double px = view_->pixelsPerUpdate();
        QVERIFY(px < 1.0);
        const QRgb pin = 0xFF0072B2u, config = 0xFF56B4E9u;  // heatmap_glyphs.h
        const QImage shot = grabOf(*view_);
        // Pixel column 0 is the one whose centre falls in update floor(0.5 / px).
        const auto centred = std::size_t(std::floor(0.5 / px));
        const int left = view_->cellRect(2, centred).left();
        const int y = view_->cellRect(2, centred).top() + 1;
        int pinned = 0;
        for (int x = left; x < left + int(3000 * px); ++x) {
            if (!sameRgb(shot.pixel(x, y), pin)) continue;
            ++pinned;
            const auto first = std::size_t(std::floor((x - left) / px));
            const auto last = std::size_t(std::floor((x - left + 1) / px));
            QVERIFY2(first < 1003 && last > 1000,
                     qPrintable(QString("x %1: updates %2..%3").arg(x).arg(first).arg(last)));
        }
        QVERIFY2(pinned >= 1 && pinned <= 2, qPrintable(QString::number(pinned)));
        QVERIFY(!sameRgb(shot.pixel(left + 5, y), pin));
        QVERIFY(sameRgb(shot.pixel(left + 5, view_->cellRect(0, centred).top() + 1), config));
        QVERIFY(
            sameRgb(shot.pixel(left + 5, view_->cellRect(2, centred).center().y()), sensitivityColor(0.3f)));
        view_->zoomUpdates(1000.0);  // 48 px per update
        view_->scrollToUpdate(995);
        const QImage close = grabOf(*view_);
        for (std::size_t u : {1000u, 1002u})
            QVERIFY(sameRgb(close.pixel(view_->cellRect(2, u).center().x(), view_->cellRect(2, u).top() + 1),
                            pin));
        for (std::size_t u : {999u, 1003u}) {
            const QRect r = view_->cellRect(2, u);
            QVERIFY(!sameRgb(close.pixel(r.center().x(), r.top() + 1), pin));
        }
    }

    // A command in flight for a block (RunSession::pendingFor) outlines its row and leads its
    // tooltip, until the agent applies it.
    void pendingCommandIsShownOnItsRow() {
        sp::ui::registerUiMetaTypes();
        auto owned = std::make_unique<FakeTelemetrySource>();
        FakeTelemetrySource* source = owned.get();
        RunSession session(std::move(owned));
        source->state(SourceState::live);
        source->header(sp::test::runHeader("run-A", 3));
        source->records({sp::test::uniformUpdate(10, 3)});
        HeatmapView view;
        view.resize(500, 300);
        view.setSession(&session);
        view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&view));
        view.refresh();
        const QImage before = grabOf(view);
        const QString id = session.pin({1}, sp::Precision::int8);
        QVERIFY(!id.isEmpty());
        QVERIFY(view.rowShowsPending(1));
        QVERIFY(!view.rowShowsPending(0));
        QVERIFY2(view.rowToolTip(1).startsWith(QStringLiteral("pending: pin int8")),
                 qPrintable(view.rowToolTip(1)));
        QVERIFY(!view.rowToolTip(0).contains(QStringLiteral("pending")));
        const QImage pending = grabOf(view);
        auto changed_in = [&](int block, const QImage& a, const QImage& b) {
            const QRect row = view.cellRect(block, 0);
            int changed = 0;
            for (int y = row.top() + 3; y < row.bottom() - 3; ++y)  // inside the row, not its edges
                for (int x = 0; x < a.width(); ++x) changed += a.pixel(x, y) != b.pixel(x, y) ? 1 : 0;
            return changed;
        };
        QVERIFY(changed_in(1, before, pending) > 20);
        QCOMPARE(changed_in(0, before, pending), 0);
        applyCommand(*source, id, QStringLiteral(R"({"cmd":"pin","blocks":[1],"precision":"int8"})"));
        QVERIFY(!view.rowShowsPending(1));
        QVERIFY(grabOf(view) == before);
    }

    // Precision shows on the cells at every cell size the legend names: corner squares on big
    // cells, a line along the bottom of rows of 6 px or more otherwise (zoomed out: a pixel column
    // with any non-BF16 update); and the legend says so.
    void precisionShowsWhereTheLegendSays() {
        makeView(3000);
        QVERIFY(view_->pixelsPerUpdate() < 1.0);
        QVERIFY(!view_->cornerMarksShown());
        QVERIFY(view_->precisionStripShown());
        const QImage shot = grabOf(*view_);
        const auto centred = std::size_t(std::floor(0.5 / view_->pixelsPerUpdate()));
        const QRect int8 = view_->cellRect(1, centred), fp8 = view_->cellRect(3, centred),
                    bf16 = view_->cellRect(2, centred);
        QVERIFY2(sameRgb(shot.pixel(int8.left() + 3, int8.bottom()), precisionColor(sp::Precision::int8)),
                 qPrintable(QString("%1 at %2,%3, rect %4")
                                .arg(shot.pixel(int8.left() + 3, int8.bottom()), 0, 16)
                                .arg(int8.left() + 3)
                                .arg(int8.bottom())
                                .arg(int8.height())));
        QVERIFY(sameRgb(shot.pixel(fp8.left() + 3, fp8.bottom()), precisionColor(sp::Precision::fp8_e4m3)));
        QVERIFY(!sameRgb(shot.pixel(bf16.left() + 3, bf16.bottom()), precisionColor(sp::Precision::bf16)));
        makeView(6);
        QVERIFY(view_->cornerMarksShown());
        QVERIFY(!view_->precisionStripShown());
        view_->setColorMode(HeatmapView::ColorMode::precision);  // the cells are the precision
        QVERIFY(!view_->cornerMarksShown() && !view_->precisionStripShown());
        HeatmapLegend legend;
        QVERIFY(legend.entryTexts().contains(QStringLiteral("pinned: badge, band")));
        QVERIFY(legend.entryTexts().contains(QStringLiteral("command pending")));
        QVERIFY(legend.note().contains(QStringLiteral("10 px")) &&
                legend.note().contains(QStringLiteral("6 px")));
    }

    void cleanup() { view_.reset(); }
};

QTEST_MAIN(TestHeatmapMarks)
#include "test_heatmap_marks.moc"
