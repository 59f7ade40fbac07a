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

}  // namespace sp::ui
