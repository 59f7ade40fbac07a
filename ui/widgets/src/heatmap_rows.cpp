// HeatmapView: the rows it shows (the block filter), what a row says about its block, and the
// cache of the row headers (labels, badges, precision strip).
#include <algorithm>
#include <cmath>

#include <QPainter>

#include "heatmap_image.h"
#include "heatmap_layout.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

void HeatmapView::setShownBlocks(std::optional<std::vector<int>> blocks) {
    if (blocks == shown_blocks_) return;
    shown_blocks_ = std::move(blocks);
    rows_built_for_ = -1;
    // A filter that hides most rows would otherwise leave the remaining few scrolled out of view.
    fit_y_ = true;
    view_.y_first = 0;
    band_active_ = false;
    grid_cache_valid_ = false;
    updateGeometryState();
    viewport()->update();
}

const std::vector<int>& HeatmapView::rowBlocks() const {
    const int blocks = store_ ? store_->blockCount() : 0;
    if (rows_built_for_ == blocks) return row_blocks_;
    rows_built_for_ = blocks;
    row_blocks_.clear();
    block_rows_.assign(std::size_t(blocks), -1);
    auto add = [this, blocks](int b) {
        // Ids the store lacks (yet) and repeats get no row.
        if (b < 0 || b >= blocks || block_rows_[std::size_t(b)] >= 0) return;
        block_rows_[std::size_t(b)] = int(row_blocks_.size());
        row_blocks_.push_back(b);
    };
    if (shown_blocks_) {
        for (int b : *shown_blocks_) add(b);
    } else {
        for (int b = 0; b < blocks; ++b) add(b);
    }
    return row_blocks_;
}

void HeatmapView::scrollToBlock(int block) {
    const int row = rowOfBlock(block);
    if (row >= 0) scrollToRow(row);
}

void HeatmapView::scrollToRow(int row) {
    view_.y_first = std::max(0, row);
    grid_cache_valid_ = false;
    updateGeometryState();
    viewport()->update();
}

int HeatmapView::blockOfRow(int row) const {
    const std::vector<int>& rows = rowBlocks();
    return row >= 0 && row < int(rows.size()) ? rows[std::size_t(row)] : -1;
}

int HeatmapView::rowOfBlock(int block) const {
    rowBlocks();
    return block >= 0 && block < int(block_rows_.size()) ? block_rows_[std::size_t(block)] : -1;
}

QString HeatmapView::pendingText(int block) const {
    const QString what = session_ ? session_->pendingFor(block) : QString();
    return what.isEmpty() ? what : tr("pending: %1").arg(what);
}

QString HeatmapView::rowToolTip(int block) const {
    const auto shown = displayedUpdate();
    QString cell = shown ? cellToolTip(block, *shown) : QString();
    const QString pending = pendingText(block);
    if (pending.isEmpty() || cell.isEmpty()) return cell;
    return pending + QLatin1Char('\n') + cell;
}

void HeatmapView::paintCachedRowHeaders(QPainter& p, const HeatmapLayout& layout,
                                        const ViewState& view) const {
    const QRect area(layout.labels.left(), layout.grid.top(), layout.strip.right() + 1 - layout.labels.left(),
                     layout.grid.height());
    if (area.isEmpty()) return;
    // Everything the headers' pixels depend on: the geometry, the rows and their selection in
    // `key`, each visible row's cell (format, pin) in `cells`.
    QByteArray key;
    auto put = [&key](auto v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    for (const QRect& r : {area, layout.labels, layout.badges, layout.strip})
        for (int v : {r.left(), r.top(), r.width(), r.height()}) put(v);
    put(view.y_first);
    put(view.y_scale);
    put(palette().cacheKey());
    put(viewport()->devicePixelRatioF());
    put(image_->generation());
    key.append(font().key().toUtf8());
    const std::vector<int>& rows = rowBlocks();
    const auto displayed = displayedUpdate();
    put(displayed.has_value());
    auto row_top = [&](int r) {
        return layout.grid.top() + int(std::floor((r - view.y_first) * view.y_scale));
    };
    int end = view.y_first;  // rows [y_first, end) are visible
    for (; end < int(rows.size()) && row_top(end) <= layout.grid.bottom(); ++end) {
        const int b = rows[std::size_t(end)];
        put(b);
        put(std::binary_search(selection_.begin(), selection_.end(), b));
    }
    std::vector<std::uint8_t> cells;
    cells.reserve(std::size_t(std::max(0, end - view.y_first)));
    for (int r = view.y_first; r < end; ++r) {
        const BlockCell c = displayed ? store_->cell(rows[std::size_t(r)], *displayed) : BlockCell{};
        cells.push_back(std::uint8_t(int(c.present) | int(c.precision) << 1 | int(c.forced) << 4));
    }
    if (key != headers_cache_key_ || headers_cache_.isNull()) {
        const qreal dpr = viewport()->devicePixelRatioF();
        headers_cache_ = QImage(area.size() * dpr, QImage::Format_ARGB32_Premultiplied);
        headers_cache_.setDevicePixelRatio(dpr);
        headers_cache_.fill(palette().color(QPalette::Window));
        QPainter cached(&headers_cache_);
        cached.setFont(p.font());
        cached.translate(-area.topLeft());
        paintRowHeaders(cached, layout, view);
    } else if (cells != headers_cache_cells_) {
        // Same rows, some cell changed (a live run: a block switched format or was pinned):
        // redraw those rows' badge and strip only.
        QPainter cached(&headers_cache_);
        cached.translate(-area.topLeft());
        const bool draw_glyphs = view.y_scale >= 7.0;
        cached.setRenderHint(QPainter::Antialiasing, draw_glyphs);
        for (int r = view.y_first; r < end; ++r) {
            const auto i = std::size_t(r - view.y_first);
            if (cells[i] == headers_cache_cells_[i]) continue;
            const int b = rows[std::size_t(r)];
            const int y0 = row_top(r);
            const int h = std::max(1, row_top(r + 1) - y0);
            const bool selected = std::binary_search(selection_.begin(), selection_.end(), b);
            const QRect badges(layout.badges.left(), y0, layout.strip.left() - layout.badges.left(), h);
            cached.setClipRect(QRect(badges.topLeft(), QPoint(layout.strip.right(), y0 + h - 1)));
            cached.fillRect(badges, palette().color(selected ? QPalette::Highlight : QPalette::Window));
            if (displayed) paintRowState(cached, layout, store_->cell(b, *displayed), y0, h, draw_glyphs);
        }
    }
    headers_cache_key_ = key;
    headers_cache_cells_ = std::move(cells);
    p.drawImage(area.topLeft(), headers_cache_);
}

}  // namespace sp::ui
