// Config validation: every rule with its message (unknown keys, types, ranges, the rules between
// keys, limits), all problems reported at once, and validate() on structs. Loading, files and
// to_json are in test_config.cpp.
#include <QtTest>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config_fixtures.h"
#include "sp/config.h"

using nlohmann::json;

namespace {

using namespace sp::test::config_fixtures;

}  // namespace

class TestConfigValidation : public QObject {
    Q_OBJECT

  private slots:
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
        QTest::newRow("mode as number")
            << "mode"
            << "3"
            << R"(must be one of "off", "static", "dynamic", "budget", "tolerance")";
        QTest::newRow("mode unknown")
            << "mode"
            << "\"fast\""
            << R"(must be one of "off", "static", "dynamic", "budget", "tolerance")";
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
};

QTEST_APPLESS_MAIN(TestConfigValidation)
#include "test_config_validation.moc"
