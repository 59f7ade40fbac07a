#pragma once
// The sensitivity heatmap: rows = blocks, columns = updates, colour = sensitivity (viridis) or
// precision. Custom-painted over an image with one pixel per cell that is extended column by column
// as updates arrive; painting resamples only the visible part into a viewport-sized cache, so a
// repaint costs about one blit whatever the run's length. Zoomed out, an append rewrites only the
// pixel columns whose updates changed (heatmap_pooled.h). Rows can be limited to a set of blocks
// (the block table's filter); pinned periods, pending commands and precision are marked on the rows
// (heatmap_marks.cpp).
//
// Reads a TelemetryStore it does not own (a RunSession's, or one a test fills) and never blocks:
// the main window calls refresh() from its repaint timer.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <QAbstractScrollArea>
#include <QByteArray>
#include <QImage>
#include <QPoint>
#include <QString>

namespace sp::ui {

class RunSession;
class TelemetryStore;
class HeatmapImage;
class HeatmapRuns;
class PooledSensitivity;
struct BlockCell;
struct HeatmapLayout;

class HeatmapView : public QAbstractScrollArea {
    Q_OBJECT
  public:
    enum class ColorMode { sensitivity, precision };
    static constexpr std::size_t kNoCursor = std::numeric_limits<std::size_t>::max();

    explicit HeatmapView(QWidget* parent = nullptr);
    ~HeatmapView() override;

    // --- Data -------------------------------------------------------------------------------
    // Shows a session's store and rebuilds when the session resets (new run, agent restart).
    void setSession(const RunSession* session);
    // Shows a store the caller fills (tests, benchmarks); call resetData() after resetting it.
    void setStore(const TelemetryStore* store);
    const TelemetryStore* store() const { return store_; }
    // Forgets the image; the next refresh() rebuilds it from the store.
    void resetData();
    // Brings the view up to the store: writes only the newly appended columns (a rebuild after a
    // reset) and repaints when something visible changed. Cheap when nothing changed.
    void refresh();

    // Replay timeline: show only updates [0, count). kNoCursor shows everything (live).
    void setTimelineCursor(std::size_t count);
    void clearTimelineCursor() { setTimelineCursor(kNoCursor); }
    std::size_t timelineCursor() const { return cursor_; }
    // Updates shown: the store's, limited by the cursor.
    std::size_t shownUpdateCount() const;
    // The update whose precision/pin/config marks the row labels show: the newest shown one.
    std::optional<std::size_t> displayedUpdate() const;

    void setColorMode(ColorMode mode);
    ColorMode colorMode() const { return color_mode_; }

    // --- Rows: the block filter ------------------------------------------------------------
    // Shows only these blocks, one row each in the given order (ids the store lacks are skipped);
    // nullopt shows every block. Everything row-based follows: painting, pooling, hit tests,
    // selection, scrolling, zoom, fit, tooltips, export.
    void setShownBlocks(std::optional<std::vector<int>> blocks);
    const std::optional<std::vector<int>>& shownBlocks() const { return shown_blocks_; }
    int shownRowCount() const { return int(rowBlocks().size()); }
    // The block a row shows (-1 past the rows) and the row showing a block (-1: filtered out).
    int blockOfRow(int row) const;
    int rowOfBlock(int block) const;
    // What hovering the row's label says: the block at the displayed update, and a command in
    // flight for it ("pending: pin int8") first.
    QString rowToolTip(int block) const;
    // The session's command in flight touching the block (empty: none, or no session).
    QString pendingText(int block) const;
    bool rowShowsPending(int block) const { return !pendingText(block).isEmpty(); }

    // --- Selection (block ids, ascending) ------------------------------------------------------
    const std::vector<int>& selection() const { return selection_; }
    // Sets the selection from outside (the block table); emits nothing.
    void setSelection(std::vector<int> blocks);

    // --- View ---------------------------------------------------------------------------------
    bool followsLiveEdge() const { return follow_; }
    // On: the newest update stays at the right edge as updates arrive. Turned off by panning
    // away from the right edge, back on by panning to it (or by this call).
    void setFollowLiveEdge(bool follow);
    // Shows every update and every block.
    void fitAll();
    // Horizontal (update axis) zoom by a factor, around a viewport x (the live edge when following).
    void zoomUpdates(double factor, std::optional<int> anchor_x = std::nullopt);
    void zoomBlocks(double factor, std::optional<int> anchor_y = std::nullopt);
    void zoomIn() { zoomUpdates(1.5); }
    void zoomOut() { zoomUpdates(1.0 / 1.5); }
    // Pans so that `update` is the first column shown (clamped).
    void scrollToUpdate(std::size_t update);
    // Pans so that the block's row is the first shown (nothing when it is filtered out).
    void scrollToBlock(int block);
    double pixelsPerUpdate() const { return view_.x_scale; }
    double pixelsPerBlock() const { return view_.y_scale; }
    std::size_t firstVisibleUpdate() const { return view_.x_first; }
    int firstVisibleBlock() const { return blockOfRow(view_.y_first); }
    // Whether precision is drawn on the cells at this zoom (sensitivity mode): corner squares on
    // cells of at least 10 px, else a line along the bottom of rows of at least 6 px.
    // Thinner rows show precision only in the strip left of the grid (the legend says so).
    bool cornerMarksShown() const;
    bool precisionStripShown() const;

