// Config loading: defaults, nestings, every validation rule with its message, files, to_json.
#include <QtTest>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/problems.h"
#include "sp/config.h"

using nlohmann::json;

namespace {

using sp::test::has_problem;
using sp::test::joined;

// The problems config_from_json reports; empty when it accepted the input.
std::vector<std::string> problems_of(const json& j) {
    try {
        sp::config_from_json(j);
    } catch (const sp::ConfigError& e) {
        return e.problems();
    }
    return {};
}

#define EXPECT_PROBLEM(ps, ...) QVERIFY2(has_problem(ps, {__VA_ARGS__}), joined(ps).c_str())

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

    // ---- unknown keys ----------------------------------------------------------------------
    void unknown_keys_data() {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("suggested");  // empty: no suggestion expected
        QTest::newRow("typo") << "bf16_treshold"
                              << "bf16_threshold";
        QTest::newRow("transposition") << "mdoe"
                                       << "mode";
        QTest::newRow("case") << "Enabled"
                              << "enabled";
        QTest::newRow("missing letters") << "hysteresis_marg"
                                         << "hysteresis_margin";
        QTest::newRow("plural") << "force_bf16_block"
                                << "force_bf16_blocks";
        QTest::newRow("far") << "learning_rate"
                             << "";
        QTest::newRow("short") << "x"
                               << "";
        QTest::newRow("rollback typo") << "rollback_cooldown_step"
                                       << "rollback_cooldown_steps";
        QTest::newRow("zscore typo") << "loss_spike_zscor"
                                     << "loss_spike_zscore";
    }
    void unknown_keys() {
        QFETCH(QString, key);
        QFETCH(QString, suggested);
        const auto ps = problems_of(json{{key.toStdString(), 1}});
        QCOMPARE(ps.size(), std::size_t(1));
        EXPECT_PROBLEM(ps, "key '" + key.toStdString() + "'", "unknown key");
        if (suggested.isEmpty())
            QVERIFY2(ps[0].find("did you mean") == std::string::npos, ps[0].c_str());
        else
            EXPECT_PROBLEM(ps, "did you mean '" + suggested.toStdString() + "'?");
    }

    // ---- type errors -----------------------------------------------------------------------
    void wrong_types_data() {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("value");     // JSON text
        QTest::addColumn<QString>("expected");  // fragment of the rule
        QTest::newRow("bool as number") << "enabled"
                                        << "1"
                                        << "must be a boolean";
        QTest::newRow("bool as string") << "log_decisions"
                                        << "\"true\""
                                        << "must be a boolean";
        QTest::newRow("bool null") << "run_calibration"
                                   << "null"
                                   << "must be a boolean";
        QTest::newRow("number as string") << "bf16_threshold"
                                          << "\"0.5\""
                                          << "must be a number";
        QTest::newRow("bool is not a number") << "grad_weight"
                                              << "true"
                                              << "must be a number";
        QTest::newRow("integer fraction") << "warmup_steps"
                                          << "10.5"
                                          << "must be an integer";
        QTest::newRow("integer huge") << "warmup_steps"
                                      << "1e+100"
                                      << "must be an integer";
        QTest::newRow("int beyond int32") << "calibration_samples"
                                          << "3000000000"
                                          << "must be an integer";
        QTest::newRow("integer as string") << "history_window"
                                           << "\"5\""
                                           << "must be an integer";
        QTest::newRow("integer as bool") << "update_interval_steps"
                                         << "false"
                                         << "must be an integer";
        QTest::newRow("mode as number") << "mode"
                                        << "3"
                                        << R"(must be one of "off", "static", "dynamic", "budget")";
        QTest::newRow("mode unknown") << "mode"
                                      << "\"fast\""
                                      << R"(must be one of "off", "static", "dynamic", "budget")";
        QTest::newRow("ambiguous unknown") << "ambiguous_default"
                                           << "\"fp16\""
                                           << R"("bf16", "int8", "fp8_e4m3", "fp8_e5m2", "int4")";
        QTest::newRow("snr thresholds not object") << "snr_threshold_db"
                                                   << "30"
                                                   << "must be an object of dB thresholds";
        QTest::newRow("snr threshold of bf16") << "snr_threshold_db"
                                               << R"({"bf16": 30})"
                                               << R"(unknown low format "bf16")";
        QTest::newRow("snr threshold not number") << "snr_threshold_db"
                                                  << R"({"int4": "high"})"
                                                  << R"(the threshold of "int4" must be a number)";
        QTest::newRow("list not array") << "force_bf16_blocks"
                                        << "3"
                                        << "must be an array of block ids";
        QTest::newRow("list of strings") << "force_int8_blocks"
                                         << "[\"a\"]"
                                         << "element [0] must be an integer";
        QTest::newRow("list fraction") << "force_bf16_blocks"
                                       << "[1,2.5]"
                                       << "element [1] must be an integer";
        QTest::newRow("file as number") << "telemetry_file"
                                        << "5"
                                        << "must be a string";
    }
    void wrong_types() {
        QFETCH(QString, key);
        QFETCH(QString, value);
        QFETCH(QString, expected);
        const json bad = json::parse(value.toStdString());
        const auto ps = problems_of(json{{key.toStdString(), bad}});
        QCOMPARE(ps.size(), std::size_t(1));
        // The element's own value is shown for list elements, the whole value otherwise.
        const std::string shown = bad.is_array() ? bad.back().dump() : bad.dump();
        EXPECT_PROBLEM(ps, "key '" + key.toStdString() + "'", expected.toStdString(), "got " + shown);
    }

