// HeatmapView: painting, export and tooltip text. The grid is a cached resampling: nearest-neighbour
// of the one-pixel-per-cell image (heatmap_image.h), or zoomed out the highest sensitivity of each
// pixel's cells (heatmap_pooled.h); everything drawn per row is limited to the visible rows. The
// marks over the cells are in heatmap_marks.cpp.
#include <algorithm>
#include <cmath>

#include <QFontMetrics>
#include <QPainter>
#include <QPainterPath>
#include <QStringList>

#include "heatmap_axis.h"
#include "heatmap_glyphs.h"
#include "heatmap_image.h"
#include "heatmap_layout.h"
#include "heatmap_pooled.h"
#include "sp/ui/colormap.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

namespace {

QString formatValue(float v) {
    return std::isnan(v) ? QStringLiteral("n/a") : QString::number(double(v), 'g', 4);
}

}  // namespace

void HeatmapView::paintEvent(QPaintEvent*) {
    QPainter p(viewport());
    paintAll(p, currentLayout(), view_, true);
}

QImage HeatmapView::renderToImage(QSize size) const {
    QImage out(size.expandedTo(QSize(1, 1)), QImage::Format_RGB32);
    QPainter p(&out);
    const HeatmapLayout now = currentLayout();
    const HeatmapLayout layout = layoutFor(out.size());
    // Same updates and blocks as on screen, stretched to the new grid.
    ViewState view = view_;
    const std::size_t shown = shownUpdateCount();
    const std::size_t cols = std::max<std::size_t>(
        1, std::min(visibleUpdateCapacity(now), shown > view_.x_first ? shown - view_.x_first : 0));
    const int rows = std::max(1, std::min(visibleBlockCapacity(now), shownRowCount() - view_.y_first));
    // Stretched to fill the image, but no further than the larger of the current zoom and the fit
    // limit, so an export at the widget's size looks like the widget.
    view.x_scale = std::max(
        1e-6, std::min(double(layout.grid.width()) / double(cols), std::max(view_.x_scale, kMaxPxPerUpdate)));
    view.y_scale = std::max(
        1e-6, std::min(double(layout.grid.height()) / double(rows), std::max(view_.y_scale, kFitPxPerBlock)));
    paintAll(p, layout, view, false);
    return out;
}

QString HeatmapView::emptyStateText() const {
    if (!store_) return tr("No run loaded.");
    if (store_->empty()) return tr("Waiting for updates…");
    if (shownUpdateCount() == 0) return tr("Timeline at the start: no update shown yet.");
    if (store_->blockCount() == 0 || image_->firstDetailedUpdate() >= shownUpdateCount()) {
        return tr(
            "No per-block details in this run.\nIts update records carry an empty block_details "
            "(the original tool's format), so there is nothing to draw per block.\n"
            "The charts still show the run-level values.");
    }
    if (shownRowCount() == 0) return tr("No block matches the filter.");
    return {};
}

void HeatmapView::paintEmptyState(QPainter& p, const QRect& area, const QString& text) const {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(area.adjusted(16, 16, -16, -16), Qt::AlignCenter | Qt::TextWordWrap, text);
}

void HeatmapView::paintAll(QPainter& p, const HeatmapLayout& layout, const ViewState& view,
                           bool use_cache) const {
    p.fillRect(p.viewport(), palette().color(QPalette::Window));
    const QString empty = emptyStateText();
    if (!empty.isEmpty()) {
        paintEmptyState(p, p.viewport(), empty);
        return;
    }
    paintGrid(p, layout, view, use_cache);
    if (color_mode_ == ColorMode::sensitivity) {
        paintCellMarks(p, layout, view);
        paintPrecisionStrip(p, layout, view);
    }
    paintForcedRuns(p, layout, view);
    paintRows(p, layout, view, use_cache);
    paintPending(p, layout, view);
    paintAxis(p, layout, view);
}

void HeatmapView::paintGrid(QPainter& p, const HeatmapLayout& layout, const ViewState& view,
                            bool use_cache) const {
    const QSize size = layout.grid.size();
    if (size.isEmpty()) return;
    if (!use_cache) {
        QImage sampled(size, QImage::Format_RGB32);
        sampleGrid(sampled, view);
        p.drawImage(layout.grid.topLeft(), sampled);
        return;
    }
    if (!grid_cache_valid_ || grid_cache_.size() != size) {
        if (grid_cache_.size() != size) grid_cache_ = QImage(size, QImage::Format_RGB32);
        sampleGrid(grid_cache_, view);
        grid_cache_valid_ = true;
    }
    p.drawImage(layout.grid.topLeft(), grid_cache_);
}

