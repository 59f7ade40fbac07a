#pragma once
// Pure helpers of ChartsPanel (no widgets): loss smoothing, what a log axis may show, how many markers
// are drawn, tick intervals that leave room for their labels, and the zoomed step range. Private to
// sp_ui_widgets.
#include <cstddef>
#include <functional>
#include <vector>

#include "sp/ui/decimate.h"

namespace sp::ui {

// TensorBoard's debiased exponential moving average over the first `n` values: the i-th finite
// value v (1-based among finite values) gives m = w·m + (1-w)·v and shows m / (1 - w^i); the
// debiasing keeps the start from being pulled towards 0. Non-finite values stay NaN and leave m be.
std::vector<float> emaSmooth(const std::vector<float>& y, std::size_t n, double weight);

// The series without its points at y <= 0 (a log axis cannot place them); the line breaks there.
DecimatedSeries positiveOnly(const DecimatedSeries& d);

// Sorted, de-duplicated steps in [x_lo, x_hi], merged so that at most `max_count` remain: steps in
// the same 1/max_count of the range keep the first of them.
std::vector<double> mergeMarkers(std::vector<double> steps, double x_lo, double x_hi, int max_count);

// The tick interval for an axis spanning `span` (in its values) over `length` px: the smallest
// 1, 2 or 5 x 10^k that gives at most `max_intervals` intervals and puts neighbouring ticks at least
// `label_room(interval)` px apart (the room a label needs with its gap; the labels' decimals follow the
// interval). `length` <= 0: `max_intervals` alone decides.
double fittedTickInterval(double span, double length, int max_intervals,
                          const std::function<double(double interval)>& label_room);

// The decimals a tick label needs at this interval: 0 for whole intervals, else enough for it.
int tickDecimals(double interval);

struct StepRange {
    double lo = 0.0;
    double hi = 1.0;
    double span() const { return hi - lo; }
    bool operator==(const StepRange& o) const { return lo == o.lo && hi == o.hi; }
};

// `view` scaled by `factor` around `anchor` (factor < 1 zooms in: the anchor keeps its place), no
// narrower than `min_span`, then moved (not scaled) back inside `limits` where it left them. A result
// as wide as `limits` or wider is `limits`.
StepRange zoomedRange(StepRange view, double anchor, double factor, StepRange limits, double min_span);

// `view` moved by `delta` steps, stopping at the edges of `limits` (its width kept).
StepRange pannedRange(StepRange view, double delta, StepRange limits);

}  // namespace sp::ui
