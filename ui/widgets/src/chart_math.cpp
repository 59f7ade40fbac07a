#include "chart_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sp::ui {

std::vector<float> emaSmooth(const std::vector<float>& y, std::size_t n, double weight) {
    n = std::min(n, y.size());
    std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
    double m = 0.0;
    double bias = 1.0;  // w^i
    for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite(y[i])) continue;
        m = weight * m + (1.0 - weight) * double(y[i]);
        bias *= weight;
        out[i] = float(bias < 1.0 ? m / (1.0 - bias) : m);
    }
    return out;
}

DecimatedSeries positiveOnly(const DecimatedSeries& d) {
    DecimatedSeries out;
    for (int s = 0; s < d.segmentCount(); ++s) {
        bool open = false;  // a segment of `out` is in progress
        for (qsizetype i = d.segmentBegin(s); i < d.segmentEnd(s); ++i) {
            const QPointF& p = d.points[i];
            if (!(p.y() > 0.0)) {
                open = false;
                continue;
            }
            if (!open) out.segment_starts.push_back(out.points.size());
            open = true;
            out.points.push_back(p);
        }
    }
    return out;
}

std::vector<double> mergeMarkers(std::vector<double> steps, double x_lo, double x_hi, int max_count) {
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    std::vector<double> out;
    const double span = std::max(x_hi - x_lo, 1e-9);
    long long last_bucket = -1;
    for (double s : steps) {
        if (s < x_lo || s > x_hi) continue;
        const auto bucket = std::min<long long>(static_cast<long long>((s - x_lo) / span * max_count),
                                                max_count - 1);  // x_hi itself: the last bucket
        if (!out.empty() && bucket == last_bucket) continue;
        out.push_back(s);
        last_bucket = bucket;
    }
    return out;
}

namespace {

// The smallest 1, 2 or 5 x 10^k at least `raw`.
double niceAtLeast(double raw) {
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * magnitude >= raw * (1.0 - 1e-9)) return m * magnitude;
    return 10.0 * magnitude;
}

// The next 1, 2 or 5 x 10^k above `interval` (itself such a number).
double niceAbove(double interval) {
    return niceAtLeast(interval * 1.5);
}

}  // namespace

double fittedTickInterval(double span, double length, int max_intervals,
                          const std::function<double(double interval)>& label_room) {
    if (!(span > 0.0) || !std::isfinite(span)) return 1.0;
    double interval = niceAtLeast(span / std::max(1, max_intervals));
    if (!(length > 0.0)) return interval;
    // Twenty steps take the interval past any span: 1, 2, 5 x 10^k grows 10-fold every three.
    for (int i = 0; i < 20 && interval / span * length < label_room(interval); ++i)
        interval = niceAbove(interval);
    return interval;
}

int tickDecimals(double interval) {
    if (interval >= 1.0) return 0;
    return std::min(6, int(std::ceil(-std::log10(interval) - 1e-9)));
}

StepRange zoomedRange(StepRange view, double anchor, double factor, StepRange limits, double min_span) {
    const double span = std::max(view.span() * factor, min_span);
    if (span >= limits.span()) return limits;
    // The anchor keeps its share of the view: what lay a quarter in stays a quarter in.
    const double share = view.span() > 0.0 ? std::clamp((anchor - view.lo) / view.span(), 0.0, 1.0) : 0.5;
    StepRange out{anchor - share * span, anchor - share * span + span};
    return pannedRange(out, 0.0, limits);
}

StepRange pannedRange(StepRange view, double delta, StepRange limits) {
    const double span = view.span();
    if (span >= limits.span()) return limits;
    const double lo = std::clamp(view.lo + delta, limits.lo, limits.hi - span);
    return {lo, lo + span};
}

}  // namespace sp::ui
