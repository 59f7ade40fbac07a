#include "sp/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "id_list.h"

namespace sp {
namespace {

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
      budget_target_pct_(config_.budget_target_pct),
      loss_tolerance_pct_(config_.loss_tolerance_pct),
      loss_estimator_(config_.loss_estimator()),
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
        std::vector<int> missing;
        for (int id : ids)
            if (id >= int(n)) missing.push_back(id);
        if (missing.size() == 1)
            problems.push_back(std::string("key '") + key + "': block " + std::to_string(missing[0]) +
                               " does not exist (" + block_range(n) + ")");
        else if (!missing.empty())
            problems.push_back(std::string("key '") + key + "': blocks " + detail::id_list(missing) +
                               " do not exist (" + block_range(n) + ")");
    };
    for (Precision p : kAllPrecisions) check_ids(config_.force_list(p), Config::force_key(p).c_str());
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
    snr_.assign(n, kNoSnr);
    loss_delta_.assign(n, kNoSnr);
    admitted_.assign(n, kAllFormats);
    effective_.assign(n, Precision::bf16);
    recorded_.assign(n, Precision::bf16);
    pins_.assign(n, std::nullopt);
    pin_until_.assign(n, kForever);
    pin_on_spike_.assign(n, 0);
    config_force_.assign(n, std::nullopt);
    cooldown_from_.assign(n, kNever);
    rollback_until_.assign(n, kNever);
    lowered_at_.assign(n, kNever);
    last_change_step_.assign(n, -1);
    switches_.assign(n, 0);

    // Force lists hold from the start, in every mode: they are the run's initial state, not a switch.
    for (Precision p : kAllPrecisions)
        for (int id : config_.force_list(p)) config_force_[std::size_t(id)] = p;
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
    win_head_[b] = win_head_[b] + 1 == w ? 0 : win_head_[b] + 1;
    win_count_[b] = std::min(win_count_[b] + 1, w);
}

void Policy::observe_snr(const BlockSnr& snr) {
    if (snr.block_id < 0 || snr.block_id >= block_count())
        throw std::invalid_argument("observe_snr: unknown block " + std::to_string(snr.block_id) + " (" +
                                    block_range(layout_.size()) + ")");
    snr_[std::size_t(snr.block_id)] = snr.snr_db;
}

void Policy::observe_loss_estimate(const BlockLossEstimate& estimate) {
    if (estimate.block_id < 0 || estimate.block_id >= block_count())
        throw std::invalid_argument("observe_loss_estimate: unknown block " +
                                    std::to_string(estimate.block_id) + " (" + block_range(layout_.size()) +
                                    ")");
    loss_delta_[std::size_t(estimate.block_id)] = estimate.loss_delta;
    loss_estimated_ = true;
}

void Policy::set_admitted_formats(std::vector<FormatMask> admitted) {
    if (admitted.size() != layout_.size())
        throw std::invalid_argument("set_admitted_formats: " + std::to_string(admitted.size()) +
                                    " masks for " + std::to_string(layout_.size()) + " blocks");
    for (FormatMask& m : admitted) m |= format_bit(Precision::bf16);
    admitted_ = std::move(admitted);
}

void Policy::set_materializable(FormatMask formats) {
    materializable_ = formats | format_bit(Precision::bf16);
}

std::string Policy::check_command(const Command& command) const {
    return sp::check_command(command, block_count(), materializable_);
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

const LossFeedback& Policy::observe_loss(std::int64_t step, double loss) {
    LossFeedback& fb = loss_feedback_;
    fb.suspects.clear();
    fb.changes.clear();
    fb.released_pins.clear();
    fb.cooldown_until = 0;
    // Judged at every step, so that a pin given release_on_spike has the history it needs however
    // rollback is configured.
    fb.verdict = loss_monitor_.observe(loss);
    if (!fb.alarm()) return fb;
    fb.cooldown_until = step + config_.rollback_cooldown_steps;
    release_pins_on_spike(fb, step);
    if (!config_.rollback_enabled) return fb;

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
    for (int b : fb.suspects) {
        set_effective(b, Precision::bf16, step, Reason::rollback, &fb.changes);
        cooldown_from_[std::size_t(b)] = step;
        rollback_until_[std::size_t(b)] = fb.cooldown_until;
    }
    return fb;
}

// A release of a block that holds no pin would change nothing, and an operator told "applied"
// would believe a pin had ended (POLICY.md rule 9): the whole command is refused, naming the
// blocks. A pin that expired at this very boundary counts as gone.
std::string Policy::unpinned_in(const std::vector<int>& blocks) const {
    std::string unpinned;
    for (int b : blocks) {
        if (pins_[std::size_t(b)]) continue;
        unpinned +=
            (unpinned.empty() ? "" : ", ") + layout_[std::size_t(b)].name + " (" + std::to_string(b) + ")";
    }
    if (unpinned.empty()) return {};
    return "release: not pinned, nothing to release: " + unpinned;
}

CommandOutcome Policy::apply(const Command& command, std::int64_t step) {
    CommandOutcome out;
    out.error = check_command(command);
    // A target outside budget mode would change nothing, and an operator told "applied" would
    // believe it did (POLICY.md rule 18): refused, saying what to do. A set_mode budget applied
    // earlier at the same boundary counts.
    if (out.error.empty() && command.kind == Command::Kind::set_budget && mode_ != Mode::budget)
        out.error = "set_budget: the policy is in mode " + std::string(to_string(mode_)) +
                    ", and a budget target acts only in mode budget; switch first (sp-ctl mode budget, or "
                    "Control > Mode: budget in the dashboard)";
    if (out.error.empty() && command.kind == Command::Kind::set_tolerance && mode_ != Mode::tolerance)
        out.error =
            "set_tolerance: the policy is in mode " + std::string(to_string(mode_)) +
            ", and a loss tolerance acts only in mode tolerance; switch first (sp-ctl mode tolerance, "
            "or Control > Mode: tolerance in the dashboard)";
    if (out.error.empty() && command.kind == Command::Kind::release) out.error = unpinned_in(command.blocks);
    if (!out.error.empty()) return out;
    out.ok = true;

    switch (command.kind) {
        case Command::Kind::pin:
            for (int b : command.blocks) {
                const std::size_t i = std::size_t(b);
                pins_[i] = command.precision;
                pin_until_[i] = command.for_steps > 0 ? step + command.for_steps : kForever;
                pin_on_spike_[i] = command.release_on_spike ? 1 : 0;
                set_effective(b, command.precision, step, Reason::pin, &out.changes);
            }
            break;
        case Command::Kind::release:
            for (int b : command.blocks) release_pin(b, step, &out.changes);
            break;
        case Command::Kind::release_all:
            for (int b = 0; b < block_count(); ++b) release_pin(b, step, &out.changes);
            break;
        case Command::Kind::set_budget:
            budget_target_pct_ = command.target_pct;  // the next update plans for it
            break;
        case Command::Kind::set_tolerance:
            loss_tolerance_pct_ = command.tolerance_pct;  // the next update plans for it
            break;
        case Command::Kind::set_mode:
            mode_ = command.mode;
            // Leaving dynamic, budget or tolerance returns policy-routed blocks to bf16 at once; entering
            // them lets the next update decide from where each block stands.
            if (mode_ == Mode::off || mode_ == Mode::static_) {
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
