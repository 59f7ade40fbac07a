// The policy on the loss estimate (POLICY.md rule 23): mode tolerance, budget with cost_estimator
// "loss", the plan in the loss's units against the tolerance times the loss EMA, set_tolerance, pins,
// cooldowns and hysteresis in the plans, the records' fields and the Why text.
#include <QtTest>

#include <string>

#include "../common/commands.h"
#include "sp/policy.h"
#include "sp/reason_text.h"

using namespace sp;
using sp::test::pin;
using sp::test::set_mode;

namespace {

Config loss_config(Mode mode) {
    Config c;
    c.warmup_steps = 0;
    c.update_interval_steps = 1;
    c.min_steps_between_switches = 0;
    c.hysteresis_margin = 0.0;
    c.mode = mode;
    c.cost_estimator = "loss";
    return c;
}

// Estimates in the loss's units; with a loss of 2.0 each is 50 times its value in percent.
BlockLossEstimate estimate(int block, double int4, double int8, double e4m3 = 1.0, double e5m2 = 1.0) {
    BlockLossEstimate e;
    e.block_id = block;
    e.loss_delta[std::size_t(Precision::int4)] = int4;
    e.loss_delta[std::size_t(Precision::int8)] = int8;
    e.loss_delta[std::size_t(Precision::fp8_e4m3)] = e4m3;
    e.loss_delta[std::size_t(Precision::fp8_e5m2)] = e5m2;
    return e;
}

// Four blocks of 100 bytes; INT4 costs 0.1, 0.2, 2, 3 % and INT8 0.05, 0.06, 0.07, 0.5 % of a loss of 2.
void observe_estimates(Policy& p) {
    p.observe_loss_estimate(estimate(0, 0.002, 0.001));
    p.observe_loss_estimate(estimate(1, 0.004, 0.0012));
    p.observe_loss_estimate(estimate(2, 0.04, 0.0014));
    p.observe_loss_estimate(estimate(3, 0.06, 0.01));
}

Command set_tolerance(double pct) {
    Command c;
    c.kind = Command::Kind::set_tolerance;
    c.tolerance_pct = pct;
    return c;
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace

class TestPolicyLoss : public QObject {
    Q_OBJECT
  private slots:
    // Before a loss is known the estimate has no percent: every free block stays in BF16.
    void nothing_moves_before_the_first_loss() {
        Config c = loss_config(Mode::tolerance);
        Policy p(c, uniform_layout(4, 100));
        observe_estimates(p);
        const UpdateRecord* r = p.update(0, 0.0);
        QCOMPARE(p.precisions(), std::vector<Precision>(4, Precision::bf16));
        QVERIFY(std::isnan(r->block_details[0].loss_delta_pct[std::size_t(Precision::int4)]));
        QVERIFY2(contains(reason_text(r->block_details[0]), "(no loss estimate yet)"),
                 reason_text(r->block_details[0]).c_str());
    }

    void tolerance_saves_the_most_within_it() {
        Config c = loss_config(Mode::tolerance);
        c.loss_tolerance_pct = 0.2;
        Policy p(c, uniform_layout(4, 100));
        observe_estimates(p);
        p.observe_loss(0, 2.0);
        const UpdateRecord* r = p.update(1, 0.0);
        // Three INT8 blocks (0.18%) save 37.5%, more than INT4 + INT8 (0.16%, 31.25%).
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int8, Precision::int8, Precision::int8,
                                                         Precision::bf16}));
        QCOMPARE(*r->loss_tolerance_pct, 0.2);
        QVERIFY(!r->budget_target_pct);
        QVERIFY(std::fabs(*r->estimated_loss_pct - 0.18) < 1e-9);
        QCOMPARE(r->estimated_bandwidth_saving_pct, 37.5);
        QVERIFY(std::fabs(r->block_details[0].loss_delta_pct[std::size_t(Precision::int4)] - 0.1) < 1e-12);
        const std::string why = reason_text(r->block_details[0]);
        QVERIFY2(contains(why,
                          "tolerance 0.20%, on the loss estimate: int8, which costs \u2248 +0.05% loss; "
                          "int4 would cost \u2248 +0.10% loss"),
                 why.c_str());
        QVERIFY2(contains(reason_text(r->block_details[3]), ": bf16; int4 would cost \u2248 +3.00% loss"),
                 reason_text(r->block_details[3]).c_str());
        // Wider: INT4 on the two cheap blocks, INT8 on the third (0.37%).
        QVERIFY(p.apply(set_tolerance(0.4), 2).ok);
        r = p.update(2, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int4, Precision::int4, Precision::int8,
                                                         Precision::bf16}));
        QCOMPARE(*r->loss_tolerance_pct, 0.4);
    }

    // The plan is made in the loss's units against the tolerance times the loss EMA: as the EMA falls,
    // the same estimates are a larger share of the loss and the plan gives up savings to stay within it.
    void tolerance_follows_the_loss_ema() {
        Config c = loss_config(Mode::tolerance);
        c.loss_tolerance_pct = 0.2;
        Policy p(c, uniform_layout(4, 100));
        observe_estimates(p);
        p.observe_loss(0, 2.0);
        p.update(1, 0.0);  // three INT8 blocks, 0.18% of 2.0
        p.observe_loss(1, 1.0);
        p.observe_loss(2, 1.0);  // the EMA (alpha 0.2): 1.8, then 1.64
        const UpdateRecord* r = p.update(3, 0.0);
        // Three INT8 would be 0.0036 / 1.64 = 0.22%; INT4 + INT8 on the two cheapest, 0.0032 / 1.64 =
        // 0.195%, saves 31.25%, more than any other plan within 0.2%.
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int4, Precision::int8, Precision::bf16,
                                                         Precision::bf16}));
        QVERIFY(std::fabs(*r->estimated_loss_pct - 100.0 * 0.0032 / 1.64) < 1e-9);
        QVERIFY(std::fabs(r->block_details[0].loss_delta_pct[std::size_t(Precision::int4)] -
                          100.0 * 0.002 / 1.64) < 1e-12);
        QCOMPARE(r->estimated_bandwidth_saving_pct, 31.25);
    }

    // A pin is fixed where it is and its known cost counts against the tolerance.
    void pins_count_against_the_tolerance() {
        Config c = loss_config(Mode::tolerance);
        c.loss_tolerance_pct = 0.2;
        Policy p(c, uniform_layout(4, 100));
        observe_estimates(p);
        p.observe_loss(0, 2.0);
        QVERIFY(p.apply(pin({2}, Precision::int8), 1).ok);  // 0.07%
        const UpdateRecord* r = p.update(1, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int8, Precision::int8, Precision::int8,
                                                         Precision::bf16}));
        QVERIFY(*r->estimated_loss_pct <= 0.2 + 1e-12);
        QVERIFY(p.apply(pin({3}, Precision::int4), 2).ok);  // 3% alone: nothing else may move
        r = p.update(2, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::bf16, Precision::bf16, Precision::int8,
                                                         Precision::int4}));
    }

    void set_tolerance_only_in_mode_tolerance() {
        Policy p(loss_config(Mode::budget), uniform_layout(2, 100));
        const CommandOutcome refused = p.apply(set_tolerance(0.3), 0);
        QVERIFY(!refused.ok);
        QVERIFY2(contains(refused.error, "set_tolerance: the policy is in mode budget") &&
                     contains(refused.error, "sp-ctl mode tolerance"),
                 refused.error.c_str());
        QCOMPARE(p.loss_tolerance_pct(), 0.5);
        QVERIFY(p.apply(set_mode(Mode::tolerance), 1).ok);
        QVERIFY(p.apply(set_tolerance(0.3), 1).ok);
        QCOMPARE(p.loss_tolerance_pct(), 0.3);
    }

    // Budget on the loss: the cheapest plan that saves the target, over every format. Before the first
    // loss (no estimate in percent yet) it plans on the sensitivity, so the target holds from the
    // first update; the words say which.
    void budget_on_the_loss_minimises_the_estimate() {
        Config c = loss_config(Mode::budget);
        c.budget_target_pct = 50.0;
        Policy p(c, uniform_layout(4, 100));
        observe_estimates(p);
        const UpdateRecord* first = p.update(0, 0.0);
        QCOMPARE(first->estimated_bandwidth_saving_pct, 50.0);
        QVERIFY(!first->estimated_loss_pct);
        QVERIFY2(contains(reason_text(first->block_details[0]), "budget 50.0%, sensitivity"),
                 reason_text(first->block_details[0]).c_str());
        p.observe_loss(0, 2.0);
        const UpdateRecord* r = p.update(1, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int4, Precision::int4, Precision::int8,
                                                         Precision::bf16}));
        QCOMPARE(r->estimated_bandwidth_saving_pct, 50.0);
        QVERIFY(std::fabs(*r->estimated_loss_pct - 0.37) < 1e-9);
        QVERIFY2(contains(reason_text(r->block_details[0]), "budget 50.0%, on the loss estimate: int4"),
                 reason_text(r->block_details[0]).c_str());
        // The sensitivity estimator plans as before, and its words say so.
        c.cost_estimator = "sensitivity";
        Policy q(c, uniform_layout(4, 100));
        observe_estimates(q);
        q.observe_loss(0, 2.0);
        r = q.update(1, 0.0);
        QVERIFY(!r->estimated_loss_pct);
        QVERIFY2(contains(reason_text(r->block_details[0]), "budget 50.0%, sensitivity"),
                 reason_text(r->block_details[0]).c_str());
    }

    // Hysteresis weighs the objective: two blocks of equal saving do not trade places when their
    // estimates move, while the current one fits the tolerance.
    void hysteresis_keeps_near_equal_blocks_in_place() {
        Config c = loss_config(Mode::tolerance);
        c.loss_tolerance_pct = 0.5;
        c.hysteresis_margin = 0.1;
        Policy p(c, uniform_layout(2, 100));
        p.observe_loss_estimate(estimate(0, 0.0080, 1.0, 1.0, 1.0));  // 0.40%
        p.observe_loss_estimate(estimate(1, 0.0082, 1.0, 1.0, 1.0));  // 0.41%
        p.observe_loss(0, 2.0);
        p.update(1, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int4, Precision::bf16}));
        p.observe_loss_estimate(estimate(0, 0.0082, 1.0, 1.0, 1.0));  // now the dearer, by 2.5%
        p.observe_loss_estimate(estimate(1, 0.0080, 1.0, 1.0, 1.0));
        p.update(2, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int4, Precision::bf16}));
        // Hysteresis weighs the saving: at equal savings the current block stays, dearer or not, as long as
        // it fits; the tolerance itself is never bent.
        p.observe_loss_estimate(estimate(0, 0.0098, 1.0, 1.0, 1.0));  // 0.49%: still within 0.5%
        p.update(3, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int4, Precision::bf16}));
        p.observe_loss_estimate(estimate(0, 0.0102, 1.0, 1.0, 1.0));  // 0.51%: out
        p.update(4, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::bf16, Precision::int4}));
    }

    // A block the policy just moved is held by its cooldown: the plan sees it as fixed.
    void cooldowns_hold_in_the_plans() {
        Config c = loss_config(Mode::tolerance);
        c.loss_tolerance_pct = 0.2;
        c.min_steps_between_switches = 10;
        Policy p(c, uniform_layout(4, 100));
        observe_estimates(p);
        p.observe_loss(0, 2.0);
        p.update(1, 0.0);
        QVERIFY(p.apply(set_tolerance(0.0), 2).ok);  // everything back to BF16 ... once the cooldown ends
        const UpdateRecord* r = p.update(2, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int8, Precision::int8, Precision::int8,
                                                         Precision::bf16}));
        QCOMPARE(r->block_details[0].reason, Reason::hold);
        p.update(11, 0.0);
        QCOMPARE(p.precisions(), std::vector<Precision>(4, Precision::bf16));
    }
};

QTEST_GUILESS_MAIN(TestPolicyLoss)
#include "test_policy_loss.moc"
