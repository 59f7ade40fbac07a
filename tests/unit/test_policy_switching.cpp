// The policy's numbered rules (core/POLICY.md) that decide when a block switches once it has a
// precision: hysteresis (6), cooldown (7), modes (8), and pins and releases (9), each with its edge
// cases. What an update computes and reports is in test_policy.cpp.
#include <QtTest>

#include <cmath>
#include <optional>

#include "../common/commands.h"
#include "policy_fixtures.h"
#include "sp/policy.h"

using namespace sp;
using sp::test::pin;
using sp::test::release;
using sp::test::set_mode;
using namespace sp::test::policy_fixtures;

class TestPolicySwitching : public QObject {
    Q_OBJECT
  private slots:
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
};

void TestPolicySwitching::rule6_hysteresis_boundaries() {
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

void TestPolicySwitching::rule6_hysteresis_through_policy() {
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

void TestPolicySwitching::rule7_cooldown_exactly_at_limit() {
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

void TestPolicySwitching::rule7_first_assignment_starts_cooldown_only_off_bf16() {
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

void TestPolicySwitching::rule8_modes() {
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

void TestPolicySwitching::rule8_set_mode_command() {
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

void TestPolicySwitching::rule9_pin_during_cooldown_and_priority() {
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

void TestPolicySwitching::rule9_release_returns_to_policy_without_cooldown() {
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

void TestPolicySwitching::rule9_release_returns_to_config_force() {
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

void TestPolicySwitching::rule9_invalid_commands_change_nothing() {
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

QTEST_APPLESS_MAIN(TestPolicySwitching)
#include "test_policy_switching.moc"
