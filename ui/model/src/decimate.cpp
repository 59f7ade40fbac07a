#include "sp/ui/decimate.h"

#include <algorithm>
#include <cmath>

#include "segment_writer.h"

namespace sp::ui {

namespace {

using detail::SegmentWriter;

// The finite minimum and maximum seen in one pixel column so far.
struct ColumnExtremes {
    std::size_t min_i = 0;
    std::size_t max_i = 0;
    bool any = false;

    void add(std::size_t i, const float* y) {
        if (!any) {
            min_i = max_i = i;
            any = true;
            return;
        }
        if (y[i] < y[min_i]) min_i = i;
        if (y[i] > y[max_i]) max_i = i;
    }
    // Emits the extremes in their original order and forgets them.
    void flush(const double* x, const float* y, SegmentWriter& w) {
        if (!any) return;
        const std::size_t first = std::min(min_i, max_i);
        const std::size_t second = std::max(min_i, max_i);
        w.point(x[first], y[first]);
        if (second != first) w.point(x[second], y[second]);
        any = false;
    }
};

}  // namespace

DecimatedSeries decimateMinMax(const double* x, const float* y, std::size_t n, double x_lo, double x_hi,
                               int pixel_width, GapPolicy gaps) {
    DecimatedSeries out;
    if (n == 0 || !(x_hi >= x_lo) || pixel_width <= 0) return out;

    // Range cut, keeping one sample beyond each edge so the line runs to the plot's border.
    std::size_t begin = std::size_t(std::lower_bound(x, x + n, x_lo) - x);
    std::size_t end = std::size_t(std::upper_bound(x, x + n, x_hi) - x);
    if (begin > 0) --begin;
    if (end < n) ++end;
    if (begin >= end) return out;

    const bool breaks = gaps == GapPolicy::break_line;
    SegmentWriter writer(out);
    const std::size_t count = end - begin;
    if (count <= 2 * std::size_t(pixel_width)) {
        out.points.reserve(qsizetype(count));
        for (std::size_t i = begin; i < end; ++i) {
            if (std::isnan(y[i])) {
                if (breaks) writer.gap();
                continue;
            }
            writer.point(x[i], y[i]);
        }
        return out;
    }

    out.points.reserve(2 * pixel_width + 4);
    const double span = x_hi - x_lo;
    const double per_x = span > 0.0 ? double(pixel_width) / span : 0.0;
    auto column_of = [&](double xv) -> long {
        if (xv < x_lo) return -1;  // the edge samples get columns of their own
        if (xv > x_hi) return pixel_width;
        return std::min(long(pixel_width) - 1, long((xv - x_lo) * per_x));
    };

    ColumnExtremes column;
    long current = column_of(x[begin]);
    bool column_broke = false;  // a column breaks the line at most once (bounds the point count)
    for (std::size_t i = begin; i < end; ++i) {
        const long c = column_of(x[i]);
        if (c != current) {
            column.flush(x, y, writer);
            current = c;
            column_broke = false;
        }
        if (std::isnan(y[i])) {
            // A gap: what the column held so far ends the segment; what follows starts a new one.
            // Further gaps in the same column are narrower than a pixel and are not drawn.
            if (breaks && !column_broke) {
                column.flush(x, y, writer);
                writer.gap();
                column_broke = true;
            }
            continue;
        }
        column.add(i, y);
    }
    column.flush(x, y, writer);
    return out;
}

}  // namespace sp::ui
