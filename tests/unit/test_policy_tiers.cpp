// Formats below BF16 (POLICY.md rules 16-19): the SNR tiers, their hysteresis in dB, the gate's
// admitted formats, cooldowns between formats and the budget mode, through sp::Policy.
#include <QtTest>

#include <cmath>
#include <limits>

#include "../common/commands.h"
#include "sp/policy.h"
#include "sp/reason_text.h"

using namespace sp;
using sp::test::pin;
using sp::test::set_budget;

namespace {

// Every step an update, no cooldown, and sensitivity == the block's calibration error exactly.
Config tier_config() {
    Config c;
    c.warmup_steps = 0;
    c.update_interval_steps = 1;
    c.history_window = 1;
    c.min_steps_between_switches = 0;
    c.grad_weight = 0.0;
    c.error_weight = 1.0;
    c.quant_error_threshold = 1.0;
    c.snr_tiers = true;
    c.snr_hysteresis_db = 3.0;
    c.snr_threshold_db[std::size_t(Precision::int4)] = 24.0;
    c.snr_threshold_db[std::size_t(Precision::int8)] = 30.0;
    c.snr_threshold_db[std::size_t(Precision::fp8_e4m3)] = 25.0;
    c.snr_threshold_db[std::size_t(Precision::fp8_e5m2)] = 20.0;
    return c;
}

// {int4, int8, fp8_e4m3, fp8_e5m2} in dB.
BlockSnr snr(int id, double int4, double int8, double e4m3, double e5m2) {
    BlockSnr s;
    s.block_id = id;
    s.snr_db[std::size_t(Precision::int4)] = int4;
    s.snr_db[std::size_t(Precision::int8)] = int8;
    s.snr_db[std::size_t(Precision::fp8_e4m3)] = e4m3;
    s.snr_db[std::size_t(Precision::fp8_e5m2)] = e5m2;
    return s;
}

bool contains(const std::string& text, const char* part) {
    return text.find(part) != std::string::npos;
}

}  // namespace

class TestPolicyTiers : public QObject {
    Q_OBJECT
  private slots:
    void cheapest_format_whose_snr_clears() {
        Policy p(tier_config(), uniform_layout(5), {0.1, 0.1, 0.1, 0.7, 0.1});
        p.observe_snr(snr(0, 19.1, 41.7, 33, 27));  // int4 fails, int8 clears
        p.observe_snr(snr(1, 26, 41, 33, 27));      // int4 clears
        p.observe_snr(snr(2, 10, 20, 26, 22));      // outliers: only FP8 clears
        p.observe_snr(snr(3, 40, 50, 40, 30));      // too sensitive: BF16 whatever the SNR
        const UpdateRecord* r = p.update(0, 0.0);   // block 4: no SNR yet
        QVERIFY(r);
        const std::vector<Precision> want = {Precision::int8, Precision::int4, Precision::fp8_e4m3,
                                             Precision::bf16, Precision::bf16};
        QCOMPARE(p.precisions(), want);
        QCOMPARE(reason_text(r->block_details[0]),
                 std::string("sensitivity 0.100 < int8_threshold 0.300; int4 19.1 dB < 24.0 dB; "
                             "int8 41.7 dB >= 30.0 dB: int8"));
        QVERIFY2(contains(reason_text(r->block_details[3]), ">= bf16_threshold 0.600: bf16"),
                 reason_text(r->block_details[3]).c_str());
        QVERIFY2(contains(reason_text(r->block_details[4]),
                          "int4 SNR unknown; int8 SNR unknown; fp8_e4m3 SNR unknown; "
                          "fp8_e5m2 SNR unknown: bf16"),
                 reason_text(r->block_details[4]).c_str());
        QCOMPARE(r->blocks_int4, 1);
        QCOMPARE(r->blocks_int8, 1);
        QCOMPARE(r->blocks_fp8, 1);
        QCOMPARE(r->blocks_bf16, 2);
        QCOMPARE(r->estimated_bandwidth_saving_pct, 100.0 * (1.0 - (0.25 + 0.5 + 0.5 + 1 + 1) / 5.0));
        QCOMPARE(r->block_details[2].snr_db[std::size_t(Precision::fp8_e4m3)], 26.0);
    }

