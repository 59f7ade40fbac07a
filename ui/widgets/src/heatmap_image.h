#pragma once
// The heatmap's backing image: one pixel per (update, block) cell. Stored update-major (scan line u
// holds update u's colours for every block, the heatmap's column u): appending an update writes one
// contiguous line, and resampling a zoomed-out view reads only the updates it shows (about 1,600
// lines of 4 KB for 1,000 blocks), not the whole image as a block-major layout would.
// Kept in step with a TelemetryStore incrementally: a sync writes only the updates appended since
// the previous one; a reset, a layout change or a colour-mode change rebuilds it. A live run's
// retention (TelemetryStore::setRetainUpdates) bounds it: the lines of the updates the store dropped
// are dropped too (those columns draw as background), so it holds at most about 2.5 x the retained
// updates' lines however long the run. Private to sp_ui.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <QImage>

#include "sp/ui/telemetry_store.h"

namespace sp::ui {

enum class HeatmapColorMode : std::uint8_t { sensitivity, precision };

class HeatmapImage {
  public:
    // Drops the image; the next sync() rebuilds it from update 0.
    void clear();
    // Brings the image up to the store's updates. Returns true when pixels were written.
    bool sync(const TelemetryStore& store, HeatmapColorMode mode);

    // Scan line = update, pixel = block.
    const QImage& image() const { return image_; }
    QRgb color(int block, std::size_t update) const;
    std::size_t columns() const { return columns_; }
    int rows() const { return rows_; }
    // Cumulative pixels written (tests check that appends write only the new columns).
    std::uint64_t cellsWritten() const { return cells_written_; }
    // Bumps on every rebuild (the view drops caches keyed on the old image).
    std::uint64_t generation() const { return generation_; }
    // The first update whose line is held (earlier ones were dropped with the store's retention).
    std::size_t firstColumn() const { return first_column_; }
    // Bytes of pixels held (capacity).
    std::size_t heldBytes() const { return image_.isNull() ? 0 : std::size_t(image_.sizeInBytes()); }
    // The first update with per-block details, or columns() when none has them yet.
    std::size_t firstDetailedUpdate() const { return first_detailed_; }

    // Nearest-neighbour resampling of the cells [first_col, first_col + cols) x [first_row, ...)
    // into `dst`, cell c of the range covering dst pixels whose centres fall in
    // [c * px_per_col, (c + 1) * px_per_col); row r shows block row_blocks[r] (the block filter).
    // Pixels past the range get `background`.
    void sampleInto(QImage& dst, double first_col, double px_per_col, std::size_t col_limit,
                    const std::vector<int>& row_blocks, double first_row, double px_per_row,
                    QRgb background) const;

  private:
    void writeColumns(const TelemetryStore& store, std::size_t from, std::size_t to);
    void ensureCapacity(std::size_t end);  // room for updates [first_column_, end)
    void dropBefore(std::size_t update);

    QImage image_;
    std::size_t columns_ = 0;       // columns written (== store updates after a sync)
    std::size_t first_column_ = 0;  // update of scan line 0
    int rows_ = 0;
    HeatmapColorMode mode_ = HeatmapColorMode::sensitivity;
    std::uint64_t cells_written_ = 0;
    std::uint64_t generation_ = 0;
    std::size_t first_detailed_ = 0;
    double first_timestamp_ = 0.0;  // of update 0: a different one means the store was refilled
    bool valid_ = false;
};

}  // namespace sp::ui
