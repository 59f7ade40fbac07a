#include "sp/ui/store_series.h"

#include <algorithm>
#include <cmath>

#include "segment_writer.h"

namespace sp::ui {

StoreSeries StoreSeries::run(const TelemetryStore& store, RunField field, std::size_t count) {
    StoreSeries s;
    s.store_ = &store;
    s.count_ = std::min(count, store.updateCount());
    s.run_field_ = field;
    return s;
}

StoreSeries StoreSeries::block(const TelemetryStore& store, int block, BlockField field, std::size_t count) {
    StoreSeries s;
    s.column_ = store.series(block, field);
    if (s.column_.empty()) return s;
    s.store_ = &store;
    s.count_ = std::min(count, s.column_.size());
    s.run_level_ = false;
    s.block_ = block;
    s.block_field_ = field;
    return s;
}

double StoreSeries::x(std::size_t u) const {
    const UpdateRow& row = store_->row(u);
    return double(run_level_ && run_field_ == RunField::eval_loss ? row.eval_step : row.step);
}

float StoreSeries::y(std::size_t u) const {
    return run_level_ ? runValue(store_->row(u), run_field_) : column_[u];
}

SpanStats StoreSeries::stats(std::size_t first, std::size_t last) const {
    if (!store_) return {};
    last = std::min(last, count_);
    if (first >= last) return {};
    return run_level_ ? store_->runStats(run_field_, first, last)
                      : store_->stats(block_, block_field_, first, last);
}

std::size_t StoreSeries::lowerBound(double v) const {
    std::size_t lo = 0, hi = count_;
    while (lo < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (x(mid) < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

std::size_t StoreSeries::upperBound(double v) const {
    std::size_t lo = 0, hi = count_;
    while (lo < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (x(mid) <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

std::vector<ColumnEnvelope> columnEnvelopes(const StoreSeries& series, double x_lo, double x_hi,
                                            int columns) {
    std::vector<ColumnEnvelope> out;
    if (columns <= 0 || !(x_hi >= x_lo)) return out;
    out.resize(std::size_t(columns));
    const double width = (x_hi - x_lo) / double(columns);
    std::size_t first = series.lowerBound(x_lo);
    for (int c = 0; c < columns; ++c) {
        const bool last_column = c + 1 == columns;
        const std::size_t last =
            last_column ? series.upperBound(x_hi) : series.lowerBound(x_lo + double(c + 1) * width);
        ColumnEnvelope& column = out[std::size_t(c)];
        column.first = first;
        column.last = std::max(first, last);
        column.stats = series.stats(column.first, column.last);
        first = column.last;
    }
    return out;
}

namespace {

using detail::SegmentWriter;

// One sample, or a gap where it has no value.
void writeSample(const StoreSeries& s, std::size_t u, GapPolicy gaps, SegmentWriter& w) {
    const float v = s.y(u);
    if (!std::isnan(v))
        w.point(s.x(u), v);
    else if (gaps == GapPolicy::break_line)
        w.gap();
}

// Each column's extremes from the summary: the one nearer the line's last point first, so a flat
// stretch draws as a line, not as a zigzag.
void writeEnvelope(const StoreSeries& s, double x_lo, double x_hi, int columns, GapPolicy gaps,
                   DecimatedSeries& out, SegmentWriter& w) {
    for (const ColumnEnvelope& c : columnEnvelopes(s, x_lo, x_hi, columns)) {
        if (c.first == c.last) continue;
        if (!c.stats.count) {
            if (gaps == GapPolicy::break_line) w.gap();
            continue;
        }
        const double x_first = s.x(c.first), x_last = s.x(c.last - 1);
        const double previous = out.points.isEmpty() ? double(c.stats.min) : out.points.back().y();
        const bool max_first =
            std::abs(previous - double(c.stats.max)) < std::abs(previous - double(c.stats.min));
        w.point(x_first, max_first ? c.stats.max : c.stats.min);
        if (c.stats.max != c.stats.min) w.point(x_last, max_first ? c.stats.min : c.stats.max);
    }
}

}  // namespace

DecimatedSeries drawStoreSeries(const StoreSeries& series, double x_lo, double x_hi, int columns,
                                GapPolicy gaps) {
    DecimatedSeries out;
    if (series.empty() || !(x_hi >= x_lo) || columns <= 0) return out;
    const std::size_t begin = series.lowerBound(x_lo), end = series.upperBound(x_hi);
    SegmentWriter writer(out);
    if (end - begin <= 2 * std::size_t(columns)) {
        // Few samples: all of them, and one beyond each edge.
        const std::size_t from = begin > 0 ? begin - 1 : begin;
        const std::size_t to = std::min(series.size(), end + 1);
        out.points.reserve(qsizetype(to - from));
        for (std::size_t u = from; u < to; ++u) writeSample(series, u, gaps, writer);
        return out;
    }
    out.points.reserve(2 * columns + 2);
    if (begin > 0) writeSample(series, begin - 1, gaps, writer);
    writeEnvelope(series, x_lo, x_hi, columns, gaps, out, writer);
    if (end < series.size()) writeSample(series, end, gaps, writer);
    return out;
}

}  // namespace sp::ui
