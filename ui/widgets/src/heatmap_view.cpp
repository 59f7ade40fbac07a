// HeatmapView: data, view state (zoom, pan, live edge) and geometry. Input is in heatmap_input.cpp,
// painting in heatmap_paint.cpp.
#include "sp/ui/heatmap_view.h"

#include <algorithm>
#include <cmath>

#include <QFontMetrics>
#include <QScrollBar>

#include "heatmap_image.h"
#include "heatmap_layout.h"
#include "heatmap_pooled.h"
#include "heatmap_pooling.h"
#include "heatmap_runs.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

HeatmapView::HeatmapView(QWidget* parent)
    : QAbstractScrollArea(parent),
      image_(std::make_unique<HeatmapImage>()),
      pooled_(std::make_unique<PooledSensitivity>()),
      runs_(std::make_unique<HeatmapRuns>()) {
    setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    setFocusPolicy(Qt::StrongFocus);
    viewport()->setMouseTracking(true);
    viewport()->setAttribute(Qt::WA_OpaquePaintEvent);
    setMinimumSize(240, 160);
    connect(horizontalScrollBar(), &QScrollBar::valueChanged, this, &HeatmapView::onUserScrolledX);
    connect(verticalScrollBar(), &QScrollBar::valueChanged, this, &HeatmapView::onUserScrolledY);
}

HeatmapView::~HeatmapView() = default;

// --- Data ---------------------------------------------------------------------------------------

void HeatmapView::setSession(const RunSession* session) {
    if (session_) disconnect(session_, nullptr, this, nullptr);
    session_ = session;
    if (session_) {
        connect(session_, &RunSession::reset, this, &HeatmapView::resetData);
        // A command's pending mark comes and goes without a new update.
        connect(session_, &RunSession::commandStateChanged, this, [this] { viewport()->update(); });
        connect(session_, &QObject::destroyed, this, [this] { setStore(nullptr); });
    }
    store_ = session_ ? &session_->store() : nullptr;
    resetData();
}

void HeatmapView::setStore(const TelemetryStore* store) {
    if (session_) disconnect(session_, nullptr, this, nullptr);
    session_ = nullptr;
    store_ = store;
    resetData();
}

void HeatmapView::resetData() {
    image_->clear();
    pooled_->clear();
    runs_->clear();
    rows_built_for_ = -1;
    selection_.clear();
    anchor_row_ = -1;
    label_width_ = -1;
    fit_x_ = fit_y_ = true;
    view_ = ViewState{};
    setFollowInternal(true);
    refresh();
    grid_cache_valid_ = false;
    viewport()->update();
}

void HeatmapView::refresh() {
    if (!store_) return;
    const std::uint64_t generation = image_->generation();
    const std::size_t before = image_->columns();
    const bool wrote =
        image_->sync(*store_, color_mode_ == ColorMode::sensitivity ? HeatmapColorMode::sensitivity
                                                                    : HeatmapColorMode::precision);
    if (!wrote && generation == image_->generation()) return;  // nothing changed: no repaint
    pooled_->sync(*store_, image_->generation());
    runs_->sync(*store_, image_->generation());
    if (generation != image_->generation()) {
        label_width_ = -1;
        rows_built_for_ = -1;  // the block count may have changed
    }
    // New columns only matter to the cache when they are (or, following, become) visible.
    const HeatmapLayout layout = currentLayout();
    const std::size_t visible_end = view_.x_first + visibleUpdateCapacity(layout) + 1;
    if (generation != image_->generation() || follow_ || fit_x_ || before < visible_end) {
        grid_cache_valid_ = false;
    }
    updateGeometryState();
    viewport()->update();
}

void HeatmapView::setTimelineCursor(std::size_t count) {
    if (count == cursor_) return;
    cursor_ = count;
    grid_cache_valid_ = false;
    updateGeometryState();
    viewport()->update();
}

std::size_t HeatmapView::shownUpdateCount() const {
    if (!store_) return 0;
    return std::min({store_->updateCount(), image_->columns(), cursor_});
}

std::optional<std::size_t> HeatmapView::displayedUpdate() const {
    const std::size_t n = shownUpdateCount();
    if (n == 0) return std::nullopt;
    return n - 1;
}

