// Telemetry JSONL, the wire shape: the exact keys and order of update records, round trips of
// every field and every record kind (updates, step stats, headers, events). Reading lines from
// other writers, bad lines and the reader over streams and files are in
// test_telemetry_jsonl_reading.cpp.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "sp/jsonl.h"
#include "telemetry_jsonl_fixtures.h"

using namespace sp;
using namespace sp::test::telemetry_jsonl_fixtures;

namespace {

std::vector<std::string> keys_of(const nlohmann::ordered_json& j) {
    std::vector<std::string> keys;
    for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
    return keys;
}

}  // namespace

class TestTelemetryJsonl : public QObject {
    Q_OBJECT

  private slots:
    void reason_spellings() {
        const Reason all[] = {Reason::warmup,    Reason::mode,   Reason::initial,
                              Reason::policy,    Reason::hold,   Reason::cooldown,
                              Reason::nonfinite, Reason::config, Reason::pin};
        for (Reason r : all) QCOMPARE(parse_reason(to_string(r)), std::optional<Reason>(r));
        QCOMPARE(to_string(Reason::nonfinite), std::string_view("nonfinite"));
        QVERIFY(!parse_reason("Hold").has_value());
    }

    void update_round_trips_every_field() {
        const UpdateRecord in = sample_update();
        const std::string line = to_json_line(in);
        QVERIFY(line.find('\n') == std::string::npos);
        QVERIFY(line.find("\"estimated_bandwidth_saving_pct\":30.208333333333336,") != std::string::npos);
        QVERIFY(line.find("\"mean_sensitivity\":0.19999999999999998,") != std::string::npos);
        QVERIFY(line.find("\"min_sensitivity\":null,") != std::string::npos);
        QVERIFY(line.find("\"l2_norm\":2.0,") != std::string::npos);  // stays a float
        const UpdateRecord out = parse_update(line);
        QCOMPARE(out.step_id, in.step_id);
        CHECK_SAME(out.timestamp, in.timestamp);
        QCOMPARE(out.blocks_bf16, 1);
        QCOMPARE(out.blocks_int8, 1);
        QCOMPARE(out.blocks_fp8, 1);
        CHECK_SAME(out.mean_sensitivity, 0.19999999999999998);
        CHECK_SAME(out.max_sensitivity, 0.87);
        QVERIFY(std::isnan(out.min_sensitivity));
        QCOMPARE(out.precision_changes, 2);
        CHECK_SAME(out.estimated_bandwidth_saving_pct, 30.208333333333336);
        QCOMPARE(out.mode, std::optional<Mode>(Mode::static_));
        QVERIFY(out.measured_bandwidth_saving_pct.has_value());
        CHECK_SAME(*out.measured_bandwidth_saving_pct, 29.5);
        QVERIFY(out.train_loss.has_value() && out.eval_loss.has_value());
        CHECK_SAME(*out.train_loss, 2.718281828459045);
        CHECK_SAME(*out.eval_loss, 3.0);
        QCOMPARE(out.eval_step, std::optional<std::int64_t>(0));
        QCOMPARE(out.block_details.size(), std::size_t(3));
        for (std::size_t i = 0; i < 3; ++i) {
            const BlockDetail& e = in.block_details[i];
            const BlockDetail& g = out.block_details[i];
            QCOMPARE(g.id, e.id);
            QCOMPARE(g.precision, e.precision);
            CHECK_SAME(g.sensitivity, e.sensitivity);
            CHECK_SAME(g.grad_score, e.grad_score);
            CHECK_SAME(g.error_score, e.error_score);
            CHECK_SAME(g.relative_magnitude, e.relative_magnitude);
            CHECK_SAME(g.l2_norm, std::isfinite(e.l2_norm) ? e.l2_norm : kNoValue);
            CHECK_SAME(g.max_abs, e.max_abs);
            CHECK_SAME(g.variance, e.variance);
            CHECK_SAME(g.mean, e.mean);
            QCOMPARE(g.forced, e.forced);
            QCOMPARE(g.changed, e.changed);
            QCOMPARE(g.reason, e.reason);
            QCOMPARE(g.window, e.window);
            QCOMPARE(g.last_change_step, e.last_change_step);
            QCOMPARE(g.switches, e.switches);
        }
        QVERIFY(std::signbit(out.block_details[0].relative_magnitude));  // -0.0 survives
        QCOMPARE(to_json_line(out), line);                               // and the text is stable
    }

