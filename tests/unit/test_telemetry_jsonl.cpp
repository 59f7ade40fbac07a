// Telemetry JSONL: the exact wire shape of update records, round trips of every field, loading the
// original tool's records, and the reader's handling of corrupt, unknown, blank and torn lines.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../common/same_update_record.h"
#include "sp/jsonl.h"
#include "update_record_parser.h"

using namespace sp;

namespace {

// Exact equality for doubles (QCOMPARE on doubles is fuzzy); NaN equals NaN.
bool same(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    std::uint64_t x = 0, y = 0;
    std::memcpy(&x, &a, sizeof x);
    std::memcpy(&y, &b, sizeof y);
    return x == y;
}
#define CHECK_SAME(a, b) \
    QVERIFY2(same((a), (b)), qPrintable(QStringLiteral("%1 != %2").arg((a), 0, 'g', 17).arg((b), 0, 'g', 17)))

UpdateRecord sample_update() {
    UpdateRecord r;
    r.step_id = 1234567890123;
    r.timestamp = 1717171717.123456;
    r.blocks_bf16 = 1;
    r.blocks_int8 = 1;
    r.blocks_fp8 = 1;
    r.mean_sensitivity = 0.19999999999999998;
    r.max_sensitivity = 0.87;
    r.min_sensitivity = kNoValue;
    r.precision_changes = 2;
    r.estimated_bandwidth_saving_pct = 30.208333333333336;
    r.mode = Mode::static_;
    r.measured_bandwidth_saving_pct = 29.5;
    r.train_loss = 2.718281828459045;
    r.eval_loss = 3.0;
    r.eval_step = 0;  // measured before training, earlier than the record's step
    BlockDetail a;
    a.id = 0;
    a.precision = Precision::int8;
    a.sensitivity = 0.1 + 0.2;
    a.grad_score = 5e-324;
    a.error_score = 1.7976931348623157e308;
    a.relative_magnitude = -0.0;
    a.l2_norm = 2.0;
    a.max_abs = 1e21;
    a.variance = 3.4e-7;
    a.mean = kNoValue;
    a.forced = ForcedBy::config;
    a.changed = true;
    a.reason = Reason::config;
    a.window = 5;
    a.last_change_step = 40;
    a.switches = 3;
    BlockDetail b;  // all defaults: NaN window averages, reason hold, never changed
    b.id = 7;
    BlockDetail c;
    c.id = 12;
    c.precision = Precision::fp8_e5m2;
    c.forced = ForcedBy::pin;
    c.reason = Reason::pin;
    c.l2_norm = std::numeric_limits<double>::infinity();  // non-finite: written as null
    r.block_details = {a, b, c};
    return r;
}

UpdateRecord parse_update(const std::string& line) {
    TelemetryRecord rec;
    std::string error;
    const ParseStatus st = parse_record(line, rec, error);
    if (st != ParseStatus::ok) qWarning("parse failed: %s", error.c_str());
    if (st != ParseStatus::ok || !std::holds_alternative<UpdateRecord>(rec)) return UpdateRecord{};
    return std::get<UpdateRecord>(rec);
}

std::string minimal_line(const std::string& details = "{}") {
    return R"({"step_id": 50, "timestamp": 1234567.89, "blocks_bf16": 19, "blocks_int8": 29, )"
           R"("mean_sensitivity": 0.34, "max_sensitivity": 0.87, "min_sensitivity": 0.04, )"
           R"("precision_changes": 2, "estimated_bandwidth_saving_pct": 30.2, "block_details": )" +
           details + "}";
}

const char* kDetail0 =
    R"({"precision":"bf16","sensitivity":0.5,"grad_score":0.4,"error_score":0.1,"relative_magnitude":1,)"
    R"("l2_norm":null,"max_abs":null,"variance":null,"forced":null,"changed":false})";

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

    void loads_original_tool_record() {
        const UpdateRecord r = parse_update(minimal_line());
        QCOMPARE(r.step_id, std::int64_t(50));
        CHECK_SAME(r.timestamp, 1234567.89);
        QCOMPARE(r.blocks_bf16, 19);
        QCOMPARE(r.blocks_int8, 29);
        CHECK_SAME(r.mean_sensitivity, 0.34);
        CHECK_SAME(r.max_sensitivity, 0.87);
        CHECK_SAME(r.min_sensitivity, 0.04);
        QCOMPARE(r.precision_changes, 2);
        CHECK_SAME(r.estimated_bandwidth_saving_pct, 30.2);
        QVERIFY(r.block_details.empty());
        QCOMPARE(r.blocks_fp8, 0);
        QVERIFY(!r.mode.has_value());
        QVERIFY(!r.measured_bandwidth_saving_pct.has_value());
    }

