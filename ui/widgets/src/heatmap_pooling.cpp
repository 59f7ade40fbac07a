#include "heatmap_pooling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "sp/ui/colormap.h"

namespace sp::ui {

namespace {

constexpr float kNone = -std::numeric_limits<float>::infinity();

// The highest of v[first, last), NaN skipped; kNone when there is none. Two independent maxima
// halve the dependency chain of the compare-and-select (the zoomed-out repaint's inner loop).
inline float maxOf(const FieldSeries& v, long first, long last) {
    float a = kNone, b = kNone;
    long u = first;
    for (; u + 1 < last; u += 2) {
        a = v[u] > a ? v[u] : a;
        b = v[u + 1] > b ? v[u + 1] : b;
    }
    if (u < last) a = v[u] > a ? v[u] : a;
    return a > b ? a : b;
}

}  // namespace

CellSpan cellsOfPixel(double first_cell, double px_per_cell, int pixel, long cell_count) {
    CellSpan s;
    if (px_per_cell >= 1.0) {
        s.first = long(std::floor(first_cell + (pixel + 0.5) / px_per_cell));
        s.last = s.first + 1;
    } else {
        s.first = long(std::floor(first_cell + pixel / px_per_cell));
        s.last = std::max(s.first + 1, long(std::floor(first_cell + (pixel + 1) / px_per_cell)));
    }
    s.first = std::max(s.first, 0L);
    s.last = std::min(s.last, cell_count);
    return s;
}

PixelRange pixelsOfCells(double first_cell, double px_per_cell, long first, long last) {
    if (last <= first) return {};
    if (px_per_cell >= 1.0) {  // the pixels whose centres lie in the cells
        return {int(std::ceil((double(first) - first_cell) * px_per_cell - 0.5)),
                int(std::ceil((double(last) - first_cell) * px_per_cell - 0.5))};
    }
    constexpr long kNoLimit = std::numeric_limits<long>::max();
    // The pixel whose span holds cell c: about ceil((c - first_cell + 1) * px) - 1, settled exactly
    // against cellsOfPixel (rounding).
    auto pixel_of = [&](long c) {
        int p = int(std::ceil((double(c) - first_cell + 1.0) * px_per_cell)) - 1;
        while (cellsOfPixel(first_cell, px_per_cell, p, kNoLimit).first > c) --p;
        while (cellsOfPixel(first_cell, px_per_cell, p + 1, kNoLimit).first <= c) ++p;
        return p;
    };
    return {pixel_of(first), pixel_of(last - 1) + 1};
}

void sampleMaxSensitivityInto(QImage& dst, const TelemetryStore& store, double first_col, double px_per_col,
                              std::size_t col_limit, const std::vector<int>& row_blocks, double first_row,
                              double px_per_row, QRgb background) {
    const int w = dst.width();
    const int h = dst.height();
    if (w <= 0 || h <= 0) return;
    const long cols = long(std::min(col_limit, store.updateCount()));
    const long rows = long(row_blocks.size());
    // The distinct update spans of the pixel columns, in order (zoomed in, several columns share
    // one cell: it is reduced once), and which one each column shows (-1: past the data).
    std::vector<CellSpan> spans;
    std::vector<int> span_of_x(static_cast<std::size_t>(w), -1);
    for (int x = 0; x < w; ++x) {
        const CellSpan c = cellsOfPixel(first_col, px_per_col, x, cols);
        if (c.empty()) continue;
        if (spans.empty() || spans.back().first != c.first || spans.back().last != c.last) spans.push_back(c);
        span_of_x[std::size_t(x)] = int(spans.size()) - 1;
    }

    std::vector<float> best(spans.size());
    std::vector<QRgb> span_color(spans.size());
    std::vector<QRgb> line(static_cast<std::size_t>(w));
    CellSpan done{-1, -1};  // the block span `line` holds (consecutive rows often share one)
    for (int y = 0; y < h; ++y) {
        auto* out = reinterpret_cast<QRgb*>(dst.scanLine(y));
        const CellSpan blocks = cellsOfPixel(first_row, px_per_row, y, rows);
        if (blocks.empty()) {
            std::fill(out, out + w, background);
            continue;
        }
        if (blocks.first != done.first || blocks.last != done.last) {
            std::fill(best.begin(), best.end(), kNone);
            for (long r = blocks.first; r < blocks.last; ++r) {
                const FieldSeries v = store.series(row_blocks[std::size_t(r)], BlockField::sensitivity);
                const long n = long(v.size());  // shorter than cols for a block that came late
                for (std::size_t i = 0; i < spans.size(); ++i)
                    best[i] = std::max(best[i], maxOf(v, spans[i].first, std::min(spans[i].last, n)));
            }
            for (std::size_t i = 0; i < spans.size(); ++i)
                span_color[i] = best[i] == kNone ? kMissingColor : sensitivityColor(best[i]);
            for (int x = 0; x < w; ++x) {
                const int i = span_of_x[std::size_t(x)];
                line[std::size_t(x)] = i < 0 ? background : span_color[std::size_t(i)];
            }
            done = blocks;
        }
        std::copy(line.begin(), line.end(), out);
    }
}

std::optional<HottestCell> hottestCellOfPixel(const TelemetryStore& store, QPoint pixel, double first_col,
                                              double px_per_col, std::size_t col_limit,
                                              const std::vector<int>& row_blocks, double first_row,
                                              double px_per_row) {
    const long cols = long(std::min(col_limit, store.updateCount()));
    const CellSpan c = cellsOfPixel(first_col, px_per_col, pixel.x(), cols);
    const CellSpan r = cellsOfPixel(first_row, px_per_row, pixel.y(), long(row_blocks.size()));
    if (c.empty() || r.empty()) return std::nullopt;
    HottestCell hot{row_blocks[std::size_t(r.first)], std::size_t(c.first)};
    float best = kNone;
    for (long row = r.first; row < r.last; ++row) {
        const int b = row_blocks[std::size_t(row)];
        const FieldSeries series = store.series(int(b), BlockField::sensitivity);
        const long end = std::min(c.last, long(series.size()));
        for (long u = c.first; u < end; ++u) {
            if (series[std::size_t(u)] > best) {
                best = series[std::size_t(u)];
                hot = HottestCell{int(b), std::size_t(u)};
            }
        }
    }
    return hot;
}

}  // namespace sp::ui