void HeatmapView::setColorMode(ColorMode mode) {
    if (mode == color_mode_) return;
    color_mode_ = mode;
    refresh();  // the image is rebuilt in the new colours
}

QRgb HeatmapView::cellColor(int block, std::size_t update) const {
    return image_->color(block, update);
}

std::uint64_t HeatmapView::cellsWritten() const {
    return image_->cellsWritten();
}

// --- Selection ----------------------------------------------------------------------------------

void HeatmapView::setSelection(std::vector<int> blocks) {
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
    if (blocks == selection_) return;
    selection_ = std::move(blocks);
    viewport()->update();
}

void HeatmapView::applySelection(std::vector<int> blocks) {
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
    if (blocks == selection_) return;
    selection_ = std::move(blocks);
    viewport()->update();
    emit selectionChanged(selection_);
}

// --- View state ---------------------------------------------------------------------------------

HeatmapLayout HeatmapView::currentLayout() const {
    return layoutFor(viewport()->size());
}

HeatmapLayout HeatmapView::layoutFor(QSize size) const {
    HeatmapLayout l;
    const QFontMetrics fm(font());
    l.font_height = fm.height();
    if (label_width_ < 0) {
        int widest = fm.horizontalAdvance(QStringLiteral("blocks.000"));
        if (store_) {
            for (const auto& info : store_->layout())
                widest = std::max(widest, fm.horizontalAdvance(QString::fromStdString(info.name)));
        }
        label_width_ = widest + 6;  // elision needs a few pixels of slack
    }
    const int margin = 4;
    const int label_w = std::clamp(label_width_, 0, std::min(220, size.width() * 3 / 10));
    const int axis_h = l.font_height + 10;
    const int top = margin;
    const int bottom = std::max(top, size.height() - axis_h);
    l.labels = QRect(margin, top, label_w, bottom - top);
    l.badges = QRect(l.labels.right() + 1 + 3, top, 2 * l.font_height, bottom - top);
    l.strip = QRect(l.badges.right() + 1 + 2, top, 8, bottom - top);
    const int grid_left = l.strip.right() + 1 + 4;
    l.grid = QRect(grid_left, top, std::max(0, size.width() - margin - grid_left), bottom - top);
    l.axis = QRect(grid_left, bottom, l.grid.width(), axis_h);
    return l;
}

std::size_t HeatmapView::visibleUpdateCapacity(const HeatmapLayout& layout) const {
    return std::size_t(std::floor(double(layout.grid.width()) / view_.x_scale + 1e-9));
}

int HeatmapView::visibleBlockCapacity(const HeatmapLayout& layout) const {
    return int(std::floor(double(layout.grid.height()) / view_.y_scale + 1e-9));
}

void HeatmapView::updateGeometryState() {
    const HeatmapLayout layout = currentLayout();
    const ViewState before = view_;
    const std::size_t shown = shownUpdateCount();
    const int blocks = shownRowCount();
    const double grid_w = std::max(1, layout.grid.width());
    const double grid_h = std::max(1, layout.grid.height());

    const double fit_x = fitPxPerUpdate(grid_w, shown);
    if (fit_x_) view_.x_scale = fit_x;
    view_.x_scale = std::clamp(view_.x_scale, fit_x, kMaxPxPerUpdate);
    const std::size_t capacity_x = visibleUpdateCapacity(layout);
    std::size_t max_first_x = shown > capacity_x ? shown - capacity_x : 0;
    // Zoomed out (not fitted) at k updates per pixel, the live edge's first update is a multiple of
    // k (the last pixel column then holds under k updates): see updatesPerPixel.
    if (const std::size_t k = fit_x_ ? 0 : updatesPerPixel(view_.x_scale); k > 1)
        max_first_x = (max_first_x + k - 1) / k * k;
    if (follow_) view_.x_first = max_first_x;
    view_.x_first = std::min(view_.x_first, max_first_x);

    const double fit_y = blocks > 0 ? std::min(kFitPxPerBlock, grid_h / double(blocks)) : kFitPxPerBlock;
    if (fit_y_) view_.y_scale = fit_y;
    view_.y_scale = std::clamp(view_.y_scale, fit_y, kMaxPxPerBlock);
    const int capacity_y = visibleBlockCapacity(layout);
    const int max_first_y = std::max(0, blocks - capacity_y);
    view_.y_first = std::clamp(view_.y_first, 0, max_first_y);

    if (before.x_first != view_.x_first || before.x_scale != view_.x_scale ||
        before.y_first != view_.y_first || before.y_scale != view_.y_scale) {
        grid_cache_valid_ = false;
    }
    syncScrollBars();
}