    void details_without_additive_fields_get_defaults() {
        const UpdateRecord r = parse_update(minimal_line(std::string(R"({"3": )") + kDetail0 + "}"));
        QCOMPARE(r.block_details.size(), std::size_t(1));
        const BlockDetail& d = r.block_details[0];
        QCOMPARE(d.id, 3);
        CHECK_SAME(d.sensitivity, 0.5);
        CHECK_SAME(d.relative_magnitude, 1.0);  // an integer where a double is expected is fine
        QVERIFY(std::isnan(d.l2_norm) && std::isnan(d.mean));
        QCOMPARE(d.reason, Reason::hold);
        QCOMPARE(d.window, 0);
        QCOMPARE(d.last_change_step, std::int64_t(-1));
        QCOMPARE(d.switches, 0);
    }

    void tolerates_formatting_order_escapes_and_unknown_keys() {
        // Keys in any order, whitespace everywhere, escapes, unknown keys with nested values, CRLF.
        const std::string line =
            " \t{ \"block_details\" : { \"10\" : { \"future\" : [1, {\"x\": [true, null]}, \"a\\\"b\"], "
            "\"changed\":true,\"forced\":\"pin\",\"variance\":1e-3,\"max_abs\":-2.5E+2,\"l2_norm\":0,"
            "\"relative_magnitude\":0.5,\"error_score\":0,\"grad_score\":0,\"sensitivity\":0.25,"
            "\"precision\":\"\\u0069nt8\"} , \"2\" : " +
            std::string(kDetail0) +
            " },\n\"step_\\u0069d\" : 7 , \"type\" : \"update\", \"note\": \"tab\\there "
            "\\u00e9\\ud83d\\ude00\", "
            "\"timestamp\":0.5,\"blocks_bf16\":1,\"blocks_int8\":1,\"mean_sensitivity\":0,"
            "\"max_sensitivity\":0,\"min_sensitivity\":0,\"precision_changes\":0,"
            "\"estimated_bandwidth_saving_pct\":0, \"mode\": \"dynamic\", \"extra\": {}} \r";
        const UpdateRecord r = parse_update(line);
        QCOMPARE(r.step_id, std::int64_t(7));
        QCOMPARE(r.mode, std::optional<Mode>(Mode::dynamic));
        QCOMPARE(r.block_details.size(), std::size_t(2));
        QCOMPARE(r.block_details[0].id, 2);  // sorted by id
        QCOMPARE(r.block_details[1].id, 10);
        QCOMPARE(r.block_details[1].precision, Precision::int8);
        QCOMPARE(r.block_details[1].forced, ForcedBy::pin);
        QVERIFY(r.block_details[1].changed);
        CHECK_SAME(r.block_details[1].max_abs, -250.0);
        CHECK_SAME(r.block_details[1].variance, 1e-3);
    }

