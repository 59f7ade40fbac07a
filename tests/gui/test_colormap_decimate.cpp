// Colormap (viridis LUT, clamping, missing colour) and min/max decimation, pure logic.
#include <QtTest>

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "sp/ui/colormap.h"
#include "sp/ui/decimate.h"

using namespace sp::ui;

namespace {

// CIE L* (0..100) of an sRGB colour.
double luminance(QRgb c) {
    auto linear = [](int v) {
        const double x = v / 255.0;
        return x <= 0.04045 ? x / 12.92 : std::pow((x + 0.055) / 1.055, 2.4);
    };
    const double y = 0.2126 * linear(qRed(c)) + 0.7152 * linear(qGreen(c)) + 0.0722 * linear(qBlue(c));
    const double f = y > 216.0 / 24389.0 ? std::cbrt(y) : (24389.0 / 27.0 * y + 16.0) / 116.0;
    return 116.0 * f - 16.0;
}

std::size_t countInRange(const DecimatedSeries& d, double lo, double hi) {
    std::size_t n = 0;
    for (const QPointF& p : d.points) n += (p.x() >= lo && p.x() <= hi) ? 1 : 0;
    return n;
}

}  // namespace

class TestColormapDecimate : public QObject {
    Q_OBJECT
  private slots:
    void viridisEndpointsAndMiddle() {
        QCOMPARE(sensitivityColor(0.0f), qRgb(0x44, 0x01, 0x54));
        QCOMPARE(sensitivityColor(1.0f), qRgb(0xFD, 0xE7, 0x25));
        QCOMPARE(sensitivityColor(0.5f), qRgb(0x21, 0x91, 0x8C));  // entry 128
        QCOMPARE(sensitivityIndex(0.5f), 128);
        QCOMPARE(int(viridisTable().size()), 256);
        for (QRgb c : viridisTable()) QCOMPARE(qAlpha(c), 255);
    }

    void luminanceIsMonotone() {
        // Viridis rises in lightness; its 8-bit rounding leaves dips far below a visible step
        // (entry 95 is 0.2 L* darker than 94), so: never darker by more than 0.5 L* from one entry to
        // the next, and strictly lighter every 8 entries.
        const auto& t = viridisTable();
        for (std::size_t i = 1; i < t.size(); ++i) {
            QVERIFY2(luminance(t[i]) > luminance(t[i - 1]) - 0.5, qPrintable(QString::number(i)));
        }
        for (std::size_t i = 8; i < t.size(); i += 8) {
            QVERIFY2(luminance(t[i]) > luminance(t[i - 8]) + 1.0, qPrintable(QString::number(i)));
        }
        QVERIFY(luminance(t.back()) - luminance(t.front()) > 60.0);  // ~16 → ~92
        // Colours of increasing sensitivity get lighter at a visible step (0.05).
        for (int i = 1; i <= 20; ++i) {
            QVERIFY(luminance(sensitivityColor(float(i) / 20.0f)) >
                    luminance(sensitivityColor(float(i - 1) / 20.0f)));
        }
    }

    void clampsOutOfRange() {
        QCOMPARE(sensitivityColor(-0.5f), sensitivityColor(0.0f));
        QCOMPARE(sensitivityColor(7.0f), sensitivityColor(1.0f));
        QCOMPARE(sensitivityColor(std::numeric_limits<float>::infinity()), sensitivityColor(1.0f));
        QCOMPARE(sensitivityColor(-std::numeric_limits<float>::infinity()), sensitivityColor(0.0f));
        QVERIFY(sensitivityColor(0.25f) != sensitivityColor(0.75f));
    }

    void nanIsNeutralGrey() {
        const QRgb c = sensitivityColor(std::numeric_limits<float>::quiet_NaN());
        QCOMPARE(c, kMissingColor);
        QCOMPARE(qRed(c), qGreen(c));
        QCOMPARE(qGreen(c), qBlue(c));
        QCOMPARE(sensitivityIndex(std::numeric_limits<float>::quiet_NaN()), -1);
        for (QRgb v : viridisTable()) QVERIFY(v != c);
    }

    void precisionColorsAreDistinct() {
        std::set<QRgb> seen;
        for (sp::Precision p : sp::kAllPrecisions) {
            const QRgb c = precisionColor(p);
            QVERIFY(seen.insert(c).second);
            QVERIFY(c != kMissingColor);
            for (QRgb v : viridisTable()) QVERIFY(v != c);
            QVERIFY(!precisionLabel(p).isEmpty());
        }
    }

