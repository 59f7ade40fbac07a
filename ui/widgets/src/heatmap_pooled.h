#pragma once
// The zoomed-out sensitivity grid, fast and incremental. Same pixels as sampleMaxSensitivityInto
// (heatmap_pooling.h, kept as the reference), from a copy of the sensitivities quantized to the
// colormap's entries: the colormap rounds to 256 entries monotonically, so the highest entry
// among a pixel's cells is the entry of its highest sensitivity. Entry 0 and "no value" share the
// byte 0, so a presence bit per cell tells them apart. 1.125 bytes per cell (11 MB at
// 1,000 x 10,000), stored update-major like HeatmapImage, so a pixel column's maximum over its
// updates is an element-wise maximum of whole byte lines (vectorised), not one short scan per block.
//
// Each pixel column's per-block maxima are kept between repaints, keyed by the updates the column
// covers: updates never change once appended, so a column whose span is unchanged (or moved to
// another x when the view scrolls) is reused, and only the pixel columns whose span changed are
// written again. Bounded like HeatmapImage by a live run's retention: the updates the store dropped
// are dropped here too (a pixel column of them only shows no value). Private to sp_ui.
#include <cstddef>
#include <cstdint>
#include <vector>

#include <QImage>

#include "heatmap_pooling.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

class PooledSensitivity {
  public:
    // Drops everything; the next sync() rebuilds from update 0.
    void clear();
    // Quantizes the updates appended since the last sync; rebuilds when `generation` (the backing
    // image's: bumped on a reset, refill or layout change) differs from the last sync's.
    void sync(const TelemetryStore& store, std::uint64_t generation);

    // Fills `dst`: pixel (x, y) gets the colour of the highest sensitivity among the updates of
    // pixel column x (cellsOfPixel over [0, min(col_limit, synced))) and the blocks
    // row_blocks[r] of the rows r of pixel row y. Pixels past the data get `background`. When
    // `dst` is the image the last call filled (untouched since) for the same rows, only the pixel
    // columns whose span changed are written.
    void sampleInto(QImage& dst, double first_col, double px_per_col, std::size_t col_limit,
                    const std::vector<int>& row_blocks, double first_row, double px_per_row, QRgb background);

    std::size_t columns() const { return columns_; }
    // The first update held, and the bytes held (capacity) for the quantized cells.
    std::size_t firstColumn() const { return first_; }
    std::size_t heldBytes() const { return levels_.capacity() + presence_.capacity(); }
    // Pixel columns whose per-block maxima the last sampleInto computed (the rest were reused).
    std::size_t lastColumnsComputed() const { return last_computed_; }
    // Pixel columns the last sampleInto wrote into `dst` (the rest held the same pixels already).
    std::size_t lastColumnsWritten() const { return last_written_; }

  private:
    std::size_t presenceBytes() const { return (std::size_t(blocks_) + 7) / 8; }
    std::size_t columnBytes() const { return std::size_t(blocks_) + presenceBytes(); }
    // A pixel column's per-block maxima and presence (columnBytes() bytes) over `span`.
    void computeColumn(const CellSpan& span, std::uint8_t* out) const;
    // Writes pixel columns [xs_begin, xs_end) (at most 64) of every pixel row from their maxima.
    void writeColumns(QImage& dst, const int* xs_begin, const int* xs_end, const std::vector<CellSpan>& rows,
                      const std::vector<int>& row_blocks, QRgb background) const;

    std::vector<std::uint8_t> levels_;    // update-major: blocks_ bytes per update, sensitivityIndex
    std::vector<std::uint8_t> presence_;  // update-major: presenceBytes() per update, bit b: has a value
    std::size_t first_ = 0;               // the update of the first line of levels_ and presence_
    void dropBefore(std::size_t update);
    int blocks_ = 0;
    std::size_t columns_ = 0;
    std::uint64_t generation_ = 0;
    bool valid_ = false;

    // Per pixel column of the last sampleInto: its update span and columnBytes() of maxima; the
    // previous call's in old_* (swapped, so no allocation per repaint).
    std::vector<CellSpan> spans_, old_spans_;
    std::vector<std::uint8_t> maxima_, old_maxima_;
    std::size_t last_computed_ = 0;
    std::size_t last_written_ = 0;
    // What the last call wrote: the image (QImage::cacheKey moves on any other write), its rows.
    qint64 dst_key_ = 0;
    std::vector<CellSpan> rows_;
    std::vector<int> row_blocks_;
    QRgb background_ = 0;
};

}  // namespace sp::ui