    void hysteresis_in_decibels() {
        Policy p(tier_config(), uniform_layout(1), {0.1});
        p.observe_snr(snr(0, 20, 35, 20, 20));
        p.update(0, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int8);
        p.observe_snr(snr(0, 26, 28, 20, 20));  // int8 28 >= 30 - 3 stays; int4 26 < 24 + 3 does not enter
        const UpdateRecord* r = p.update(1, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int8);
        QCOMPARE(r->block_details[0].reason, Reason::hold);
        p.observe_snr(snr(0, 27.5, 28, 20, 20));  // int4 clears 27: moves down a tier
        r = p.update(2, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int4);
        QCOMPARE(r->block_details[0].reason, Reason::policy);
        p.observe_snr(snr(0, 22, 28, 26, 24));  // int4 22 >= 24 - 3: stays
        p.update(3, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int4);
        // int4 20 < 21 leaves; int8 28 < 33 and e4m3 26 < 28 do not enter; e5m2 24 >= 23 does.
        p.observe_snr(snr(0, 20, 28, 26, 24));
        r = p.update(4, 0.0);
        QCOMPARE(p.precisions()[0], Precision::fp8_e5m2);
        QVERIFY2(contains(reason_text(r->block_details[0]), "int4 20.0 dB < 21.0 dB; int8 28.0 dB < 33.0 dB"),
                 reason_text(r->block_details[0]).c_str());
        p.observe_snr(snr(0, 0, 0, 0, 0));  // nothing clears: back to BF16
        p.update(5, 0.0);
        QCOMPARE(p.precisions()[0], Precision::bf16);
    }

