// `sp-ctl validate` and `sp-ctl summarize` end to end: counts, problems with their line numbers,
// exit codes, exact per-block step accounting, and the bundled example's simulated output.
#include <sys/stat.h>

#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_process.h"
#include "sp/jsonl.h"

namespace {

using sp::Precision;

using sp::test::Run;
using sp::test::sp_ctl;

nlohmann::json json_of(const Run& r) {
    return nlohmann::json::parse(r.out.toStdString());
}

QString write_file(QTemporaryDir& dir, const char* name, const std::string& content) {
    QString path = dir.filePath(name);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write temp file");
    f.write(content.data(), qint64(content.size()));
    return path;
}

// Three blocks of 100, 100 and 200 bytes: an int8 block 0 or 1 saves 12.5%, block 2 saves 25%.
const std::vector<std::uint64_t> kBytes = {100, 100, 200};

std::string header_line() {
    sp::RunHeader h;
    h.run_id = "run-1";
    h.producer = "test 1.0";
    for (int i = 0; i < 3; ++i)
        h.blocks.push_back({i, "blocks." + std::to_string(i), kBytes[std::size_t(i)]});
    return sp::to_json_line(h) + "\n";
}

// A consistent update record: counts, changed flags (against `prev`) and saving from the details.
sp::UpdateRecord update(std::int64_t step, const std::vector<Precision>& precs,
                        const std::vector<Precision>& prev,
                        const std::vector<double>& sens = {0.25, 0.5, 0.75}) {
    sp::UpdateRecord r;
    r.step_id = step;
    r.timestamp = 1000.0 + double(step);
    r.mode = sp::Mode::dynamic;
    double total = 0.0, moved = 0.0;
    for (std::size_t i = 0; i < precs.size(); ++i) {
        sp::BlockDetail d;
        d.id = int(i);
        d.precision = precs[i];
        d.sensitivity = sens[i];
        d.changed = precs[i] != prev[i];
        d.reason = sp::Reason::policy;
        r.block_details.push_back(d);
        (precs[i] == Precision::bf16 ? r.blocks_bf16 : r.blocks_int8)++;
        r.precision_changes += d.changed ? 1 : 0;
        total += double(kBytes[i]);
        moved += double(kBytes[i]) * (precs[i] == Precision::bf16 ? 1.0 : 0.5);
    }
    r.estimated_bandwidth_saving_pct = 100.0 * (1.0 - moved / total);
    return r;
}

std::string line(const sp::UpdateRecord& r) {
    return sp::to_json_line(r) + "\n";
}

std::string event_line(std::int64_t step, const char* kind, const char* payload) {
    return sp::to_json_line(sp::event_from_json_text(kind, step, 1000.0, payload)) + "\n";
}

std::string stats_line(std::int64_t step) {
    sp::StepStatsRecord s;
    s.step = step;
    s.timestamp = 1000.0;
    for (int i = 0; i < 3; ++i) s.blocks.push_back({i, 1.0, 0.1, 0.01, 0.0, 10, 0});
    return sp::to_json_line(s) + "\n";
}

constexpr Precision kBf16 = Precision::bf16, kInt8 = Precision::int8;

// A clean file's last line: the run ended at step 49, it was not cut.
const std::string kRunEnd =
    R"({"type":"event","kind":"run_end","step":49,"timestamp":1049.0,"reason":"completed"})"
    "\n";

// Updates at 10 {bf16,int8,bf16}, 20 {int8,bf16,bf16}, 40 {int8,int8,bf16}; the last step seen is 49.
std::string clean_file() {
    sp::UpdateRecord u10 = update(10, {kBf16, kInt8, kBf16}, {kBf16, kBf16, kBf16});
    u10.train_loss = 3.0;
    sp::UpdateRecord u20 = update(20, {kInt8, kBf16, kBf16}, {kBf16, kInt8, kBf16});
    u20.train_loss = 2.5;
    u20.eval_loss = 2.75;
    sp::UpdateRecord u40 = update(40, {kInt8, kInt8, kBf16}, {kInt8, kBf16, kBf16});
    u40.train_loss = 2.0;
    u40.measured_bandwidth_saving_pct = 20.0;
    return header_line() + stats_line(9) +
           event_line(10, "command",
                      R"({"command":{"cmd":"pin","blocks":[1],"precision":"int8"},"ok":true})") +
           line(u10) +
           event_line(15, "command",
                      R"({"command":{"cmd":"pin","blocks":[1],"precision":"int8"},"ok":false})") +
           line(u20) + event_line(20, "precision_change", R"({"block":0,"from":"bf16","to":"int8"})") +
           "{\"type\":\"from_the_future\",\"step\":30}\n" + line(u40) +
           event_line(-1, "dropped", R"({"count":3,"total":3})") + stats_line(49) + kRunEnd;
}

std::vector<std::uint64_t> problem_lines(const nlohmann::json& j) {
    std::vector<std::uint64_t> lines;
    for (const auto& p : j["problems"]) lines.push_back(p["line"].get<std::uint64_t>());
    return lines;
}

}  // namespace