    void rejects_bad_lines_data() {
        QTest::addColumn<QString>("line");
        QTest::addColumn<QString>("error");
        QTest::newRow("garbage") << "hello world"
                                 << "invalid JSON at column 1";
        QTest::newRow("array") << "[1,2]"
                               << "expected a JSON object";
        QTest::newRow("truncated") << QString::fromStdString(minimal_line()).left(60)
                                   << "unexpected end of line";
        QTest::newRow("trailing") << QString::fromStdString(minimal_line() + " x") << "unexpected characters";
        QTest::newRow("wrong type") << QString::fromStdString(minimal_line())
                                           .replace("\"blocks_int8\": 29", "\"blocks_int8\": \"29\"")
                                    << "field 'blocks_int8': expected an integer, got string";
        QTest::newRow("float for int")
            << QString::fromStdString(minimal_line()).replace("\"step_id\": 50", "\"step_id\": 50.5")
            << "field 'step_id': expected an integer, got number";
        QTest::newRow("int overflow") << QString::fromStdString(minimal_line())
                                             .replace("\"blocks_bf16\": 19", "\"blocks_bf16\": 3000000000")
                                      << "field 'blocks_bf16': integer out of range";
        QTest::newRow("missing")
            << QString::fromStdString(minimal_line()).replace("\"min_sensitivity\": 0.04, ", "")
            << "missing field 'min_sensitivity'";
        QTest::newRow("bad number") << QString::fromStdString(minimal_line()).replace("0.34", "1.")
                                    << "invalid number";
        QTest::newRow("negative key")
            << QString::fromStdString(minimal_line(std::string("{\"-1\": ") + kDetail0 + "}"))
            << "block_details: key '-1' is not a non-negative integer";
        QTest::newRow("word key") << QString::fromStdString(
                                         minimal_line(std::string("{\"a\": ") + kDetail0 + "}"))
                                  << "key 'a' is not a non-negative integer";
        QTest::newRow("duplicate id")
            << QString::fromStdString(
                   minimal_line(std::string("{\"1\": ") + kDetail0 + ", \"1\": " + kDetail0 + "}"))
            << "duplicate block id 1";
        QTest::newRow("detail missing")
            << QString::fromStdString(minimal_line(R"({"4": {"precision": "bf16"}})"))
            << "block_details.4: missing field 'sensitivity'";
        QTest::newRow("detail precision")
            << QString::fromStdString(minimal_line(std::string("{\"4\": ") + kDetail0 + "}"))
                   .replace("bf16", "fp4")
            << "field 'block_details.4.precision': unknown precision 'fp4'";
        QTest::newRow("detail type") << QString::fromStdString(
                                            minimal_line(std::string("{\"4\": ") + kDetail0 + "}"))
                                            .replace("\"changed\":false", "\"changed\":0")
                                     << "field 'block_details.4.changed': expected a boolean, got number";
        // Unknown fields follow sp::parse_json's rules too (the fast path accepted both).
        QTest::newRow("unknown field out of range")
            << QString::fromStdString(minimal_line())
                   .replace("\"block_details\"", "\"x\": 1e309, \"block_details\"")
            << "1e309";
        QTest::newRow("unknown field too deep")
            << QString::fromStdString(minimal_line())
                   .replace("\"block_details\"",
                            QString::fromStdString("\"x\": " + std::string(64, '[') + std::string(64, ']') +
                                                   ", \"block_details\""))
            << "nested deeper than 64";
        QTest::newRow("bad escape") << R"({"note": "\x"})"
                                    << "invalid escape";
        QTest::newRow("header field") << R"({"type":"header","schema_version":"1"})"
                                      << "field 'schema_version': expected an integer, got string";
        QTest::newRow("event missing") << R"({"type":"event","kind":"warning","step":3})"
                                       << "missing field 'timestamp'";
        // A crafted header thousands of levels deep overflowed the stack (nlohmann copies recursively).
        QTest::newRow("deep nesting")
            << QString::fromStdString(R"({"type":"header","schema_version":1,"config":{"a":)" +
                                      std::string(300, '[') + std::string(300, ']') + R"(,"b":1}})")
            << "nested deeper than 64";
    }
    void rejects_bad_lines() {
        QFETCH(QString, line);
        QFETCH(QString, error);
        TelemetryRecord rec;
        std::string why;
        QCOMPARE(parse_record(line.toStdString(), rec, why), ParseStatus::corrupt);
        QVERIFY(!parse_record_line(line.toStdString(), rec, why));
        QVERIFY2(QString::fromStdString(why).contains(error), why.c_str());
    }

    // The DOM parser (the fuzzer's reference) agrees with the fast path on every fixture line that
    // is JSON: both accept it with equal records, or both reject it.
    void dom_parser_agrees_with_fast_path() {
        std::vector<std::string> lines = {to_json_line(sample_update()), minimal_line(),
                                          minimal_line(std::string(R"({"3": )") + kDetail0 + "}")};
        for (const char* name : {"replay_small", "replay_original_tool", "replay_corrupt"}) {
            std::ifstream in(std::string(SP_SOURCE_DIR) + "/tests/gui/data/" + name + ".jsonl");
            QVERIFY(in);
            for (std::string line; std::getline(in, line);) lines.push_back(line);
        }
        int updates = 0;
        for (const std::string& line : lines) {
            const auto j = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
            if (j.is_discarded()) continue;
            UpdateRecord fast, dom;
            std::string fast_error, dom_error;
            const bool fast_ok = detail::parse_update_record(line, fast, fast_error).ok;
            const bool dom_ok = detail::update_record_from_json(j, dom, dom_error);
            QVERIFY2(fast_ok == dom_ok,
                     qPrintable(QString::fromStdString(line + "\n" + fast_error + " | " + dom_error)));
            if (!fast_ok) continue;
            ++updates;
            const std::string diff = test::update_record_difference(fast, dom);
            QVERIFY2(diff.empty(), qPrintable(QString::fromStdString(diff + " differs in " + line)));
        }
        QVERIFY(updates >= 20);
    }