    void doubles_round_trip_exactly() {
        std::mt19937_64 rng(7);
        UpdateRecord r;
        for (int i = 0; i < 2000; ++i) {
            std::uint64_t bits = rng();
            double v = 0.0;
            std::memcpy(&v, &bits, sizeof v);
            if (!std::isfinite(v)) continue;
            r.timestamp = v;
            r.mean_sensitivity = std::ldexp(double(rng() >> 11), -53);  // uniform in [0, 1)
            const UpdateRecord out = parse_update(to_json_line(r));
            CHECK_SAME(out.timestamp, v);
            CHECK_SAME(out.mean_sensitivity, r.mean_sensitivity);
        }
    }

    void update_has_exact_key_order_and_no_type() {
        const std::vector<std::string> seed = {
            "step_id",         "timestamp",         "blocks_bf16",
            "blocks_int8",     "mean_sensitivity",  "max_sensitivity",
            "min_sensitivity", "precision_changes", "estimated_bandwidth_saving_pct",
            "block_details"};
        UpdateRecord r = sample_update();
        auto j = nlohmann::ordered_json::parse(to_json_line(r));
        std::vector<std::string> expected = seed;
        for (const char* k : {"blocks_fp8", "blocks_int4", "mode", "measured_bandwidth_saving_pct",
                              "train_loss", "eval_loss", "eval_step"})
            expected.push_back(k);
        QCOMPARE(keys_of(j), expected);
        QVERIFY(!j.contains("type"));
        QCOMPARE(j["mode"].get<std::string>(), std::string("static"));
        QCOMPARE(keys_of(j["block_details"]), (std::vector<std::string>{"0", "7", "12"}));
        const std::vector<std::string> detail_keys = {"precision",
                                                      "sensitivity",
                                                      "grad_score",
                                                      "error_score",
                                                      "relative_magnitude",
                                                      "l2_norm",
                                                      "max_abs",
                                                      "variance",
                                                      "mean",
                                                      "forced",
                                                      "changed",
                                                      "reason",
                                                      "window",
                                                      "last_change_step",
                                                      "switches"};
        for (const auto& [id, d] : j["block_details"].items()) QCOMPARE(keys_of(d), detail_keys);
        QVERIFY(j["block_details"]["0"]["mean"].is_null());
        QCOMPARE(j["block_details"]["0"]["forced"].get<std::string>(), std::string("config"));
        QVERIFY(j["block_details"]["7"]["forced"].is_null());
        QCOMPARE(j["block_details"]["12"]["forced"].get<std::string>(), std::string("pin"));
        QVERIFY(j["block_details"]["12"]["l2_norm"].is_null());
        QCOMPARE(j["block_details"]["0"]["changed"].get<bool>(), true);
        QCOMPARE(j["block_details"]["12"]["precision"].get<std::string>(), std::string("fp8_e5m2"));

        // Optional additive fields are omitted, not null, when unset.
        r.mode.reset();
        r.measured_bandwidth_saving_pct.reset();
        r.train_loss.reset();
        r.eval_loss.reset();
        r.eval_step.reset();
        j = nlohmann::ordered_json::parse(to_json_line(r));
        expected.resize(seed.size() + 2);  // blocks_fp8 and blocks_int4 are always written
        QCOMPARE(keys_of(j), expected);
    }

