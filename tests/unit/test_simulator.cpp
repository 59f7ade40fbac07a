// The offline simulator: input parsing, error reporting with line numbers, command timing.
#include <QtTest>

#include <sstream>

#include "sp/simulator.h"

using namespace sp;

namespace {

Config fast_config() {
    Config c;
    c.warmup_steps = 2;
    c.update_interval_steps = 2;
    c.min_steps_between_switches = 0;
    return c;
}

SimulationResult run(const std::string& input, const Config& c = fast_config(),
                     const std::map<int, double>& cal = {}) {
    std::istringstream in(input);
    SimulationOptions options;
    options.config = c;
    if (!cal.empty()) options.calibration = cal;
    options.now = [] { return 42.0; };
    return simulate(in, "stats.jsonl", options);
}

// Expects a SimulationError whose message contains `line_tag` (e.g. "stats.jsonl:3:") and `text`.
void expect_error(const std::string& input, const std::string& line_tag, const std::string& text) {
    try {
        run(input);
        QFAIL(("no error for input: " + input).c_str());
    } catch (const SimulationError& e) {
        const std::string what = e.what();
        QVERIFY2(what.find(line_tag) != std::string::npos, what.c_str());
        QVERIFY2(what.find(text) != std::string::npos, what.c_str());
    }
}

const char* kStep =
    R"({"step":%d,"blocks":[{"id":0,"l2_norm":%g,"max_abs":1,"variance":1},{"id":1,"l2_norm":3,"max_abs":1,"variance":1}]})";

std::string step_line(int step, double l2_block0) {
    char buf[256];
    std::snprintf(buf, sizeof buf, kStep, step, l2_block0);
    return std::string(buf) + "\n";
}

}  // namespace

class TestSimulator : public QObject {
    Q_OBJECT
  private slots:
    void without_layout_uses_ids_seen() {
        const auto r =
            run(step_line(0, 1) + step_line(1, 1) + step_line(2, 1) + step_line(3, 1) + step_line(4, 1));
        QCOMPARE(int(r.layout.size()), 2);
        QCOMPARE(r.steps, std::uint64_t(5));
        QCOMPARE(int(r.records.size()), 2);  // steps 2 and 4
        QCOMPARE(r.records[0].step_id, std::int64_t(2));
        QCOMPARE(r.records[0].timestamp, 42.0);
        QCOMPARE(r.records[0].block_details[0].relative_magnitude, 0.5);
        QCOMPARE(r.records[0].block_details[0].precision, Precision::int8);
    }

    void layout_sizes_and_timestamps() {
        const std::string layout =
            R"({"type":"layout","blocks":[{"id":0,"name":"a","bytes_bf16":300},{"id":1,"bytes_bf16":100},{"id":2}]})"
            "\n";
        const auto r =
            run(layout +
                R"({"step":2,"timestamp":7.5,"blocks":[{"id":0,"l2_norm":0,"max_abs":0,"variance":0}]})");
        QCOMPARE(int(r.layout.size()), 3);
        QCOMPARE(r.layout[0].name, std::string("a"));
        QCOMPARE(r.layout[2].name, std::string("blocks.2"));
        QCOMPARE(r.records.at(0).timestamp, 7.5);
        QCOMPARE(int(r.records[0].block_details.size()), 3);
    }

    void commands_apply_before_the_steps_stats() {
        std::string in = step_line(0, 1) + step_line(1, 1);
        in += R"({"step":2,"command":{"cmd":"pin","blocks":[0],"precision":"bf16"}})"
              "\n";
        in += step_line(2, 1) + step_line(3, 1);
        in += R"({"step":4,"command":{"cmd":"release","blocks":[0]}})"
              "\n";
        in += step_line(4, 1);
        const auto r = run(in);
        QCOMPARE(r.commands, std::uint64_t(2));
        QCOMPARE(r.records[0].block_details[0].precision, Precision::bf16);
        QCOMPARE(r.records[0].block_details[0].forced, ForcedBy::pin);
        QCOMPARE(r.records[1].block_details[0].precision, Precision::int8);  // released at 4, hysteresis
        QCOMPARE(r.records[1].block_details[0].forced, ForcedBy::none);
    }

    void null_statistics_are_nonfinite() {
        std::string in = step_line(0, 1) + step_line(1, 1);
        in +=
            R"({"step":2,"blocks":[{"id":0,"l2_norm":null,"max_abs":null,"variance":null,"nonfinite_count":3}]})"
            "\n";
        const auto r = run(in);
        QCOMPARE(r.records[0].block_details[0].sensitivity, 1.0);
        QCOMPARE(r.records[0].block_details[0].reason, Reason::nonfinite);
    }

    void calibration_is_used_and_checked() {
        std::istringstream cal(R"({"errors":{"0":0.05,"1":0.0}})");
        const auto errors = parse_calibration(cal, "cal.json");
        const auto r = run(step_line(0, 1) + step_line(2, 1), fast_config(), errors);
        QCOMPARE(r.records[0].block_details[0].error_score, 1.0);
        QVERIFY_THROWS_EXCEPTION(SimulationError, run(step_line(2, 1), fast_config(), {{0, 0.1}}));
        QVERIFY_THROWS_EXCEPTION(SimulationError,
                                 run(step_line(2, 1), fast_config(), {{0, 0.1}, {1, 0.1}, {5, 0.1}}));
        std::istringstream bad_key(R"({"errors":{"x":0.1}})");
        QVERIFY_THROWS_EXCEPTION(SimulationError, parse_calibration(bad_key, "cal.json"));
        std::istringstream negative(R"({"errors":{"0":-0.1}})");
        QVERIFY_THROWS_EXCEPTION(SimulationError, parse_calibration(negative, "cal.json"));
        std::istringstream not_json(R"({"errors":)");
        QVERIFY_THROWS_EXCEPTION(SimulationError, parse_calibration(not_json, "cal.json"));
    }