    void integral_floats_are_integers() {
        const auto c =
            sp::parse_config(R"({"warmup_steps": 4.0, "history_window": 1e1, "force_bf16_blocks": [2.0]})");
        QCOMPARE(c.warmup_steps, std::int64_t(4));
        QCOMPARE(c.history_window, 10);
        QCOMPARE(c.force_bf16_blocks, std::vector<int>{2});
        QCOMPARE(sp::parse_config(R"({"warmup_steps": 1000000000000})").warmup_steps,
                 std::int64_t(1000000000000));
        QCOMPARE(sp::parse_config(R"({"bf16_threshold": 1})").bf16_threshold, 1.0);  // integers are numbers
    }

    // ---- range rules -----------------------------------------------------------------------
    void out_of_range_data() {
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("rule");
        QTest::newRow("bf16 above") << "bf16_threshold"
                                    << "1.5"
                                    << "must be a number in [0, 1]";
        QTest::newRow("bf16 below") << "bf16_threshold"
                                    << "-0.1"
                                    << "must be a number in [0, 1]";
        QTest::newRow("int8 above") << "int8_threshold"
                                    << "1.01"
                                    << "must be a number in [0, 1]";
        QTest::newRow("hysteresis") << "hysteresis_margin"
                                    << "-0.5"
                                    << "must be a number in [0, 1]";
        QTest::newRow("grad_weight") << "grad_weight"
                                     << "2"
                                     << "must be a number in [0, 1]";
        QTest::newRow("error_weight") << "error_weight"
                                      << "-1"
                                      << "must be a number in [0, 1]";
        QTest::newRow("quant zero") << "quant_error_threshold"
                                    << "0"
                                    << "must be a number in (0, 1]";
        QTest::newRow("quant above") << "quant_error_threshold"
                                     << "1.5"
                                     << "must be a number in (0, 1]";
        QTest::newRow("quant negative") << "quant_error_threshold"
                                        << "-0.1"
                                        << "must be a number in (0, 1]";
        QTest::newRow("sensitivity zero") << "grad_sensitivity_threshold"
                                          << "0"
                                          << "must be a finite number > 0";
        QTest::newRow("sensitivity neg") << "grad_sensitivity_threshold"
                                         << "-2"
                                         << "must be a finite number > 0";
        QTest::newRow("history zero") << "history_window"
                                      << "0"
                                      << "must be an integer in [1, 100000]";
        QTest::newRow("interval zero") << "update_interval_steps"
                                       << "0"
                                       << "must be an integer in [1, 1099511627776]";
        QTest::newRow("samples negative") << "calibration_samples"
                                          << "-3"
                                          << "must be an integer in [1, 10000]";
        QTest::newRow("warmup negative") << "warmup_steps"
                                         << "-1"
                                         << "must be an integer in [0, 1099511627776]";
        QTest::newRow("cooldown negative") << "min_steps_between_switches"
                                           << "-5"
                                           << "must be an integer in [0, 1099511627776]";
        QTest::newRow("bf16 block negative") << "force_bf16_blocks"
                                             << "-1"
                                             << "block ids must be >= 0";
        QTest::newRow("int8 block negative") << "force_int8_blocks"
                                             << "-7"
                                             << "block ids must be >= 0";
        QTest::newRow("loss alpha zero") << "loss_ema_alpha"
                                         << "0"
                                         << "must be a number in (0, 1]";
        QTest::newRow("loss alpha above") << "loss_ema_alpha"
                                          << "1.5"
                                          << "must be a number in (0, 1]";
        QTest::newRow("zscore zero") << "loss_spike_zscore"
                                     << "0"
                                     << "must be a finite number > 0";
        QTest::newRow("loss history zero") << "loss_min_history"
                                           << "0"
                                           << "must be an integer in [1, 100000]";
        QTest::newRow("rollback window zero") << "rollback_window_steps"
                                              << "0"
                                              << "must be an integer in [1, 1099511627776]";
        QTest::newRow("rollback cooldown negative") << "rollback_cooldown_steps"
                                                    << "-1"
                                                    << "must be an integer in [0, 1099511627776]";
    }
    void out_of_range() {
        QFETCH(QString, key);
        QFETCH(QString, value);
        QFETCH(QString, rule);
        const std::string k = key.toStdString();
        json v = json::parse(value.toStdString());
        const bool list = k.rfind("force_", 0) == 0;
        const json input = list ? json{{k, json::array({3, v})}} : json{{k, v}};
        const auto ps = problems_of(input);
        QCOMPARE(ps.size(), std::size_t(1));
        EXPECT_PROBLEM(ps, "key '" + k + "'", rule.toStdString(), "got " + value.toStdString());
    }

