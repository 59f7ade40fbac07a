// Config loading: defaults, nestings, text and files, to_json. Every validation rule with its
// message is in test_config_validation.cpp.
#include <QtTest>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config_fixtures.h"
#include "sp/config.h"

using nlohmann::json;

namespace {

using namespace sp::test::config_fixtures;

// Field-by-field equality (Config has no operator==; to_json covers every key).
bool same(const sp::Config& a, const sp::Config& b) {
    return sp::to_json(a) == sp::to_json(b);
}

}  // namespace

class TestConfig : public QObject {
    Q_OBJECT

  private slots:
    void defaults_match_the_seed_table() {
        const sp::Config c = sp::config_from_json(json::object());
        QCOMPARE(c.enabled, true);
        QVERIFY(c.mode == sp::Mode::dynamic);
        QCOMPARE(c.bf16_threshold, 0.6);
        QCOMPARE(c.int8_threshold, 0.3);
        QVERIFY(c.ambiguous_default == sp::Precision::bf16);
        QCOMPARE(c.hysteresis_margin, 0.1);
        QCOMPARE(c.grad_weight, 0.7);
        QCOMPARE(c.error_weight, 0.3);
        QCOMPARE(c.grad_sensitivity_threshold, 2.0);
        QCOMPARE(c.run_calibration, true);
        QCOMPARE(c.calibration_samples, 4);
        QCOMPARE(c.quant_error_threshold, 0.05);
        QCOMPARE(c.warmup_steps, std::int64_t(10));
        QCOMPARE(c.history_window, 5);
        QCOMPARE(c.update_interval_steps, std::int64_t(10));
        QCOMPARE(c.min_steps_between_switches, std::int64_t(20));
        QVERIFY(c.force_bf16_blocks.empty());
        QVERIFY(c.force_int8_blocks.empty());
        QCOMPARE(c.log_decisions, true);
        QCOMPARE(c.telemetry_enabled, true);
        QCOMPARE(c.telemetry_file, std::string("selective_precision_telemetry.jsonl"));
        QVERIFY(sp::validate(sp::Config{}).empty());
    }

    void mode_strings() {
        QCOMPARE(sp::to_string(sp::Mode::off), std::string_view("off"));
        QCOMPARE(sp::to_string(sp::Mode::static_), std::string_view("static"));
        QCOMPARE(sp::to_string(sp::Mode::dynamic), std::string_view("dynamic"));
        for (sp::Mode m : {sp::Mode::off, sp::Mode::static_, sp::Mode::dynamic}) {
            sp::Mode parsed = m == sp::Mode::off ? sp::Mode::dynamic : sp::Mode::off;
            QVERIFY(sp::parse_mode(sp::to_string(m), parsed));
            QVERIFY(parsed == m);
        }
        sp::Mode untouched = sp::Mode::static_;
        for (const char* bad : {"Static", "", "static_", "on", "dynamic "})
            QVERIFY(!sp::parse_mode(bad, untouched));
        QVERIFY(untouched == sp::Mode::static_);
    }

    void effective_mode() {
        sp::Config c;
        c.mode = sp::Mode::static_;
        QVERIFY(c.effective_mode() == sp::Mode::static_);
        c.enabled = false;
        QVERIFY(c.effective_mode() == sp::Mode::off);
    }

