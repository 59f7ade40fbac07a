#pragma once
// ChartsPanel's data before it is drawn, with no widgets: a run's columns copied from its store as
// updates arrive (decimation wants contiguous arrays), the lines a chart draws at full resolution, and
// those lines as CSV. Private to sp_ui_widgets.
#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include <QColor>
#include <QString>

#include "sp/ui/decimate.h"

namespace sp::ui {

class TelemetryStore;
class FieldSeries;

// A run's run-level values, one entry per update.
struct RunColumns {
    std::vector<double> steps;
    std::vector<double> eval_steps;  // where each update's eval loss was measured (eval_step)
    std::vector<float> estimated, measured, target, bf16, int8, fp8, int4, train_loss, eval_loss;

    std::size_t size() const { return steps.size(); }
    void clear();
    // Appends the store's updates not copied yet. Returns true when the store was reset and refilled
    // since the last call (fewer updates, or another first update): the columns then start over.
    bool syncWith(const TelemetryStore& store);

  private:
    std::array<std::vector<float>*, 9> floatColumns() {
        return {&estimated, &measured, &target, &bf16, &int8, &fp8, &int4, &train_loss, &eval_loss};
    }
    double first_timestamp_ = 0.0;
};

// What a line's legend entry is.
enum class LegendEntry {
    own,   // its own entry: its colour, dash and name
    run,   // an overlaid run's line: the run's one entry ("╍╍ other.jsonl") names it
    none,  // none (the faint raw losses, explained by the smoothed lines' entries)
};

// One line of a chart at full resolution: its name, its look and its samples (x[i], y[i]), i < n.
// The arrays belong to the panel's columns, a store, or `owned` (computed values: a smoothed loss).
struct LineSource {
    QString name;
    QColor color;
    Qt::PenStyle style = Qt::SolidLine;
    LegendEntry legend = LegendEntry::own;
    QString run;  // the overlaid run's name (legend LegendEntry::run)
    const double* x = nullptr;
    const float* y = nullptr;
    std::size_t n = 0;
    GapPolicy gaps = GapPolicy::break_line;
    std::shared_ptr<std::vector<float>> owned;

    void setSamples(const std::vector<double>& xs, const std::vector<float>& ys, std::size_t limit);
    void setOwnedSamples(const std::vector<double>& xs, std::vector<float> ys);
    // A block's column, decoded from the store's 16-bit form into `owned` (only the few selected
    // blocks' lines are drawn, so the copy lives as long as the line).
    void setDecodedSamples(const std::vector<double>& xs, const FieldSeries& ys, std::size_t limit);
    bool hasFiniteSample() const;
};

// The lines as CSV: a "step" column, then a column per line headed by its name, one row per x at
// which any line has a finite value (in increasing order), the cell empty where a line has none.
// Lines without a finite value are left out.
QString linesCsv(const std::vector<LineSource>& lines);

}  // namespace sp::ui