    void boundaries_are_accepted() {
        const auto c = sp::parse_config(R"({"bf16_threshold": 1, "int8_threshold": 0, "hysteresis_margin": 0,
            "grad_weight": 1, "error_weight": 0, "quant_error_threshold": 1, "grad_sensitivity_threshold": 1e-9,
            "history_window": 1, "update_interval_steps": 1, "calibration_samples": 1, "warmup_steps": 0,
            "min_steps_between_switches": 0, "force_bf16_blocks": [0]})");
        QCOMPARE(c.bf16_threshold, 1.0);
        QCOMPARE(c.grad_sensitivity_threshold, 1e-9);
        QVERIFY(sp::validate(c).empty());
        // Equal thresholds (no ambiguous band) are allowed.
        QCOMPARE(sp::parse_config(R"({"bf16_threshold": 0.4, "int8_threshold": 0.4})").int8_threshold, 0.4);
    }

    void thresholds_must_be_ordered() {
        const auto ps = problems_of(json{{"int8_threshold", 0.7}});
        QCOMPARE(ps.size(), std::size_t(1));
        EXPECT_PROBLEM(ps, "key 'int8_threshold'", "must be <= 'bf16_threshold'", "(0.6)", "got 0.7");
        QCOMPARE(problems_of(json{{"int8_threshold", 0.5}, {"bf16_threshold", 0.4}}).size(), std::size_t(1));
    }

    void block_in_both_force_lists() {
        const auto ps = problems_of(json{{"force_bf16_blocks", {1, 2, 3}}, {"force_int8_blocks", {3, 4, 2}}});
        // One problem per pair of keys, naming every shared block (a bounded list: detail::id_list).
        QCOMPARE(ps.size(), std::size_t(1));
        EXPECT_PROBLEM(ps, "'force_bf16_blocks'", "'force_int8_blocks'", "blocks 2, 3 are in both");
        const auto one = problems_of(json{{"force_bf16_blocks", {1}}, {"force_int8_blocks", {1}}});
        EXPECT_PROBLEM(one, "'force_bf16_blocks'", "'force_int8_blocks'", "block 1 is in both");
    }

    void duplicates_are_removed_and_sorted() {
        const auto c =
            sp::config_from_json(json{{"force_bf16_blocks", {5, 1, 5, 3, 1}}, {"force_int8_blocks", {9, 9}}});
        QCOMPARE(c.force_bf16_blocks, (std::vector<int>{1, 3, 5}));
        QCOMPARE(c.force_int8_blocks, (std::vector<int>{9}));
    }

    void telemetry_file_required_when_enabled() {
        const auto ps = problems_of(json{{"telemetry_file", ""}});
        QCOMPARE(ps.size(), std::size_t(1));
        EXPECT_PROBLEM(ps, "key 'telemetry_file'", "non-empty", "'telemetry_enabled'", "got \"\"");
        const auto c = sp::config_from_json(json{{"telemetry_file", ""}, {"telemetry_enabled", false}});
        QCOMPARE(c.telemetry_file, std::string());
    }

    // ---- all problems at once --------------------------------------------------------------
    void all_problems_are_collected() {
        const json j = json::parse(R"({"bf16_treshold": 0.5, "enabled": "yes", "history_window": 0,
            "quant_error_threshold": 0, "force_bf16_blocks": [1], "force_int8_blocks": [1]})");
        try {
            sp::config_from_json(j);
            QFAIL("accepted an invalid config");
        } catch (const sp::ConfigError& e) {
            const auto& ps = e.problems();
            QCOMPARE(ps.size(), std::size_t(5));
            EXPECT_PROBLEM(ps, "bf16_treshold", "did you mean 'bf16_threshold'?");
            EXPECT_PROBLEM(ps, "key 'enabled'", "must be a boolean", "\"yes\"");
            EXPECT_PROBLEM(ps, "key 'history_window'", "[1, 100000]", "got 0");
            EXPECT_PROBLEM(ps, "key 'quant_error_threshold'", "(0, 1]", "got 0");
            EXPECT_PROBLEM(ps, "block 1 ");
            const std::string what = e.what();
            QVERIFY(what.rfind("invalid Selective Precision config:", 0) == 0);
            for (const auto& p : ps) QVERIFY2(what.find("\n  " + p) != std::string::npos, what.c_str());
        }
    }

    void a_type_error_does_not_cascade() {
        // int8_threshold keeps its default 0.3 after the type error; the order rule against
        // bf16_threshold 0.1 must not fire on that default.
        const auto ps = problems_of(json{{"int8_threshold", "x"}, {"bf16_threshold", 0.1}});
        QCOMPARE(ps.size(), std::size_t(1));
        EXPECT_PROBLEM(ps, "key 'int8_threshold'", "must be a number");
    }

    // ---- validate() on structs -------------------------------------------------------------
    void validate_rejects_non_finite() {
        constexpr double nan = std::numeric_limits<double>::quiet_NaN();
        constexpr double inf = std::numeric_limits<double>::infinity();
        sp::Config c;
        c.bf16_threshold = nan;
        c.grad_weight = inf;
        c.quant_error_threshold = nan;
        c.grad_sensitivity_threshold = inf;
        c.hysteresis_margin = -inf;
        const auto ps = sp::validate(c);
        QCOMPARE(ps.size(), std::size_t(5));  // no order complaint on top of the NaN threshold
        EXPECT_PROBLEM(ps, "key 'bf16_threshold'", "[0, 1]", "got nan");
        EXPECT_PROBLEM(ps, "key 'grad_weight'", "[0, 1]", "got inf");
        EXPECT_PROBLEM(ps, "key 'hysteresis_margin'", "got -inf");
        EXPECT_PROBLEM(ps, "key 'quant_error_threshold'", "(0, 1]", "got nan");
        EXPECT_PROBLEM(ps, "key 'grad_sensitivity_threshold'", "finite", "got inf");
        sp::Config d;
        d.grad_sensitivity_threshold = nan;
        EXPECT_PROBLEM(sp::validate(d), "grad_sensitivity_threshold", "got nan");
        // The same values arriving through a json built in code are caught too.
        EXPECT_PROBLEM(problems_of(json{{"error_weight", nan}}), "key 'error_weight'", "got nan");
    }

    void validate_same_wording_as_json() {
        sp::Config c;
        c.bf16_threshold = 1.5;
        c.warmup_steps = -1;
        const auto from_struct = sp::validate(c);
        const auto from_json = problems_of(json{{"bf16_threshold", 1.5}, {"warmup_steps", -1}});
        QCOMPARE(from_struct, from_json);
        QCOMPARE(from_struct.size(), std::size_t(2));
    }

    void validate_struct_only_rules() {
        sp::Config c;
        c.ambiguous_default = static_cast<sp::Precision>(9);
        c.mode = static_cast<sp::Mode>(7);
        c.force_bf16_blocks = {4, 4, -2};  // duplicates are fine, the negative id is not
        c.force_int8_blocks = {4};
        c.telemetry_file.clear();
        const auto ps = sp::validate(c);
        QCOMPARE(ps.size(), std::size_t(5));
        EXPECT_PROBLEM(ps, "key 'ambiguous_default'", R"("bf16", "int8")", "got 9");
        EXPECT_PROBLEM(ps, "key 'mode'", "got 7");
        EXPECT_PROBLEM(ps, "key 'force_bf16_blocks'", ">= 0", "got -2");
        EXPECT_PROBLEM(ps, "block 4 ", "'force_int8_blocks'");
        EXPECT_PROBLEM(ps, "key 'telemetry_file'", "non-empty");
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

    // Every integer has an upper bound the program can honour; a huge unknown key is cheap to report.
    void limits() {
        auto ps = problems_of(json::parse(R"({"history_window": 2147483647, "warmup_steps": 1099511627777,
                                               "calibration_samples": 10001, "loss_min_history": 100000})"));
        EXPECT_PROBLEM(ps, "key 'history_window': must be an integer in [1, 100000], got 2147483647");
        EXPECT_PROBLEM(ps, "key 'warmup_steps': must be an integer in [0, 1099511627776], got 1099511627777");
        EXPECT_PROBLEM(ps, "key 'calibration_samples': must be an integer in [1, 10000], got 10001");
        QCOMPARE(ps.size(), std::size_t(3));  // 100000 is within its bound
        ps = problems_of(json{{"telemetry_file", std::string(5000, 'x')}});
        EXPECT_PROBLEM(ps, "key 'telemetry_file': too long: 5000 bytes (the limit is 4096)");

        const std::string huge(10 << 20, 'k');
        ps = problems_of(json{{huge, 1}});
        QCOMPARE(ps.size(), std::size_t(1));
        QVERIFY2(ps[0].size() < 200, ps[0].substr(0, 200).c_str());
        EXPECT_PROBLEM(ps, "unknown key, 10485760 bytes long (keys are at most 256)");
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
        QCOMPARE(j.size(), std::size_t(46));
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
