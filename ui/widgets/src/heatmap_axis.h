#pragma once
// The heatmap's step axis: ticks at round steps (1, 2 or 5 x 10^k), at least a given number of pixels
// apart, each placed where its step falls between the two updates that bracket it (updates need not
// land on round steps). Private to sp_ui_widgets; tested on its own.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sp/ui/telemetry_store.h"

namespace sp::ui {

struct AxisTick {
    double update = 0;      // fractional update index of the tick
    std::int64_t step = 0;  // its label
};

// Ticks for updates [first, last) of `rows` drawn `px_per_update` wide.
std::vector<AxisTick> stepAxisTicks(const std::vector<UpdateRow>& rows, std::size_t first, std::size_t last,
                                    double px_per_update, double min_px_apart = 90.0);

}  // namespace sp::ui
