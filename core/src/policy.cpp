#include "sp/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace sp {
namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min();

// This build's runtimes handle BF16 and INT8; the FP8 tier arrives with its own issue.
bool routable(Precision p) {
    return p == Precision::bf16 || p == Precision::int8;
}

bool all_finite(const BlockGradStats& s) {
    return s.finite() && std::isfinite(s.l2_norm) && std::isfinite(s.max_abs) && std::isfinite(s.variance) &&
           std::isfinite(s.mean);
}

std::string block_range(std::size_t n) {
    return n == 0 ? std::string("the model has no blocks")
                  : "the model has " + std::to_string(n) + " blocks: 0.." + std::to_string(n - 1);
}

}  // namespace

Precision initial_precision(double sensitivity, const Config& c) {
    if (sensitivity >= c.bf16_threshold) return Precision::bf16;
    if (sensitivity < c.int8_threshold) return Precision::int8;
    return c.ambiguous_default;
}

Precision hysteresis_precision(Precision current, double sensitivity, const Config& c) {
    if (current == Precision::bf16) {
        // Computed in double exactly as written: 0.3 - 0.1 == 0.19999999999999998.
        return sensitivity < c.int8_threshold - c.hysteresis_margin ? Precision::int8 : Precision::bf16;
    }
    return sensitivity >= c.bf16_threshold ? Precision::bf16 : current;
}

Policy::Policy(Config config, BlockLayout layout, std::vector<double> calibration_errors)
    : config_(std::move(config)),
      layout_(std::move(layout)),
      calibration_errors_(std::move(calibration_errors)),
      mode_(config_.effective_mode()),
      loss_monitor_(config_) {
    std::vector<std::string> problems = validate(config_);
    const std::size_t n = layout_.size();
    for (std::size_t i = 0; i < n; ++i) {
        if (layout_[i].id != int(i)) {
            problems.push_back("layout: block at position " + std::to_string(i) + " has id " +
                               std::to_string(layout_[i].id) + "; ids must be 0..n-1 in order");
            break;
        }
    }
    auto check_ids = [&](const std::vector<int>& ids, const char* key) {
        for (int id : ids) {
            if (id >= int(n)) {
                problems.push_back(std::string("key '") + key + "': block " + std::to_string(id) +
                                   " does not exist (" + block_range(n) + ")");
            }
        }
    };
    check_ids(config_.force_bf16_blocks, "force_bf16_blocks");
    check_ids(config_.force_int8_blocks, "force_int8_blocks");
    if (!calibration_errors_.empty()) {
        if (calibration_errors_.size() != n) {
            problems.push_back("calibration: " + std::to_string(calibration_errors_.size()) +
                               " errors given for " + std::to_string(n) + " blocks");
        }
        for (std::size_t i = 0; i < calibration_errors_.size(); ++i) {
            const double e = calibration_errors_[i];
            if (!std::isfinite(e) || e < 0.0) {
                problems.push_back("calibration: block " + std::to_string(i) + " has error " +
                                   std::to_string(e) + "; must be finite and >= 0");
            }
        }
    }
    if (!problems.empty()) throw ConfigError(std::move(problems));

    const std::size_t w = std::size_t(config_.history_window);
    win_l2_.assign(n * w, 0.0);
    win_max_.assign(n * w, 0.0);
    win_var_.assign(n * w, 0.0);
    win_mean_.assign(n * w, 0.0);
    win_count_.assign(n, 0);
    win_head_.assign(n, 0);
    nonfinite_since_update_.assign(n, 0);
    effective_.assign(n, Precision::bf16);
    recorded_.assign(n, Precision::bf16);
    pins_.assign(n, std::nullopt);
    config_force_.assign(n, std::nullopt);
    cooldown_from_.assign(n, kNever);
    rollback_until_.assign(n, kNever);
    lowered_at_.assign(n, kNever);
    last_change_step_.assign(n, -1);
    switches_.assign(n, 0);

    // Force lists hold from the start, in every mode: they are the run's initial state, not a switch.
    for (int id : config_.force_bf16_blocks) config_force_[std::size_t(id)] = Precision::bf16;
    for (int id : config_.force_int8_blocks) config_force_[std::size_t(id)] = Precision::int8;
    for (std::size_t i = 0; i < n; ++i) {
        if (config_force_[i]) effective_[i] = *config_force_[i];
    }
}

