#pragma once
// The benchmarks' synthetic telemetry: a block's gradient statistics with realistic values (every
// field set, doubles with full-length decimal forms), drawn from the benchmark's fixed-seed stream.
#include <random>

#include "sp/telemetry.h"

namespace sp::test {

// Fills the scores and gradient statistics of `d` (not its mean, precision or routing fields); six
// draws from `rng`, in the order the fields are listed.
inline void random_block_statistics(sp::BlockDetail& d, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    d.grad_score = unit(rng);
    d.error_score = unit(rng) * 0.1;
    d.sensitivity = 0.7 * d.grad_score + 0.3 * d.error_score;
    d.relative_magnitude = unit(rng) * 3.0;
    d.l2_norm = unit(rng) * 50.0;
    d.max_abs = unit(rng) * 2.0;
    d.variance = unit(rng) * 1e-4;
}

}  // namespace sp::test
