// Telemetry JSONL, reading: loading the original tool's records, tolerated formatting, every
// rejected line with its message, the reading rules (exact doubles, UTF-8, depth, size), the
// simdjson parser against the nlohmann oracle, and the reader's handling of
// corrupt, unknown, blank, torn and overlong lines in streams and files (with the writer). The wire
// shape and round trips are in test_telemetry_jsonl.cpp.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../common/same_update_record.h"
#include "../common/update_record_oracle.h"
#include "sp/jsonl.h"
#include "telemetry_jsonl_fixtures.h"
#include "update_record_parser.h"

using namespace sp;
using namespace sp::test::telemetry_jsonl_fixtures;

class TestTelemetryJsonlReading : public QObject {
    Q_OBJECT

  private slots:
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
        // Text that is not JSON: sp::parse_json's message (TELEMETRY.md "Reading JSON"), with its column.
        QTest::newRow("garbage") << "hello world"
                                 << "invalid JSON: column 1: syntax error";
        QTest::newRow("array") << "[1,2]"
                               << "expected a JSON object";
        QTest::newRow("truncated") << QString::fromStdString(minimal_line()).left(60)
                                   << "invalid JSON: column 61: syntax error while parsing object key - "
                                      "unexpected end of input";
        QTest::newRow("trailing") << QString::fromStdString(minimal_line() + " x") << "expected end of input";
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
        QTest::newRow("every bad key")  // each one named, not only the first
            << QString::fromStdString(minimal_line(std::string("{\"-1\": ") + kDetail0 +
                                                   ", \"0\": " + kDetail0 + ", \"99999999999\": " + kDetail0 +
                                                   ", \"abc\": {\"x\": [1]}}"))
            << "block_details: keys '-1', '99999999999', 'abc' are not non-negative integers";
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
        // Unknown fields follow sp::parse_json's rules too (checked down to their leaves).
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
        QTest::newRow("bad escape")
            << R"({"note": "\x"})"
            << "column 12, key 'note': syntax error while parsing value - invalid string: "
               "forbidden character after backslash";
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

