// The policy's numbered rules (core/POLICY.md) that decide what an update computes and reports:
// the observation window (1, 2), the update schedule (3), the scores (4), the first assignment (5),
// the record (10), and the construction checks, each with its edge cases. The rules that decide
// when a block switches afterwards (6-9) are in test_policy_switching.cpp.
#include <QtTest>

#include <cmath>
#include <limits>

#include "../common/commands.h"
#include "policy_fixtures.h"
#include "sp/policy.h"

using namespace sp;
using sp::test::pin;
using namespace sp::test::policy_fixtures;

namespace {

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
