#pragma once
// Where the heatmap's parts go in a given size. Private to sp_ui (view and painter share it).
#include <algorithm>
#include <cmath>
#include <cstddef>

#include <QRect>

namespace sp::ui {

inline constexpr double kMaxPxPerUpdate = 48.0;  // zoom-in limit (and the fit limit for short runs)
// Rows fill the height for a few blocks (six fill a 1280x800 window's heatmap), up to this.
inline constexpr double kMaxPxPerBlock = 160.0;
inline constexpr double kFitPxPerBlock = 160.0;

// The zoom that shows `shown` updates in `grid_w` pixels. Zoomed out, the updates per pixel are
// rounded up to a power-of-two step of at most (updates per pixel) / width: the updates fall short
// of the width by less than a pixel, and the zoom (with every pixel column's updates) stays put
// until about one pixel column's worth of updates has arrived, so a live run's append changes the
// last column instead of rescaling them all (heatmap_pooled.h reuses the others).
inline double fitPxPerUpdate(double grid_w, std::size_t shown) {
    if (shown == 0) return kMaxPxPerUpdate;
    const double px = grid_w / double(shown);
    if (px >= 1.0) return std::min(kMaxPxPerUpdate, px);
    const double per_px = double(shown) / grid_w;
    const double step = std::exp2(std::floor(std::log2(per_px / grid_w)));
    return 1.0 / (std::ceil(per_px / step) * step);
}

// Zoomed out past the fit, the zoom is a whole number k of updates per pixel, and following the live
// edge keeps the first update shown a multiple of k: the view then moves by whole pixel columns,
// one every k appends, and the pixel columns shift rather than change (heatmap_pooled.h). Returns
// k for such a zoom, 0 otherwise.
inline std::size_t updatesPerPixel(double px_per_update) {
    if (px_per_update >= 1.0) return 0;
    return std::size_t(std::lround(1.0 / px_per_update));
}

struct HeatmapLayout {
    QRect labels;  // block names, right-aligned
    QRect badges;  // pin / config marks at the displayed update
    QRect strip;   // precision at the displayed update, one swatch per row
    QRect grid;    // the cells
    QRect axis;    // step axis under the grid
    int font_height = 0;
};

}  // namespace sp::ui