    void bad_input_names_the_line() {
        const std::string ok = step_line(0, 1);
        expect_error(ok + "\n{nope\n", "stats.jsonl:3:", "not valid JSON");
        expect_error(ok + "[1,2]\n", "stats.jsonl:2:", "expected a JSON object");
        expect_error(ok + step_line(0, 1), "stats.jsonl:2:", "already has a stats line (line 1)");
        expect_error(step_line(5, 1) + step_line(4, 1), "stats.jsonl:2:", "must not decrease");
        expect_error(R"({"step":1,"blocks":[{"id":0,"l2_norm":-1,"max_abs":1,"variance":1}]})",
                     ":1:", "'l2_norm': must be >= 0");
        expect_error(R"({"step":1,"blocks":[{"id":0,"l2_norm":"1","max_abs":1,"variance":1}]})",
                     ":1:", "'l2_norm'");
        expect_error(R"({"step":1,"blocks":[{"id":0,"max_abs":1,"variance":1}]})",
                     ":1:", "missing field 'l2_norm'");
        expect_error(R"({"step":1,"blocks":[{"id":-2,"l2_norm":1,"max_abs":1,"variance":1}]})",
                     ":1:", "'id'");
        expect_error(R"({"step":1.5,"blocks":[]})", ":1:", "'step': expected an integer");
        expect_error(
            R"({"step":1,"blocks":[{"id":0,"l2_norm":1,"max_abs":1,"variance":1},{"id":0,"l2_norm":1,"max_abs":1,"variance":1}]})",
            ":1:", "block 0 appears twice");
        expect_error(R"({"step":1})", ":1:", "exactly one of 'blocks' or 'command'");
        expect_error(R"({"step":1,"command":{"cmd":"explode"}})", ":1:", "command:");
        expect_error(ok + R"({"type":"layout","blocks":[{"id":0}]})", ":2:", "must be the first line");
        expect_error(R"({"type":"layout","blocks":[{"id":1}]})", ":1:", "0..n-1");
        expect_error(R"({"type":"layout","blocks":[{"id":0}]})"
                     "\n" +
                         ok,
                     ":2:", "unknown block 1");
        expect_error(R"({"step":1,"blocks":[{"id":2147483647,"l2_norm":1,"max_abs":1,"variance":1}]})",
                     ":1:", "without a layout line block ids stop at 4095");
        expect_error(R"({"type":"frobnicate"})", ":1:", "unknown line type");
        expect_error(ok + R"({"step":1,"command":{"cmd":"set_budget","target_pct":120}})",
                     ":2:", "target_pct");
    }

    void telemetry_file_is_simulator_input() {
        // A header (layout + config + calibration), recorded commands (one rejected), the file's own
        // update records and other events: only what the policy saw is replayed.
        std::string in =
            R"({"type":"header","schema_version":1,"run_id":"r","blocks":[{"id":0,"name":"blocks.0","bytes_bf16":10},)"
            R"({"id":1,"name":"blocks.1","bytes_bf16":10}],"config":{"warmup_steps":1,"update_interval_steps":1,)"
            R"("min_steps_between_switches":0},"calibration":{"errors":{"0":0.05,"1":0.0}}})"
            "\n";
        in += step_line(0, 1);
        in += R"({"type":"event","kind":"command","step":1,"timestamp":1.0,"ok":true,"changes":1,)"
              R"("command":{"cmd":"pin","blocks":[1],"precision":"bf16"}})"
              "\n";
        in += R"({"type":"event","kind":"command","step":1,"timestamp":1.0,"ok":false,"error":"x",)"
              R"("command":{"cmd":"pin","blocks":[0],"precision":"int8"}})"
              "\n";
        in += R"({"type":"event","kind":"precision_change","step":1,"timestamp":1.0,"block":1})"
              "\n";
        in += step_line(1, 1);
        in += R"({"step_id":1,"timestamp":1.0,"blocks_bf16":2,"blocks_int8":0,"mean_sensitivity":0,)"
              R"("max_sensitivity":0,"min_sensitivity":0,"precision_changes":0,)"
              R"("estimated_bandwidth_saving_pct":0,"block_details":{}})"
              "\n";
        std::istringstream stream(in);
        SimulationOptions options;
        const SimulationResult r = simulate(stream, "run.jsonl", options);
        QVERIFY(r.config_from_header);
        QVERIFY(r.calibration_from_header);
        QCOMPARE(r.config.warmup_steps, std::int64_t(1));
        QCOMPARE(r.layout[1].bytes_bf16, std::uint64_t(10));
        QCOMPARE(r.commands, std::uint64_t(1));  // the rejected one is not replayed
        QCOMPARE(r.skipped_update_records, std::uint64_t(1));
        QCOMPARE(int(r.records.size()), 1);  // warmup 1: one update, at step 1
        QCOMPARE(r.records[0].block_details[0].error_score, 1.0);
        QCOMPARE(r.records[0].block_details[1].forced, ForcedBy::pin);

        // --config overrides the header's config.
        std::istringstream again(in);
        options.config = fast_config();
        const SimulationResult o = simulate(again, "run.jsonl", options);
        QVERIFY(!o.config_from_header);
        QCOMPARE(o.config.warmup_steps, std::int64_t(2));
        QVERIFY(o.records.empty());
    }

    void config_that_does_not_fit_the_layout() {
        Config c = fast_config();
        c.force_bf16_blocks = {7};
        QVERIFY_THROWS_EXCEPTION(ConfigError, run(step_line(0, 1), c));
    }
};

QTEST_APPLESS_MAIN(TestSimulator)
#include "test_simulator.moc"