    void format_fields_round_trip() {
        // Update records: per-block SNR (finite entries only) and reason text, INT4 count, budget target.
        UpdateRecord r = sample_update();
        r.blocks_int4 = 3;
        r.budget_target_pct = 55.5;
        r.block_details[0].snr_db[std::size_t(Precision::int4)] = 19.25;
        r.block_details[0].snr_db[std::size_t(Precision::int8)] = 41.5;
        r.block_details[0].reason_text = "int4 19.2 dB < 24.0 dB; \"quoted\"";
        const std::string line = to_json_line(r);
        const auto j = nlohmann::json::parse(line);
        QCOMPARE(j["block_details"]["0"]["snr_db"].size(), std::size_t(2));
        QVERIFY(!j["block_details"]["7"].contains("snr_db"));
        QVERIFY(!j["block_details"]["7"].contains("reason_text"));
        const UpdateRecord back = parse_update(line);
        QCOMPARE(back.blocks_int4, 3);
        QCOMPARE(*back.budget_target_pct, 55.5);
        QCOMPARE(back.block_details[0].snr_db[std::size_t(Precision::int4)], 19.25);
        QCOMPARE(back.block_details[0].snr_db[std::size_t(Precision::int8)], 41.5);
        QVERIFY(std::isnan(back.block_details[0].snr_db[std::size_t(Precision::fp8_e4m3)]));
        QCOMPARE(back.block_details[0].reason_text, r.block_details[0].reason_text);
        std::string error;
        TelemetryRecord rec;
        QCOMPARE(
            parse_record(
                minimal_line(R"({"0":{"precision":"int4","sensitivity":0,"grad_score":0,"error_score":0,)"
                             R"("relative_magnitude":0,"l2_norm":0,"max_abs":0,"variance":0,)"
                             R"("forced":null,"changed":false,"snr_db":{"int9":3}}})"),
                rec, error),
            ParseStatus::corrupt);
        QVERIFY2(error.find("unknown format 'int9'") != std::string::npos, error.c_str());

        // Step lines: the SNR estimates taken at that step.
        StepStatsRecord st;
        st.step = 50;
        BlockSnr s;
        s.block_id = 2;
        s.snr_db[std::size_t(Precision::fp8_e5m2)] = 27.0;
        st.snr = {s};
        QCOMPARE(parse_record(to_json_line(st), rec, error), ParseStatus::ok);
        const auto& stats = std::get<StepStatsRecord>(rec);
        QCOMPARE(stats.snr.size(), std::size_t(1));
        QCOMPARE(stats.snr[0].block_id, 2);
        QCOMPARE(stats.snr[0].snr_db[std::size_t(Precision::fp8_e5m2)], 27.0);

        // Headers: the formats the gate admits per block.
        RunHeader h;
        h.blocks = uniform_layout(2);
        h.admitted_formats = {FormatMask(format_bit(Precision::bf16) | format_bit(Precision::int8)),
                              format_bit(Precision::bf16)};
        const std::string header = to_json_line(h);
        QVERIFY2(header.find(R"("admitted_formats":[["bf16","int8"],["bf16"]])") != std::string::npos,
                 header.c_str());
        QCOMPARE(parse_record(header, rec, error), ParseStatus::ok);
        QVERIFY(std::get<RunHeader>(rec).admitted_formats == h.admitted_formats);
    }

    void step_stats_lines_round_trip() {
        StepStatsRecord r;
        r.step = 17;
        r.timestamp = 1763700000.125;
        BlockGradStats a;
        a.block_id = 0;
        a.l2_norm = 0.1 + 0.2;
        a.max_abs = 1e-300;
        a.variance = 3.0;
        a.mean = -0.5;
        a.numel = 1234567;
        BlockGradStats b;
        b.block_id = 3;
        b.l2_norm = std::numeric_limits<double>::quiet_NaN();
        b.nonfinite_count = 9;
        r.blocks = {a, b};
        const std::string line = to_json_line(r);
        QVERIFY(line.find("\"l2_norm\":null") != std::string::npos);
        TelemetryRecord rec;
        std::string error;
        QCOMPARE(parse_record(line, rec, error), ParseStatus::ok);
        QVERIFY2(std::holds_alternative<StepStatsRecord>(rec), error.c_str());
        const auto& back = std::get<StepStatsRecord>(rec);
        QCOMPARE(back.step, std::int64_t(17));
        CHECK_SAME(back.timestamp, 1763700000.125);
        QCOMPARE(back.blocks.size(), std::size_t(2));
        CHECK_SAME(back.blocks[0].l2_norm, 0.1 + 0.2);
        CHECK_SAME(back.blocks[0].max_abs, 1e-300);
        QCOMPARE(back.blocks[0].numel, std::uint64_t(1234567));
        QVERIFY(std::isnan(back.blocks[1].l2_norm));
        QCOMPARE(back.blocks[1].nonfinite_count, std::uint64_t(9));
        QCOMPARE(parse_record(R"({"step":1,"blocks":[{"id":"x"}]})", rec, error), ParseStatus::corrupt);
        QVERIFY2(error.find("blocks[0].id") != std::string::npos, error.c_str());
        // A statistic beyond double range makes a bad line, never an abort (nor an infinity).
        QCOMPARE(parse_record(R"({"step":1,"blocks":[{"id":0,"l2_norm":1e309,"max_abs":1,"variance":1}]})",
                              rec, error),
                 ParseStatus::corrupt);
        QVERIFY2(error.find("invalid JSON: column 39, key 'blocks[0].l2_norm': number beyond the range of a "
                            "double: 1e309") != std::string::npos,
                 error.c_str());
    }