    void gate_restricts_the_formats() {
        Policy p(tier_config(), uniform_layout(2), {0.1, 0.1});
        p.set_admitted_formats({format_bit(Precision::int8), 0});  // block 1: nothing below BF16
        p.observe_snr(snr(0, 40, 45, 40, 40));
        p.observe_snr(snr(1, 40, 45, 40, 40));
        const UpdateRecord* r = p.update(0, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int8, Precision::bf16}));
        QVERIFY2(contains(reason_text(r->block_details[0]), "int4 not faster than bf16 (gate); int8 45.0 dB"),
                 reason_text(r->block_details[0]).c_str());
        QVERIFY(p.admitted_formats()[1] == format_bit(Precision::bf16));  // BF16 is always admitted
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, p.set_admitted_formats({0}));
    }

    void runtime_limits_what_is_routed() {
        Policy p(tier_config(), uniform_layout(1), {0.1});
        p.set_materializable(format_bit(Precision::int8));
        p.observe_snr(snr(0, 40, 45, 40, 40));
        p.update(0, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int8);
    }

    void cooldown_holds_changes_between_formats() {
        Config c = tier_config();
        c.min_steps_between_switches = 10;
        Policy p(c, uniform_layout(1), {0.1});
        p.observe_snr(snr(0, 20, 35, 20, 20));
        p.update(0, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int8);
        p.observe_snr(snr(0, 40, 35, 20, 20));
        const UpdateRecord* r = p.update(1, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int8);
        QCOMPARE(r->block_details[0].reason, Reason::cooldown);
        QVERIFY2(contains(reason_text(r->block_details[0]), "held in int8 by the cooldown until step 10"),
                 reason_text(r->block_details[0]).c_str());
        p.update(10, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int4);
    }

    void tiers_off_keep_the_sensitivity_rules() {
        Config c = tier_config();
        c.snr_tiers = false;
        Policy p(c, uniform_layout(2), {0.1, 0.4});
        p.observe_snr(snr(0, 40, 10, 10, 10));  // reported, not used
        const UpdateRecord* r = p.update(0, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int8, Precision::bf16}));
        QCOMPARE(reason_text(r->block_details[0]),
                 std::string("sensitivity 0.100 < int8_threshold 0.300; int8"));
        QCOMPARE(r->block_details[0].snr_db[std::size_t(Precision::int4)], 40.0);
    }

    void budget_mode_plans_and_follows_the_target() {
        Config c = tier_config();
        c.snr_tiers = false;
        c.mode = Mode::budget;
        c.budget_target_pct = 60.0;
        Policy p(c, uniform_layout(4, 100), {0.9, 0.1, 0.5, 0.0});
        const UpdateRecord* r = p.update(0, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int8, Precision::int4, Precision::int8,
                                                         Precision::int4}));
        QCOMPARE(*r->budget_target_pct, 60.0);
        QCOMPARE(r->estimated_bandwidth_saving_pct, 62.5);
        QVERIFY2(contains(reason_text(r->block_details[0]), "budget 60.0%"),
                 reason_text(r->block_details[0]).c_str());
        QVERIFY(p.apply(set_budget(50.0), 1).ok);
        r = p.update(1, 0.0);
        QCOMPARE(p.precisions(), std::vector<Precision>(4, Precision::int8));
        QCOMPARE(r->estimated_bandwidth_saving_pct, 50.0);
        QCOMPARE(*r->budget_target_pct, 50.0);
        // A pin is fixed in the plan: block 1 at BF16 leaves room only for INT4 elsewhere at 50%.
        QVERIFY(p.apply(pin({1}, Precision::bf16), 2).ok);
        r = p.update(2, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int8, Precision::bf16, Precision::int4,
                                                         Precision::int4}));
        QCOMPARE(r->estimated_bandwidth_saving_pct, 50.0);
    }

    void budget_uses_only_formats_that_clear_their_threshold() {
        Config c = tier_config();
        c.mode = Mode::budget;
        c.budget_target_pct = 75.0;
        Policy p(c, uniform_layout(2, 100), {0.1, 0.1});
        p.observe_snr(snr(0, 30, 40, 30, 30));
        p.observe_snr(snr(1, 10, 40, 30, 30));  // INT4 ruins it: 8 bits at best
        p.update(0, 0.0);
        QCOMPARE(p.precisions(), (std::vector<Precision>{Precision::int4, Precision::int8}));
    }

    void set_mode_budget_and_back() {
        Config c = tier_config();
        c.snr_tiers = false;
        Policy p(c, uniform_layout(2, 100), {0.1, 0.1});
        Command m;
        m.kind = Command::Kind::set_mode;
        m.mode = Mode::budget;
        QVERIFY(p.apply(m, 0).ok);
        QCOMPARE(p.mode(), Mode::budget);
        p.update(0, 0.0);
        QCOMPARE(p.precisions()[0], Precision::int8);  // 50% default target from INT4: one block moves up
        m.mode = Mode::static_;
        const CommandOutcome out = p.apply(m, 1);
        QVERIFY(out.ok);
        QCOMPARE(p.precisions(), std::vector<Precision>(2, Precision::bf16));
    }

    // A budget target outside budget mode would change nothing: refused, saying to switch first
    // (POLICY.md rule 18); a set_mode budget applied before it at the same boundary counts.
    void set_budget_outside_budget_mode_is_rejected() {
        Config c = tier_config();
        Policy p(c, uniform_layout(2, 100), {0.1, 0.1});
        QCOMPARE(p.mode(), Mode::dynamic);
        CommandOutcome out = p.apply(set_budget(60.0), 3);
        QVERIFY(!out.ok);
        QVERIFY2(contains(out.error, "the policy is in mode dynamic") && contains(out.error, "mode budget"),
                 out.error.c_str());
        QCOMPARE(p.budget_target_pct(), c.budget_target_pct);
        QVERIFY(p.apply(sp::test::set_mode(Mode::budget), 4).ok);
        out = p.apply(set_budget(60.0), 4);
        QVERIFY2(out.ok, out.error.c_str());
        QCOMPARE(p.budget_target_pct(), 60.0);
    }
};

QTEST_APPLESS_MAIN(TestPolicyTiers)
#include "test_policy_tiers.moc"
