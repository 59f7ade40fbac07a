#pragma once
// Configs and observations the policy suites share (test_policy, test_policy_switching): configs in
// which a test controls each update's inputs directly, and one call that observes and updates.
#include <cmath>
#include <cstdint>
#include <vector>

#include "sp/policy.h"

namespace sp::test::policy_fixtures {

// A config in which every step is an update step and the window holds one observation, so a test
// controls each update's inputs directly.
inline Config immediate_config() {
    Config c;
    c.warmup_steps = 0;
    c.update_interval_steps = 1;
    c.history_window = 1;
    c.min_steps_between_switches = 0;
    return c;
}

// grad_weight 0, error_weight 1, quant_error_threshold 1: sensitivity == calibration error, exactly.
inline Config error_only_config() {
    Config c = immediate_config();
    c.grad_weight = 0.0;
    c.error_weight = 1.0;
    c.quant_error_threshold = 1.0;
    return c;
}

// grad_weight 1, error_weight 0, grad_sensitivity_threshold 2: sensitivity == l2 / (2 * mean l2).
inline Config grad_only_config() {
    Config c = immediate_config();
    c.grad_weight = 1.0;
    c.error_weight = 0.0;
    return c;
}

inline BlockGradStats stat(int id, double l2, std::uint64_t nonfinite = 0) {
    BlockGradStats s;
    s.block_id = id;
    s.l2_norm = l2;
    s.max_abs = l2 / 2;
    s.variance = l2 * l2;
    s.mean = -l2 / 4;
    s.numel = 100;
    s.nonfinite_count = nonfinite;
    return s;
}

// Observes one L2 per block (NaN: no observation) and runs update(step).
inline const UpdateRecord* step_with(Policy& p, std::int64_t step, const std::vector<double>& l2) {
    for (std::size_t i = 0; i < l2.size(); ++i) {
        if (!std::isnan(l2[i])) p.observe(step, stat(int(i), l2[i]));
    }
    return p.update(step, 1000.0 + double(step));
}

}  // namespace sp::test::policy_fixtures
