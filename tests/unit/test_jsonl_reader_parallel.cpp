// JsonlReader::parse_on_two_threads: the same records, counts and problems as the one-thread
// reader at every call of next(), whatever the batch size (core/TELEMETRY.md "Performance").
#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "../common/same_update_record.h"
#include "sp/jsonl.h"
#include "telemetry_jsonl_fixtures.h"

using namespace sp;
using namespace sp::test;
using namespace sp::test::telemetry_jsonl_fixtures;

namespace {

// Every kind of line the reader tells apart: good records of each type, blank lines, corrupt
// lines, an unknown type, a line over the limit (when `with_overlong`), a torn last line.
std::string mixed_text(bool with_overlong) {
    UpdateRecord u = sample_update();
    RunHeader h;
    h.run_id = "r1";
    std::string text = to_json_line(h) + "\n";
    for (int i = 0; i < 300; ++i) {
        u.step_id = i;
        text += to_json_line(u) + (i % 7 == 0 ? "\r\n" : "\n");
        if (i % 11 == 0) text += "garbage {\n";
        if (i % 13 == 0) text += "\n  \t\n";
        if (i % 17 == 0)
            text += R"({"type":"metrics_v9","step":1})"
                    "\n";
        if (i % 19 == 0) text += minimal_line().replace(minimal_line().find("19"), 2, "\"x\"") + "\n";
        if (i % 23 == 0)
            text += R"({"type":"event","kind":"warning","step":5,"timestamp":1.5,"message":"hot"})"
                    "\n";
        if (with_overlong && i == 150) text += "{\"x\":\"" + std::string(17 << 20, 'a') + "\"}\n";
    }
    return text + to_json_line(u).substr(0, 300);  // a writer killed mid-line
}

// What next() returned and every count after it, as text, one entry per call.
std::vector<std::string> trace(const std::string& text, std::size_t batch_bytes) {
    std::istringstream in(text);
    JsonlReader reader(in);
    if (batch_bytes > 0) reader.parse_on_two_threads(batch_bytes);
    TelemetryRecord rec;
    std::vector<std::string> out;
    bool more = true;
    while (more) {
        more = reader.next(rec);
        std::string line = more ? to_json_line(rec) : "end";
        line += " lines=" + std::to_string(reader.lines_read()) +
                " bytes=" + std::to_string(reader.bytes_read()) +
                " records=" + std::to_string(reader.records_read()) +
                " unknown=" + std::to_string(reader.unknown_type_count()) +
                " problems=" + std::to_string(reader.problem_count());
        for (const LineProblem& p : reader.problems())
            line += " [" + std::to_string(p.line) + ": " + p.reason + "]";
        out.push_back(std::move(line));
    }
    return out;
}

}  // namespace

class TestJsonlReaderParallel : public QObject {
    Q_OBJECT

  private slots:
    void same_as_one_thread_data() {
        QTest::addColumn<std::size_t>("batch_bytes");
        QTest::addColumn<bool>("with_overlong");
        QTest::newRow("a line per batch") << std::size_t(1) << false;
        QTest::newRow("a few lines per batch") << std::size_t(5000) << false;
        QTest::newRow("the default batch") << JsonlReader::kParallelBatchBytes << false;
        QTest::newRow("a line over the limit") << std::size_t(20000) << true;
    }
    void same_as_one_thread() {
        QFETCH(std::size_t, batch_bytes);
        QFETCH(bool, with_overlong);
        const std::string text = mixed_text(with_overlong);
        const std::vector<std::string> one = trace(text, 0);
        const std::vector<std::string> two = trace(text, batch_bytes);
        QVERIFY(one.size() > 300);
        QCOMPARE(two.size(), one.size());
        for (std::size_t i = 0; i < one.size(); ++i) QCOMPARE(two[i], one[i]);
        QVERIFY(one.back().find("truncated last line") != std::string::npos);
    }

    // Switched on after some records: it goes on where the one-thread reader stood.
    void switched_on_midway() {
        const std::string text = mixed_text(false);
        const std::vector<std::string> one = trace(text, 0);
        std::istringstream in(text);
        JsonlReader reader(in);
        TelemetryRecord rec;
        for (int i = 0; i < 10; ++i) QVERIFY(reader.next(rec));
        reader.parse_on_two_threads(3000);
        std::size_t n = 10;
        while (reader.next(rec)) ++n;
        QCOMPARE(n + 1, one.size());
        QCOMPARE(reader.lines_read(), std::uint64_t(std::count(text.begin(), text.end(), '\n') + 1));
        QCOMPARE(reader.bytes_read(), std::uint64_t(text.size()));
    }

    // Records come out whole and in order, each parsed from its own line (no record of another
    // batch's reused memory shows through).
    void records_are_exact() {
        UpdateRecord u = sample_update();
        std::string text;
        std::vector<UpdateRecord> written;
        for (int i = 0; i < 200; ++i) {
            u.step_id = i;
            u.block_details.resize(std::size_t(1 + i % 5), u.block_details.front());
            for (std::size_t b = 0; b < u.block_details.size(); ++b) {
                u.block_details[b].id = int(b);
                u.block_details[b].sensitivity = 0.1 * i + double(b);
            }
            written.push_back(u);
            text += to_json_line(u) + "\n";
        }
        std::istringstream in(text);
        JsonlReader reader(in);
        reader.parse_on_two_threads(2000);
        TelemetryRecord rec;
        std::size_t n = 0;
        while (reader.next(rec)) {
            QVERIFY(n < written.size());
            const std::string difference = update_record_difference(std::get<UpdateRecord>(rec), written[n]);
            QVERIFY2(difference.empty(), difference.c_str());
            ++n;
        }
        QCOMPARE(n, written.size());
    }

    // A reader given up midway, while the worker may still be parsing a batch, closes cleanly (this
    // test also runs under TSan in CI).
    void stopped_midway() {
        const std::string text = mixed_text(false);
        for (int stop_after : {0, 1, 7, 50}) {
            std::istringstream in(text);
            JsonlReader reader(in);
            reader.parse_on_two_threads(500);
            TelemetryRecord rec;
            for (int i = 0; i < stop_after; ++i) QVERIFY(reader.next(rec));
        }  // destroyed with batches split ahead and perhaps one in the worker's hands
    }
};

QTEST_APPLESS_MAIN(TestJsonlReaderParallel)
#include "test_jsonl_reader_parallel.moc"