class TestSpCtlLogs : public QObject {
    Q_OBJECT
  private slots:
    void validate_clean_file() {
        QTemporaryDir dir;
        const QString path = write_file(dir, "clean.jsonl", clean_file());
        Run r = sp_ctl({"validate", path});
        QVERIFY2(r.exit_code == 0, r.out + r.err);
        QVERIFY2(
            r.out.contains("update        3") && r.out.contains("command 2") && r.out.endsWith("clean\n"),
            r.out.constData());

        r = sp_ctl({"validate", path, "--json"});
        QCOMPARE(r.exit_code, 0);
        const auto j = json_of(r);
        QCOMPARE(j["lines"].get<int>(), 12);
        QCOMPARE(j["counts"]["header"].get<int>(), 1);
        QCOMPARE(j["counts"]["update"].get<int>(), 3);
        QCOMPARE(j["counts"]["event"].get<int>(), 5);
        QCOMPARE(j["counts"]["step_stats"].get<int>(), 2);
        QCOMPARE(j["counts"]["unknown_type"].get<int>(), 1);
        QCOMPARE(j["counts"]["bad_lines"].get<int>(), 0);
        QCOMPARE(j["events"]["command"].get<int>(), 2);
        QCOMPARE(j["events"]["dropped"].get<int>(), 1);
        QCOMPARE(j["events"]["precision_change"].get<int>(), 1);
        QCOMPARE(j["events"]["run_end"].get<int>(), 1);
        QCOMPARE(j["blocks"].get<int>(), 3);
        QVERIFY(j["clean"].get<bool>());
        QVERIFY(j["problems"].empty());
    }

    // A run that stops without its run_end record was cut: validate counts it as a problem at the
    // last line, summarize says so; with the record, both report how the run ended.
    void a_file_without_run_end_is_flagged_as_cut() {
        QTemporaryDir dir;
        std::string text = clean_file();
        const QString ended = write_file(dir, "ended.jsonl", text);
        text.resize(text.size() - kRunEnd.size());
        const QString cut = write_file(dir, "cut.jsonl", text);

        Run r = sp_ctl({"validate", cut});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(
            r.out.contains(cut.toUtf8() + ":11: ends at step 49 without a run_end record: the run was cut\n"),
            r.out.constData());
        r = sp_ctl({"summarize", cut});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.out.contains("end       ends at step 49 without a run_end record: the run was cut\n"),
                 r.out.constData());
        QVERIFY(json_of(sp_ctl({"summarize", cut, "--json"}))["cut"].get<bool>());

