#pragma once
// The zoomed-out sensitivity heatmap: when a pixel covers several cells (more updates than pixel
// columns, or more blocks than pixel rows), it shows the highest sensitivity among them, so a
// one-update spike stays visible however far the view is zoomed out. Nearest-neighbour resampling
// (HeatmapImage::sampleInto) would show one cell in n and drop the rest. Reads the store's
// block-major series directly: every visible cell once per repaint. Private to sp_ui.
#include <cstddef>
#include <optional>
#include <vector>

#include <QImage>

#include "sp/ui/telemetry_store.h"

namespace sp::ui {

// The cells [first, last) one pixel covers along an axis. Zoomed in (>= 1 px per cell) it is the
// cell under the pixel's centre; zoomed out the pixels partition the cells, every cell in exactly
// one pixel (pixel p covers floor(first_cell + p / px) .. floor(first_cell + (p + 1) / px)).
struct CellSpan {
    long first = 0;
    long last = 0;
    bool empty() const { return last <= first; }
};
CellSpan cellsOfPixel(double first_cell, double px_per_cell, int pixel, long cell_count);

// The pixels [x0, x1) that show any of the cells [first, last) (the inverse of cellsOfPixel):
// zoomed out, every pixel whose span holds one of them, so a single cell gets at least one pixel.
struct PixelRange {
    int x0 = 0;
    int x1 = 0;
};
PixelRange pixelsOfCells(double first_cell, double px_per_cell, long first, long last);

// Fills `dst` (the grid) with the highest sensitivity's colour of each pixel's cells: NaN and
// absent values are skipped, a pixel whose cells have none is kMissingColor, and a pixel past the
// data is `background`. Updates at or past `col_limit` are not shown (the timeline cursor); row r
// is block row_blocks[r] (the block filter). The reference PooledSensitivity (heatmap_pooled.h)
// must match pixel for pixel; the view uses that one.
void sampleMaxSensitivityInto(QImage& dst, const TelemetryStore& store, double first_col, double px_per_col,
                              std::size_t col_limit, const std::vector<int>& row_blocks, double first_row,
                              double px_per_row, QRgb background);

struct HottestCell {
    int block = -1;
    std::size_t update = 0;
};
// The cell whose sensitivity the pixel shows (the first of equals, in block then update order);
// nullopt past the data. With no finite value among the cells, the first cell.
std::optional<HottestCell> hottestCellOfPixel(const TelemetryStore& store, QPoint pixel, double first_col,
                                              double px_per_col, std::size_t col_limit,
                                              const std::vector<int>& row_blocks, double first_row,
                                              double px_per_row);

}  // namespace sp::ui
