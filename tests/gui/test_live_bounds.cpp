// A long live run with a small retention (TelemetryStore::setRetainUpdates): what the heatmap and
// the charts hold stays bounded by the retention, not by the run's length.
#include <QtTest>

#include <algorithm>

#include "heatmap_image.h"
#include "heatmap_pooled.h"
#include "heatmap_runs.h"
#include "heatmap_test_data.h"
#include "sp/ui/charts_panel.h"

using namespace sp::ui;
using namespace sp::ui::heatmap_test;

namespace {
constexpr std::size_t kRetain = TelemetryStore::kMinRetainUpdates;  // 1,024
constexpr int kLiveBlocks = 64;
constexpr std::size_t kUpdates = 20 * kRetain;
constexpr std::size_t kBurst = 97;  // updates between two repaints
}  // namespace

class TestLiveBounds : public QObject {
    Q_OBJECT
  private slots:
    void heatmapCopiesFollowTheRetention() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(kLiveBlocks));
        store.setRetainUpdates(kRetain);
        HeatmapImage image;
        PooledSensitivity pooled;
        std::size_t image_peak = 0, pooled_peak = 0;
        for (std::size_t u = 0; u < kUpdates; ++u) {
            store.append(makeRecord(u, kLiveBlocks));
            if ((u + 1) % kBurst != 0 && u + 1 != kUpdates) continue;
            image.sync(store, HeatmapColorMode::sensitivity);
            pooled.sync(store, image.generation());
            image_peak = std::max(image_peak, image.heldBytes());
            pooled_peak = std::max(pooled_peak, pooled.heldBytes());
        }
        // The columns the store keeps (at most 1.25 x the retention, plus a burst), with the image's
        // doubling: 2.5 x the retention bounds the lines held. Unbounded: 20 x.
        const double lines = 2.5 * double(kRetain + kBurst);
        QVERIFY2(double(image_peak) <= lines * kLiveBlocks * sizeof(QRgb),
                 qPrintable(QString::number(image_peak)));
        const std::size_t pooled_line = kLiveBlocks + (kLiveBlocks + 7) / 8;  // levels and presence bits
        QVERIFY2(double(pooled_peak) <= lines * double(pooled_line),
                 qPrintable(QString::number(pooled_peak)));
        QCOMPARE(image.firstColumn(), store.firstKept());
        QCOMPARE(pooled.firstColumn(), store.firstKept());
        // Kept updates draw as before; dropped ones as missing.
        const std::size_t kept = store.firstKept();
        QCOMPARE(image.color(5, kUpdates - 1), sensitivityColor(sensitivityOf(5, kUpdates - 1)));
        QCOMPARE(image.color(5, kept), sensitivityColor(sensitivityOf(5, kept)));
        QCOMPARE(image.color(5, kept - 1), kMissingColor);
        // A rebuild (another colour mode) starts at the first kept update.
        image.sync(store, HeatmapColorMode::precision);
        QCOMPARE(image.firstColumn(), kept);
        QVERIFY(image.heldBytes() <= std::size_t(lines * kLiveBlocks * sizeof(QRgb)));
    }

    // Runs of marks grow with every change of precision or pin: a block flipping at every update
    // makes one run per two updates. With a retention they stay bounded by it, and match the runs a
    // fresh build over the kept updates makes.
    void heatmapRunsFollowTheRetention() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(kLiveBlocks));
        store.setRetainUpdates(kRetain);
        HeatmapRuns runs;
        std::size_t peak = 0;
        for (std::size_t u = 0; u < kUpdates; ++u) {
            sp::UpdateRecord r = makeRecord(u, kLiveBlocks);
            for (sp::BlockDetail& d : r.block_details) {
                const bool odd = (u + std::size_t(d.id)) % 2 == 1;
                d.precision = odd ? sp::Precision::int8 : sp::Precision::bf16;
                // Block 0 stays forced by the config: long runs, one across the first kept update.
                d.forced = d.id == 0 ? sp::ForcedBy::config : (odd ? sp::ForcedBy::pin : sp::ForcedBy::none);
            }
            store.append(r);
            if ((u + 1) % kBurst != 0 && u + 1 != kUpdates) continue;
            runs.sync(store, 1);
            peak = std::max(peak, runs.heldRuns());
        }
        // Per block, at most one pin and one precision run per two held updates (held: at most 1.25 x
        // the retention, plus a burst), and one config run. Unbounded: 20 x the retention.
        const double held = 1.25 * double(kRetain) + double(kBurst);
        QVERIFY2(double(peak) <= kLiveBlocks * (held + 4), qPrintable(QString::number(peak)));
        QVERIFY(store.firstKept() > 0);
        HeatmapRuns fresh;
        fresh.sync(store, 2);
        auto same = [](const UpdateRuns& a, const UpdateRuns& b) {
            return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                              [](const UpdateRun& x, const UpdateRun& y) {
                                  return x.first == y.first && x.last == y.last && x.value == y.value;
                              });
        };
        QVERIFY(!runs.configForced(0).empty());
        for (int b = 0; b < kLiveBlocks; ++b) {
            QVERIFY(!runs.notBf16(b).empty());
            QVERIFY(runs.notBf16(b).front().first >= store.firstKept());
            QVERIFY2(same(runs.notBf16(b), fresh.notBf16(b)), qPrintable(QString::number(b)));
            QVERIFY(same(runs.pinned(b), fresh.pinned(b)));
            QVERIFY(same(runs.configForced(b), fresh.configForced(b)));
        }
    }

    void chartsDrawABoundedNumberOfPoints() {
        TelemetryStore store;
        store.reset(sp::uniform_layout(kLiveBlocks));
        store.setRetainUpdates(kRetain);
        ChartsPanel charts;
        charts.resize(900, 700);
        charts.setStore(&store);
        charts.setSelectedBlocks({0, 1, 2});
        qsizetype peak = 0;
        for (std::size_t u = 0; u < kUpdates; ++u) {
            store.append(makeRecord(u, kLiveBlocks));
            if ((u + 1) % (8 * kBurst) != 0) continue;
            charts.refresh();
            peak = std::max(peak, charts.drawnPointCount());
        }
        // 2 points per column of at most ~450 columns per line, and a few lines per chart.
        QVERIFY2(peak > 0 && peak < 20000, qPrintable(QString::number(peak)));
        const auto line = charts.linePoints(ChartsPanel::Chart::sensitivity, QStringLiteral("blocks.0"));
        QVERIFY(line && !line->isEmpty());
        QVERIFY(line->size() <= 2 * 900 + 2);
    }
};

QTEST_MAIN(TestLiveBounds)
#include "test_live_bounds.moc"
