// StoreSeries (ui/model/include/sp/ui/store_series.h): chart lines read in place from the store, and
// their zoomed-out min/max envelopes from the summaries, against a brute-force scan of the values.
#include <cmath>
#include <random>

#include <QtTest>

#include "fake_telemetry_source.h"
#include "sp/ui/store_series.h"

using sp::Precision;
using sp::ui::BlockField;
using sp::ui::RunField;
using sp::ui::StoreSeries;
using sp::ui::TelemetryStore;
using namespace sp::test;

namespace {

// A run whose steps advance unevenly (1 to 4 per update), with a block's sensitivity and the train
// loss random and missing in stretches (both gap kinds: scattered and long).
void fillRun(TelemetryStore& store, std::size_t updates, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    store.reset(sp::uniform_layout(2));
    std::int64_t step = 0;
    for (std::size_t u = 0; u < updates; ++u) {
        step += 1 + std::int64_t(rng() % 4);
        const bool gap = u % 89 < 3 || (u >= 3000 && u < 3400);
        std::vector<sp::BlockDetail> details{blockDetail(1, Precision::int8, unit(rng))};
        if (!gap) details.insert(details.begin(), blockDetail(0, Precision::int8, unit(rng)));
        sp::UpdateRecord r = updateRecord(step, std::move(details));
        if (!gap) r.train_loss = 2.0 + unit(rng);
        store.append(r);
    }
}

// The updates whose x falls in column c of [lo, hi] split in `columns` (the last one closed), and
// their finite minimum and maximum, by scanning every update.
struct Brute {
    std::size_t count = 0;
    float min = 0.0f, max = 0.0f;
};
Brute bruteColumn(const StoreSeries& s, double lo, double hi, int columns, int c) {
    const double width = (hi - lo) / double(columns);
    const double from = lo + double(c) * width, to = lo + double(c + 1) * width;
    Brute b;
    for (std::size_t u = 0; u < s.size(); ++u) {
        const double x = s.x(u);
        const bool in = x >= from && (c + 1 == columns ? x <= hi : x < to);
        const float v = s.y(u);
        if (!in || std::isnan(v)) continue;
        b.min = b.count ? std::min(b.min, v) : v;
        b.max = b.count ? std::max(b.max, v) : v;
        ++b.count;
    }
    return b;
}

// The column's stats against the brute force: the summary keeps the values as appended, the
// column their fp16 (sensitivity), so within fp16's rounding; the loss exactly.
void checkEnvelope(const StoreSeries& s, double lo, double hi, int columns, float tolerance) {
    const auto envelope = sp::ui::columnEnvelopes(s, lo, hi, columns);
    QCOMPARE(int(envelope.size()), columns);
    for (int c = 0; c < columns; ++c) {
        const Brute want = bruteColumn(s, lo, hi, columns, c);
        const sp::ui::SpanStats& got = envelope[std::size_t(c)].stats;
        QCOMPARE(got.count, std::uint64_t(want.count));
        if (!want.count) continue;
        QVERIFY2(std::abs(got.min - want.min) <= tolerance, qPrintable(QString("column %1 min").arg(c)));
        QVERIFY2(std::abs(got.max - want.max) <= tolerance, qPrintable(QString("column %1 max").arg(c)));
    }
}

}  // namespace

class TestStoreSeries : public QObject {
    Q_OBJECT
  private slots:
    void envelopeMatchesBruteForce() {
        TelemetryStore store;
        fillRun(store, 6000, 11);
        const StoreSeries sensitivity = StoreSeries::block(store, 0, BlockField::sensitivity, 6000);
        const StoreSeries loss = StoreSeries::run(store, RunField::train_loss, 6000);
        QCOMPARE(sensitivity.size(), std::size_t(6000));
        std::mt19937 rng(5);
        const double last = sensitivity.x(5999);
        for (int trial = 0; trial < 60; ++trial) {
            double lo = double(rng() % std::uint32_t(last)), hi = double(rng() % std::uint32_t(last));
            if (lo > hi) std::swap(lo, hi);
            const int columns = 1 + int(rng() % 300);
            checkEnvelope(sensitivity, lo, hi, columns, 1e-3f);
            checkEnvelope(loss, lo, hi, columns, 0.0f);
        }
        checkEnvelope(sensitivity, 0.0, last, 640, 1e-3f);  // the whole run, as a chart draws it
    }

    void zoomedOutDrawsAtMostTwoPointsPerColumn() {
        TelemetryStore store;
        fillRun(store, 20000, 3);
        const StoreSeries s = StoreSeries::block(store, 0, BlockField::sensitivity, 20000);
        const double lo = s.x(1000), hi = s.x(18000);
        const int columns = 200;
        const sp::ui::DecimatedSeries drawn = sp::ui::drawStoreSeries(s, lo, hi, columns);
        QVERIFY(drawn.points.size() <= 2 * columns + 2);
        QVERIFY(drawn.segmentCount() >= 2);  // the long gap breaks the line
        // Its extremes inside the range are the range's, as a scan of every update finds them.
        float want_min = 1.0f, want_max = 0.0f, got_min = 1.0f, got_max = 0.0f;
        for (std::size_t u = 1000; u <= 18000; ++u)
            if (!std::isnan(s.y(u)))
                want_min = std::min(want_min, s.y(u)), want_max = std::max(want_max, s.y(u));
        for (const QPointF& p : drawn.points)
            if (p.x() >= lo && p.x() <= hi)
                got_min = std::min(got_min, float(p.y())), got_max = std::max(got_max, float(p.y()));
        QVERIFY(std::abs(got_min - want_min) <= 1e-3f);
        QVERIFY(std::abs(got_max - want_max) <= 1e-3f);
        // Zoomed in (fewer updates than 2 per column): the samples themselves, in order.
        const sp::ui::DecimatedSeries near = sp::ui::drawStoreSeries(s, s.x(100), s.x(150), columns);
        QCOMPARE(near.points.first().x(), s.x(99));
        QCOMPARE(near.points.last().x(), s.x(151));
    }

    void retentionKeepsTheEnvelopeOfDroppedUpdates() {
        // Updates the store dropped still draw: their whole spans come from the summary.
        TelemetryStore store;
        store.setRetainUpdates(1024);
        fillRun(store, 8000, 9);
        QVERIFY(store.firstKept() > 4096);
        const StoreSeries s = StoreSeries::block(store, 1, BlockField::sensitivity, 8000);
        const auto envelope = sp::ui::columnEnvelopes(s, s.x(0), s.x(4095), 4);  // 1,024 updates each
        for (const auto& c : envelope) QVERIFY(c.stats.count > 0);
    }
};

QTEST_MAIN(TestStoreSeries)
#include "test_store_series.moc"