    // eval_step (additive): written when set, read by both parsers, null or absent reads as absent
    // (older files: the eval loss belongs to the record's own step); a non-integer is an error.
    void eval_step_round_trips_through_both_parsers() {
        UpdateRecord r = sample_update();
        r.eval_step = 1234567890000;
        const std::string line = to_json_line(r);
        QVERIFY(line.find(",\"eval_step\":1234567890000}") != std::string::npos);
        const auto check_both = [](const std::string& text, std::optional<std::int64_t> expected) {
            UpdateRecord fast, dom;
            std::string error;
            QVERIFY2(detail::parse_update_record(text, fast, error).ok, error.c_str());
            QVERIFY2(detail::update_record_from_json(nlohmann::ordered_json::parse(text), dom, error),
                     error.c_str());
            QCOMPARE(fast.eval_step, expected);
            QCOMPARE(dom.eval_step, expected);
        };
        check_both(line, 1234567890000);
        check_both(minimal_line(), std::nullopt);
        const std::string with_null =
            minimal_line().substr(0, minimal_line().size() - 1) + R"(, "eval_step": null})";
        check_both(with_null, std::nullopt);
        const std::string with_float =
            minimal_line().substr(0, minimal_line().size() - 1) + R"(, "eval_step": 0.5})";
        UpdateRecord out;
        std::string why;
        QVERIFY(!detail::parse_update_record(with_float, out, why).ok);
        QVERIFY2(QString::fromStdString(why).contains("field 'eval_step': expected an integer"), why.c_str());
        QVERIFY(!detail::update_record_from_json(nlohmann::ordered_json::parse(with_float), out, why));
        QVERIFY2(QString::fromStdString(why).contains("field 'eval_step': expected an integer"), why.c_str());
    }

