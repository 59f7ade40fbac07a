#pragma once
// What the gradient-statistics pass produces per block, on the device (grad_stats_launcher.h) and in
// its host model (grad_stats_host_model.h).
#include <cstdint>

namespace sp::cuda {

// One block's statistics over its finite elements (non-finite ones are only counted).
struct BlockMoments {
    std::uint64_t finite = 0;
    std::uint64_t nonfinite = 0;
    double mean = 0.0;
    double m2 = 0.0;     // sum of squared deviations from the mean
    double sumsq = 0.0;  // sum of squares
    double max_abs = 0.0;
};

}  // namespace sp::cuda
