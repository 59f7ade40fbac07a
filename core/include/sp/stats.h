#pragma once
// Gradient statistics of one block at one step, as collectors (CPU or CUDA) report them.
#include <cstdint>

namespace sp {

struct BlockGradStats {
    int block_id = 0;
    // Over the block's finite gradient elements (non-finite ones are only counted):
    double l2_norm = 0.0;   // sqrt(sum of squares)
    double max_abs = 0.0;   // max |g|
    double variance = 0.0;  // population variance
    double mean = 0.0;
    std::uint64_t numel = 0;            // every element, non-finite ones included
    std::uint64_t nonfinite_count = 0;  // NaN and +-Inf elements; > 0 keeps the observation out of the window

    bool finite() const { return nonfinite_count == 0; }
};

}  // namespace sp
