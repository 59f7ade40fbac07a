// HeatmapView: input (mouse selection and rubber band, pan, zoom, keys, context menu, tooltip).
#include <algorithm>
#include <cmath>

#include <QApplication>
#include <QContextMenuEvent>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>

#include "heatmap_layout.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

// --- Events -------------------------------------------------------------------------------------

void HeatmapView::resizeEvent(QResizeEvent* event) {
    QAbstractScrollArea::resizeEvent(event);
    grid_cache_valid_ = false;
    updateGeometryState();
}

void HeatmapView::scrollContentsBy(int, int) {
    // The scroll bars drive the view state (onUserScrolled*); nothing to move by pixels.
}

bool HeatmapView::viewportEvent(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        QString text;
        if (const auto cell = cellAt(help->pos())) {
            text = cellToolTip(cell->block, cell->update);
            const QString pending = pendingText(cell->block);
            if (!pending.isEmpty()) text = pending + QLatin1Char('\n') + text;
        } else if (const int row = rowAt(help->pos()); row >= 0) {
            text = rowToolTip(row);
        }
        if (text.isEmpty()) {
            QToolTip::hideText();
            event->ignore();
        } else {
            QToolTip::showText(help->globalPos(), text, viewport());
        }
        return true;
    }
    return QAbstractScrollArea::viewportEvent(event);
}

void HeatmapView::mousePressEvent(QMouseEvent* event) {
    const QPoint pos = event->position().toPoint();
    if (event->button() == Qt::MiddleButton) {
        panning_ = true;
        pan_origin_ = pos;
        pan_view_ = view_;
        viewport()->setCursor(Qt::ClosedHandCursor);
        return;
    }
    if (event->button() != Qt::LeftButton) return;
    press_pos_ = pos;
    press_row_ = rowIndexAt(pos);
    band_active_ = false;
}

void HeatmapView::mouseMoveEvent(QMouseEvent* event) {
    const QPoint pos = event->position().toPoint();
    if (panning_) {
        const QPoint d = pos - pan_origin_;
        const double cols = double(d.x()) / view_.x_scale;
        const double rows = double(d.y()) / view_.y_scale;
        const double first = std::max(0.0, double(pan_view_.x_first) - std::round(cols));
        scrollToUpdate(std::size_t(first));
        scrollToRow(std::max(0, pan_view_.y_first - int(std::round(rows))));
        return;
    }
    if (!(event->buttons() & Qt::LeftButton) || press_row_ < 0) return;
    if (!band_active_ && (pos - press_pos_).manhattanLength() < QApplication::startDragDistance()) return;
    band_active_ = true;
    band_from_ = press_row_;
    const HeatmapLayout layout = currentLayout();
    // Clamp to the rows shown so a drag past the grid's edge selects up to the last visible row.
    const QPoint clamped(std::clamp(pos.x(), layout.grid.left(), layout.grid.right()),
                         std::clamp(pos.y(), layout.grid.top(), layout.grid.bottom()));
    const int row = rowIndexAt(clamped);
    if (row >= 0) band_to_ = row;
    viewport()->update();
}

void HeatmapView::mouseReleaseEvent(QMouseEvent* event) {
    if (event->button() == Qt::MiddleButton && panning_) {
        panning_ = false;
        viewport()->unsetCursor();
        return;
    }
    if (event->button() != Qt::LeftButton) return;
    const bool ctrl = event->modifiers() & Qt::ControlModifier;
    const bool shift = event->modifiers() & Qt::ShiftModifier;
    std::vector<int> next = ctrl ? selection_ : std::vector<int>{};
    // Ranges are of rows shown (the filter hides the rest), selected as their blocks.
    auto add_range = [this, &next](int a, int b) {
        for (int r = std::min(a, b); r <= std::max(a, b); ++r) next.push_back(blockOfRow(r));
    };
    if (band_active_) {
        band_active_ = false;
        if (band_from_ >= 0 && band_to_ >= 0) add_range(band_from_, band_to_);
        anchor_row_ = blockOfRow(band_from_);
    } else {
        const int row = rowAt(event->position().toPoint());
        if (row < 0) {
            if (!ctrl) next.clear();
        } else if (shift && rowOfBlock(anchor_row_) >= 0) {
            add_range(rowOfBlock(anchor_row_), rowOfBlock(row));
        } else if (ctrl) {
            const auto it = std::find(next.begin(), next.end(), row);
            if (it != next.end()) {
                next.erase(it);
            } else {
                next.push_back(row);
            }
            anchor_row_ = row;
        } else {
            next.push_back(row);
            anchor_row_ = row;
        }
    }
    press_row_ = -1;
    applySelection(std::move(next));
    viewport()->update();
}

