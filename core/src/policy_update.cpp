// Policy::update, in the phases POLICY.md names: window averages (rule 2), scores (rule 4), one
// decision per block (rules 5-9 and 16-18: pins and force lists, then the mode, then safety, then the
// budget or the dynamic rules), the record's totals (rule 10).
#include <algorithm>
#include <cmath>

#include "format_choice.h"
#include "sp/policy.h"

namespace sp {

bool Policy::cooling(std::size_t b, std::int64_t step) const {
    return (cooldown_from_[b] != kNever && step < cooldown_from_[b] + config_.min_steps_between_switches) ||
           (rollback_until_[b] != kNever && step < rollback_until_[b]);
}

std::int64_t Policy::free_from(std::size_t b) const {
    std::int64_t from = 0;
    if (cooldown_from_[b] != kNever) from = cooldown_from_[b] + config_.min_steps_between_switches;
    if (rollback_until_[b] != kNever) from = std::max(from, rollback_until_[b]);
    return from;
}

Policy::WindowTotals Policy::average_windows(UpdateRecord& rec) const {
    const int w = config_.history_window;
    WindowTotals totals;
    // One division per update, not one per block and format: this runs over every block at every update.
    const double per_unit = loss_in_percent() ? 100.0 / loss_monitor_.ema() : kNoValue;
    for (std::size_t b = 0; b < layout_.size(); ++b) {
        BlockDetail& d = rec.block_details[b];
        d = BlockDetail{};
        d.id = int(b);
        d.window = win_count_[b];
        d.snr_db = snr_[b];
        if (!std::isnan(per_unit))                        // else it stays unknown
            for (Precision p : kLowFormatsCheapestFirst)  // in place: a PerFormat returned by value stalls
                d.loss_delta_pct[std::size_t(p)] = loss_delta_[b][std::size_t(p)] * per_unit;
        if (d.window == 0) continue;
        // Oldest observation first, so the sums are reproducible.
        const std::size_t base = b * std::size_t(w);
        // head in [0, w) and window in [1, w]: one wrap at most (no integer division per block).
        int oldest = win_head_[b] - d.window;
        if (oldest < 0) oldest += w;
        double l2 = 0, mx = 0, var = 0, mean = 0;
        auto add = [&](std::size_t from, std::size_t to) {  // slots [from, to) of this block's ring
            for (std::size_t slot = base + from; slot < base + to; ++slot) {
                l2 += win_l2_[slot];
                mx += win_max_[slot];
                var += win_var_[slot];
                mean += win_mean_[slot];
            }
        };
        // The ring from its oldest slot: up to its end, then from its start (no division per slot).
        const int first_part = std::min(d.window, w - oldest);
        add(std::size_t(oldest), std::size_t(oldest) + std::size_t(first_part));
        add(0, std::size_t(d.window - first_part));
        d.l2_norm = l2 / d.window;
        d.max_abs = mx / d.window;
        d.variance = var / d.window;
        d.mean = mean / d.window;
        totals.l2_sum += d.l2_norm;
        ++totals.with_window;
    }
    return totals;
}

void Policy::score_blocks(UpdateRecord& rec, const WindowTotals& totals, std::int64_t step,
                          std::vector<BudgetBlock>* budget) const {
    const double l2_mean = totals.with_window > 0 ? totals.l2_sum / totals.with_window : 0.0;
    if (budget) budget->resize(layout_.size());
    for (std::size_t b = 0; b < layout_.size(); ++b) {
        BlockDetail& d = rec.block_details[b];
        d.relative_magnitude =
            (d.window > 0 && l2_mean > 0.0 && std::isfinite(l2_mean)) ? d.l2_norm / l2_mean : 0.0;
        d.grad_score = std::min(d.relative_magnitude / config_.grad_sensitivity_threshold, 1.0);
        d.error_score = calibration_errors_.empty()
                            ? 0.0
                            : std::min(calibration_errors_[b] / config_.quant_error_threshold, 1.0);
        const double raw = config_.grad_weight * d.grad_score + config_.error_weight * d.error_score;
        d.sensitivity = nonfinite_since_update_[b] ? 1.0 : std::clamp(raw, 0.0, 1.0);
        if (budget) fill_budget_block((*budget)[b], b, d, step);
    }
}

Policy::Decision Policy::decide_dynamic(BlockDetail& d, std::int64_t step, bool first) const {
    const std::size_t b = std::size_t(d.id);
    const Precision current = effective_[b];
    ReasonFacts& f = d.facts;
    if (first) {
        // Rule 5: thresholds without hysteresis.
        Precision fallback = Precision::int8;
        if (d.sensitivity >= config_.bf16_threshold) {
            f.rule = ReasonRule::reached_bf16;
            f.threshold = config_.bf16_threshold;
            return {Precision::bf16, Reason::initial};
        }
        if (d.sensitivity < config_.int8_threshold) {
            f.rule = ReasonRule::below_int8;
            f.threshold = config_.int8_threshold;
        } else {
            fallback = config_.ambiguous_default;
            f.rule = ReasonRule::ambiguous;
            f.format = fallback;
            if (fallback == Precision::bf16) return {Precision::bf16, Reason::initial};
        }
        // The first assignment starts from BF16 whatever a released pin left behind.
        const detail::FormatChoice choice =
            detail::choose_low_format(Precision::bf16, true, d.snr_db, allowed(b), fallback, config_);
        f.choice = choice.facts;
        return {choice.format, Reason::initial};
    }

    // Rule 6: hysteresis on the sensitivity decides whether the block may be below BF16 ...
    Precision wanted = Precision::bf16;
    if (current == Precision::bf16) {
        const double below = config_.int8_threshold - config_.hysteresis_margin;  // in double, as written
        f.threshold = below;
        f.rule = d.sensitivity < below ? ReasonRule::leaves_bf16 : ReasonRule::stays_bf16;
    } else if (d.sensitivity >= config_.bf16_threshold) {
        f.rule = ReasonRule::reached_bf16;
        f.threshold = config_.bf16_threshold;
    } else {
        f.rule = ReasonRule::below_bf16_band;
        f.threshold = config_.bf16_threshold;
    }
    // ... rule 17: the SNR tiers decide which format.
    if (f.rule == ReasonRule::leaves_bf16 || f.rule == ReasonRule::below_bf16_band) {
        const auto choice =
            detail::choose_low_format(current, false, d.snr_db, allowed(b), Precision::int8, config_);
        wanted = choice.format;
        f.choice = choice.facts;
    }
    if (wanted == current) return {current, Reason::hold};
    if (cooling(b, step)) {  // rule 7
        f.cooldown_until = free_from(b);
        f.held_in = current;
        return {current, Reason::cooldown};
    }
    return {wanted, Reason::policy};
}

// Rule 18's input for one block: its size, score, SNRs, the formats it may take, and whether it is
// fixed this update (forced, pinned, unsafe or cooling).
void Policy::fill_budget_block(BudgetBlock& bb, std::size_t b, const BlockDetail& d,
                               std::int64_t step) const {
    // Worked out in locals and stored once: through the reference, every `&=` was a store.
    FormatMask admissible = allowed(b);
    if (config_.snr_tiers) {  // rule 17's thresholds bound what the budget may use
        // Without a branch: which formats a block's SNRs clear is as unpredictable as the SNRs.
        FormatMask below = 0;
        for (Precision p : kLowFormatsCheapestFirst) {
            const bool clears = d.snr_db[std::size_t(p)] >= config_.snr_threshold_db[std::size_t(p)];
            below |= FormatMask(unsigned(!clears) << unsigned(p));
        }
        admissible &= FormatMask(~below);
    }
    std::optional<Precision> fixed;
    ForcedBy by;
    if (const auto forced = forced_precision(int(b), &by)) {
        fixed = forced;
    } else if (nonfinite_since_update_[b]) {
        fixed = Precision::bf16;
    } else if (cooling(b, step)) {
        fixed = effective_[b];
    }
    bb.bytes_bf16 = double(layout_[b].bytes_bf16);
    bb.sensitivity = d.sensitivity;
    bb.snr_db = d.snr_db;
    bb.admissible = admissible;
    bb.fixed = fixed;
    bb.current = effective_[b];
    // The planners take the estimates in the loss's own units, which change only when they are profiled,
    // so the loss planner's prepared input outlives the loss EMA's every move (plan_on_loss scales the
    // tolerance instead). Unknown until a loss is seen, as their percent is.
    bb.loss_pct = loss_in_percent() ? loss_delta_[b] : kNoSnr;
}

// The plan in the loss's units (fill_budget_block): the tolerance in percent of the loss EMA becomes
// tolerance * EMA / 100; a budget's minimum is the same at any scale. Before any loss the costs are
// unknown and every free block stays at BF16, as in percent.
std::vector<Precision> Policy::plan_on_loss(UpdateRecord& rec) {
    const bool budget = mode_ == Mode::budget;
    const bool known = loss_in_percent();
    const double ema = known ? loss_monitor_.ema() : 1.0;
    const LossPlan plan =
        budget ? loss_planner_.plan_budget(budget_blocks_, budget_target_pct_, config_.hysteresis_margin)
               : loss_planner_.plan_tolerance(budget_blocks_, loss_tolerance_pct_ * ema / 100.0,
                                              config_.hysteresis_margin);
    rec.estimated_loss_pct = known ? plan.loss_pct * 100.0 / ema : plan.loss_pct;
    return plan.precision;
}

Policy::Decision Policy::decide_budget(BlockDetail& d, Precision planned) const {
    const std::size_t b = std::size_t(d.id);
    const Precision current = effective_[b];
    const bool tolerance = mode_ == Mode::tolerance;
    d.facts.rule = tolerance ? ReasonRule::tolerance : ReasonRule::budget;
    d.facts.threshold = tolerance ? loss_tolerance_pct_ : budget_target_pct_;
    d.facts.on_loss = plans_on_loss();
    d.facts.format = planned;
    return {planned, planned == current ? Reason::hold : Reason::policy};
}

void Policy::apply_decision(BlockDetail& d, const Decision& decision, std::int64_t step) {
    const std::size_t b = std::size_t(d.id);
    d.reason = decision.reason;
    if (decision.next == effective_[b]) return;
    set_effective(d.id, decision.next, step, decision.reason, &last_changes_);
    // Only the policy's own moves start a cooldown; forced and pinned ones never do.
    if (d.reason == Reason::policy || d.reason == Reason::initial || d.reason == Reason::nonfinite)
        cooldown_from_[b] = step;
    // A speculative move down by the policy itself is what loss feedback may undo.
    if (decision.next != Precision::bf16 && (d.reason == Reason::policy || d.reason == Reason::initial))
        lowered_at_[b] = step;
}

void Policy::tally_block(BlockDetail& d, Tally& t) const {
    const std::size_t b = std::size_t(d.id);
    d.precision = effective_[b];
    d.changed = effective_[b] != recorded_[b];
    d.last_change_step = last_change_step_[b];
    d.switches = switches_[b];
    t.changes += d.changed ? 1 : 0;
    // By format, indexed rather than branched on (the formats of neighbouring blocks are no pattern).
    ++t.blocks[std::size_t(d.precision)];
    t.bytes_bf16_in[std::size_t(d.precision)] += double(layout_[b].bytes_bf16);
    t.sens_sum += d.sensitivity;
    t.sens_max = std::max(t.sens_max, d.sensitivity);
    t.sens_min = std::min(t.sens_min, d.sensitivity);
}

void Policy::tally(UpdateRecord& rec) const {
    Tally t;
    for (BlockDetail& d : rec.block_details) tally_block(d, t);
    end_tally(rec, t);
}

void Policy::end_tally(UpdateRecord& rec, const Tally& t) const {
    const std::size_t n = layout_.size();
    const auto count = [&](Precision p) { return t.blocks[std::size_t(p)]; };
    rec.precision_changes = t.changes;
    rec.blocks_bf16 = count(Precision::bf16);
    rec.blocks_int8 = count(Precision::int8);
    rec.blocks_fp8 = count(Precision::fp8_e4m3) + count(Precision::fp8_e5m2);
    rec.blocks_int4 = count(Precision::int4);
    rec.max_sensitivity = t.sens_max;
    rec.min_sensitivity = n > 0 ? t.sens_min : 0.0;
    rec.mean_sensitivity = n > 0 ? t.sens_sum / double(n) : 0.0;
    // Byte counts are whole numbers and the widths powers of two: these sums are exact in any order.
    double bytes = 0.0, bf16_bytes = 0.0;
    for (Precision p : kAllPrecisions) {
        bytes += t.bytes_bf16_in[std::size_t(p)] * bytes_per_element(p) / 2.0;
        bf16_bytes += t.bytes_bf16_in[std::size_t(p)];
    }
    rec.estimated_bandwidth_saving_pct = bf16_bytes > 0.0 ? 100.0 * (1.0 - bytes / bf16_bytes) : 0.0;
}

void Policy::begin_record(UpdateRecord& rec, std::int64_t step, double timestamp) const {
    rec.step_id = step;
    rec.timestamp = timestamp;
    rec.mode = mode_;
    rec.budget_target_pct.reset();
    if (mode_ == Mode::budget) rec.budget_target_pct = budget_target_pct_;
    rec.loss_tolerance_pct.reset();
    if (mode_ == Mode::tolerance) rec.loss_tolerance_pct = loss_tolerance_pct_;
    rec.estimated_loss_pct.reset();
    rec.measured_bandwidth_saving_pct.reset();
    rec.block_details.resize(layout_.size());
}

Policy::Decision Policy::decide(BlockDetail& d, std::int64_t step, bool first_dynamic,
                                const std::vector<Precision>& planned) const {
    const std::size_t b = std::size_t(d.id);
    if (const auto forced = forced_precision(d.id, &d.forced)) {  // rule 9
        d.facts.rule = d.forced == ForcedBy::pin ? ReasonRule::pinned : ReasonRule::forced;
        d.facts.format = *forced;
        return {*forced, d.forced == ForcedBy::pin ? Reason::pin : Reason::config};
    }
    if (mode_ == Mode::off || mode_ == Mode::static_) {  // rule 8
        d.facts.rule = ReasonRule::mode;
        d.facts.mode = mode_;
        return {Precision::bf16, Reason::mode};
    }
    if (nonfinite_since_update_[b]) {  // rule 4: safety, even inside the cooldown
        d.facts.rule = ReasonRule::nonfinite;
        return {Precision::bf16, Reason::nonfinite};
    }
    if (mode_ == Mode::budget || mode_ == Mode::tolerance)
        return decide_budget(d, planned[b]);        // rules 18, 23
    return decide_dynamic(d, step, first_dynamic);  // rules 5-7, 16, 17
}

void Policy::end_update(std::int64_t step, bool first_dynamic) {
    if (first_dynamic) dynamic_assigned_ = true;
    recorded_before_update_ = recorded_;
    recorded_ = effective_;
    std::fill(nonfinite_since_update_.begin(), nonfinite_since_update_.end(), 0);
    last_update_ = step;
}

const UpdateRecord* Policy::update(std::int64_t step, double timestamp) {
    last_changes_.clear();
    if (!is_update_step(step)) return nullptr;  // rule 3

    UpdateRecord& rec = record_;
    begin_record(rec, step, timestamp);
    // Modes budget and tolerance: each block's planner input is taken as it is scored (a pass over the
    // record less).
    const bool planning = mode_ == Mode::budget || mode_ == Mode::tolerance;
    score_blocks(rec, average_windows(rec), step, planning ? &budget_blocks_ : nullptr);
    const bool first_dynamic = mode_ == Mode::dynamic && !dynamic_assigned_;
    std::vector<Precision> planned;
    if (plans_on_loss())
        planned = plan_on_loss(rec);
    else if (planning)
        planned =
            budget_planner_.plan(budget_blocks_, budget_target_pct_, config_.hysteresis_margin).precision;
    // Each block is tallied as soon as its decision is applied: a decision changes that block alone.
    Tally tally;
    for (BlockDetail& d : rec.block_details) {
        apply_decision(d, decide(d, step, first_dynamic, planned), step);
        tally_block(d, tally);
    }
    end_tally(rec, tally);
    end_update(step, first_dynamic);
    return &rec;
}

}  // namespace sp