bool HeatmapView::poolsCells(const ViewState& view) const {
    return color_mode_ == ColorMode::sensitivity && (view.x_scale < 1.0 || view.y_scale < 1.0);
}

void HeatmapView::sampleGrid(QImage& dst, const ViewState& view) const {
    const QRgb background = palette().color(QPalette::Base).rgb();
    if (poolsCells(view)) {
        pooled_->sampleInto(dst, double(view.x_first), view.x_scale, shownUpdateCount(), rowBlocks(),
                            double(view.y_first), view.y_scale, background);
    } else {
        image_->sampleInto(dst, double(view.x_first), view.x_scale, shownUpdateCount(), rowBlocks(),
                           double(view.y_first), view.y_scale, background);
    }
}

void HeatmapView::paintRowHeaders(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const {
    const std::vector<int>& rows = rowBlocks();
    const int row_count = int(rows.size());
    const auto displayed = displayedUpdate();
    const int fh = layout.font_height;
    const QPalette& pal = palette();
    const int label_every = std::max(1, int(std::ceil(double(fh) / view.y_scale)));
    const bool draw_glyphs = view.y_scale >= 7.0;
    auto row_top = [&](int r) {
        return layout.grid.top() + int(std::floor((r - view.y_first) * view.y_scale));
    };

    p.save();
    p.setClipRect(QRect(layout.labels.topLeft(), layout.strip.bottomRight()));
    p.setRenderHint(QPainter::Antialiasing, draw_glyphs);
    for (int r = view.y_first; r < row_count; ++r) {
        const int b = rows[std::size_t(r)];
        const int y0 = row_top(r);
        if (y0 > layout.grid.bottom()) break;
        const int h = std::max(1, row_top(r + 1) - y0);
        const bool selected = std::binary_search(selection_.begin(), selection_.end(), b);
        if (selected) {
            p.fillRect(QRect(layout.labels.left(), y0, layout.strip.left() - layout.labels.left(), h),
                       pal.color(QPalette::Highlight));
        }
        if (displayed) paintRowState(p, layout, store_->cell(b, *displayed), y0, h, draw_glyphs);
        if ((r - view.y_first) % label_every == 0 || selected) {
            if (h * label_every >= fh / 2 || selected) {
                p.setPen(pal.color(selected ? QPalette::HighlightedText : QPalette::WindowText));
                const QString name = QString::fromStdString(store_->layout()[std::size_t(b)].name);
                const QRect text_rect(layout.labels.left(), y0 + h / 2 - fh / 2, layout.labels.width() - 2,
                                      fh);
                p.drawText(text_rect, Qt::AlignRight | Qt::AlignVCenter,
                           p.fontMetrics().elidedText(name, Qt::ElideMiddle, layout.labels.width() - 2));
            }
        }
    }
    p.restore();
}

void HeatmapView::paintRowState(QPainter& p, const HeatmapLayout& layout, const BlockCell& c, int y0, int h,
                                bool draw_glyphs) const {
    const int fh = layout.font_height;
    p.fillRect(QRect(layout.strip.left(), y0, layout.strip.width(), h),
               QColor::fromRgb(c.present ? precisionColor(c.precision) : kMissingColor));
    if (!c.present || c.forced == ForcedBy::none) return;
    const bool pin = c.forced == ForcedBy::pin;
    const QColor color = QColor::fromRgb(pin ? glyphs::kPinColor : glyphs::kConfigColor);
    const int x = layout.badges.left() + (pin ? 0 : fh);
    if (draw_glyphs) {
        const QRectF box(x, y0, std::min(double(fh), double(h)), std::min(double(fh), double(h)));
        pin ? glyphs::drawPin(p, box, color) : glyphs::drawLock(p, box, color);
    } else {
        p.fillRect(QRect(x, y0, fh - 2, h), color);  // too small for a glyph: a bar
    }
}

void HeatmapView::paintRows(QPainter& p, const HeatmapLayout& layout, const ViewState& view,
                            bool use_cache) const {
    if (use_cache) {
        paintCachedRowHeaders(p, layout, view);
    } else {
        paintRowHeaders(p, layout, view);
    }
    const QPalette& pal = palette();
    auto row_top = [&](int r) {
        return layout.grid.top() + int(std::floor((r - view.y_first) * view.y_scale));
    };

    // Selected rows framed on the grid (rows big enough to frame without hiding the colour).
    p.save();
    p.setClipRect(layout.grid);
    if (view.y_scale >= 4.0) {
        p.setPen(QPen(pal.color(QPalette::Highlight), 1));
        p.setBrush(Qt::NoBrush);
        for (int b : selection_) {
            const int r = rowOfBlock(b);  // rows need not be in block order (the filter's order)
            if (r < view.y_first) continue;
            const int y0 = row_top(r);
            if (y0 > layout.grid.bottom()) continue;
            p.drawRect(
                QRect(layout.grid.left(), y0, layout.grid.width() - 1, std::max(1, row_top(r + 1) - y0) - 1));
        }
    } else {
        // Thin rows: a tick at the grid's left edge marks each selected row.
        for (int b : selection_) {
            const int r = rowOfBlock(b);
            if (r < view.y_first) continue;
            const int y0 = row_top(r);
            if (y0 > layout.grid.bottom()) continue;
            p.fillRect(QRect(layout.grid.left(), y0, 3, std::max(1, row_top(r + 1) - y0)),
                       pal.color(QPalette::Highlight));
        }
    }
    p.restore();

    if (band_active_ && band_from_ >= 0 && band_to_ >= 0) {
        const int lo = std::min(band_from_, band_to_);
        const int hi = std::max(band_from_, band_to_);
        const int y0 = std::max(layout.grid.top(), row_top(lo));
        const int y1 = std::min(layout.grid.bottom() + 1, row_top(hi + 1));
        QColor fill = pal.color(QPalette::Highlight);
        fill.setAlpha(70);
        const QRect band(layout.labels.left(), y0, layout.grid.right() - layout.labels.left(),
                         std::max(1, y1 - y0));
        p.fillRect(band, fill);
        p.setPen(pal.color(QPalette::Highlight));
        p.drawRect(band);
    }
}

void HeatmapView::paintAxis(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const {
    const std::size_t shown = shownUpdateCount();
    if (shown == 0 || layout.axis.isEmpty()) return;
    const QPalette& pal = palette();
    p.setPen(pal.color(QPalette::WindowText));
    p.drawLine(layout.axis.topLeft(), layout.axis.topRight());
    const std::size_t last =
        std::min(shown, view.x_first + std::size_t(std::ceil(layout.grid.width() / view.x_scale)));
    const int fh = layout.font_height;
    const QFontMetrics fm(p.font());
    for (const AxisTick& tick : stepAxisTicks(store_->rows(), view.x_first, last, view.x_scale)) {
        const double x = layout.grid.left() + (tick.update - double(view.x_first) + 0.5) * view.x_scale;
        if (x > layout.grid.right()) break;
        const int xi = int(std::lround(x));
        p.drawLine(xi, layout.axis.top(), xi, layout.axis.top() + 4);
        const QString label = QString::number(static_cast<long long>(tick.step));
        // A label that would run into the "step" caption (left of the grid) is left out.
        if (xi - fm.horizontalAdvance(label) / 2 < layout.grid.left()) continue;
        p.drawText(QRect(xi - 60, layout.axis.top() + 5, 120, fh), Qt::AlignHCenter | Qt::AlignTop, label);
    }
    p.drawText(
        QRect(layout.labels.left(), layout.axis.top() + 5, layout.strip.right() - layout.labels.left(), fh),
        Qt::AlignRight | Qt::AlignTop, tr("step"));
}

QString HeatmapView::cellToolTip(int block, std::size_t update) const {
    if (!store_ || block < 0 || block >= store_->blockCount() || update >= store_->updateCount()) return {};
    const auto& info = store_->layout()[std::size_t(block)];
    const BlockCell c = store_->cell(block, update);
    QStringList lines;
    lines << tr("%1 (block %2)").arg(QString::fromStdString(info.name)).arg(info.id);
    lines << tr("step %1 (update %2)").arg(store_->row(update).step).arg(update);
    if (!c.present) {
        lines << tr("no detail for this block at this update");
        return lines.join(QLatin1Char('\n'));
    }
    auto field = [&](BlockField f) { return formatValue(store_->value(block, update, f)); };
    lines << tr("precision: %1%2")
                 .arg(precisionLabel(c.precision), c.changed ? tr(" (changed here)") : QString());
    lines << tr("sensitivity: %1").arg(field(BlockField::sensitivity));
    lines << tr("grad score: %1   error score: %2")
                 .arg(field(BlockField::grad_score), field(BlockField::error_score));
    lines << tr("relative magnitude: %1").arg(field(BlockField::relative_magnitude));
    lines << tr("l2: %1   max |g|: %2").arg(field(BlockField::l2_norm), field(BlockField::max_abs));
    switch (c.forced) {
        case ForcedBy::pin:
            lines << tr("pinned by the operator");
            break;
        case ForcedBy::config:
            lines << tr("forced by the run's config");
            break;
        case ForcedBy::none:
            lines << tr("not forced");
            break;
    }
    lines << tr("reason: %1")
                 .arg(QString::fromUtf8(to_string(c.reason).data(), int(to_string(c.reason).size())));
    return lines.join(QLatin1Char('\n'));
}

}  // namespace sp::ui