        r = sp_ctl({"summarize", ended});
        QVERIFY2(r.out.contains("end       completed at step 49\n"), r.out.constData());
        const auto j = json_of(sp_ctl({"summarize", ended, "--json"}));
        QVERIFY(!j["cut"].get<bool>());
        QCOMPARE(j["run_end"]["reason"].get<std::string>(), std::string("completed"));
        QCOMPARE(j["run_end"]["step"].get<int>(), 49);
    }

    // A file with no record at all (0 bytes, or blank lines only) is no clean, empty run: its producer
    // stopped before the header. Both readers say so and exit 1 (validate called it clean, exit 0).
    void a_file_without_any_record_is_cut_without_a_header() {
        QTemporaryDir dir;
        for (const auto& [name, text, last_line] : std::vector<std::tuple<const char*, std::string, int>>{
                 {"zero.jsonl", "", 0}, {"blank.jsonl", "\n\n", 2}, {"spaces.jsonl", " \t\r\n\n  \n", 3}}) {
            const QString path = write_file(dir, name, text);
            Run r = sp_ctl({"validate", path});
            QVERIFY2(r.exit_code == 1, name);
            const QByteArray problem =
                path.toUtf8() + ":" + QByteArray::number(last_line) + ": cut: no header\n";
            QVERIFY2(r.out.contains(problem) && r.out.endsWith("1 problem(s)\n"), r.out.constData());
            const auto j = json_of(sp_ctl({"validate", path, "--json"}));
            QVERIFY(!j["clean"].get<bool>());
            QCOMPARE(j["problems"][0]["reason"].get<std::string>(), std::string("cut: no header"));
            r = sp_ctl({"summarize", path});
            QVERIFY2(r.exit_code == 1, name);
            QCOMPARE(r.err, "sp-ctl summarize: '" + path.toUtf8() + "' holds no record: cut: no header\n");
            QVERIFY(r.out.isEmpty());
        }
    }

    void validate_original_tool_format() {
        QTemporaryDir dir;
        const QString path = write_file(
            dir, "seed.jsonl",
            R"({"step_id":10,"timestamp":1717171717.25,"blocks_bf16":48,"blocks_int8":0,"mean_sensitivity":0.5,"max_sensitivity":0.7,"min_sensitivity":0.2,"precision_changes":0,"estimated_bandwidth_saving_pct":0.0,"block_details":{}})"
            "\n"
            R"({"step_id":20,"timestamp":1717171727.25,"blocks_bf16":19,"blocks_int8":29,"mean_sensitivity":0.4,"max_sensitivity":0.7,"min_sensitivity":0.1,"precision_changes":29,"estimated_bandwidth_saving_pct":30.208333333333336,"block_details":{}})"
            "\n");
        Run r = sp_ctl({"validate", path, "--json"});
        QVERIFY2(r.exit_code == 0, r.out.constData());
        QCOMPARE(json_of(r)["counts"]["update"].get<int>(), 2);
        r = sp_ctl({"summarize", path, "--json"});
        QCOMPARE(r.exit_code, 0);
        const auto j = json_of(r);
        QCOMPARE(j["updates"].get<int>(), 2);
        QVERIFY(j["blocks"].empty());
        QVERIFY(j["run_id"].is_null());
        // 30.2083...% holds for the last step only (20), 0% for steps 10..19.
        QCOMPARE(j["totals"]["estimated_saving_pct"].get<double>(), 30.208333333333336 / 11.0);
    }

    void validate_reports_corrupt_and_truncated_lines() {
        QTemporaryDir dir;
        const std::string text =
            header_line() + line(update(10, {kBf16, kInt8, kBf16}, {kBf16, kBf16, kBf16})) +
            "this is not json\n" + line(update(20, {kBf16, kInt8, kBf16}, {kBf16, kInt8, kBf16})) + "\n" +
            "{\"step_id\":30,\"timest";
        const QString path = write_file(dir, "corrupt.jsonl", text);
        Run r = sp_ctl({"validate", path});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(
            r.out.contains("corrupt.jsonl:3: ") && r.out.contains("corrupt.jsonl:6: truncated last line"),
            r.out.constData());
        r = sp_ctl({"validate", path, "--json"});
        QCOMPARE(r.exit_code, 1);
        const auto j = json_of(r);
        QCOMPARE(j["counts"]["bad_lines"].get<int>(), 2);
        QCOMPARE(j["counts"]["update"].get<int>(), 2);
        // The torn last line, and the run that therefore stops without its run_end.
        QCOMPARE(problem_lines(j), (std::vector<std::uint64_t>{3, 6, 6}));
        QCOMPARE(j["problems"][2]["reason"].get<std::string>(),
                 std::string("ends at step 20 without a run_end record: the run was cut"));
        QVERIFY(!j["clean"].get<bool>());

        // summarize skips them, says so, and still succeeds.
        r = sp_ctl({"summarize", path});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.err.contains("skipped 2 bad line(s)") && r.err.contains("corrupt.jsonl:3:"),
                 r.err.constData());
    }

    // Issue 30, defect 8: validate called step statistics clean that simulate rejects. Both now
    // judge them by the simulator's rules (tests/fuzz/regressions/fuzz_simulator holds the lines).
    void validate_judges_step_statistics_by_simulates_rules() {
        QTemporaryDir dir;
        const std::string ok = R"({"id":0,"l2_norm":1,"max_abs":1,"variance":1})";
        const std::pair<std::string, const char*> cases[] = {
            {R"({"step":0,"blocks":[{"id":0,"max_abs":1,"variance":1}]})", "missing field 'l2_norm'"},
            {R"({"step":0,"blocks":[{"id":0,"l2_norm":1,"max_abs":1,"variance":-1}]})",
             "field 'variance': must be >= 0"},
            {R"({"step":0,"blocks":[{"id":0,"l2_norm":1,"max_abs":1,"variance":1,"numel":-1}]})",
             "field 'numel': out of range"},
            {R"({"step":5,"blocks":[)" + ok + "]}\n" + R"({"step":3,"blocks":[)" + ok + "]}",
             "step 3 comes after step 5"},
            // The reader's own rule catches this one first ("integer out of range").
            {R"({"step":9223372036854775808,"blocks":[)" + ok + "]}", "field 'step': "},
        };
        for (const auto& [text, reason] : cases) {
            const QString path = write_file(dir, "stats.jsonl", text + "\n");
            const Run validate = sp_ctl({"validate", path});
            QCOMPARE(validate.exit_code, 1);
            QVERIFY2(validate.out.contains(reason), validate.out.constData());
            const Run simulate = sp_ctl({"simulate", "--stats", path});
            QCOMPARE(simulate.exit_code, 2);
            QVERIFY2(simulate.err.contains(reason), simulate.err.constData());
        }
        const QString clean = write_file(dir, "clean.jsonl", R"({"step":0,"blocks":[)" + ok + "]}\n");
        QCOMPARE(sp_ctl({"validate", clean}).exit_code, 0);
        QCOMPARE(sp_ctl({"simulate", "--stats", clean}).exit_code, 0);
        // An update record's step is a training step: never negative.
        const QString update = write_file(
            dir, "update.jsonl",
            R"({"step_id":-9223372036854775808,"timestamp":1,"blocks_bf16":0,"blocks_int8":0,"mean_sensitivity":0,"max_sensitivity":0,"min_sensitivity":0,"precision_changes":0,"estimated_bandwidth_saving_pct":0,"block_details":{}})"
            "\n");
        const Run negative = sp_ctl({"validate", update});
        QCOMPARE(negative.exit_code, 1);
        QVERIFY2(negative.out.contains("step_id -9223372036854775808 is negative"), negative.out.constData());
    }

    // The line that killed every dashboard following a run (issue 30, defect 1): a precision_change
    // whose block is not a block id. validate names it; the dashboard logs it (test_run_session).
    void validate_flags_a_precision_change_without_a_block_id() {
        QTemporaryDir dir;
        std::string text = clean_file();
        const std::string bad =
            R"({"type":"event","kind":"precision_change","step":40,"timestamp":1717171720.5,"block":null,"from":"bf16","to":"int8"})";
        text.insert(text.size() - kRunEnd.size(), bad + "\n");
        const QString path = write_file(dir, "bad_block.jsonl", text);
        Run r = sp_ctl({"validate", path});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(
            r.out.contains(path.toUtf8() +
                           ":12: precision_change event: 'block' must be a non-negative integer, got null"),
            r.out.constData());
        for (const char* block : {"\"3\"", "[3]", "{}", "-1", "4294967296", "1.5"}) {
            std::string other = clean_file();
            std::string line = bad;
            line.replace(line.find("null"), 4, block);
            other.insert(other.size() - kRunEnd.size(), line + "\n");
            r = sp_ctl({"validate", write_file(dir, "other.jsonl", other)});
            QVERIFY2(r.exit_code == 1 && r.out.contains("'block' must be a non-negative integer"), block);
        }
    }

    // Every block a record names outside the layout is a problem of its own: events of each kind that
    // names blocks (validate read only update details), and every block_details key that is no block id
    // (only the first was named). A refused command may name a block the run lacks: why it was refused.
    void validate_flags_every_block_outside_the_layout() {
        QTemporaryDir dir;
        std::string text = clean_file();
        const std::string events[] = {
            event_line(40, "precision_change", R"({"block":99,"from":"bf16","to":"int8"})"),
            event_line(40, "pin_release", R"({"trigger":"expired","blocks":[1,7,8]})"),
            event_line(40, "rollback", R"({"trigger":"spike","blocks":[5]})"),
            event_line(40, "map_adopted", R"({"blocks":[0,6]})"),
            event_line(40, "command",
                       R"({"command":{"cmd":"pin","blocks":[4],"precision":"int8"},"ok":true})"),
            event_line(40, "command",
                       R"({"command":{"cmd":"pin","blocks":[9],"precision":"int8"},"ok":false})"),
        };
        std::string detail = line(update(45, {kInt8, kInt8, kBf16}, {kInt8, kInt8, kBf16}));
        for (const auto& [id, key] :
             {std::pair{"0", "-1"}, std::pair{"1", "99999999999"}, std::pair{"2", "abc"}}) {
            const std::string old_key = "\"" + std::string(id) + "\":{\"precision\"";
            detail.replace(detail.find(old_key), old_key.size(),
                           "\"" + std::string(key) + "\":{\"precision\"");
        }
        for (const std::string& e : events) text.insert(text.size() - kRunEnd.size(), e);
        text.insert(text.size() - kRunEnd.size(), detail);
        const QString path = write_file(dir, "outside.jsonl", text);
        const Run r = sp_ctl({"validate", path, "--max-problems", "100"});
        QCOMPARE(r.exit_code, 1);
        const QByteArray at = path.toUtf8() + ":";
        for (const QByteArray& expected :
             {at + "12: precision_change event: block 99 is not in the header's layout\n",
              at + "13: pin_release event: block 7 is not in the header's layout\n",
              at + "13: pin_release event: block 8 is not in the header's layout\n",
              at + "14: rollback event: block 5 is not in the header's layout\n",
              at + "15: map_adopted event: block 6 is not in the header's layout\n",
              at + "16: command event: block 4 is not in the header's layout\n",
              at + "18: block_details: keys '-1', '99999999999', 'abc' are not non-negative integers\n",
              QByteArray("\n7 problem(s)\n")})
            QVERIFY2(r.out.contains(expected), (expected + "missing in\n" + r.out.right(700)).constData());
    }

    // A step-statistics line with a number beyond double range is one bad line, not an abort.
    void out_of_range_statistic_is_a_bad_line() {
        QTemporaryDir dir;
        const std::string text =
            header_line() + line(update(10, {kBf16, kInt8, kBf16}, {kBf16, kBf16, kBf16})) +
            R"({"step":10,"blocks":[{"id":0,"l2_norm":1e309,"max_abs":1,"variance":1}]})" + "\n" +
            line(update(20, {kBf16, kInt8, kBf16}, {kBf16, kInt8, kBf16}));
        const QString path = write_file(dir, "huge.jsonl", text);
        Run r = sp_ctl({"validate", path});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.out.contains(
                     "huge.jsonl:3: invalid JSON: column 40, key 'blocks[0].l2_norm': number beyond the "
                     "range of a double: 1e309"),
                 r.out.constData());
        r = sp_ctl({"summarize", path});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.err.contains("skipped 1 bad line(s)"), r.err.constData());
    }

    void validate_reports_inconsistent_records() {
        sp::UpdateRecord wrong_sum = update(20, {kBf16, kInt8, kBf16}, {kBf16, kInt8, kBf16});
        wrong_sum.blocks_bf16 += 1;
        sp::UpdateRecord wrong_changes = update(30, {kBf16, kInt8, kBf16}, {kBf16, kInt8, kBf16});
        wrong_changes.precision_changes = 2;
        sp::UpdateRecord wrong_saving = update(40, {kBf16, kInt8, kBf16}, {kBf16, kInt8, kBf16});
        wrong_saving.estimated_bandwidth_saving_pct += 0.5;
        sp::UpdateRecord stranger = update(50, {kBf16, kInt8, kBf16}, {kBf16, kInt8, kBf16});
        sp::BlockDetail extra;
        extra.id = 7;
        stranger.block_details.push_back(extra);  // bf16, so the counts and the saving still agree
        stranger.blocks_bf16 += 1;
        sp::UpdateRecord swapped = update(60, {kInt8, kBf16, kBf16}, {kBf16, kInt8, kBf16});
        std::swap(swapped.blocks_bf16, swapped.blocks_int8);
        const std::string text = header_line() +
                                 line(update(10, {kBf16, kInt8, kBf16}, {kBf16, kBf16, kBf16})) +
                                 line(update(5, {kBf16, kInt8, kBf16}, {kBf16, kInt8, kBf16})) +
                                 line(wrong_sum) + line(wrong_changes) + line(wrong_saving) + line(stranger) +
                                 header_line() + line(swapped) + kRunEnd;
        QTemporaryDir dir;
        const QString path = write_file(dir, "inconsistent.jsonl", text);
        Run r = sp_ctl({"validate", path, "--json"});
        QCOMPARE(r.exit_code, 1);
        const auto j = json_of(r);
        QCOMPARE(j["counts"]["bad_lines"].get<int>(), 0);
        QCOMPARE(j["counts"]["inconsistencies"].get<int>(), 7);
        QCOMPARE(problem_lines(j), (std::vector<std::uint64_t>{3, 4, 5, 6, 7, 8, 9}));

        r = sp_ctl({"validate", path});
        QCOMPARE(r.exit_code, 1);
        for (const char* expected :
             {"inconsistent.jsonl:3: step_id 5 does not increase", "inconsistent.jsonl:4: blocks_bf16+",
              "inconsistent.jsonl:5: precision_changes 2 but 0", "inconsistent.jsonl:6: estimated_bandwidth",
              "inconsistent.jsonl:7: block 7 is not in the header's layout",
              "inconsistent.jsonl:8: another header", "inconsistent.jsonl:9: precision counts"}) {
            QVERIFY2(r.out.contains(expected), (QByteArray(expected) + " missing in\n" + r.out).constData());
        }
        r = sp_ctl({"validate", path, "--max-problems", "2"});
        QCOMPARE(r.exit_code, 1);
        QVERIFY(r.out.contains("inconsistent.jsonl:4:") && !r.out.contains("inconsistent.jsonl:5:"));
        QVERIFY2(r.out.contains("5 more problem(s) not shown"), r.out.constData());

        // A header after another record.
        const QString late = write_file(
            dir, "late.jsonl",
            line(update(10, {kBf16, kInt8, kBf16}, {kBf16, kBf16, kBf16})) + header_line() + kRunEnd);
        r = sp_ctl({"validate", late, "--json"});
        QCOMPARE(r.exit_code, 1);
        QCOMPARE(problem_lines(json_of(r)), (std::vector<std::uint64_t>{2}));
    }

    void usage_errors_exit_2() {
        QTemporaryDir dir;
        const QString ok = write_file(dir, "ok.jsonl", clean_file());
        const QString missing = dir.filePath("missing.jsonl");
        for (const char* command : {"validate", "summarize"}) {
            Run r = sp_ctl({command, missing});
            QCOMPARE(r.exit_code, 2);
            QVERIFY2(r.err.contains(missing.toUtf8()), r.err.constData());
            r = sp_ctl({command, ok, "--bogus"});
            QCOMPARE(r.exit_code, 2);
            QVERIFY2(r.err.contains("unknown option '--bogus'"), r.err.constData());
            r = sp_ctl({command});
            QCOMPARE(r.exit_code, 2);
            r = sp_ctl({command, ok, ok});
            QCOMPARE(r.exit_code, 2);
            r = sp_ctl({command, dir.path()});
            QCOMPARE(r.exit_code, 2);
            QVERIFY2(r.err.contains("directory"), r.err.constData());
            r = sp_ctl({command, "/dev/zero"});  // it would never end
            QCOMPARE(r.exit_code, 2);
            QVERIFY2(r.err.contains("'/dev/zero': it is a character device"), r.err.constData());
            r = sp_ctl({command, "--help"});
            QCOMPARE(r.exit_code, 0);
            QVERIFY(r.out.startsWith("usage: sp-ctl " + QByteArray(command)));
        }
        Run r = sp_ctl({"validate", ok, "--max-problems", "many"});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("--max-problems"), r.err.constData());
        r = sp_ctl({"validate", ok, "--max-problems"});
        QCOMPARE(r.exit_code, 2);
    }

    // A FIFO (a named pipe; `<(zcat run.jsonl.gz)` is one too) is read once, to its end: the same
    // counts, problems and exit code as the regular file, without waiting for a writer that is gone.
    // The second reading validate gives step statistics (simulate's rules) is left out, and said.
    void a_fifo_is_read_once_to_its_end() {
        QTemporaryDir dir;
        const QString file = write_file(dir, "run.jsonl", clean_file() + "garbage {\n");
        const QString fifo = dir.filePath("run.fifo");
        QCOMPARE(::mkfifo(qPrintable(fifo), 0600), 0);
        for (const char* command : {"validate", "summarize"}) {
            const Run want = sp_ctl({command, file});
            QProcess writer;  // blocks in its open until sp-ctl opens the FIFO
            writer.start(QStringLiteral("sh"),
                         {QStringLiteral("-c"), QStringLiteral("cat \"$0\" > \"$1\""), file, fifo});
            QVERIFY(writer.waitForStarted());
            const Run got = sp_ctl({command, fifo});
            const bool wrote = writer.waitForFinished(30000);  // a reader that never opened leaves it blocked
            if (!wrote) writer.kill();
            QVERIFY2(wrote, command);
            QCOMPARE(got.exit_code, want.exit_code);
            QCOMPARE(QString(got.out).replace(fifo, "F"), QString(want.out).replace(file, "F"));
            if (std::string(command) == "validate")
                QVERIFY2(got.err.contains("is a pipe, read once: its step statistics were not checked"),
                         got.err.constData());
        }
    }

    void summarize_counts_steps_switches_and_savings() {
        QTemporaryDir dir;
        const QString path = write_file(dir, "clean.jsonl", clean_file());
        Run r = sp_ctl({"summarize", path, "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(r.err.isEmpty());
        const auto j = json_of(r);
        QCOMPARE(j["run_id"].get<std::string>(), std::string("run-1"));
        QCOMPARE(j["producer"].get<std::string>(), std::string("test 1.0"));
        QCOMPARE(j["first_step"].get<int>(), 10);
        QCOMPARE(j["last_update_step"].get<int>(), 40);
        QCOMPARE(j["last_step"].get<int>(), 49);  // the stats line; the dropped event's -1 does not count
        QCOMPARE(j["updates"].get<int>(), 3);
        QCOMPARE(j["block_count"].get<int>(), 3);
        const auto& blocks = j["blocks"];
        QCOMPARE(int(blocks.size()), 3);
        // block 0: bf16 10..19, int8 20..49; block 1: int8 10..19, bf16 20..39, int8 40..49.
        const int expected[3][3] = {{10, 30, 1}, {20, 20, 2}, {40, 0, 0}};  // bf16, int8, switches
        for (int b = 0; b < 3; ++b) {
            QCOMPARE(blocks[b]["name"].get<std::string>(), "blocks." + std::to_string(b));
            QCOMPARE(blocks[b]["steps"]["bf16"].get<int>(), expected[b][0]);
            QCOMPARE(blocks[b]["steps"]["int8"].get<int>(), expected[b][1]);
            QCOMPARE(blocks[b]["steps"]["fp8_e4m3"].get<int>(), 0);
            QCOMPARE(blocks[b]["switches"].get<int>(), expected[b][2]);
        }
        QCOMPARE(blocks[0]["final"].get<std::string>(), std::string("int8"));
        QCOMPARE(blocks[1]["final"].get<std::string>(), std::string("int8"));
        QCOMPARE(blocks[2]["final"].get<std::string>(), std::string("bf16"));
        QCOMPARE(blocks[1]["mean_sensitivity"].get<double>(), 0.5);
        const auto& t = j["totals"];
        // 12.5% for 10 steps, 12.5% for 20, 25% for 10: exactly 15.625.
        QCOMPARE(t["estimated_saving_pct"].get<double>(), 15.625);
        QCOMPARE(t["measured_saving_pct"].get<double>(), 20.0);
        QCOMPARE(t["final_train_loss"].get<double>(), 2.0);
        QCOMPARE(t["final_eval_loss"].get<double>(), 2.75);
        QCOMPARE(t["commands"].get<int>(), 2);
        QCOMPARE(t["commands_rejected"].get<int>(), 1);
        QCOMPARE(t["dropped_records"].get<int>(), 3);
        QCOMPARE(t["events"]["precision_change"].get<int>(), 1);

        r = sp_ctl({"summarize", path});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.out.contains("run-1") && r.out.contains("estimated 15.62%") && r.out.contains("blocks.1"),
                 r.out.constData());
    }

    void summarize_without_updates_exits_1() {
        QTemporaryDir dir;
        const QString path = write_file(dir, "empty.jsonl", header_line() + stats_line(1));
        const Run r = sp_ctl({"summarize", path});
        QCOMPARE(r.exit_code, 1);
        QVERIFY2(r.err.contains("no update record"), r.err.constData());
    }

    void simulated_example_validates_and_summarizes() {
        const QString example = QStringLiteral(SP_SOURCE_DIR "/resources/example/");
        Run r = sp_ctl({"simulate", "--config", example + "config.json", "--stats", example + "stats.jsonl",
                        "--calibration", example + "calibration.json"});
        QCOMPARE(r.exit_code, 0);
        QTemporaryDir dir;
        const QString path = write_file(dir, "sim.jsonl", r.out.toStdString());

        r = sp_ctl({"validate", path, "--json"});
        QVERIFY2(r.exit_code == 0, r.out.constData());
        auto j = json_of(r);
        QCOMPARE(j["blocks"].get<int>(), 48);
        QCOMPARE(j["counts"]["update"].get<int>(), 19);

        r = sp_ctl({"summarize", path, "--json"});
        QCOMPARE(r.exit_code, 0);
        j = json_of(r);
        QCOMPARE(j["updates"].get<int>(), 19);
        QCOMPARE(j["block_count"].get<int>(), 48);
        QCOMPARE(int(j["blocks"].size()), 48);
        for (const auto& b : j["blocks"]) {  // updates 10..190: every block is accounted for 181 steps
            QCOMPARE(b["steps"]["bf16"].get<int>() + b["steps"]["int8"].get<int>(), 181);
        }
        QVERIFY(j["blocks"][10]["switches"].get<int>() >= 1);  // int8, promoted to bf16 at step 100

        // The step-weighted saving, recomputed from the records: 10 steps each, 1 for the last update.
        const QList<QByteArray> lines =
            QByteArray(sp_ctl({"simulate", "--config", example + "config.json", "--stats",
                               example + "stats.jsonl", "--calibration", example + "calibration.json"})
                           .out)
                .trimmed()
                .split('\n');
        double sum = 0.0;
        for (int i = 0; i < lines.size(); ++i) {
            const double saving =
                nlohmann::json::parse(lines[i].toStdString())["estimated_bandwidth_saving_pct"].get<double>();
            sum += saving * (i + 1 < lines.size() ? 10.0 : 1.0);
        }
        QCOMPARE(j["totals"]["estimated_saving_pct"].get<double>(), sum / 181.0);
    }
};

QTEST_GUILESS_MAIN(TestSpCtlLogs)
#include "test_sp_ctl_logs.moc"