    // The nlohmann oracle (the fuzzer's reference) agrees with the parser on every fixture line
    // that is JSON: both accept it with equal records, or both reject it.
    void oracle_agrees_with_parser() {
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
            const bool fast_ok = detail::parse_update_record(line, fast, fast_error);
            const bool dom_ok = test::update_record_from_json(j, dom, dom_error);
            QVERIFY2(fast_ok == dom_ok,
                     qPrintable(QString::fromStdString(line + "\n" + fast_error + " | " + dom_error)));
            if (!fast_ok) continue;
            ++updates;
            const std::string diff = test::update_record_difference(fast, dom);
            QVERIFY2(diff.empty(), qPrintable(QString::fromStdString(diff + " differs in " + line)));
        }
        QVERIFY(updates >= 20);
    }

    // eval_step (additive): written when set, read by the parser and the oracle, null or absent reads as
    // absent (older files: the eval loss belongs to the record's own step); a non-integer is an error.
    void eval_step_round_trips_through_parser_and_oracle() {
        UpdateRecord r = sample_update();
        r.eval_step = 1234567890000;
        const std::string line = to_json_line(r);
        QVERIFY(line.find(",\"eval_step\":1234567890000}") != std::string::npos);
        const auto check_both = [](const std::string& text, std::optional<std::int64_t> expected) {
            UpdateRecord fast, dom;
            std::string error;
            QVERIFY2(detail::parse_update_record(text, fast, error), error.c_str());
            QVERIFY2(test::update_record_from_json(nlohmann::ordered_json::parse(text), dom, error),
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
        QVERIFY(!detail::parse_update_record(with_float, out, why));
        QVERIFY2(QString::fromStdString(why).contains("field 'eval_step': expected an integer"), why.c_str());
        QVERIFY(!test::update_record_from_json(nlohmann::ordered_json::parse(with_float), out, why));
        QVERIFY2(QString::fromStdString(why).contains("field 'eval_step': expected an integer"), why.c_str());
    }

    // Doubles are read correctly rounded (TELEMETRY.md "Numbers and null"): the same bits as
    // strtod, subnormals and the largest finite double included. Beyond a double's range is an
    // error naming the key, never infinity; an underflow reads as 0, as sp::parse_json reads it.
    void doubles_read_exactly() {
        const auto with_mean = [](const std::string& number) {
            std::string line = minimal_line();
            return line.replace(line.find("0.34"), 4, number);
        };
        for (const char* text :
             {"0.30000000000000004", "0.19999999999999998", "4.9406564584124654e-324", "5e-324",
              "2.2250738585072009e-308", "2.2250738585072014e-308",
              "2.225073858507201136057409796709131975934819546351645648e-308", "1.7976931348623157e308",
              "1e308", "9007199254740993", "-1.5e-7", "1e-400", "-0", "123456789012345678901234567890",
              "0.1000000000000000055511151231257827021181583404541015625", "0.30000000000000004441",
              "-0.1000000000000000055511", "0.1234567890123456789012e-330",
              "0.0000000000000000000001234567890123456789012"}) {
            const UpdateRecord r = parse_update(with_mean(text));
            CHECK_SAME(r.mean_sensitivity, std::strtod(text, nullptr));
        }
        for (const char* text : {"1e309", "-1e309", "1.8e308", "2e400", "0.1234567890123456789012e320"}) {
            TelemetryRecord rec;
            std::string why;
            QCOMPARE(parse_record(with_mean(text), rec, why), ParseStatus::corrupt);
            const std::string expected =
                "key 'mean_sensitivity': number beyond the range of a double: " + std::string(text);
            QVERIFY2(why.find(expected) != std::string::npos, why.c_str());
        }
    }

    // Strings are UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF) and
    // their escapes are decoded; a line that breaks either is corrupt, in any string of it.
    void strings_are_utf8_with_escapes_decoded() {
        const auto with_text = [](const std::string& json_string, const std::string& where) {
            std::string detail = kDetail0;
            if (where.empty()) detail.insert(detail.size() - 1, ", \"reason_text\": " + json_string);
            std::string line = minimal_line("{\"4\": " + detail + "}");
            if (where == "unknown") line.insert(1, "\"note\": " + json_string + ", ");
            if (where == "key") line.insert(1, json_string + ": 1, ");
            return line;
        };
        const UpdateRecord r =
            parse_update(with_text("\"caf\\u00e9 \\ud83d\\ude00 \\\"\\\\\\/\\b\\f\\n\\r\\t ≥\"", ""));
        QCOMPARE(r.block_details.size(), std::size_t(1));
        QCOMPARE(r.block_details[0].reason_text, std::string("café 😀 \"\\/\b\f\n\r\t ≥"));
        for (const char* where : {"", "unknown", "key"}) {
            for (const char* bad :
                 {"\"a\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"",
                  "\"\\udc00\"", "\"\\ud800x\"", "\"\\ud800\\u0041\"", "\"\\u12\"", "\"tab\there\""}) {
                TelemetryRecord rec;
                std::string why;
                QVERIFY2(parse_record(with_text(bad, where), rec, why) == ParseStatus::corrupt,
                         qPrintable(QString("%1 in %2").arg(bad, where)));
                QVERIFY2(why.find("invalid JSON: column ") == 0, why.c_str());
            }
        }
    }

    // sp::parse_json's depth limit holds in a newer producer's fields: 64 levels of arrays and
    // objects, the record's own counted (a top-level field's value opens level 2, a detail's 4).
    void nesting_is_limited_to_64_levels() {
        const auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
        std::string top = minimal_line();
        top.insert(1, "\"x\": " + nested(63) + ", ");
        QCOMPARE(parse_update(top).step_id, std::int64_t(50));
        std::string detail = kDetail0;
        detail.insert(detail.size() - 1, ", \"x\": " + nested(61));
        QCOMPARE(parse_update(minimal_line("{\"4\": " + detail + "}")).block_details.size(), std::size_t(1));
        for (const std::string& line :
             {minimal_line().insert(1, "\"x\": " + nested(64) + ", "),
              minimal_line("{\"4\": " +
                           std::string(kDetail0).insert(std::strlen(kDetail0) - 1, ", \"x\": " + nested(62)) +
                           "}")}) {
            TelemetryRecord rec;
            std::string why;
            QCOMPARE(parse_record(line, rec, why), ParseStatus::corrupt);
            QVERIFY2(why.find("nested deeper than 64 levels") != std::string::npos, why.c_str());
        }
    }

    // A line longer than the reader's limit is refused before it is parsed (the reader never holds
    // one: overlong_line_is_skipped), so no caller makes the parser grow without end.
    void parse_record_refuses_a_line_beyond_the_limit() {
        std::string line = minimal_line();
        line.append(JsonlReader::kMaxLineBytes + 1 - line.size(), ' ');
        TelemetryRecord rec;
        std::string why;
        QCOMPARE(parse_record(line, rec, why), ParseStatus::corrupt);
        QVERIFY2(why.find("too large: 16777217 bytes") != std::string::npos, why.c_str());
        line.pop_back();  // at the limit: read
        QCOMPARE(parse_record(line, rec, why), ParseStatus::ok);
    }

    void unknown_type_is_separate() {
        TelemetryRecord rec;
        std::string why;
        QCOMPARE(parse_record(R"({"type":"snapshot","x":1})", rec, why), ParseStatus::unknown_type);
        QCOMPARE(why, std::string("unknown record type 'snapshot'"));
        // Fields a newer record type uses differently must not make it look corrupt.
        QCOMPARE(parse_record(R"({"step_id":"s-1","type":"future"})", rec, why), ParseStatus::unknown_type);
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

QTEST_APPLESS_MAIN(TestTelemetryJsonlReading)
#include "test_telemetry_jsonl_reading.moc"
