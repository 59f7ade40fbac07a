// Reasons as data (POLICY.md "Reasons as data"): the policy records each block's decision as facts
// and no words; sp::reason_text renders the facts in the files' wording, and the telemetry writer
// writes those words, or the words a record was read with.
#include <QtTest>

#include <nlohmann/json.hpp>

#include "sp/jsonl.h"
#include "sp/policy.h"
#include "sp/reason_text.h"

using namespace sp;

namespace {

BlockDetail decided_by(ReasonRule rule, double sensitivity = 0.1, double threshold = 0.3) {
    BlockDetail d;
    d.sensitivity = sensitivity;
    d.facts.rule = rule;
    d.facts.threshold = threshold;
    return d;
}

void set_snr(BlockDetail& d, Precision p, double db) {
    d.snr_db[std::size_t(p)] = db;
}

void tier(BlockDetail& d, Precision p, TierOutcome outcome, double need_db = 0.0) {
    d.facts.choice.tiered = true;
    d.facts.choice.outcome[std::size_t(p)] = outcome;
    d.facts.choice.need_db[std::size_t(p)] = need_db;
}

}  // namespace

class TestReasonText : public QObject {
    Q_OBJECT
  private slots:
    void every_rule_in_the_files_wording() {
        BlockDetail pinned = decided_by(ReasonRule::pinned);
        pinned.facts.format = Precision::fp8_e5m2;
        QCOMPARE(reason_text(pinned), std::string("pinned to fp8_e5m2 by the operator"));
        BlockDetail forced = decided_by(ReasonRule::forced);
        forced.facts.format = Precision::int8;
        QCOMPARE(reason_text(forced), std::string("forced to int8 by the config"));
        BlockDetail mode = decided_by(ReasonRule::mode);
        mode.facts.mode = Mode::static_;
        QCOMPARE(reason_text(mode), std::string("mode static: bf16"));
        QCOMPARE(reason_text(decided_by(ReasonRule::nonfinite)),
                 std::string("non-finite gradients since the last update: bf16"));
        BlockDetail budget = decided_by(ReasonRule::budget, 0.12345, 55.55);
        budget.facts.format = Precision::int4;
        QCOMPARE(reason_text(budget), std::string("budget 55.5%, sensitivity 0.123: int4"));
        BlockDetail adopted = decided_by(ReasonRule::adopted);
        adopted.reason = Reason::cooldown;
        QCOMPARE(reason_text(adopted), std::string("as rank 0 decided (cooldown)"));

        QCOMPARE(reason_text(decided_by(ReasonRule::reached_bf16, 0.7, 0.6)),
                 std::string("sensitivity 0.700 >= bf16_threshold 0.600: bf16"));
        QCOMPARE(reason_text(decided_by(ReasonRule::stays_bf16, 0.29, 0.25)),
                 std::string("sensitivity 0.290 >= 0.250 (int8_threshold - hysteresis_margin): bf16"));
        BlockDetail ambiguous = decided_by(ReasonRule::ambiguous, 0.4);
        QCOMPARE(reason_text(ambiguous),
                 std::string("sensitivity 0.400 in the ambiguous band: ambiguous_default bf16; bf16"));
        ambiguous.facts.format = Precision::int4;
        ambiguous.facts.choice.wanted = Precision::int4;
        QCOMPARE(reason_text(ambiguous),
                 std::string("sensitivity 0.400 in the ambiguous band: ambiguous_default int4; int4"));
    }