    void every_key_is_read() {
        const sp::Config c = sp::parse_config(R"({
            "enabled": false, "mode": "static", "bf16_threshold": 0.8, "int8_threshold": 0.2,
            "ambiguous_default": "int8", "hysteresis_margin": 0.05, "grad_weight": 0.5, "error_weight": 0.5,
            "grad_sensitivity_threshold": 3.5, "run_calibration": false, "calibration_samples": 8,
            "quant_error_threshold": 0.1, "warmup_steps": 0, "history_window": 7, "update_interval_steps": 25,
            "min_steps_between_switches": 0, "force_bf16_blocks": [0, 11], "force_int8_blocks": [5],
            "log_decisions": false, "telemetry_enabled": false, "telemetry_file": "run.jsonl",
            "rollback_enabled": true, "loss_ema_alpha": 0.2, "loss_spike_zscore": 3.5, "loss_min_history": 12,
            "rollback_window_steps": 15, "rollback_cooldown_steps": 0})");
        QCOMPARE(c.enabled, false);
        QVERIFY(c.mode == sp::Mode::static_);
        QCOMPARE(c.bf16_threshold, 0.8);
        QCOMPARE(c.int8_threshold, 0.2);
        QVERIFY(c.ambiguous_default == sp::Precision::int8);
        QCOMPARE(c.hysteresis_margin, 0.05);
        QCOMPARE(c.grad_weight, 0.5);
        QCOMPARE(c.error_weight, 0.5);
        QCOMPARE(c.grad_sensitivity_threshold, 3.5);
        QCOMPARE(c.run_calibration, false);
        QCOMPARE(c.calibration_samples, 8);
        QCOMPARE(c.quant_error_threshold, 0.1);
        QCOMPARE(c.warmup_steps, std::int64_t(0));
        QCOMPARE(c.history_window, 7);
        QCOMPARE(c.update_interval_steps, std::int64_t(25));
        QCOMPARE(c.min_steps_between_switches, std::int64_t(0));
        QCOMPARE(c.force_bf16_blocks, (std::vector<int>{0, 11}));
        QCOMPARE(c.force_int8_blocks, (std::vector<int>{5}));
        QCOMPARE(c.log_decisions, false);
        QCOMPARE(c.telemetry_enabled, false);
        QCOMPARE(c.telemetry_file, std::string("run.jsonl"));
        QCOMPARE(c.rollback_enabled, true);
        QCOMPARE(c.loss_ema_alpha, 0.2);
        QCOMPARE(c.loss_spike_zscore, 3.5);
        QCOMPARE(c.loss_min_history, 12);
        QCOMPARE(c.rollback_window_steps, std::int64_t(15));
        QCOMPARE(c.rollback_cooldown_steps, std::int64_t(0));
    }

    // ---- nestings --------------------------------------------------------------------------
    void nested_selective_precision() {
        const auto c = sp::config_from_json(json::parse(
            R"({"selective_precision": {"bf16_threshold": 0.9}, "other_tool": {"x": 1}, "enabled": 5})"));
        QCOMPARE(c.bf16_threshold, 0.9);
        QCOMPARE(c.enabled, true);  // the sibling "enabled" belongs to someone else
    }

    void nested_under_memory_stagehand() {
        const auto c = sp::config_from_json(json::parse(R"({
            "memory": {"budget_gb": 40, "stagehand": {"prefetch": true, "selective_precision": {"mode": "off"}}},
            "trainer": {"lr": 0.1}})"));
        QVERIFY(c.mode == sp::Mode::off);
        // A stagehand config without our section (or without stagehand) runs with the defaults.
        QVERIFY(same(sp::config_from_json(json::parse(R"({"memory": {"stagehand": {"prefetch": 1}}})")),
                     sp::Config{}));
        QVERIFY(same(sp::config_from_json(json::parse(R"({"memory": {"budget_gb": 4}})")), sp::Config{}));
    }

    void nested_messages_carry_the_path() {
        auto ps = problems_of(json::parse(R"({"selective_precision": {"bf16_threshold": 1.5}})"));
        QCOMPARE(ps.size(), std::size_t(1));
        EXPECT_PROBLEM(ps, "key 'selective_precision.bf16_threshold'", "[0, 1]", "1.5");
        ps = problems_of(
            json::parse(R"({"memory": {"stagehand": {"selective_precision": {"modee": "off"}}}})"));
        EXPECT_PROBLEM(ps, "key 'memory.stagehand.selective_precision.modee'", "did you mean 'mode'?");
        ps = problems_of(json::parse(R"({"selective_precision": {"int8_threshold": 0.7}})"));
        EXPECT_PROBLEM(ps, "'selective_precision.int8_threshold'", "'selective_precision.bf16_threshold'");
    }

    void nested_section_must_be_an_object() {
        EXPECT_PROBLEM(problems_of(json::parse(R"({"selective_precision": [1, 2]})")),
                       "key 'selective_precision'", "must be an object", "[1,2]");
        EXPECT_PROBLEM(problems_of(json::parse(R"({"selective_precision": null})")), "selective_precision",
                       "null");
        EXPECT_PROBLEM(
            problems_of(json::parse(R"({"memory": {"stagehand": {"selective_precision": true}}})")),
            "key 'memory.stagehand.selective_precision'", "must be an object", "true");
        EXPECT_PROBLEM(problems_of(json::parse(R"({"memory": {"stagehand": "fast"}})")),
                       "key 'memory.stagehand'", "\"fast\"");
        EXPECT_PROBLEM(problems_of(json::parse(R"({"memory": 3})")), "key 'memory'", "must be an object",
                       "3");
    }

    void root_must_be_an_object() {
        for (const json& j : {json::array(), json(3), json("x"), json(nullptr)}) {
            const auto ps = problems_of(j);
            QCOMPARE(ps.size(), std::size_t(1));
            EXPECT_PROBLEM(ps, "must be a JSON object", j.dump());
        }
    }

    // ---- text and files --------------------------------------------------------------------
    void syntax_errors() {
        try {
            sp::parse_config(R"({"enabled": true,, })");
            QFAIL("accepted broken JSON");
        } catch (const sp::ConfigError& e) {
            QCOMPARE(e.problems().size(), std::size_t(1));
            EXPECT_PROBLEM(e.problems(), "not valid JSON: column 18: syntax error");
        }
        QVERIFY_THROWS_EXCEPTION(sp::ConfigError, sp::parse_config(""));
        QVERIFY(sp::parse_config(R"({"mode": "off"})").mode == sp::Mode::off);
        // A number beyond double range is a clear error, not an abort.
        try {
            sp::parse_config(R"({"warmup_steps": 1e309})");
            QFAIL("accepted 1e309");
        } catch (const sp::ConfigError& e) {
            EXPECT_PROBLEM(
                e.problems(),
                "not valid JSON: column 18, key 'warmup_steps': number beyond the range of a double: 1e309");
        }
        // So is nesting beyond the limit: the DOM is never built.
        try {
            sp::parse_config("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}");
            QFAIL("accepted 101 levels");
        } catch (const sp::ConfigError& e) {
            EXPECT_PROBLEM(e.problems(), "not valid JSON: column 69, key 'a[0][0]",
                           "[0]': nested deeper than 64 levels");
        }
    }

    void files() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const std::string good = dir.filePath("good.json").toStdString();
        std::ofstream(good) << R"({"selective_precision": {"history_window": 9}})";
        QCOMPARE(sp::load_config_file(good).history_window, 9);

        const std::string bad = dir.filePath("bad.json").toStdString();
        std::ofstream(bad) << R"({"history_window": 0, "grad_wieght": 1})";
        try {
            sp::load_config_file(bad);
            QFAIL("accepted an invalid file");
        } catch (const sp::ConfigError& e) {
            QCOMPARE(e.problems().size(), std::size_t(2));
            for (const auto& p : e.problems()) QVERIFY2(p.rfind(bad + ": key '", 0) == 0, p.c_str());
            EXPECT_PROBLEM(e.problems(), "did you mean 'grad_weight'?");
        }

        const std::string broken = dir.filePath("broken.json").toStdString();
        std::ofstream(broken) << "{\n  \"mode\": off\n}";
        try {
            sp::load_config_file(broken);
            QFAIL("accepted broken JSON");
        } catch (const sp::ConfigError& e) {
            EXPECT_PROBLEM(e.problems(),
                           broken + ": not valid JSON: line 2, column 11, key 'mode': syntax error");
        }

        for (const std::string& unreadable :
             {dir.filePath("missing.json").toStdString(), dir.path().toStdString()}) {
            try {
                sp::load_config_file(unreadable);
                QFAIL("read something unreadable");
            } catch (const sp::ConfigError& e) {
                EXPECT_PROBLEM(e.problems(), unreadable + ": cannot read");
            }
        }
    }

    // ---- to_json ---------------------------------------------------------------------------
    void to_json_has_every_key() {
        const json j = sp::to_json(sp::Config{});
        QVERIFY(j.is_object());
        QCOMPARE(j.size(), std::size_t(49));
        QCOMPARE(j.at("precision_scope"), json("compute"));
        QCOMPARE(j.at("cost_estimator"), json("sensitivity"));
        QCOMPARE(j.at("loss_tolerance_pct"), json(0.5));
        QCOMPARE(j.at("control_requests_per_second"), json(10.0));
        QCOMPARE(j.at("distributed_stats_mode"), json("replicated"));
        QCOMPARE(j.at("process_group_timeout_s"), json(60.0));
        QCOMPARE(j.at("int4_group_size"), json(64));
        QCOMPARE(j.at("snr_tiers"), json(false));
        QCOMPARE(j.at("snr_threshold_db").size(), std::size_t(4));
        QCOMPARE(j.at("budget_target_pct"), json(50.0));
        QCOMPARE(j.at("rollback_enabled"), json(false));
        QCOMPARE(j.at("loss_min_history"), json(20));
        QCOMPARE(j.at("mode"), json("dynamic"));
        QCOMPARE(j.at("ambiguous_default"), json("bf16"));
        QCOMPARE(j.at("force_bf16_blocks"), json::array());
        QCOMPARE(j.at("warmup_steps"), json(10));
        QCOMPARE(j.at("telemetry_file"), json("selective_precision_telemetry.jsonl"));
        QCOMPARE(j.at("telemetry_every_step"), json(false));
        QCOMPARE(j.at("calibration_cache_dir"), json(""));
        // Every key to_json writes is a key the reader accepts on its own.
        for (const auto& [key, value] : j.items())
            QVERIFY2(problems_of(json{{key, value}}).empty(), key.c_str());
    }

    void to_json_round_trips() {
        sp::Config c;
        c.enabled = false;
        c.mode = sp::Mode::static_;
        c.bf16_threshold = 0.123456789012345;
        c.int8_threshold = 0.1;
        c.ambiguous_default = sp::Precision::int8;
        c.grad_sensitivity_threshold = 1e-3;
        c.calibration_samples = 2;
        c.warmup_steps = std::int64_t(1) << 40;
        c.force_bf16_blocks = {1, 2};
        c.force_int8_blocks = {0, 7};
        c.telemetry_file = "a/b.jsonl";
        const sp::Config back = sp::config_from_json(sp::to_json(c));
        QVERIFY(same(back, c));
        QCOMPARE(back.bf16_threshold, c.bf16_threshold);
        QCOMPARE(back.warmup_steps, c.warmup_steps);
        QVERIFY(back.mode == sp::Mode::static_);
        QVERIFY(back.ambiguous_default == sp::Precision::int8);
        // And through text, as a run header would store it.
        QVERIFY(same(sp::parse_config(sp::to_json(c).dump()), c));
    }
};

QTEST_APPLESS_MAIN(TestConfig)
#include "test_config.moc"