void Policy::observe(std::int64_t /*step*/, const BlockGradStats& s) {
    if (s.block_id < 0 || s.block_id >= block_count()) {
        throw std::invalid_argument("observe: unknown block " + std::to_string(s.block_id) + " (" +
                                    block_range(layout_.size()) + ")");
    }
    const std::size_t b = std::size_t(s.block_id);
    if (!all_finite(s)) {
        nonfinite_since_update_[b] = 1;
        return;
    }
    const int w = config_.history_window;
    const std::size_t slot = b * std::size_t(w) + std::size_t(win_head_[b]);
    win_l2_[slot] = s.l2_norm;
    win_max_[slot] = s.max_abs;
    win_var_[slot] = s.variance;
    win_mean_[slot] = s.mean;
    win_head_[b] = (win_head_[b] + 1) % w;
    win_count_[b] = std::min(win_count_[b] + 1, w);
}

bool Policy::is_update_step(std::int64_t step) const {
    return step >= config_.warmup_steps &&
           (!last_update_ || step - *last_update_ >= config_.update_interval_steps);
}

std::optional<Precision> Policy::forced_precision(int block, ForcedBy* by) const {
    const std::size_t b = std::size_t(block);
    if (pins_[b]) {
        *by = ForcedBy::pin;
        return pins_[b];
    }
    if (config_force_[b]) {
        *by = ForcedBy::config;
        return config_force_[b];
    }
    *by = ForcedBy::none;
    return std::nullopt;
}

void Policy::set_effective(int block, Precision p, std::int64_t step, Reason why,
                           std::vector<PrecisionChange>* changes) {
    const std::size_t b = std::size_t(block);
    if (effective_[b] == p) return;
    changes->push_back({block, effective_[b], p, why});
    effective_[b] = p;
    if (p == Precision::bf16) lowered_at_[b] = kNever;  // whatever brought it back, nothing to undo
    last_change_step_[b] = step;
    ++switches_[b];
}

