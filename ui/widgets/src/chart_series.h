#pragma once
// ChartsPanel's data before it is drawn, with no widgets: the lines a chart draws at full resolution
// (read in place from a store, or arrays: the what-if, a smoothed loss), drawn at a bounded number of
// points, and those lines as CSV. Private to sp_ui_widgets.
#include <cstddef>
#include <memory>
#include <vector>

#include <QColor>
#include <QString>

#include "sp/ui/decimate.h"
#include "sp/ui/store_series.h"

namespace sp::ui {

// What a line's legend entry is.
enum class LegendEntry {
    own,   // its own entry: its colour, dash and name
    run,   // an overlaid run's line: the run's one entry ("╍╍ other.jsonl") names it
    none,  // none (the faint raw losses, explained by the smoothed lines' entries)
};

// One line of a chart at full resolution: its name, its look and its samples: read in place from a
// store (`series`), or arrays (x[i], y[i]), i < n, that belong to the caller (the overlays) or to
// `owned_x` / `owned_y` (computed per redraw: a smoothed loss).
struct LineSource {
    QString name;
    QColor color;
    Qt::PenStyle style = Qt::SolidLine;
    LegendEntry legend = LegendEntry::own;
    QString run;  // the overlaid run's name (legend LegendEntry::run)
    GapPolicy gaps = GapPolicy::break_line;
    StoreSeries series;  // used when x is null
    const double* x = nullptr;
    const float* y = nullptr;
    std::size_t n = 0;
    std::shared_ptr<std::vector<double>> owned_x;
    std::shared_ptr<std::vector<float>> owned_y;

    void setSeries(const StoreSeries& s);
    void setSamples(const std::vector<double>& xs, const std::vector<float>& ys, std::size_t limit);
    // The series' x with computed y (y.size() <= the series' size): copies both for this redraw.
    void setComputed(const StoreSeries& s, std::vector<float> ys);
    std::size_t size() const { return x ? n : series.size(); }
    double xAt(std::size_t i) const { return x ? x[i] : series.x(i); }
    float yAt(std::size_t i) const { return x ? y[i] : series.y(i); }
    bool hasFiniteSample() const;
    // The points drawn over [x_lo, x_hi] across `columns` pixel columns (at most 2 per column + 2).
    DecimatedSeries draw(double x_lo, double x_hi, int columns) const;
};

// The series' values as an array (for smoothing: computed per redraw, not kept).
std::vector<float> valuesOf(const StoreSeries& s);

// The lines as CSV: a "step" column, then a column per line headed by its name, one row per x at
// which any line has a finite value (in increasing order), the cell empty where a line has none.
// Lines without a finite value are left out.
QString linesCsv(const std::vector<LineSource>& lines);

}  // namespace sp::ui
