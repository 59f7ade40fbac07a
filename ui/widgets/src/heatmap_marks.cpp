// HeatmapView: the marks drawn over the cells. Each is drawn per visible row from the row's runs
// (heatmap_runs.h), so its cost follows the rows shown, not the cells:
//  - precision: a corner square on every non-BF16 cell of at least kCellMarkMinPx, else a strip
//    along the bottom of rows of at least kStripMinRowPx (sensitivity mode; the precision mode
//    colours the cells themselves);
//  - pinned (and config-forced) periods: a band along the top of the row across those updates;
//  - a command in flight for the block: a dashed outline around the row.
// Zoomed out, a run narrower than a pixel still gets the pixel column that holds it
// (pixelsOfCells), as a one-update spike does in the pooled grid.
#include <algorithm>
#include <cmath>

#include <QPainter>

#include "heatmap_glyphs.h"
#include "heatmap_layout.h"
#include "heatmap_pooling.h"
#include "heatmap_runs.h"
#include "sp/ui/colormap.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

namespace {

constexpr double kCellMarkMinPx = 10.0;  // cells at least this big get a corner square
constexpr double kStripMinRowPx = 6.0;   // smaller cells, rows at least this tall: the strip

int rowTop(const HeatmapLayout& layout, double y_first, double y_scale, int row) {
    return layout.grid.top() + int(std::floor((row - y_first) * y_scale));
}

}  // namespace

bool HeatmapView::cornerMarksShown() const {
    return color_mode_ == ColorMode::sensitivity && view_.x_scale >= kCellMarkMinPx &&
           view_.y_scale >= kCellMarkMinPx;
}

bool HeatmapView::precisionStripShown() const {
    return color_mode_ == ColorMode::sensitivity && !cornerMarksShown() && view_.y_scale >= kStripMinRowPx;
}