const UpdateRecord* Policy::update(std::int64_t step, double timestamp) {
    last_changes_.clear();
    if (!is_update_step(step)) return nullptr;

    const std::size_t n = layout_.size();
    const int w = config_.history_window;
    UpdateRecord& rec = record_;
    rec.step_id = step;
    rec.timestamp = timestamp;
    rec.blocks_bf16 = rec.blocks_int8 = rec.blocks_fp8 = rec.precision_changes = 0;
    rec.max_sensitivity = 0.0;
    rec.mode = mode_;
    rec.measured_bandwidth_saving_pct.reset();
    rec.block_details.resize(n);

    // Window averages, oldest observation first so the sums are reproducible.
    double l2_sum = 0.0;
    int with_window = 0;
    for (std::size_t b = 0; b < n; ++b) {
        BlockDetail& d = rec.block_details[b];
        d = BlockDetail{};
        d.id = int(b);
        d.window = win_count_[b];
        if (d.window == 0) continue;
        const std::size_t base = b * std::size_t(w);
        const int oldest = (win_head_[b] - d.window + w) % w;
        double l2 = 0, mx = 0, var = 0, mean = 0;
        for (int k = 0; k < d.window; ++k) {
            const std::size_t slot = base + std::size_t((oldest + k) % w);
            l2 += win_l2_[slot];
            mx += win_max_[slot];
            var += win_var_[slot];
            mean += win_mean_[slot];
        }
        d.l2_norm = l2 / d.window;
        d.max_abs = mx / d.window;
        d.variance = var / d.window;
        d.mean = mean / d.window;
        l2_sum += d.l2_norm;
        ++with_window;
    }
    const double l2_mean = with_window > 0 ? l2_sum / with_window : 0.0;
    const bool first_dynamic = mode_ == Mode::dynamic && !dynamic_assigned_;

    double sens_sum = 0.0;
    double saved_bytes = 0.0, bf16_bytes = 0.0;
    rec.min_sensitivity = n > 0 ? 1.0 : 0.0;
    for (std::size_t b = 0; b < n; ++b) {
        BlockDetail& d = rec.block_details[b];
        const bool unsafe = nonfinite_since_update_[b] != 0;
        d.relative_magnitude =
            (d.window > 0 && l2_mean > 0.0 && std::isfinite(l2_mean)) ? d.l2_norm / l2_mean : 0.0;
        d.grad_score = std::min(d.relative_magnitude / config_.grad_sensitivity_threshold, 1.0);
        d.error_score = calibration_errors_.empty()
                            ? 0.0
                            : std::min(calibration_errors_[b] / config_.quant_error_threshold, 1.0);
        const double raw = config_.grad_weight * d.grad_score + config_.error_weight * d.error_score;
        d.sensitivity = unsafe ? 1.0 : std::clamp(raw, 0.0, 1.0);

        const Precision current = effective_[b];
        Precision next = current;
        const std::optional<Precision> forced = forced_precision(int(b), &d.forced);
        if (forced) {
            next = *forced;
            d.reason = d.forced == ForcedBy::pin ? Reason::pin : Reason::config;
        } else if (mode_ != Mode::dynamic) {
            next = Precision::bf16;
            d.reason = Reason::mode;
        } else if (unsafe) {
            next = Precision::bf16;  // safety: even inside the cooldown
            d.reason = Reason::nonfinite;
        } else if (first_dynamic) {
            next = initial_precision(d.sensitivity, config_);
            d.reason = Reason::initial;
        } else {
            const Precision wanted = hysteresis_precision(current, d.sensitivity, config_);
            const bool cooling = (cooldown_from_[b] != kNever &&
                                  step < cooldown_from_[b] + config_.min_steps_between_switches) ||
                                 (rollback_until_[b] != kNever && step < rollback_until_[b]);
            if (wanted == current) {
                d.reason = Reason::hold;
            } else if (cooling) {
                d.reason = Reason::cooldown;
            } else {
                next = wanted;
                d.reason = Reason::policy;
            }
        }
        if (next != current) {
            set_effective(int(b), next, step, d.reason, &last_changes_);
            // Only the policy's own moves start a cooldown; forced and pinned ones never do.
            if (d.reason == Reason::policy || d.reason == Reason::initial || d.reason == Reason::nonfinite) {
                cooldown_from_[b] = step;
            }
            // A speculative move down by the policy itself is what loss feedback may undo.
            if (next != Precision::bf16 && (d.reason == Reason::policy || d.reason == Reason::initial))
                lowered_at_[b] = step;
        }

        d.precision = effective_[b];
        d.changed = effective_[b] != recorded_[b];
        d.last_change_step = last_change_step_[b];
        d.switches = switches_[b];
        rec.precision_changes += d.changed ? 1 : 0;
        rec.blocks_bf16 += d.precision == Precision::bf16 ? 1 : 0;
        rec.blocks_int8 += d.precision == Precision::int8 ? 1 : 0;
        rec.blocks_fp8 += is_fp8(d.precision) ? 1 : 0;
        sens_sum += d.sensitivity;
        rec.max_sensitivity = std::max(rec.max_sensitivity, d.sensitivity);
        rec.min_sensitivity = std::min(rec.min_sensitivity, d.sensitivity);
        saved_bytes += layout_[b].bytes_at(d.precision);
        bf16_bytes += double(layout_[b].bytes_bf16);
    }
    rec.mean_sensitivity = n > 0 ? sens_sum / double(n) : 0.0;
    rec.estimated_bandwidth_saving_pct = bf16_bytes > 0.0 ? 100.0 * (1.0 - saved_bytes / bf16_bytes) : 0.0;

    if (first_dynamic) dynamic_assigned_ = true;
    recorded_ = effective_;
    std::fill(nonfinite_since_update_.begin(), nonfinite_since_update_.end(), 0);
    last_update_ = step;
    return &rec;
}

