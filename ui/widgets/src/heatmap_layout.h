#pragma once
// Where the heatmap's parts go in a given size. Private to sp_ui (view and painter share it).
#include <QRect>

namespace sp::ui {

inline constexpr double kMaxPxPerUpdate = 48.0;  // zoom-in limit (and the fit limit for short runs)
// Rows fill the height for a few blocks (six fill a 1280x800 window's heatmap), up to this.
inline constexpr double kMaxPxPerBlock = 160.0;
inline constexpr double kFitPxPerBlock = 160.0;

struct HeatmapLayout {
    QRect labels;  // block names, right-aligned
    QRect badges;  // pin / config marks at the displayed update
    QRect strip;   // precision at the displayed update, one swatch per row
    QRect grid;    // the cells
    QRect axis;    // step axis under the grid
    int font_height = 0;
};

}  // namespace sp::ui