void HeatmapView::syncScrollBars() {
    const HeatmapLayout layout = currentLayout();
    const std::size_t shown = shownUpdateCount();
    const std::size_t capacity_x = visibleUpdateCapacity(layout);
    const int blocks = shownRowCount();
    const int capacity_y = visibleBlockCapacity(layout);
    syncing_scrollbars_ = true;
    QScrollBar* h = horizontalScrollBar();
    h->setRange(0, int(shown > capacity_x ? shown - capacity_x : 0));
    h->setPageStep(int(std::max<std::size_t>(1, capacity_x)));
    h->setSingleStep(std::max(1, int(capacity_x / 20)));
    h->setValue(int(view_.x_first));
    QScrollBar* v = verticalScrollBar();
    v->setRange(0, std::max(0, blocks - capacity_y));
    v->setPageStep(std::max(1, capacity_y));
    v->setSingleStep(1);
    v->setValue(view_.y_first);
    syncing_scrollbars_ = false;
}

void HeatmapView::onUserScrolledX(int value) {
    if (syncing_scrollbars_) return;
    scrollToUpdate(std::size_t(std::max(0, value)));
}

void HeatmapView::onUserScrolledY(int value) {
    if (syncing_scrollbars_) return;
    scrollToRow(value);
}

void HeatmapView::scrollToUpdate(std::size_t update) {
    const HeatmapLayout layout = currentLayout();
    const std::size_t shown = shownUpdateCount();
    const std::size_t capacity = visibleUpdateCapacity(layout);
    const std::size_t max_first = shown > capacity ? shown - capacity : 0;
    view_.x_first = std::min(update, max_first);
    // At the right edge the view follows new updates again; anywhere else it stays put.
    setFollowInternal(view_.x_first >= max_first);
    grid_cache_valid_ = false;
    updateGeometryState();
    viewport()->update();
}

void HeatmapView::setFollowInternal(bool follow) {
    if (follow == follow_) return;
    follow_ = follow;
    emit followLiveEdgeChanged(follow_);
}

void HeatmapView::setFollowLiveEdge(bool follow) {
    setFollowInternal(follow);
    updateGeometryState();
    viewport()->update();
}

void HeatmapView::fitAll() {
    fit_x_ = fit_y_ = true;
    view_.x_first = 0;
    view_.y_first = 0;
    setFollowInternal(true);
    updateGeometryState();
    viewport()->update();
}

void HeatmapView::zoomUpdates(double factor, std::optional<int> anchor_x) {
    const HeatmapLayout layout = currentLayout();
    const double grid_w = std::max(1, layout.grid.width());
    // The update under the mouse stays under it (the keyboard zooms at the right edge). Zooming in
    // on history leaves the live edge: following stops unless the edge is still in view.
    const double ax = anchor_x ? std::clamp(double(*anchor_x - layout.grid.left()), 0.0, grid_w) : grid_w;
    const double anchor_update = double(view_.x_first) + ax / view_.x_scale;
    fit_x_ = false;
    const double before = view_.x_scale;
    view_.x_scale *= factor;
    const std::size_t shown = shownUpdateCount();
    const double fit_x = fitPxPerUpdate(grid_w, shown);
    view_.x_scale = std::clamp(view_.x_scale, fit_x, kMaxPxPerUpdate);
    if (view_.x_scale < 1.0) {
        // A whole number of updates per pixel (updatesPerPixel), at least one step from before.
        const double k_before = 1.0 / before, k = 1.0 / view_.x_scale;
        double whole = factor > 1.0 ? std::floor(k + 1e-9) : std::ceil(k - 1e-9);
        if (factor > 1.0 && whole >= k_before - 1e-9) whole = std::ceil(k_before - 1e-9) - 1.0;
        if (factor < 1.0 && whole <= k_before + 1e-9) whole = std::floor(k_before + 1e-9) + 1.0;
        view_.x_scale = std::clamp(1.0 / std::max(1.0, whole), fit_x, kMaxPxPerUpdate);
    }
    if (view_.x_scale <= fit_x) fit_x_ = true;
    const double first = std::max(0.0, std::round(anchor_update - ax / view_.x_scale));
    const double capacity = std::floor(grid_w / view_.x_scale + 1e-9);
    if (follow_ && anchor_x && first + capacity < double(shown)) setFollowInternal(false);
    if (!follow_) view_.x_first = std::size_t(first);
    grid_cache_valid_ = false;
    updateGeometryState();
    viewport()->update();
}