    void gradientRunsFromZeroToOne() {
        const QImage v = colormapGradient(QSize(10, 256), Qt::Vertical);
        QCOMPARE(v.pixel(5, 0), sensitivityColor(1.0f));
        QCOMPARE(v.pixel(5, 255), sensitivityColor(0.0f));
        const QImage h = colormapGradient(QSize(256, 4), Qt::Horizontal);
        QCOMPARE(h.pixel(0, 2), sensitivityColor(0.0f));
        QCOMPARE(h.pixel(255, 2), sensitivityColor(1.0f));
        QCOMPARE(h.pixel(128, 3), sensitivityColor(128.0f / 255.0f));
    }

    void fewSamplesPassThrough() {
        const std::vector<double> x = {0, 1, 2, 3, 4};
        const std::vector<float> y = {5, 3, 9, 1, 2};
        const DecimatedSeries d = decimateMinMax(x, y, 0.0, 4.0, 100);
        QCOMPARE(d.points.size(), qsizetype(5));
        QCOMPARE(d.segmentCount(), 1);
        for (int i = 0; i < 5; ++i)
            QCOMPARE(d.points[i], QPointF(x[std::size_t(i)], double(y[std::size_t(i)])));
    }

    void keepsMinAndMaxOfEveryColumn() {
        const std::size_t n = 100000;
        std::vector<double> x(n);
        std::vector<float> y(n);
        std::mt19937 rng(7);
        std::normal_distribution<float> noise(0.0f, 1.0f);
        for (std::size_t i = 0; i < n; ++i) {
            x[i] = double(i) * 10.0;  // steps
            y[i] = noise(rng);
        }
        y[12345] = 100.0f;  // a one-sample spike must survive
        y[77777] = -100.0f;
        const int width = 500;
        const double lo = x.front();
        const double hi = x.back();
        const DecimatedSeries d = decimateMinMax(x, y, lo, hi, width);
        QVERIFY(d.points.size() <= qsizetype(2 * width + 2));
        QVERIFY(d.points.size() >= qsizetype(width));
        QCOMPARE(d.segmentCount(), 1);
        for (qsizetype i = 1; i < d.points.size(); ++i) QVERIFY(d.points[i].x() >= d.points[i - 1].x());
        // Brute force: each column's min and max are among the points of that column.
        std::vector<float> col_min(width, std::numeric_limits<float>::infinity());
        std::vector<float> col_max(width, -std::numeric_limits<float>::infinity());
        auto column = [&](double xv) { return std::min(width - 1, int((xv - lo) * width / (hi - lo))); };
        for (std::size_t i = 0; i < n; ++i) {
            const int c = column(x[i]);
            col_min[std::size_t(c)] = std::min(col_min[std::size_t(c)], y[i]);
            col_max[std::size_t(c)] = std::max(col_max[std::size_t(c)], y[i]);
        }
        std::vector<std::set<float>> seen(width);
        for (const QPointF& p : d.points) seen[std::size_t(column(p.x()))].insert(float(p.y()));
        for (int c = 0; c < width; ++c) {
            QVERIFY2(seen[std::size_t(c)].count(col_min[std::size_t(c)]) == 1,
                     qPrintable(QString::number(c)));
            QVERIFY2(seen[std::size_t(c)].count(col_max[std::size_t(c)]) == 1,
                     qPrintable(QString::number(c)));
        }
        QVERIFY(d.points.contains(QPointF(x[12345], 100.0)));
        QVERIFY(d.points.contains(QPointF(x[77777], -100.0)));
    }

    void gapsBreakTheLine() {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const std::vector<double> x = {0, 1, 2, 3, 4, 5};
        const std::vector<float> y = {1, 2, nan, nan, 3, 4};
        const DecimatedSeries broken = decimateMinMax(x, y, 0.0, 5.0, 100, GapPolicy::break_line);
        QCOMPARE(broken.points.size(), qsizetype(4));
        QCOMPARE(broken.segmentCount(), 2);
        QCOMPARE(broken.segmentBegin(1), qsizetype(2));
        QCOMPARE(broken.points[2], QPointF(4, 3));
        const DecimatedSeries joined = decimateMinMax(x, y, 0.0, 5.0, 100, GapPolicy::skip);
        QCOMPARE(joined.points.size(), qsizetype(4));
        QCOMPARE(joined.segmentCount(), 1);
        // Leading NaNs do not make an empty first segment.
        const std::vector<float> lead = {nan, nan, 1, 2, 3, 4};
        const DecimatedSeries l = decimateMinMax(x, lead, 0.0, 5.0, 100);
        QCOMPARE(l.segmentCount(), 1);
        QCOMPARE(l.points.size(), qsizetype(4));
        // All NaN: nothing to draw.
        const std::vector<float> none(6, nan);
        QVERIFY(decimateMinMax(x, none, 0.0, 5.0, 100).points.isEmpty());
    }