const LossFeedback& Policy::observe_loss(std::int64_t step, double loss) {
    LossFeedback& fb = loss_feedback_;
    fb.suspects.clear();
    fb.changes.clear();
    fb.cooldown_until = 0;
    fb.verdict = LossVerdict{};
    if (!config_.rollback_enabled) return fb;
    fb.verdict = loss_monitor_.observe(loss);
    if (!fb.alarm()) return fb;

    // The loss of `step` was computed with the map set up to step - 1: a block moved at `step`
    // itself cannot have caused it.
    for (int b = 0; b < block_count(); ++b) {
        const std::size_t i = std::size_t(b);
        ForcedBy by;
        if (effective_[i] == Precision::bf16 || lowered_at_[i] == kNever || forced_precision(b, &by))
            continue;
        if (lowered_at_[i] < step && step - lowered_at_[i] <= config_.rollback_window_steps)
            fb.suspects.push_back(b);
    }
    fb.cooldown_until = step + config_.rollback_cooldown_steps;
    for (int b : fb.suspects) {
        set_effective(b, Precision::bf16, step, Reason::rollback, &fb.changes);
        cooldown_from_[std::size_t(b)] = step;
        rollback_until_[std::size_t(b)] = fb.cooldown_until;
    }
    return fb;
}

CommandOutcome Policy::apply(const Command& command, std::int64_t step) {
    CommandOutcome out;
    for (int id : command.blocks) {
        if (id < 0 || id >= block_count()) {
            out.error = "unknown block " + std::to_string(id) + " (" + block_range(layout_.size()) + ")";
            return out;
        }
    }
    if (command.kind == Command::Kind::pin && !routable(command.precision)) {
        out.error = "precision '" + std::string(to_string(command.precision)) +
                    "' is not routed by this build (bf16, int8)";
        return out;
    }
    out.ok = true;

    auto release = [&](int b) {
        const std::size_t i = std::size_t(b);
        if (!pins_[i]) return;
        pins_[i].reset();
        cooldown_from_[i] = kNever;  // no cooldown penalty: the policy may move it at the next update
        rollback_until_[i] = kNever;
        if (config_force_[i]) set_effective(b, *config_force_[i], step, Reason::config, &out.changes);
        // Otherwise it keeps its precision until the next update decides from it (with hysteresis).
    };

    switch (command.kind) {
        case Command::Kind::pin:
            for (int b : command.blocks) {
                pins_[std::size_t(b)] = command.precision;
                set_effective(b, command.precision, step, Reason::pin, &out.changes);
            }
            break;
        case Command::Kind::release:
            for (int b : command.blocks) release(b);
            break;
        case Command::Kind::release_all:
            for (int b = 0; b < block_count(); ++b) release(b);
            break;
        case Command::Kind::set_mode:
            mode_ = command.mode;
            // Leaving dynamic returns policy-routed blocks to bf16 at once; entering dynamic lets the
            // next update decide, with hysteresis, from where each block stands.
            if (mode_ != Mode::dynamic) {
                ForcedBy by;
                for (int b = 0; b < block_count(); ++b) {
                    if (!forced_precision(b, &by))
                        set_effective(b, Precision::bf16, step, Reason::mode, &out.changes);
                }
            }
            break;
    }
    return out;
}

}  // namespace sp