    void format_choice_untiered_and_tiered() {
        BlockDetail d = decided_by(ReasonRule::below_int8);
        d.facts.choice.wanted = Precision::int8;
        QCOMPARE(reason_text(d), std::string("sensitivity 0.100 < int8_threshold 0.300; int8"));
        d.facts.choice.refused = true;
        QCOMPARE(
            reason_text(d),
            std::string("sensitivity 0.100 < int8_threshold 0.300; int8 not faster than bf16 (gate): bf16"));

        BlockDetail t = decided_by(ReasonRule::leaves_bf16, 0.1, 0.25);
        tier(t, Precision::int4, TierOutcome::gated);
        tier(t, Precision::int8, TierOutcome::unknown);
        tier(t, Precision::fp8_e4m3, TierOutcome::below, 31.0);
        set_snr(t, Precision::fp8_e4m3, 27.04);
        tier(t, Precision::fp8_e5m2, TierOutcome::chosen, 27.0);
        set_snr(t, Precision::fp8_e5m2, 27.06);
        t.facts.cooldown_until = 40;
        t.facts.held_in = Precision::bf16;
        QCOMPARE(reason_text(t), std::string("sensitivity 0.100 < int8_threshold - hysteresis_margin 0.250; "
                                             "int4 not faster than bf16 (gate); int8 SNR unknown; "
                                             "fp8_e4m3 27.0 dB < 31.0 dB; fp8_e5m2 27.1 dB >= 27.0 dB: "
                                             "fp8_e5m2; held in bf16 by the cooldown until step 40"));

        BlockDetail none = decided_by(ReasonRule::below_bf16_band, 0.5, 0.6);
        for (Precision p : kLowFormatsCheapestFirst) tier(none, p, TierOutcome::below, 30.0);
        for (Precision p : kLowFormatsCheapestFirst) set_snr(none, p, 12.0);
        QCOMPARE(reason_text(none),
                 std::string("sensitivity 0.500 < bf16_threshold 0.600; int4 12.0 dB < 30.0 dB; "
                             "int8 12.0 dB < 30.0 dB; fp8_e4m3 12.0 dB < 30.0 dB; "
                             "fp8_e5m2 12.0 dB < 30.0 dB: bf16"));
    }

    void words_read_win_and_none_render_nothing() {
        BlockDetail d = decided_by(ReasonRule::nonfinite);
        d.reason_text = "as written by an older agent";
        QCOMPARE(reason_text(d), d.reason_text);
        QVERIFY(reason_text(BlockDetail{}).empty());
        QVERIFY(!has_reason_text(BlockDetail{}));
    }

    // The policy builds no words on the training thread: its records hold facts, and the writer
    // renders them into the file's reason_text.
    void policy_records_facts_and_the_writer_renders_them() {
        Config c;
        c.warmup_steps = 0;
        c.update_interval_steps = 1;
        c.force_int8_blocks = {1};
        Policy p(c, uniform_layout(3), {0.01, 0.01, 0.5});
        const UpdateRecord* r = p.update(0, 0.0);
        QVERIFY(r);
        for (const BlockDetail& d : r->block_details) {
            QVERIFY2(d.reason_text.empty(), d.reason_text.c_str());
            QVERIFY(d.facts.rule != ReasonRule::none);
        }
        QCOMPARE(r->block_details[1].facts.rule, ReasonRule::forced);
        const auto j = nlohmann::json::parse(to_json_line(*r));
        for (const BlockDetail& d : r->block_details)
            QCOMPARE(j["block_details"][std::to_string(d.id)]["reason_text"].get<std::string>(),
                     reason_text(d));
        QCOMPARE(j["block_details"]["1"]["reason_text"].get<std::string>(),
                 std::string("forced to int8 by the config"));
    }

    void the_writer_escapes_words_read() {
        UpdateRecord r;
        r.block_details.resize(1);
        r.block_details[0].facts.rule = ReasonRule::nonfinite;  // the words read win over facts
        r.block_details[0].reason_text = "said \"so\"";
        const auto j = nlohmann::json::parse(to_json_line(r));
        QCOMPARE(j["block_details"]["0"]["reason_text"].get<std::string>(), std::string("said \"so\""));
    }
};

QTEST_APPLESS_MAIN(TestReasonText)
#include "test_reason_text.moc"
