#pragma once
// Gradient statistics of one block at one step, as collectors (CPU or CUDA) report them.
#include <cstdint>
#include <limits>

#include "sp/precision.h"

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

// Estimated SNR of a block's weights (and the inputs of its linear layers, when the trainer supplies
// them) in each format, from the distribution statistics taken every distribution_interval_steps.
// NaN: not estimated (bf16's entry, or a format the producer did not evaluate).
inline constexpr double kUnknownSnr = std::numeric_limits<double>::quiet_NaN();
inline constexpr PerFormat kNoSnr = {kUnknownSnr, kUnknownSnr, kUnknownSnr, kUnknownSnr, kUnknownSnr};

struct BlockSnr {
    int block_id = 0;
    PerFormat snr_db = kNoSnr;
};

// Estimated change of the training loss if a block ran in each format (POLICY.md rule 23), in the
// loss's own units, from the distribution statistics' sampled output error and the output gradients
// of the same step: 1/2 N sum over its linear layers and tokens of (g_y . (y_f - y))^2. NaN: not
// estimated (bf16's entry, or a format the producer did not evaluate).
struct BlockLossEstimate {
    int block_id = 0;
    PerFormat loss_delta = kNoSnr;
};

}  // namespace sp