    // --- Export and geometry --------------------------------------------------------------------
    // The current view (same updates and blocks) rendered into an image of `size`.
    QImage renderToImage(QSize size) const;
    // Viewport pixels of a cell (those whose centres lie in it); empty when not visible.
    QRect cellRect(int block, std::size_t update) const;
    struct CellRef {
        int block = -1;
        std::size_t update = 0;
    };
    std::optional<CellRef> cellAt(QPoint viewport_pos) const;
    // The block of the row under a viewport point (grid or labels), -1 outside the rows.
    int rowAt(QPoint viewport_pos) const;
    // What the widget says instead of cells (no run, no updates yet, no per-block details in the
    // file, cursor at 0); empty when it shows cells.
    QString emptyStateText() const;
    // What the hover tooltip says about a cell.
    QString cellToolTip(int block, std::size_t update) const;
    // The colour of a cell in the one-pixel-per-cell image (what the grid resamples), and how many
    // cells were written into that image so far (appends write only the new updates' cells).
    QRgb cellColor(int block, std::size_t update) const;
    std::uint64_t cellsWritten() const;

  signals:
    void selectionChanged(const std::vector<int>& blocks);
    void contextMenuRequested(const std::vector<int>& blocks, const QPoint& global_pos);
    void followLiveEdgeChanged(bool follow);
    // Double click on a row (e.g. to open the block in the table).
    void blockActivated(int block);

  protected:
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    bool viewportEvent(QEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    void contextMenuEvent(QContextMenuEvent* event) override;
    void scrollContentsBy(int dx, int dy) override;

  private:
    struct ViewState {
        std::size_t x_first = 0;
        double x_scale = 1.0;
        int y_first = 0;
        double y_scale = 1.0;
    };
    HeatmapLayout layoutFor(QSize size) const;
    HeatmapLayout currentLayout() const;
    void paintAll(QPainter& p, const HeatmapLayout& layout, const ViewState& view, bool use_cache) const;
    void paintGrid(QPainter& p, const HeatmapLayout& layout, const ViewState& view, bool use_cache) const;
    // Zoomed out in sensitivity mode a pixel shows its cells' highest sensitivity (heatmap_pooling.h);
    // otherwise the cell under its centre, from the backing image.
    bool poolsCells(const ViewState& view) const;
    void sampleGrid(QImage& dst, const ViewState& view) const;
    void paintCellMarks(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    // Pinned (and config-forced) periods and, on small cells, the precision strip (heatmap_marks.cpp).
    void paintForcedRuns(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    void paintPrecisionStrip(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    void paintPending(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    void paintRows(QPainter& p, const HeatmapLayout& layout, const ViewState& view, bool use_cache) const;
    // Labels, badges and the precision strip; on screen from a cache redrawn only when what they
    // show changed (following a live run, most appends change no row's format or pin).
    void paintRowHeaders(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    void paintCachedRowHeaders(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    // One row's strip swatch and pin/config badge, at the displayed update's cell.
    void paintRowState(QPainter& p, const HeatmapLayout& layout, const BlockCell& cell, int y0, int h,
                       bool draw_glyphs) const;
    void paintAxis(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    void paintEmptyState(QPainter& p, const QRect& area, const QString& text) const;

    // Recomputes scales and first column/row for the viewport (fit, follow, clamps) and the
    // scroll bars; drops the grid cache when the visible cells changed.
    void updateGeometryState();
    void syncScrollBars();
    void onUserScrolledX(int value);
    void onUserScrolledY(int value);
    void scrollToRow(int row);
    // The row index (not the block) under a viewport point, -1 outside the rows.
    int rowIndexAt(QPoint viewport_pos) const;
    // Row -> block, rebuilt when the filter or the store's block count changes.
    const std::vector<int>& rowBlocks() const;
    void setFollowInternal(bool follow);
    std::size_t visibleUpdateCapacity(const HeatmapLayout& layout) const;
    int visibleBlockCapacity(const HeatmapLayout& layout) const;
    void applySelection(std::vector<int> blocks);

    const RunSession* session_ = nullptr;
    const TelemetryStore* store_ = nullptr;
    std::unique_ptr<HeatmapImage> image_;
    std::unique_ptr<PooledSensitivity> pooled_;
    std::unique_ptr<HeatmapRuns> runs_;
    ColorMode color_mode_ = ColorMode::sensitivity;
    std::size_t cursor_ = kNoCursor;

    ViewState view_;
    bool fit_x_ = true;
    bool fit_y_ = true;
    bool follow_ = true;
    bool syncing_scrollbars_ = false;

    // Resampled visible cells, valid until the view, the size or the visible data change.
    mutable QImage grid_cache_;
    mutable int label_width_ = -1;  // widest block name; -1: measure again
    mutable bool grid_cache_valid_ = false;
    mutable QImage headers_cache_;          // paintRowHeaders' pixels
    mutable QByteArray headers_cache_key_;  // and everything they depend on but the rows' cells
    mutable std::vector<std::uint8_t> headers_cache_cells_;  // each visible row's format and pin

    std::optional<std::vector<int>> shown_blocks_;
    mutable std::vector<int> row_blocks_;  // row -> block
    mutable std::vector<int> block_rows_;  // block -> row, -1 filtered out
    mutable int rows_built_for_ = -1;      // the store's block count they were built for; -1 stale

    std::vector<int> selection_;
    int anchor_row_ = -1;  // a block
    // Mouse interaction.
    QPoint press_pos_;
    int press_row_ = -1;  // a row
    bool band_active_ = false;
    int band_from_ = -1;  // rows (not blocks) while the rubber band is dragged
    int band_to_ = -1;
    bool panning_ = false;
    QPoint pan_origin_;
    ViewState pan_view_;
};

}  // namespace sp::ui
