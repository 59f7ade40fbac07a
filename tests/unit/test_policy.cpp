// The policy's numbered rules (core/POLICY.md), each with its edge cases.
#include <QtTest>

#include <cmath>
#include <limits>

#include "../common/commands.h"
#include "sp/policy.h"

using namespace sp;
using sp::test::pin;
using sp::test::release;
using sp::test::set_mode;

namespace {

// A config in which every step is an update step and the window holds one observation, so a test
// controls each update's inputs directly.
Config immediate_config() {
    Config c;
    c.warmup_steps = 0;
    c.update_interval_steps = 1;
    c.history_window = 1;
    c.min_steps_between_switches = 0;
    return c;
}

// grad_weight 0, error_weight 1, quant_error_threshold 1: sensitivity == calibration error, exactly.
Config error_only_config() {
    Config c = immediate_config();
    c.grad_weight = 0.0;
    c.error_weight = 1.0;
    c.quant_error_threshold = 1.0;
    return c;
}

// grad_weight 1, error_weight 0, grad_sensitivity_threshold 2: sensitivity == l2 / (2 * mean l2).
Config grad_only_config() {
    Config c = immediate_config();
    c.grad_weight = 1.0;
    c.error_weight = 0.0;
    return c;
}

BlockGradStats stat(int id, double l2, std::uint64_t nonfinite = 0) {
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
const UpdateRecord* step_with(Policy& p, std::int64_t step, const std::vector<double>& l2) {
    for (std::size_t i = 0; i < l2.size(); ++i) {
        if (!std::isnan(l2[i])) p.observe(step, stat(int(i), l2[i]));
    }
    return p.update(step, 1000.0 + double(step));
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

class TestPolicy : public QObject {
    Q_OBJECT
  private slots:
    void rule1_nonfinite_observation_stays_out_of_window();
    void rule1_nan_statistic_counts_as_nonfinite();
    void rule2_window_keeps_last_finite_observations();
    void rule3_update_schedule();
    void rule3_updates_in_every_mode();
    void rule4_relative_magnitude_and_scores();
    void rule4_single_block();
    void rule4_all_zero_gradients();
    void rule4_empty_window_and_no_window_at_all();
    void rule4_error_score_and_clamp();
    void rule4_nonfinite_promotes_inside_cooldown();
    void rule4_nonfinite_does_not_override_pin();
    void rule5_first_assignment_thresholds();
    void rule5_ambiguous_default_int8();
    void rule6_hysteresis_boundaries();
    void rule6_hysteresis_through_policy();
    void rule7_cooldown_exactly_at_limit();
    void rule7_first_assignment_starts_cooldown_only_off_bf16();
    void rule8_modes();
    void rule8_set_mode_command();
    void rule9_pin_during_cooldown_and_priority();
    void rule9_release_returns_to_policy_without_cooldown();
    void rule9_release_returns_to_config_force();
    void rule9_invalid_commands_change_nothing();
    void rule10_record_fields();
    void rule10_saving_uses_block_sizes();
    void construction_rejects_config_that_does_not_fit_layout();
};

void TestPolicy::rule1_nonfinite_observation_stays_out_of_window() {
    Config c = immediate_config();
    c.history_window = 3;
    Policy p(c, uniform_layout(2));
    p.observe(0, stat(0, 1.0));
    p.observe(0, stat(1, 1.0));
    p.observe(1, stat(0, 5.0, /*nonfinite=*/3));
    auto rec = p.update(1, 0.0);
    QVERIFY(rec);
    const BlockDetail& d = rec->block_details[0];
    QCOMPARE(d.window, 1);  // the non-finite observation was not added
    QCOMPARE(d.l2_norm, 1.0);
    QCOMPARE(d.sensitivity, 1.0);  // but the block is unsafe at this update
    QCOMPARE(d.reason, Reason::nonfinite);
    // The flag lasts until the update, not longer.
    p.observe(2, stat(0, 1.0));
    p.observe(2, stat(1, 1.0));
    rec = p.update(2, 0.0);
    QVERIFY(rec->block_details[0].sensitivity < 1.0);
}

void TestPolicy::rule1_nan_statistic_counts_as_nonfinite() {
    Policy p(immediate_config(), uniform_layout(1));
    BlockGradStats s = stat(0, 1.0);
    s.variance = std::numeric_limits<double>::infinity();
    p.observe(0, s);
    auto rec = p.update(0, 0.0);
    QCOMPARE(rec->block_details[0].window, 0);
    QCOMPARE(rec->block_details[0].sensitivity, 1.0);
}

void TestPolicy::rule2_window_keeps_last_finite_observations() {
    Config c = immediate_config();
    c.history_window = 3;
    c.warmup_steps = 4;
    Policy p(c, uniform_layout(1));
    const double l2[] = {100.0, 1.0, 2.0, 4.0, 8.0};  // step 0's 100 falls out of the window
    for (int s = 0; s < 4; ++s) QVERIFY(!step_with(p, s, {l2[s]}));
    auto rec = step_with(p, 4, {l2[4]});
    QVERIFY(rec);
    QCOMPARE(rec->block_details[0].window, 3);
    QCOMPARE(rec->block_details[0].l2_norm, (2.0 + 4.0 + 8.0) / 3);
    QCOMPARE(rec->block_details[0].max_abs, (1.0 + 2.0 + 4.0) / 3);
    QCOMPARE(rec->block_details[0].variance, (4.0 + 16.0 + 64.0) / 3);
    QCOMPARE(rec->block_details[0].mean, -(2.0 + 4.0 + 8.0) / 12);
    // A step without an observation leaves the window as it was.
    rec = p.update(5, 0.0);
    QCOMPARE(rec->block_details[0].l2_norm, (2.0 + 4.0 + 8.0) / 3);
}

void TestPolicy::rule3_update_schedule() {
    Config c;  // warmup 10, interval 10
    Policy p(c, uniform_layout(2));
    QVERIFY(!p.is_update_step(9));
    QVERIFY(!p.update(9, 0.0));
    QVERIFY(p.update(10, 0.0));
    QVERIFY(!p.update(19, 0.0));
    QVERIFY(p.update(20, 0.0));
    QVERIFY(!p.update(25, 0.0));
    QVERIFY(p.update(37, 0.0));  // a gap: the next update comes as soon as the interval has passed
    QVERIFY(!p.update(46, 0.0));
    QVERIFY(p.update(47, 0.0));
    QCOMPARE(*p.last_update_step(), std::int64_t(47));
}

void TestPolicy::rule3_updates_in_every_mode() {
    for (Mode m : {Mode::off, Mode::static_, Mode::dynamic}) {
        Config c = immediate_config();
        c.mode = m;
        Policy p(c, uniform_layout(2));
        auto rec = step_with(p, 0, {1.0, 3.0});
        QVERIFY(rec);
        QCOMPARE(*rec->mode, m);
        QCOMPARE(rec->block_details[1].relative_magnitude, 1.5);  // scores reported in every mode
    }
}

void TestPolicy::rule4_relative_magnitude_and_scores() {
    Policy p(grad_only_config(), uniform_layout(4));
    auto rec = step_with(p, 0, {1.0, 2.0, 3.0, 10.0});  // mean 4
    QVERIFY(rec);
    const double rel[] = {0.25, 0.5, 0.75, 2.5};
    for (int b = 0; b < 4; ++b) {
        const BlockDetail& d = rec->block_details[std::size_t(b)];
        QCOMPARE(d.relative_magnitude, rel[b]);
        QCOMPARE(d.grad_score, std::min(rel[b] / 2.0, 1.0));
        QCOMPARE(d.error_score, 0.0);
        QCOMPARE(d.sensitivity, std::min(rel[b] / 2.0, 1.0));
    }
    // With the seed's weights the literal formula is not renormalized: max sensitivity is 0.7.
    Config seed = immediate_config();
    Policy q(seed, uniform_layout(2));
    rec = step_with(q, 0, {0.0, 100.0});
    QCOMPARE(rec->block_details[1].grad_score, 1.0);
    QCOMPARE(rec->block_details[1].sensitivity, 0.7);
}

void TestPolicy::rule4_single_block() {
    Policy p(immediate_config(), uniform_layout(1));
    auto rec = step_with(p, 0, {3.5});
    QCOMPARE(rec->block_details[0].relative_magnitude, 1.0);
    QCOMPARE(rec->block_details[0].grad_score, 0.5);
    QCOMPARE(rec->block_details[0].sensitivity, 0.7 * 0.5);
    QCOMPARE(rec->block_details[0].precision, Precision::bf16);  // 0.35 is ambiguous -> bf16 default
    QCOMPARE(rec->block_details[0].reason, Reason::initial);
}

void TestPolicy::rule4_all_zero_gradients() {
    Policy p(immediate_config(), uniform_layout(3));
    auto rec = step_with(p, 0, {0.0, 0.0, 0.0});
    for (const BlockDetail& d : rec->block_details) {
        QCOMPARE(d.relative_magnitude, 0.0);
        QCOMPARE(d.sensitivity, 0.0);
        QCOMPARE(d.precision, Precision::int8);
        QCOMPARE(d.l2_norm, 0.0);  // a real zero, not "no data"
    }
}

void TestPolicy::rule4_empty_window_and_no_window_at_all() {
    Policy p(grad_only_config(), uniform_layout(3));
    auto rec = step_with(p, 0, {2.0, kNaN, 6.0});             // block 1 had no gradient
    QCOMPARE(rec->block_details[0].relative_magnitude, 0.5);  // mean over blocks with a window: 4
    QCOMPARE(rec->block_details[1].relative_magnitude, 0.0);
    QCOMPARE(rec->block_details[1].window, 0);
    QVERIFY(std::isnan(rec->block_details[1].l2_norm));
    QCOMPARE(rec->block_details[2].relative_magnitude, 1.5);

    Policy none(immediate_config(), uniform_layout(2));
    rec = none.update(0, 0.0);
    QVERIFY(rec);
    for (const BlockDetail& d : rec->block_details) {
        QCOMPARE(d.relative_magnitude, 0.0);
        QCOMPARE(d.sensitivity, 0.0);
    }
}

void TestPolicy::rule4_error_score_and_clamp() {
    Config c = immediate_config();  // seed weights 0.7 / 0.3, quant_error_threshold 0.05
    Policy p(c, uniform_layout(3), {0.0, 0.025, 0.5});
    auto rec = step_with(p, 0, {1.0, 1.0, 1.0});
    QCOMPARE(rec->block_details[0].error_score, 0.0);
    QCOMPARE(rec->block_details[1].error_score, 0.025 / 0.05);
    QCOMPARE(rec->block_details[2].error_score, 1.0);
    QCOMPARE(rec->block_details[1].sensitivity, 0.7 * 0.5 + 0.3 * (0.025 / 0.05));
    // Weights above a sum of 1 are clamped to 1.
    c.grad_weight = 1.0;
    c.error_weight = 1.0;
    Policy q(c, uniform_layout(2), {0.5, 0.5});
    rec = step_with(q, 0, {0.0, 10.0});
    QCOMPARE(rec->block_details[0].sensitivity, 1.0);
    QCOMPARE(rec->block_details[1].sensitivity, 1.0);
}

void TestPolicy::rule4_nonfinite_promotes_inside_cooldown() {
    Config c = grad_only_config();
    c.min_steps_between_switches = 100;
    Policy p(c, uniform_layout(2));
    auto rec = step_with(p, 0, {0.1, 10.0});
    QCOMPARE(rec->block_details[0].precision, Precision::int8);  // cooldown now runs to step 100
    p.observe(1, stat(0, 0.1, /*nonfinite=*/1));
    p.observe(1, stat(1, 10.0));
    rec = p.update(1, 0.0);
    QCOMPARE(rec->block_details[0].precision, Precision::bf16);
    QCOMPARE(rec->block_details[0].reason, Reason::nonfinite);
    QCOMPARE(rec->block_details[0].sensitivity, 1.0);
    QCOMPARE(rec->max_sensitivity, 1.0);
    QCOMPARE(p.last_changes().size(), std::size_t(1));
    // The promotion starts a new cooldown: good gradients at step 2 do not move it back.
    rec = step_with(p, 2, {0.1, 10.0});
    QCOMPARE(rec->block_details[0].precision, Precision::bf16);
    QCOMPARE(rec->block_details[0].reason, Reason::cooldown);
}

void TestPolicy::rule4_nonfinite_does_not_override_pin() {
    Policy p(immediate_config(), uniform_layout(2));
    QVERIFY(p.apply(pin({0}, Precision::int8), 0).ok);
    p.observe(0, stat(0, 1.0, 5));
    auto rec = p.update(0, 0.0);
    QCOMPARE(rec->block_details[0].precision, Precision::int8);
    QCOMPARE(rec->block_details[0].sensitivity, 1.0);
    QCOMPARE(rec->block_details[0].forced, ForcedBy::pin);
}

void TestPolicy::rule5_first_assignment_thresholds() {
    // Sensitivity == calibration error exactly in this config.
    const std::vector<double> s = {0.6, std::nextafter(0.6, 0.0), 0.3, std::nextafter(0.3, 0.0), 0.0};
    Policy p(error_only_config(), uniform_layout(int(s.size())), s);
    auto rec = p.update(0, 0.0);
    QVERIFY(rec);
    // >= 0.6 bf16; [0.3, 0.6) ambiguous -> ambiguous_default (bf16); < 0.3 int8.
    const Precision want[] = {Precision::bf16, Precision::bf16, Precision::bf16, Precision::int8,
                              Precision::int8};
    for (std::size_t b = 0; b < s.size(); ++b) {
        QCOMPARE(rec->block_details[b].sensitivity, s[b]);
        QCOMPARE(rec->block_details[b].precision, want[b]);
        QCOMPARE(rec->block_details[b].reason, Reason::initial);
    }
}

void TestPolicy::rule5_ambiguous_default_int8() {
    Config c = error_only_config();
    c.ambiguous_default = Precision::int8;
    Policy p(c, uniform_layout(3), {0.3, 0.45, 0.6});
    auto rec = p.update(0, 0.0);
    QCOMPARE(rec->block_details[0].precision, Precision::int8);
    QCOMPARE(rec->block_details[1].precision, Precision::int8);
    QCOMPARE(rec->block_details[2].precision, Precision::bf16);
}

void TestPolicy::rule6_hysteresis_boundaries() {
    const Config c;
    const double edge = c.int8_threshold - c.hysteresis_margin;
    QCOMPARE(edge, 0.19999999999999998);
    QCOMPARE(hysteresis_precision(Precision::bf16, 0.2, c), Precision::bf16);
    QCOMPARE(hysteresis_precision(Precision::bf16, 0.19999999999999998, c), Precision::bf16);
    QCOMPARE(hysteresis_precision(Precision::bf16, std::nextafter(edge, 0.0), c), Precision::int8);
    QCOMPARE(hysteresis_precision(Precision::bf16, 0.25, c),
             Precision::bf16);  // below int8_threshold, not enough
    QCOMPARE(hysteresis_precision(Precision::int8, 0.6, c), Precision::bf16);
    QCOMPARE(hysteresis_precision(Precision::int8, std::nextafter(0.6, 0.0), c), Precision::int8);
    QCOMPARE(hysteresis_precision(Precision::int8, 0.45, c), Precision::int8);
    QCOMPARE(initial_precision(0.25, c), Precision::int8);  // the first assignment has no margin
}

void TestPolicy::rule6_hysteresis_through_policy() {
    // Blocks start bf16 through a pin held over the first update, then are released.
    const double edge = 0.3 - 0.1;
    const std::vector<double> s = {0.2, edge, std::nextafter(edge, 0.0), 0.25};
    Policy p(error_only_config(), uniform_layout(4), s);
    QVERIFY(p.apply(pin({0, 1, 2, 3}, Precision::bf16), 0).ok);
    p.update(0, 0.0);
    QVERIFY(p.apply(release({0, 1, 2, 3}), 1).ok);
    auto rec = p.update(1, 0.0);
    QCOMPARE(rec->block_details[0].precision, Precision::bf16);
    QCOMPARE(rec->block_details[1].precision, Precision::bf16);
    QCOMPARE(rec->block_details[2].precision, Precision::int8);
    QCOMPARE(rec->block_details[3].precision, Precision::bf16);
    QCOMPARE(rec->block_details[3].reason, Reason::hold);
    QCOMPARE(rec->block_details[2].reason, Reason::policy);
}

void TestPolicy::rule7_cooldown_exactly_at_limit() {
    Config c = grad_only_config();
    c.min_steps_between_switches = 20;
    Policy p(c, uniform_layout(2));
    // Step 10: block 0 relatively quiet -> int8 (first assignment; cooldown from 10).
    auto rec = step_with(p, 10, {1.0, 3.0});
    QCOMPARE(rec->block_details[0].precision, Precision::int8);
    // Block 0 becomes loud (sensitivity 0.75 >= 0.6) but is held until step 30.
    for (int step = 11; step < 30; ++step) {
        rec = step_with(p, step, {3.0, 1.0});
        QCOMPARE(rec->block_details[0].precision, Precision::int8);
        QCOMPARE(rec->block_details[0].reason, Reason::cooldown);
    }
    rec = step_with(p, 30, {3.0, 1.0});  // 30 >= 10 + 20
    QCOMPARE(rec->block_details[0].precision, Precision::bf16);
    QCOMPARE(rec->block_details[0].reason, Reason::policy);
    QCOMPARE(rec->block_details[0].last_change_step, std::int64_t(30));
    QCOMPARE(rec->block_details[0].switches, 2);
}

void TestPolicy::rule7_first_assignment_starts_cooldown_only_off_bf16() {
    Config c = grad_only_config();
    c.min_steps_between_switches = 5;
    Policy p(c, uniform_layout(2));
    step_with(p, 0, {1.0, 3.0});             // block 0 -> int8 (cooldown), block 1 stays bf16 (no cooldown)
    auto rec = step_with(p, 1, {3.0, 0.2});  // both now want to move
    QCOMPARE(rec->block_details[0].precision, Precision::int8);
    QCOMPARE(rec->block_details[0].reason, Reason::cooldown);
    QCOMPARE(rec->block_details[1].precision, Precision::int8);
    QCOMPARE(rec->block_details[1].reason, Reason::policy);
}

void TestPolicy::rule8_modes() {
    Config c = immediate_config();
    c.force_int8_blocks = {2};
    c.force_bf16_blocks = {1};
    for (Mode m : {Mode::off, Mode::static_}) {
        c.mode = m;
        Policy p(c, uniform_layout(4));
        auto rec = step_with(p, 0, {0.0, 0.0, 5.0, 0.0});  // blocks 0, 1, 3 would be int8 in dynamic
        QCOMPARE(rec->block_details[0].precision, Precision::bf16);
        QCOMPARE(rec->block_details[0].reason, Reason::mode);
        QCOMPARE(rec->block_details[1].precision, Precision::bf16);
        QCOMPARE(rec->block_details[1].forced, ForcedBy::config);
        QCOMPARE(rec->block_details[2].precision, Precision::int8);  // force lists apply in every mode
        QCOMPARE(rec->block_details[2].reason, Reason::config);
        QCOMPARE(rec->blocks_int8, 1);
    }
    c.mode = Mode::dynamic;
    c.enabled = false;
    Policy disabled(c, uniform_layout(4));
    auto rec = step_with(disabled, 0, {0.0, 0.0, 5.0, 0.0});
    QCOMPARE(*rec->mode, Mode::off);
    QCOMPARE(rec->blocks_int8, 1);
    c.enabled = true;
    Policy dyn(c, uniform_layout(4));
    rec = step_with(dyn, 0, {0.0, 0.0, 5.0, 0.0});
    QCOMPARE(rec->blocks_int8, 3);  // 0, 2 (forced), 3
}

void TestPolicy::rule8_set_mode_command() {
    Config c = grad_only_config();
    c.mode = Mode::static_;
    Policy p(c, uniform_layout(2));
    auto rec = step_with(p, 0, {1.0, 3.0});
    QCOMPARE(rec->blocks_int8, 0);
    QVERIFY(p.apply(set_mode(Mode::dynamic), 1).ok);
    rec = step_with(p, 1, {1.0, 3.0});  // first dynamic update: assignment without hysteresis
    QCOMPARE(rec->block_details[0].precision, Precision::int8);
    QCOMPARE(rec->block_details[0].reason, Reason::initial);
    const CommandOutcome off = p.apply(set_mode(Mode::off), 2);
    QVERIFY(off.ok);
    QCOMPARE(off.changes.size(), std::size_t(1));  // back to bf16 at once, not at the next update
    QCOMPARE(p.precisions()[0], Precision::bf16);
    QCOMPARE(off.changes[0].reason, Reason::mode);
    QVERIFY(p.apply(set_mode(Mode::dynamic), 3).ok);
    rec = step_with(p, 3, {0.25, 3.0});  // later dynamic updates use hysteresis (~0.077 < 0.2 -> int8)
    QCOMPARE(rec->block_details[0].reason, Reason::policy);
}

void TestPolicy::rule9_pin_during_cooldown_and_priority() {
    Config c = grad_only_config();
    c.min_steps_between_switches = 50;
    c.force_bf16_blocks = {1};
    Policy p(c, uniform_layout(3));
    step_with(p, 0, {0.1, 0.1, 5.0});
    QCOMPARE(p.precisions()[0], Precision::int8);  // cooling down until 50
    CommandOutcome out = p.apply(pin({0}, Precision::bf16), 1);
    QVERIFY(out.ok);
    QCOMPARE(p.precisions()[0], Precision::bf16);  // pins ignore the cooldown, applied at once
    QCOMPARE(out.changes.size(), std::size_t(1));
    QCOMPARE(out.changes[0].reason, Reason::pin);
    out = p.apply(pin({1}, Precision::int8), 1);  // a pin beats the config force list
    QVERIFY(out.ok);
    auto rec = step_with(p, 1, {0.1, 0.1, 5.0});
    QCOMPARE(rec->block_details[0].precision, Precision::bf16);
    QCOMPARE(rec->block_details[0].forced, ForcedBy::pin);
    QCOMPARE(rec->block_details[1].precision, Precision::int8);
    QCOMPARE(rec->block_details[1].forced, ForcedBy::pin);
    QCOMPARE(p.pins()[1], std::optional<Precision>(Precision::int8));
}

void TestPolicy::rule9_release_returns_to_policy_without_cooldown() {
    Config c = grad_only_config();
    c.min_steps_between_switches = 50;
    Policy p(c, uniform_layout(2));
    step_with(p, 0, {0.1, 5.0});  // block 0: int8 at step 0, cooldown until 50
    QVERIFY(p.apply(pin({0}, Precision::bf16), 5).ok);
    step_with(p, 5, {0.1, 5.0});
    QVERIFY(p.apply(release({0}), 6).ok);
    QCOMPARE(p.precisions()[0], Precision::bf16);  // keeps its precision until the next update
    auto rec = step_with(p, 6, {0.1, 5.0});        // decides with hysteresis, no cooldown
    QCOMPARE(rec->block_details[0].precision, Precision::int8);
    QCOMPARE(rec->block_details[0].reason, Reason::policy);
    QCOMPARE(rec->block_details[0].forced, ForcedBy::none);

    // Released at int8 into the hysteresis band: it stays int8.
    Policy q(c, uniform_layout(2));
    QVERIFY(q.apply(pin({0}, Precision::int8), 0).ok);
    step_with(q, 0, {0.9, 1.1});  // sensitivity 0.45: ambiguous
    QVERIFY(q.apply(release({0}), 1).ok);
    rec = step_with(q, 1, {0.9, 1.1});
    QCOMPARE(rec->block_details[0].precision, Precision::int8);
    QCOMPARE(rec->block_details[0].reason, Reason::hold);
}

void TestPolicy::rule9_release_returns_to_config_force() {
    Config c = immediate_config();
    c.force_int8_blocks = {0};
    Policy p(c, uniform_layout(2));
    QCOMPARE(p.precisions()[0], Precision::int8);  // force lists hold from construction
    QVERIFY(p.apply(pin({0}, Precision::bf16), 0).ok);
    QCOMPARE(p.precisions()[0], Precision::bf16);
    Command all;
    all.kind = Command::Kind::release_all;
    const CommandOutcome out = p.apply(all, 1);
    QVERIFY(out.ok);
    QCOMPARE(p.precisions()[0], Precision::int8);
    QCOMPARE(out.changes[0].reason, Reason::config);
    // Releasing a block without a pin would change nothing: refused, naming it, and nothing moves;
    // one unpinned block among pinned ones refuses the whole command.
    const std::vector<Precision> before = p.precisions();
    CommandOutcome none = p.apply(release({1}), 2);
    QVERIFY(!none.ok);
    QVERIFY2(none.error.find("not pinned, nothing to release: blocks.1 (1)") != std::string::npos,
             none.error.c_str());
    QVERIFY(p.apply(pin({1}, Precision::bf16), 2).ok);
    none = p.apply(release({0, 1}), 3);
    QVERIFY(!none.ok);
    QVERIFY2(none.error.find("blocks.0 (0)") != std::string::npos, none.error.c_str());
    QCOMPARE(p.pins()[1], std::optional<Precision>(Precision::bf16));
    QVERIFY(p.apply(release({1}), 3).ok);
    QCOMPARE(p.precisions()[0], before[0]);
    QVERIFY(p.apply(all, 4).ok);  // release_all with nothing pinned asks for a state that holds
}

void TestPolicy::rule9_invalid_commands_change_nothing() {
    Policy p(immediate_config(), uniform_layout(3));
    CommandOutcome out = p.apply(pin({0, 3}, Precision::int8), 0);
    QVERIFY(!out.ok);
    QVERIFY2(out.error.find("unknown block 3") != std::string::npos, out.error.c_str());
    QVERIFY2(out.error.find("0..2") != std::string::npos, out.error.c_str());
    QCOMPARE(p.precisions()[0], Precision::bf16);  // block 0 was not pinned either
    QVERIFY(!p.pins()[0]);
    // A format the runtime cannot materialize is rejected, naming what it can.
    p.set_materializable(format_bit(Precision::int8));
    out = p.apply(pin({1}, Precision::fp8_e4m3), 0);
    QVERIFY(!out.ok);
    QVERIFY2(out.error.find("'fp8_e4m3' cannot be materialized") != std::string::npos, out.error.c_str());
    QVERIFY2(out.error.find("bf16, int8)") != std::string::npos, out.error.c_str());
    QCOMPARE(p.check_command(pin({1}, Precision::fp8_e4m3)), out.error);
    QVERIFY(!p.pins()[1]);
    QVERIFY(p.apply(pin({1}, Precision::int8), 0).ok);
    out = p.apply(pin({-1}, Precision::int8), 0);
    QVERIFY(!out.ok);
}

void TestPolicy::rule10_record_fields() {
    // 48 equal blocks, 29 int8: the seed's example.
    std::vector<double> err(48, 0.9);
    for (int b = 0; b < 29; ++b) err[std::size_t(b)] = 0.1;
    Policy p(error_only_config(), uniform_layout(48, 1000), err);
    auto rec = p.update(0, 12345.5);
    QVERIFY(rec);
    QCOMPARE(rec->step_id, std::int64_t(0));
    QCOMPARE(rec->timestamp, 12345.5);
    QCOMPARE(rec->blocks_int8, 29);
    QCOMPARE(rec->blocks_bf16, 19);
    QCOMPARE(rec->blocks_fp8, 0);
    QCOMPARE(rec->estimated_bandwidth_saving_pct, 30.208333333333336);
    QCOMPARE(rec->precision_changes, 29);  // against all-bf16 for the first record
    QCOMPARE(rec->max_sensitivity, 0.9);
    QCOMPARE(rec->min_sensitivity, 0.1);
    QCOMPARE(rec->mean_sensitivity, (29 * 0.1 + 19 * 0.9) / 48);
    QVERIFY(std::abs(rec->mean_sensitivity - (29 * 0.1 + 19 * 0.9) / 48) < 1e-15);
    QCOMPARE(int(rec->block_details.size()), 48);
    QVERIFY(rec->block_details[0].changed);
    QVERIFY(!rec->block_details[47].changed);
    // A second update with nothing new: no changes.
    rec = p.update(1, 0.0);
    QCOMPARE(rec->precision_changes, 0);
    QVERIFY(!rec->block_details[0].changed);
    // A pin between updates shows up as a change in the next record.
    QVERIFY(p.apply(pin({0, 47}, Precision::bf16), 2).ok);
    rec = p.update(2, 0.0);
    QCOMPARE(rec->precision_changes, 1);
    QVERIFY(rec->block_details[0].changed);
}

void TestPolicy::rule10_saving_uses_block_sizes() {
    BlockLayout layout = {{0, "embed", 3000}, {1, "blocks.0", 1000}};
    Policy p(error_only_config(), layout, {0.0, 0.9});
    auto rec = p.update(0, 0.0);
    QCOMPARE(rec->estimated_bandwidth_saving_pct, 100.0 * (1.0 - (1500.0 + 1000.0) / 4000.0));
    Policy empty(immediate_config(), BlockLayout{});
    rec = empty.update(0, 0.0);
    QCOMPARE(rec->estimated_bandwidth_saving_pct, 0.0);
    QCOMPARE(rec->mean_sensitivity, 0.0);
    QCOMPARE(rec->min_sensitivity, 0.0);
}

void TestPolicy::construction_rejects_config_that_does_not_fit_layout() {
    Config c;
    c.force_int8_blocks = {48};
    try {
        Policy p(c, uniform_layout(48));
        QFAIL("expected ConfigError");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        QVERIFY2(what.find("force_int8_blocks") != std::string::npos, e.what());
        QVERIFY2(what.find("48") != std::string::npos, e.what());
    }
    QVERIFY_THROWS_EXCEPTION(ConfigError, Policy(Config{}, uniform_layout(3), {0.1, 0.2}));
    QVERIFY_THROWS_EXCEPTION(ConfigError, Policy(Config{}, uniform_layout(2), {0.1, -0.2}));
    Config both;
    both.force_bf16_blocks = {1};
    both.force_int8_blocks = {1};
    QVERIFY_THROWS_EXCEPTION(ConfigError, Policy(both, uniform_layout(2)));
    Policy ok(Config{}, uniform_layout(2));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ok.observe(0, stat(2, 1.0)));

    // Two hundred thousand wrong ids make one bounded line per key, not one line per id.
    Config many;
    for (int id = 0; id < 200'000; ++id) {
        many.force_bf16_blocks.push_back(id);
        many.force_int8_blocks.push_back(id);
        many.force_int4_blocks.push_back(-1 - id);
    }
    try {
        Policy p(many, uniform_layout(48));
        QFAIL("expected ConfigError");
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        QVERIFY2(e.problems().size() <= 8, what.substr(0, 2000).c_str());
        QVERIFY2(what.size() < 4000, what.substr(0, 4000).c_str());
        QVERIFY2(what.find("blocks 48, 49, 50") != std::string::npos &&
                     what.find("and 199942 more") != std::string::npos,
                 what.c_str());
        QVERIFY2(what.find("are in both") != std::string::npos, what.c_str());
        QVERIFY2(what.find("block ids must be >= 0, got -200000, -199999") != std::string::npos,
                 what.c_str());
    }
}

QTEST_APPLESS_MAIN(TestPolicy)
#include "test_policy.moc"