    void header_round_trip() {
        RunHeader h;
        h.run_id = "run \"7\"\n\\";
        h.producer = "sp-ctl simulate 0.1.0";
        h.blocks = uniform_layout(3, 4096);
        h.blocks[1].name = "blocks.1 é";
        h.config_json = R"({"mode": "dynamic", "bf16_threshold": 0.6, "force_bf16_blocks": [1]})";
        h.calibration_errors = {0.01, kNoValue, 0.30000000000000004};
        const std::string line = to_json_line(h);
        const auto j = nlohmann::ordered_json::parse(line);
        QCOMPARE(keys_of(j), (std::vector<std::string>{"type", "schema_version", "run_id", "producer",
                                                       "blocks", "config", "calibration"}));
        QCOMPARE(j["type"].get<std::string>(), std::string("header"));
        QCOMPARE(j["blocks"][2]["bytes_bf16"].get<std::uint64_t>(), std::uint64_t(4096));
        QVERIFY(j["calibration"]["errors"]["1"].is_null());

        TelemetryRecord rec;
        std::string why;
        QVERIFY2(parse_record_line(line, rec, why), why.c_str());
        const RunHeader& g = std::get<RunHeader>(rec);
        QCOMPARE(g.schema_version, kTelemetrySchemaVersion);
        QCOMPARE(g.run_id, h.run_id);
        QCOMPARE(g.producer, h.producer);
        QCOMPARE(g.blocks.size(), std::size_t(3));
        QCOMPARE(g.blocks[1].name, std::string("blocks.1 é"));
        QCOMPARE(g.blocks[2].id, 2);
        QCOMPARE(g.blocks[2].bytes_bf16, std::uint64_t(4096));
        QCOMPARE(nlohmann::json::parse(g.config_json), nlohmann::json::parse(h.config_json));
        QCOMPARE(g.calibration_errors.size(), std::size_t(3));
        CHECK_SAME(g.calibration_errors[0], 0.01);
        QVERIFY(std::isnan(g.calibration_errors[1]));
        CHECK_SAME(g.calibration_errors[2], 0.30000000000000004);

        RunHeader empty;  // no config, no calibration
        const auto e = nlohmann::json::parse(to_json_line(empty));
        QVERIFY(e["config"].is_object() && e["config"].empty());
        QVERIFY(!e.contains("calibration"));
        empty.config_json = "[1]";
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, to_json_line(empty));
    }

    // An event of a kind without a typed payload (sp/event_payload.h): its fields kept in order.
    void event_round_trip() {
        // Not a raw string: moc mis-tokenises \" inside raw strings and drops the whole class.
        const EventRecord ev = event_from_json_text(
            "annotation", 120, 1717171717.25,
            "{\"type\":\"wrong\",\"step\":1,\"block\":3,\"from\":\"bf16\",\"to\":\"int8\",\"note\":"
            "\"a\\\"b\\u00e9\"}");
        const std::string line = to_json_line(ev);
        const auto j = nlohmann::ordered_json::parse(line);
        QCOMPARE(keys_of(j), (std::vector<std::string>{"type", "kind", "step", "timestamp", "block", "from",
                                                       "to", "note"}));
        QCOMPARE(j["type"].get<std::string>(), std::string("event"));
        QCOMPARE(j["step"].get<int>(), 120);  // the struct wins over the payload's copy
        QCOMPARE(j["note"].get<std::string>(), std::string("a\"b\xc3\xa9"));

        TelemetryRecord rec;
        std::string why;
        QVERIFY2(parse_record_line(line, rec, why), why.c_str());
        const EventRecord& g = std::get<EventRecord>(rec);
        QCOMPARE(g.step, std::int64_t(120));
        CHECK_SAME(g.timestamp, 1717171717.25);
        QCOMPARE(g.kind, std::string("annotation"));
        QVERIFY(std::holds_alternative<UntypedEvent>(g.payload));
        QCOMPARE(to_json_line(g), line);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, to_json_line(EventRecord{}));
    }
};

QTEST_APPLESS_MAIN(TestTelemetryJsonl)
#include "test_telemetry_jsonl.moc"
