#include "heatmap_image.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "sp/ui/colormap.h"

namespace sp::ui {

void HeatmapImage::clear() {
    valid_ = false;
}

bool HeatmapImage::sync(const TelemetryStore& store, HeatmapColorMode mode) {
    const std::size_t updates = store.updateCount();
    const int blocks = store.blockCount();
    // A store that shrank, grew blocks (earlier columns change: they read as missing for the new
    // blocks) or was refilled from scratch cannot be patched column by column.
    const bool refilled = columns_ > 0 && updates > 0 && store.row(0).timestamp != first_timestamp_;
    if (!valid_ || mode != mode_ || blocks != rows_ || updates < columns_ || refilled) {
        valid_ = true;
        mode_ = mode;
        rows_ = blocks;
        columns_ = first_column_ = first_detailed_ = 0;
        ++generation_;
        image_ = QImage();
    }
    if (updates == columns_) return false;
    if (columns_ == 0) {
        first_timestamp_ = store.row(0).timestamp;
        // Rebuilt while retention holds only the latest updates: start at the first one kept.
        columns_ = first_column_ = first_detailed_ = std::min(store.firstKept(), updates);
    }
    ensureCapacity(updates);
    writeColumns(store, columns_, updates);
    if (first_detailed_ == columns_) {
        while (first_detailed_ < updates && !store.row(first_detailed_).has_details) ++first_detailed_;
    }
    columns_ = updates;
    dropBefore(store.firstKept());
    return true;
}

// Moves the held lines up over the dropped ones: O(held lines), once per retention chunk (the store
// drops a quarter of its retained updates at a time), so O(1) amortised per update.
void HeatmapImage::dropBefore(std::size_t update) {
    update = std::min(update, columns_);
    if (update <= first_column_ || image_.isNull()) return;
    const std::size_t drop = update - first_column_;
    const auto bpl = std::size_t(image_.bytesPerLine());
    std::memmove(image_.bits(), image_.constBits() + drop * bpl, (columns_ - update) * bpl);
    first_column_ = update;
}

QRgb HeatmapImage::color(int block, std::size_t update) const {
    if (block < 0 || block >= rows_ || update >= columns_ || update < first_column_ || image_.isNull())
        return kMissingColor;
    return reinterpret_cast<const QRgb*>(image_.constScanLine(int(update - first_column_)))[block];
}

void HeatmapImage::ensureCapacity(std::size_t end) {
    if (rows_ == 0) return;
    const std::size_t columns = end - first_column_;  // lines to hold
    if (!image_.isNull() && std::size_t(image_.height()) >= columns) return;
    // Geometric growth: a live run appends a few updates per refresh, and each growth copies the
    // whole image, so the copies cost O(1) amortised per update.
    const std::size_t old_height = image_.isNull() ? 0 : std::size_t(image_.height());
    const std::size_t height = std::max<std::size_t>({columns, old_height * 2, 256});
    QImage grown(rows_, int(height), QImage::Format_RGB32);
    if (grown.isNull()) return;  // out of memory: the view then shows nothing rather than crash
    if (columns_ > first_column_) {
        // Same width, so the written lines are one contiguous block in both images.
        std::memcpy(grown.bits(), image_.constBits(),
                    std::size_t(image_.bytesPerLine()) * (columns_ - first_column_));
    }
    image_ = std::move(grown);
}

void HeatmapImage::writeColumns(const TelemetryStore& store, std::size_t from, std::size_t to) {
    if (image_.isNull() || std::size_t(image_.height()) < to - first_column_) return;
    if (mode_ == HeatmapColorMode::sensitivity) {
        std::vector<FieldSeries> series(static_cast<std::size_t>(rows_));
        std::vector<std::size_t> sizes(static_cast<std::size_t>(rows_));
        for (int b = 0; b < rows_; ++b) {
            series[std::size_t(b)] = store.series(b, BlockField::sensitivity);
            sizes[std::size_t(b)] = series[std::size_t(b)].size();
        }
        for (std::size_t u = from; u < to; ++u) {
            auto* line = reinterpret_cast<QRgb*>(image_.scanLine(int(u - first_column_)));
            for (int b = 0; b < rows_; ++b) {
                line[b] = sensitivityColor(u < sizes[std::size_t(b)] ? series[std::size_t(b)][u] : kMissing);
            }
        }
    } else {
        for (std::size_t u = from; u < to; ++u) {
            auto* line = reinterpret_cast<QRgb*>(image_.scanLine(int(u - first_column_)));
            for (int b = 0; b < rows_; ++b) {
                const BlockCell c = store.cell(b, u);
                line[b] = c.present ? precisionColor(c.precision) : kMissingColor;
            }
        }
    }
    cells_written_ += std::uint64_t(to - from) * std::uint64_t(rows_);
}

void HeatmapImage::sampleInto(QImage& dst, double first_col, double px_per_col, std::size_t col_limit,
                              const std::vector<int>& row_blocks, double first_row, double px_per_row,
                              QRgb background) const {
    const int w = dst.width();
    const int h = dst.height();
    if (w <= 0 || h <= 0) return;
    const std::size_t limit = std::min(col_limit, columns_);
    // The update line under each destination column's centre; columns past the data read a line of
    // background instead (no branch in the inner loop).
    const std::vector<QRgb> blank(static_cast<std::size_t>(std::max(rows_, 1)), background);
    std::vector<const QRgb*> column(static_cast<std::size_t>(w), blank.data());
    if (!image_.isNull()) {
        const uchar* bits = image_.constBits();
        const auto bpl = std::size_t(image_.bytesPerLine());
        for (int x = 0; x < w; ++x) {
            const double c = std::floor(first_col + (x + 0.5) / px_per_col);
            if (c >= double(first_column_) && c < double(limit))
                column[std::size_t(x)] =
                    reinterpret_cast<const QRgb*>(bits + (std::size_t(c) - first_column_) * bpl);
        }
    }
    // The block under each destination row's centre (-1: none).
    std::vector<long> row_of(static_cast<std::size_t>(h), -1);
    for (int y = 0; y < h; ++y) {
        const double r = std::floor(first_row + (y + 0.5) / px_per_row);
        if (r < 0.0 || r >= double(row_blocks.size())) continue;
        const int block = row_blocks[std::size_t(r)];
        if (block < rows_) row_of[std::size_t(y)] = block;
    }
    // Tiles: each update line is its own 4 KB page at 1,000 blocks, so a whole destination row would
    // touch ~1,600 pages (TLB misses dominate); a tile touches kTileW source and kTileH target pages.
    constexpr int kTileW = 32;
    constexpr int kTileH = 128;
    uchar* out_bits = dst.bits();
    const auto out_bpl = std::size_t(dst.bytesPerLine());
    for (int y0 = 0; y0 < h; y0 += kTileH) {
        const int y1 = std::min(h, y0 + kTileH);
        for (int x0 = 0; x0 < w; x0 += kTileW) {
            const int x1 = std::min(w, x0 + kTileW);
            const QRgb* const* cols = column.data();
            for (int y = y0; y < y1; ++y) {
                auto* out = reinterpret_cast<QRgb*>(out_bits + std::size_t(y) * out_bpl);
                const long row = row_of[std::size_t(y)];
                if (row < 0) {
                    std::fill(out + x0, out + x1, background);
                    continue;
                }
                for (int x = x0; x < x1; ++x) out[x] = cols[x][row];
            }
        }
    }
}

}  // namespace sp::ui
