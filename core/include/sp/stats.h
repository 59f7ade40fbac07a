#pragma once
// Gradient statistics of one block at one step, as collectors (CPU or CUDA) report them.
#include <cstdint>

namespace sp {

struct BlockGradStats {
    int block_id = 0;
    double l2_norm = 0.0;   // sqrt(sum of squares) over every gradient element of the block
    double max_abs = 0.0;   // max |g| over the finite elements
    double variance = 0.0;  // population variance over all gradient elements
    double mean = 0.0;
    std::uint64_t numel = 0;
    std::uint64_t nonfinite_count = 0;  // NaN and +-Inf elements; > 0 keeps the observation out of the window

    bool finite() const { return nonfinite_count == 0; }
};

}  // namespace sp
