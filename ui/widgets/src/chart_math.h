#pragma once
// Pure helpers of ChartsPanel's extras (no widgets): loss smoothing, what a log axis may show, and
// how many markers are drawn. Private to sp_ui_widgets.
#include <cstddef>
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

}  // namespace sp::ui
