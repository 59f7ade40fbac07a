#pragma once
// Min/max decimation of a series for drawing: at most a few points per pixel column, so a chart of a
// 100k-update run costs what a chart of a few thousand points costs, and no spike is lost (each
// column keeps its minimum and its maximum, in their original order).
#include <cstddef>
#include <vector>

#include <QList>
#include <QPointF>

namespace sp::ui {

// What a NaN y means.
enum class GapPolicy {
    break_line,  // the line is interrupted: a new segment starts after the gap
    skip,        // the sample is ignored: the line connects its neighbours (sparse series, e.g. eval loss)
};

struct DecimatedSeries {
    QList<QPointF> points;
    // Index into `points` where each segment starts; segment_starts[0] == 0 when points is
    // non-empty. With GapPolicy::skip there is at most one segment.
    std::vector<qsizetype> segment_starts;

    int segmentCount() const { return static_cast<int>(segment_starts.size()); }
    // Points [segmentBegin(i), segmentEnd(i)) of segment i.
    qsizetype segmentBegin(int i) const { return segment_starts[std::size_t(i)]; }
    qsizetype segmentEnd(int i) const {
        const std::size_t next = std::size_t(i) + 1;
        return next < segment_starts.size() ? segment_starts[next] : points.size();
    }
};

// Decimates samples (x[i], y[i]), i < n, for a plot showing x in [x_lo, x_hi] across `pixel_width`
// columns. `x` must be non-decreasing (steps or update indices). The range is cut first by binary
// search (keeping one sample beyond each edge so the line reaches the border), then, when more than
// two samples per column remain, each column keeps its finite minimum and maximum. Gaps narrower
// than a column collapse: a column breaks the line at most once. O(log n + samples in range).
// Result: at most 2 points per column (4 in a column holding a gap) plus the 2 edge samples.
DecimatedSeries decimateMinMax(const double* x, const float* y, std::size_t n, double x_lo, double x_hi,
                               int pixel_width, GapPolicy gaps = GapPolicy::break_line);

inline DecimatedSeries decimateMinMax(const std::vector<double>& x, const std::vector<float>& y, double x_lo,
                                      double x_hi, int pixel_width, GapPolicy gaps = GapPolicy::break_line) {
    return decimateMinMax(x.data(), y.data(), x.size() < y.size() ? x.size() : y.size(), x_lo, x_hi,
                          pixel_width, gaps);
}

}  // namespace sp::ui