void HeatmapView::mouseDoubleClickEvent(QMouseEvent* event) {
    const int row = rowAt(event->position().toPoint());
    if (event->button() == Qt::LeftButton && row >= 0) emit blockActivated(row);
}

void HeatmapView::wheelEvent(QWheelEvent* event) {
    const QPoint delta = event->angleDelta();
    const double notches = double(delta.y() != 0 ? delta.y() : delta.x()) / 120.0;
    const Qt::KeyboardModifiers mods = event->modifiers();
    if (mods & Qt::ControlModifier) {
        const double factor = std::pow(1.25, notches);
        if (mods & Qt::ShiftModifier) {
            zoomBlocks(factor, event->position().toPoint().y());
        } else {
            zoomUpdates(factor, event->position().toPoint().x());
        }
        event->accept();
        return;
    }
    const HeatmapLayout layout = currentLayout();
    const bool rows_fit = !store_ || visibleBlockCapacity(layout) >= shownRowCount();
    if (delta.x() != 0 || (mods & Qt::ShiftModifier) || rows_fit) {
        // Horizontal pan by a tenth of the view per notch (wheel up/left = back in time).
        const double cols = std::max(1.0, double(visibleUpdateCapacity(layout)) / 10.0) * notches;
        const double first = std::max(0.0, double(view_.x_first) - std::round(cols));
        scrollToUpdate(std::size_t(first));
    } else {
        const double rows = std::max(1.0, double(visibleBlockCapacity(layout)) / 10.0) * notches;
        scrollToRow(std::max(0, view_.y_first - int(std::round(rows))));
    }
    event->accept();
}

void HeatmapView::keyPressEvent(QKeyEvent* event) {
    const HeatmapLayout layout = currentLayout();
    const std::size_t page = std::max<std::size_t>(1, visibleUpdateCapacity(layout) / 4);
    switch (event->key()) {
        case Qt::Key_Plus:
        case Qt::Key_Equal:
            zoomIn();
            break;
        case Qt::Key_Minus:
            zoomOut();
            break;
        case Qt::Key_0:
        case Qt::Key_F:
            fitAll();
            break;
        case Qt::Key_End:
            setFollowLiveEdge(true);
            break;
        case Qt::Key_Home:
            scrollToUpdate(0);
            break;
        case Qt::Key_Left:
            scrollToUpdate(view_.x_first > page ? view_.x_first - page : 0);
            break;
        case Qt::Key_Right:
            scrollToUpdate(view_.x_first + page);
            break;
        case Qt::Key_Escape:
            applySelection({});
            break;
        default:
            QAbstractScrollArea::keyPressEvent(event);
            return;
    }
    event->accept();
}

void HeatmapView::contextMenuEvent(QContextMenuEvent* event) {
    const int row = rowAt(event->pos());  // viewport coordinates (QAbstractScrollArea)
    if (row >= 0 && !std::binary_search(selection_.begin(), selection_.end(), row)) {
        anchor_row_ = row;
        applySelection({row});
    }
    if (!selection_.empty()) emit contextMenuRequested(selection_, event->globalPos());
    event->accept();
}

}  // namespace sp::ui