void HeatmapView::paintCellMarks(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const {
    if (view.x_scale < kCellMarkMinPx || view.y_scale < kCellMarkMinPx) return;
    // Large cells: a corner square in the precision's colour on every non-BF16 cell, so precision
    // and sensitivity read together. At most (grid / 10 px)^2 cells are visible here.
    const std::size_t shown = shownUpdateCount();
    const std::vector<int>& rows = rowBlocks();
    const double mark = std::min(8.0, std::min(view.x_scale, view.y_scale) / 3.0);
    p.save();
    p.setClipRect(layout.grid);
    for (int r = view.y_first; r < int(rows.size()); ++r) {
        const double y = layout.grid.top() + (r - view.y_first) * view.y_scale;
        if (y > layout.grid.bottom()) break;
        for (std::size_t u = view.x_first; u < shown; ++u) {
            const double x = layout.grid.left() + double(u - view.x_first) * view.x_scale;
            if (x > layout.grid.right()) break;
            const BlockCell c = store_->cell(rows[std::size_t(r)], u);
            if (!c.present || c.precision == Precision::bf16) continue;
            p.fillRect(QRectF(x + view.x_scale - mark - 1, y + 1, mark, mark),
                       QColor::fromRgb(precisionColor(c.precision)));
        }
    }
    p.restore();
}

namespace {

// Fills, on row [y, y + h) of the grid, the pixel columns of every run overlapping the visible
// updates [first, last), in `color_of(run)`.
template <typename ColorOf>
void fillRuns(QPainter& p, const QRect& grid, double x_first, double x_scale, std::size_t first,
              std::size_t last, const UpdateRuns& runs, int y, int h, ColorOf color_of) {
    const auto [begin, end] = runsOverlapping(runs, first, last);
    int drawn_to = grid.left();  // a run inside pixels already drawn (zoomed out) is skipped
    for (auto it = begin; it != end; ++it) {
        // Clamped to the updates shown: a pin still running past the timeline cursor stops there.
        const PixelRange px = pixelsOfCells(x_first, x_scale, long(std::max<std::size_t>(it->first, first)),
                                            long(std::min<std::size_t>(it->last, last)));
        const int x0 = grid.left() + px.x0;
        const int x1 = std::min(grid.left() + px.x1, grid.right() + 1);
        if (x1 <= x0 || x1 <= drawn_to) continue;
        p.fillRect(QRect(x0, y, x1 - x0, h), color_of(*it));
        drawn_to = x1;
    }
}

}  // namespace

void HeatmapView::paintPrecisionStrip(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const {
    if (view.y_scale < kStripMinRowPx || (view.x_scale >= kCellMarkMinPx && view.y_scale >= kCellMarkMinPx))
        return;
    const std::size_t shown = shownUpdateCount();
    const std::size_t last =
        std::min(shown, view.x_first + std::size_t(std::ceil(layout.grid.width() / view.x_scale)) + 1);
    const std::vector<int>& rows = rowBlocks();
    p.save();
    p.setClipRect(layout.grid);
    for (int r = view.y_first; r < int(rows.size()); ++r) {
        const int y0 = rowTop(layout, view.y_first, view.y_scale, r);
        if (y0 > layout.grid.bottom()) break;
        const int h = rowTop(layout, view.y_first, view.y_scale, r + 1) - y0;
        const int t = std::clamp(h / 5, 2, 3);
        fillRuns(p, layout.grid, double(view.x_first), view.x_scale, view.x_first, last,
                 runs_->notBf16(rows[std::size_t(r)]), y0 + h - t, t, [](const UpdateRun& run) {
                     return QColor::fromRgb(precisionColor(static_cast<Precision>(run.value)));
                 });
    }
    p.restore();
}

void HeatmapView::paintForcedRuns(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const {
    const std::size_t shown = shownUpdateCount();
    const std::size_t last =
        std::min(shown, view.x_first + std::size_t(std::ceil(layout.grid.width() / view.x_scale)) + 1);
    const std::vector<int>& rows = rowBlocks();
    const QColor pin = QColor::fromRgb(glyphs::kPinColor);
    const QColor config = QColor::fromRgb(glyphs::kConfigColor);
    p.save();
    p.setClipRect(layout.grid);
    for (int r = view.y_first; r < int(rows.size()); ++r) {
        const int y0 = rowTop(layout, view.y_first, view.y_scale, r);
        if (y0 > layout.grid.bottom()) break;
        const int h = std::max(1, rowTop(layout, view.y_first, view.y_scale, r + 1) - y0);
        // Thin rows: the band is the whole row (more rows than pixels: the pixel row it shares).
        const int t = h >= 12 ? 3 : (h >= 6 ? 2 : 1);
        const int b = rows[std::size_t(r)];
        fillRuns(p, layout.grid, double(view.x_first), view.x_scale, view.x_first, last, runs_->pinned(b), y0,
                 t, [&pin](const UpdateRun&) { return pin; });
        fillRuns(p, layout.grid, double(view.x_first), view.x_scale, view.x_first, last,
                 runs_->configForced(b), y0, t, [&config](const UpdateRun&) { return config; });
    }
    p.restore();
}

void HeatmapView::paintPending(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const {
    if (!session_) return;
    const std::vector<int>& rows = rowBlocks();
    p.save();
    p.setRenderHint(QPainter::Antialiasing, false);
    for (int r = view.y_first; r < int(rows.size()); ++r) {
        const int y0 = rowTop(layout, view.y_first, view.y_scale, r);
        if (y0 > layout.grid.bottom()) break;
        if (!rowShowsPending(rows[std::size_t(r)])) continue;
        const int h = std::max(1, rowTop(layout, view.y_first, view.y_scale, r + 1) - y0);
        if (h < 5) {  // too thin to outline: a bar left of the label
            p.fillRect(QRect(layout.labels.left(), y0, 3, h), QColor::fromRgb(glyphs::kPinColor));
            continue;
        }
        // Dashes over a light line: visible on the dark and the light end of the colormap alike.
        const QRect box(layout.labels.left(), y0 + 1, layout.grid.right() - layout.labels.left(), h - 2);
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(Qt::white, 2));
        p.drawRect(box);
        p.setPen(QPen(QColor::fromRgb(glyphs::kPinColor), 2, Qt::DashLine));
        p.drawRect(box);
    }
    p.restore();
}

}  // namespace sp::ui
