#include "heatmap_axis.h"

#include <algorithm>
#include <cmath>

namespace sp::ui {

std::vector<AxisTick> stepAxisTicks(const std::vector<UpdateRow>& rows, std::size_t first, std::size_t last,
                                    double px_per_update, double min_px_apart) {
    std::vector<AxisTick> ticks;
    last = std::min(last, rows.size());
    if (last <= first || px_per_update <= 0) return ticks;
    const double s0 = double(rows[first].step), s1 = double(rows[last - 1].step);
    const double steps_per_update = last - first > 1 ? (s1 - s0) / double(last - first - 1) : 1.0;
    const double min_steps = std::max(1.0, min_px_apart / px_per_update * steps_per_update);
    double spacing = 1.0;
    while (spacing < min_steps) spacing *= spacing * 2 >= min_steps ? 2 : (spacing * 5 >= min_steps ? 5 : 10);
    const auto begin = rows.begin() + std::ptrdiff_t(first), end = rows.begin() + std::ptrdiff_t(last);
    for (double t = std::ceil(s0 / spacing) * spacing; t <= s1; t += spacing) {
        const auto at =
            std::lower_bound(begin, end, t, [](const UpdateRow& r, double v) { return double(r.step) < v; });
        const std::size_t u = std::size_t(at - rows.begin());
        double index = double(u);
        if (u > first && double(rows[u].step) > t) {  // between updates u - 1 and u
            const double a = double(rows[u - 1].step), b = double(rows[u].step);
            index = double(u - 1) + (t - a) / (b - a);
        }
        ticks.push_back({index, static_cast<std::int64_t>(t)});
    }
    return ticks;
}

}  // namespace sp::ui