    void unknown_type_is_separate() {
        TelemetryRecord rec;
        std::string why;
        QCOMPARE(parse_record(R"({"type":"snapshot","x":1})", rec, why), ParseStatus::unknown_type);
        QCOMPARE(why, std::string("unknown record type 'snapshot'"));
        // Fields a newer record type uses differently must not make it look corrupt.
        QCOMPARE(parse_record(R"({"step_id":"s-1","type":"future"})", rec, why), ParseStatus::unknown_type);
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

    void event_round_trip() {
        EventRecord ev;
        ev.step = 120;
        ev.timestamp = 1717171717.25;
        ev.kind = "precision_change";
        // Not a raw string: moc mis-tokenises \" inside raw strings and drops the whole class.
        ev.payload_json =
            "{\"type\":\"wrong\",\"step\":1,\"block\":3,\"from\":\"bf16\",\"to\":\"int8\",\"note\":"
            "\"a\\\"b\\u00e9\"}";
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
        QCOMPARE(g.kind, std::string("precision_change"));
        QCOMPARE(nlohmann::json::parse(g.payload_json), nlohmann::json::parse(line));
        QCOMPARE(to_json_line(g), line);

        EventRecord from_payload;  // kind taken from the payload when the struct has none
        from_payload.payload_json = R"({"kind":"warning","message":"x"})";
        QCOMPARE(nlohmann::json::parse(to_json_line(from_payload))["kind"].get<std::string>(),
                 std::string("warning"));
        EventRecord bad;
        bad.kind = "command";
        bad.payload_json = "not json";
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, to_json_line(bad));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, to_json_line(EventRecord{}));
    }

    void reader_skips_corrupt_lines_with_line_numbers() {
        UpdateRecord u = sample_update();
        std::string text;
        RunHeader h;
        h.run_id = "r1";
        text += to_json_line(h) + "\n";  // 1 header
        u.step_id = 10;
        text += to_json_line(u) + "\n";  // 2 good
        text += "garbage {\n";           // 3 bad
        text += "\n   \n";               // 4, 5 blank
        u.step_id = 20;
        text += to_json_line(u) + "\r\n";                                              // 6 good (CRLF)
        text += to_json_line(u).substr(0, 500) + "\n";                                 // 7 truncated JSON
        text += minimal_line().replace(minimal_line().find("19"), 2, "\"x\"") + "\n";  // 8 wrong type
        text += minimal_line(std::string("{\"-3\": ") + kDetail0 + "}") + "\n";        // 9 negative key
        text += R"({"type":"metrics_v9","step":1})"
                "\n";  // 10 unknown type
        text += R"({"type":"event","kind":"warning","step":5,"timestamp":1.5,"message":"hot"})"
                "\n";                   // 11
        text += minimal_line() + "\n";  // 12 good, original tool
        std::istringstream in(text);
        JsonlReader reader(in);
        TelemetryRecord rec;
        std::vector<std::string> seen;
        while (reader.next(rec)) {
            if (auto* up = std::get_if<UpdateRecord>(&rec)) seen.push_back("u" + std::to_string(up->step_id));
            if (std::holds_alternative<RunHeader>(rec)) seen.push_back("h");
            if (auto* ev = std::get_if<EventRecord>(&rec)) seen.push_back("e" + ev->kind);
        }
        QCOMPARE(seen, (std::vector<std::string>{"h", "u10", "u20", "ewarning", "u50"}));
        QCOMPARE(reader.problem_count(), std::uint64_t(4));
        QCOMPARE(reader.problems().size(), std::size_t(4));
        QCOMPARE(reader.problems()[0].line, std::uint64_t(3));
        QCOMPARE(reader.problems()[1].line, std::uint64_t(7));
        QCOMPARE(reader.problems()[2].line, std::uint64_t(8));
        QVERIFY(QString::fromStdString(reader.problems()[2].reason).contains("field 'blocks_bf16'"));
        QCOMPARE(reader.problems()[3].line, std::uint64_t(9));
        QVERIFY(QString::fromStdString(reader.problems()[3].reason).contains("'-3'"));
        QCOMPARE(reader.unknown_type_count(), std::uint64_t(1));
        QCOMPARE(reader.records_read(), std::uint64_t(5));
        QCOMPARE(reader.lines_read(), std::uint64_t(12));
        QCOMPARE(reader.bytes_read(), std::uint64_t(text.size()));
        QVERIFY(!reader.next(rec));  // stays at the end
    }

    void reader_tolerates_truncated_last_line() {
        const std::string good = to_json_line(sample_update());
        {
            std::istringstream in(good + "\n" + good + "\n" + good.substr(0, good.size() / 2));
            JsonlReader reader(in);
            TelemetryRecord rec;
            int n = 0;
            while (reader.next(rec)) ++n;
            QCOMPARE(n, 2);
            QCOMPARE(reader.problem_count(), std::uint64_t(1));
            QCOMPARE(reader.problems()[0].line, std::uint64_t(3));
            QVERIFY(QString::fromStdString(reader.problems()[0].reason).startsWith("truncated last line"));
        }
        {  // a complete last line without its newline is simply a record
            std::istringstream in(good + "\n" + good);
            JsonlReader reader(in);
            TelemetryRecord rec;
            int n = 0;
            while (reader.next(rec)) ++n;
            QCOMPARE(n, 2);
            QCOMPARE(reader.problem_count(), std::uint64_t(0));
        }
    }

    void reader_handles_lines_across_and_beyond_its_buffer() {
        UpdateRecord big;  // one line larger than the 1 MiB read block
        for (int i = 0; i < 4000; ++i) {
            BlockDetail d;
            d.id = i;
            d.sensitivity = i * 1e-4;
            big.block_details.push_back(d);
        }
        const std::string big_line = to_json_line(big);
        QVERIFY(big_line.size() > (std::size_t(1) << 20));
        std::string text;
        const std::string normal = to_json_line(sample_update());
        for (int i = 0; i < 1000; ++i) text += normal + "\n";  // several refills, lines split across them
        text += big_line + "\n";
        for (int i = 0; i < 1000; ++i) text += normal + "\n";
        std::istringstream in(text);
        JsonlReader reader(in);
        TelemetryRecord rec;
        std::size_t n = 0;
        std::size_t details = 0;
        while (reader.next(rec)) {
            ++n;
            details += std::get<UpdateRecord>(rec).block_details.size();
        }
        QCOMPARE(n, std::size_t(2001));
        QCOMPARE(details, std::size_t(2000 * 3 + 4000));
        QCOMPARE(reader.problem_count(), std::uint64_t(0));
    }

    void reader_caps_stored_problems() {
        std::string text;
        for (int i = 0; i < 1500; ++i) text += "{bad\n";
        std::istringstream in(text);
        JsonlReader reader(in);
        TelemetryRecord rec;
        QVERIFY(!reader.next(rec));
        QCOMPARE(reader.problems().size(), JsonlReader::kMaxStoredProblems);
        QCOMPARE(reader.problem_count(), std::uint64_t(1500));
        QCOMPARE(reader.problems().back().line, std::uint64_t(1000));
    }

    // A line beyond the limit is one problem, skipped without being held; the rest is read.
    void overlong_line_is_skipped() {
        const std::string good = to_json_line(sample_update());
        const std::string huge = "{\"x\":\"" + std::string(20 << 20, 'a') + "\"}";
        for (const bool last : {false, true}) {
            std::istringstream in(good + "\n" + huge + (last ? "" : "\n" + good + "\n"));
            JsonlReader reader(in);
            TelemetryRecord rec;
            int n = 0;
            while (reader.next(rec)) ++n;
            QCOMPARE(n, last ? 1 : 2);
            QCOMPARE(reader.problem_count(), std::uint64_t(1));
            QCOMPARE(reader.problems()[0].line, std::uint64_t(2));
            QCOMPARE(reader.problems()[0].reason, "line too long: " + std::to_string(huge.size()) +
                                                      " bytes (the limit is 16777216); skipped");
            QCOMPARE(reader.lines_read(), std::uint64_t(last ? 2 : 3));
            QCOMPARE(reader.bytes_read(), std::uint64_t(in.str().size()));
        }
        // Exactly at the limit is still a line (here a bad one, for what it holds, not its size).
        std::istringstream at_limit(std::string(JsonlReader::kMaxLineBytes - 1, ' ') + "x\n" + good + "\n");
        JsonlReader reader(at_limit);
        TelemetryRecord rec;
        QVERIFY(reader.next(rec));
        QCOMPARE(reader.problem_count(), std::uint64_t(1));
        QVERIFY2(reader.problems()[0].reason.find("too long") == std::string::npos,
                 reader.problems()[0].reason.c_str());
    }

    void open_failures_name_the_path() {
        QTemporaryDir dir;
        const std::string missing = dir.filePath("nope/t.jsonl").toStdString();
        try {
            JsonlReader reader(missing);
            QFAIL("no exception");
        } catch (const std::runtime_error& e) {
            QVERIFY(QString(e.what()).contains(QString::fromStdString(missing)));
        }
        try {
            JsonlWriter writer(missing);
            QFAIL("no exception");
        } catch (const std::runtime_error& e) {
            QVERIFY(QString(e.what()).contains(QString::fromStdString(missing)));
        }
    }

    void writer_truncates_appends_and_repairs_torn_line() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("t.jsonl").toStdString();
        { std::ofstream(path) << "old content\n"; }
        RunHeader h;
        h.run_id = "w";
        EventRecord ev;
        ev.kind = "command";
        {
            JsonlWriter w(path, JsonlWriter::OpenMode::truncate, /*flush_each_line=*/true);
            w.write(TelemetryRecord(h));
            w.write(sample_update());
            QCOMPARE(w.lines_written(), std::uint64_t(2));
            // Flushed per line: visible to a reader before the writer closes.
            JsonlReader live(path);
            TelemetryRecord rec;
            int n = 0;
            while (live.next(rec)) ++n;
            QCOMPARE(n, 2);
        }
        { std::ofstream(path, std::ios::app) << "{\"step_id\": 1, \"timest"; }  // a crashed writer
        {
            JsonlWriter w(path);  // append
            w.write(ev);
            w.write(sample_update());
        }
        JsonlReader reader(path);
        TelemetryRecord rec;
        std::vector<std::size_t> kinds;
        while (reader.next(rec)) kinds.push_back(rec.index());
        QCOMPARE(kinds, (std::vector<std::size_t>{1, 0, 2, 0}));
        QCOMPARE(reader.problem_count(), std::uint64_t(1));
        QCOMPARE(reader.problems()[0].line, std::uint64_t(3));
        QCOMPARE(reader.lines_read(), std::uint64_t(5));
    }
};

QTEST_APPLESS_MAIN(TestTelemetryJsonl)
#include "test_telemetry_jsonl.moc"