    void gapsSurviveDecimation() {
        const std::size_t n = 20000;
        std::vector<double> x(n);
        std::vector<float> y(n);
        for (std::size_t i = 0; i < n; ++i) {
            x[i] = double(i);
            y[i] = (i >= 8000 && i < 12000) ? std::numeric_limits<float>::quiet_NaN() : float(i % 7);
        }
        const DecimatedSeries d = decimateMinMax(x, y, 0.0, double(n - 1), 200);
        QCOMPARE(d.segmentCount(), 2);
        QCOMPARE(countInRange(d, 8000.0, 11999.0), std::size_t(0));
        QVERIFY(d.points.size() <= qsizetype(4 * 200 + 2));
        // The segment ends before the gap and the next begins after it.
        QVERIFY(d.points[d.segmentEnd(0) - 1].x() < 8000.0);
        QVERIFY(d.points[d.segmentBegin(1)].x() >= 12000.0);
    }

    void pointCountBoundedEvenWithManyGaps() {
        const std::size_t n = 100000;
        std::vector<double> x(n);
        std::vector<float> y(n);
        for (std::size_t i = 0; i < n; ++i) {
            x[i] = double(i);
            y[i] = i % 2 ? std::numeric_limits<float>::quiet_NaN() : float(i % 13);
        }
        const int width = 100;
        const DecimatedSeries d = decimateMinMax(x, y, 0.0, double(n - 1), width);
        QVERIFY(d.points.size() <= qsizetype(4 * width + 2));
        QVERIFY(d.segmentCount() <= width + 1);
        const DecimatedSeries s = decimateMinMax(x, y, 0.0, double(n - 1), width, GapPolicy::skip);
        QVERIFY(s.points.size() <= qsizetype(2 * width + 2));
        QCOMPARE(s.segmentCount(), 1);
    }

    void rangeIsCutWithOneSampleBeyondEachEdge() {
        const std::size_t n = 10000;
        std::vector<double> x(n);
        std::vector<float> y(n);
        for (std::size_t i = 0; i < n; ++i) {
            x[i] = double(i);
            y[i] = float(i);
        }
        const DecimatedSeries d = decimateMinMax(x, y, 1000.0, 1999.0, 2000);  // fits: no decimation
        QCOMPARE(d.points.size(), qsizetype(1002));
        QCOMPARE(d.points.front().x(), 999.0);
        QCOMPARE(d.points.back().x(), 2000.0);
        const DecimatedSeries narrow = decimateMinMax(x, y, 1000.0, 5999.0, 100);
        QVERIFY(narrow.points.size() <= qsizetype(2 * 100 + 2));
        QCOMPARE(narrow.points.front().x(), 999.0);
        QCOMPARE(narrow.points.back().x(), 6000.0);
        QCOMPARE(countInRange(narrow, 0.0, 998.0) + countInRange(narrow, 6001.0, 1e9), std::size_t(0));
    }

    void degenerateInputs() {
        const std::vector<double> x = {0, 1, 2};
        const std::vector<float> y = {1, 2, 3};
        QVERIFY(decimateMinMax(x, y, 0.0, 2.0, 0).points.isEmpty());
        QVERIFY(decimateMinMax(x, y, 2.0, 0.0, 10).points.isEmpty());
        QVERIFY(decimateMinMax(x, y, std::nan(""), 2.0, 10).points.isEmpty());
        QVERIFY(decimateMinMax(std::vector<double>{}, std::vector<float>{}, 0.0, 1.0, 10).points.isEmpty());
        // A range beyond the data keeps the last sample (the line reaches into the view).
        QCOMPARE(decimateMinMax(x, y, 10.0, 20.0, 10).points.size(), qsizetype(1));
        // Equal steps (x_lo == x_hi) are one column.
        const std::vector<double> same(1000, 5.0);
        const std::vector<float> vals(1000, 1.0f);
        QVERIFY(decimateMinMax(same, vals, 5.0, 5.0, 1).points.size() <= qsizetype(2));
    }
};

QTEST_MAIN(TestColormapDecimate)
#include "test_colormap_decimate.moc"
