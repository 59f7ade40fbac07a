#pragma once
// The sensitivity heatmap: rows = blocks, columns = updates, colour = sensitivity (viridis) or
// precision. Custom-painted over an image with one pixel per cell that is extended column by column
// as updates arrive; painting resamples only the visible part into a viewport-sized cache, so a
// repaint costs about one blit whatever the run's length.
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
#include <QImage>
#include <QPoint>
#include <QString>

namespace sp::ui {

class RunSession;
class TelemetryStore;
class HeatmapImage;
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
    void scrollToBlock(int block);
    double pixelsPerUpdate() const { return view_.x_scale; }
    double pixelsPerBlock() const { return view_.y_scale; }
    std::size_t firstVisibleUpdate() const { return view_.x_first; }
    int firstVisibleBlock() const { return view_.y_first; }

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
    void paintRows(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    void paintAxis(QPainter& p, const HeatmapLayout& layout, const ViewState& view) const;
    void paintEmptyState(QPainter& p, const QRect& area, const QString& text) const;

    // Recomputes scales and first column/row for the viewport (fit, follow, clamps) and the
    // scroll bars; drops the grid cache when the visible cells changed.
    void updateGeometryState();
    void syncScrollBars();
    void onUserScrolledX(int value);
    void onUserScrolledY(int value);
    void setFollowInternal(bool follow);
    std::size_t visibleUpdateCapacity(const HeatmapLayout& layout) const;
    int visibleBlockCapacity(const HeatmapLayout& layout) const;
    void applySelection(std::vector<int> blocks);

    const RunSession* session_ = nullptr;
    const TelemetryStore* store_ = nullptr;
    std::unique_ptr<HeatmapImage> image_;
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

    std::vector<int> selection_;
    int anchor_row_ = -1;
    // Mouse interaction.
    QPoint press_pos_;
    int press_row_ = -1;
    bool band_active_ = false;
    int band_from_ = -1;
    int band_to_ = -1;
    bool panning_ = false;
    QPoint pan_origin_;
    ViewState pan_view_;
};

}  // namespace sp::ui