void HeatmapView::zoomBlocks(double factor, std::optional<int> anchor_y) {
    const HeatmapLayout layout = currentLayout();
    const double ay =
        anchor_y ? std::clamp(double(*anchor_y - layout.grid.top()), 0.0, double(layout.grid.height())) : 0.0;
    const double anchor_block = double(view_.y_first) + ay / view_.y_scale;
    fit_y_ = false;
    view_.y_scale *= factor;
    const int blocks = shownRowCount();
    const double grid_h = std::max(1, layout.grid.height());
    const double fit_y = blocks > 0 ? std::min(kFitPxPerBlock, grid_h / double(blocks)) : kFitPxPerBlock;
    view_.y_scale = std::clamp(view_.y_scale, fit_y, kMaxPxPerBlock);
    if (view_.y_scale <= fit_y) fit_y_ = true;
    view_.y_first = int(std::max(0.0, std::round(anchor_block - ay / view_.y_scale)));
    grid_cache_valid_ = false;
    updateGeometryState();
    viewport()->update();
}

// --- Geometry -----------------------------------------------------------------------------------

namespace {
// Pixels whose centres lie in [a, b): [ceil(a - 0.5), ceil(b - 0.5)).
int firstPixel(double a) {
    return int(std::ceil(a - 0.5));
}
}  // namespace

QRect HeatmapView::cellRect(int block, std::size_t update) const {
    const int row = rowOfBlock(block);
    if (row < 0 || update >= shownUpdateCount()) return {};
    if (update < view_.x_first || row < view_.y_first) return {};
    const HeatmapLayout layout = currentLayout();
    const double x0 = layout.grid.left() + double(update - view_.x_first) * view_.x_scale;
    const double y0 = layout.grid.top() + double(row - view_.y_first) * view_.y_scale;
    const int left = firstPixel(x0);
    const int right = std::min(firstPixel(x0 + view_.x_scale), layout.grid.left() + layout.grid.width());
    const int top = firstPixel(y0);
    const int bottom = std::min(firstPixel(y0 + view_.y_scale), layout.grid.top() + layout.grid.height());
    if (right <= left || bottom <= top) return {};
    return QRect(QPoint(left, top), QPoint(right - 1, bottom - 1));
}

int HeatmapView::rowAt(QPoint pos) const {
    return blockOfRow(rowIndexAt(pos));
}

int HeatmapView::rowIndexAt(QPoint pos) const {
    if (!store_) return -1;
    const HeatmapLayout layout = currentLayout();
    if (pos.y() < layout.grid.top() || pos.y() >= layout.grid.bottom() + 1) return -1;
    if (pos.x() < layout.labels.left() || pos.x() > layout.grid.right()) return -1;
    const int row = view_.y_first + int(std::floor((pos.y() + 0.5 - layout.grid.top()) / view_.y_scale));
    return row >= 0 && row < shownRowCount() ? row : -1;
}

std::optional<HeatmapView::CellRef> HeatmapView::cellAt(QPoint pos) const {
    const HeatmapLayout layout = currentLayout();
    if (!layout.grid.contains(pos)) return std::nullopt;
    const int row = rowAt(pos);
    if (row < 0) return std::nullopt;
    if (poolsCells(view_)) {
        const auto hot =
            hottestCellOfPixel(*store_, pos - layout.grid.topLeft(), double(view_.x_first), view_.x_scale,
                               shownUpdateCount(), rowBlocks(), double(view_.y_first), view_.y_scale);
        if (!hot) return std::nullopt;
        return CellRef{hot->block, hot->update};
    }
    const double c = double(view_.x_first) + std::floor((pos.x() + 0.5 - layout.grid.left()) / view_.x_scale);
    if (c < 0.0 || c >= double(shownUpdateCount())) return std::nullopt;
    return CellRef{row, std::size_t(c)};
}

}  // namespace sp::ui
