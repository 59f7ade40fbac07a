#pragma once
// Colours the dashboard uses for data: the sensitivity colormap (viridis: perceptually uniform,
// readable in greyscale and by most colour-blind viewers) and the categorical precision colours.
// Shared by the heatmap, its legend and the charts so the same value always has the same colour.
#include <array>

#include <QColor>
#include <QImage>
#include <QSize>
#include <QString>

#include "sp/precision.h"

namespace sp::ui {

inline constexpr int kColormapSize = 256;

// A neutral grey for "no value" (NaN / the update carried no detail for the block). Viridis has
// no grey (every entry is saturated), so a missing cell never reads as a low or high sensitivity.
inline constexpr QRgb kMissingColor = 0xFF808080u;

// The 256-entry viridis table (matplotlib's, CC0), opaque QRgb, index 0 = sensitivity 0.
const std::array<QRgb, kColormapSize>& viridisTable();

// Index into the table for a sensitivity: clamped to [0, 1], rounded to the nearest entry.
// NaN gives -1.
int sensitivityIndex(float sensitivity);

// The colour of a sensitivity in [0, 1] (clamped); NaN → kMissingColor.
QRgb sensitivityColor(float sensitivity);

// The legend's colour bar: `size` pixels, 1 at the top (vertical) or right (horizontal).
QImage colormapGradient(QSize size, Qt::Orientation orientation);

// Categorical precision colours (Okabe–Ito, distinct from every viridis entry): BF16 a light
// neutral, INT8 orange, FP8 reddish purple (E4M3) / vermilion (E5M2).
QRgb precisionColor(Precision p);
// Labels for legends and tooltips: "BF16", "INT8", "FP8 E4M3", "FP8 E5M2".
QString precisionLabel(Precision p);
// One letter for per-cell marks: B, I, F, E.
QChar precisionLetter(Precision p);

}  // namespace sp::ui
