// TelemetrySink's failures: an unopenable path throws naming it, write errors are loud and
// counted, writes resume with the loss written where it happened, a reader that goes away is a
// write error and not a signal, and a malformed record becomes a warning event; none of it reaches
// the training thread. Ordering and the full queue are in test_telemetry_sink.cpp.
#include <QFileInfo>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <csignal>
#include <mutex>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sp/jsonl.h"
#include "telemetry_sink.h"
#include "telemetry_sink_fixtures.h"

using namespace sp;
using sp::agent::TelemetrySink;
using namespace sp::test::telemetry_sink_fixtures;

namespace {

// Collects the sink's warning lines (they go to standard error by default).
struct Warnings {
    std::mutex mutex;
    std::vector<std::string> lines;
    TelemetrySink::Warn sink() {
        return [this](const std::string& line) {
            std::lock_guard<std::mutex> lock(mutex);
            lines.push_back(line);
        };
    }
    std::vector<std::string> taken() {
        std::lock_guard<std::mutex> lock(mutex);
        return lines;
    }
};

// Retries at every record, so that the tests need no sleeping.
TelemetrySink::Options quick_retry(std::size_t capacity, Warnings& warnings) {
    TelemetrySink::Options o;
    o.capacity = capacity;
    o.retry_interval = std::chrono::milliseconds(0);
    o.warn = warnings.sink();
    return o;
}

}  // namespace

class TestTelemetrySinkErrors : public QObject {
    Q_OBJECT

  private slots:
    void unopenable_path_throws_naming_it();
    void write_errors_are_loud_and_counted();
    void writes_resume_and_the_loss_is_written_where_it_happened();
    void reader_gone_is_a_write_error_not_a_signal();
    void malformed_record_becomes_a_warning_event();
};

void TestTelemetrySinkErrors::unopenable_path_throws_naming_it() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("no/such/dir/t.jsonl").toStdString();
    try {
        TelemetrySink sink(path);
        QFAIL("expected std::runtime_error");
    } catch (const std::runtime_error& ex) {
        QVERIFY2(std::string(ex.what()).find(path) != std::string::npos, ex.what());
    }
}

void TestTelemetrySinkErrors::write_errors_are_loud_and_counted() {
    // /dev/full accepts open(); every write fails with ENOSPC, which is how a full disk shows up.
    if (::access("/dev/full", W_OK) != 0) QSKIP("/dev/full is not available");
    Warnings warnings;
    {
        TelemetrySink sink("/dev/full", quick_retry(8, warnings));
        QVERIFY(sink.error().empty());
        QVERIFY(sink.push(update(1)));
        sink.drain();
        const std::string error = sink.error();
        QVERIFY2(error.find("/dev/full") != std::string::npos &&
                     error.find("No space left on device") != std::string::npos,
                 error.c_str());
        // The first failure is announced at once, naming the file and the reason.
        std::vector<std::string> lines = warnings.taken();
        QCOMPARE(lines.size(), std::size_t(1));
        QVERIFY2(lines[0].find("'/dev/full'") != std::string::npos &&
                     lines[0].find("No space left on device") != std::string::npos &&
                     lines[0].find("records are lost until writes succeed again") != std::string::npos,
                 lines[0].c_str());

        // Training goes on: records are still accepted, tried and counted; no second warning.
        for (int i = 0; i < 100; ++i) {
            QVERIFY(sink.push(update(2 + i)));
            if (i % 4 == 3) sink.drain();  // keep the queue short: every loss here is a write error
        }
        sink.drain();
        const TelemetrySink::Health h = sink.health();
        QCOMPARE(h.offered, std::uint64_t(101));
        QCOMPARE(h.lost, std::uint64_t(101));
        QCOMPARE(h.lost_to_errors, std::uint64_t(101));
        QVERIFY(h.failing);
        QCOMPARE(h.failures, std::uint64_t(1));
        QCOMPARE(sink.written(), std::uint64_t{0});
        QCOMPARE(warnings.taken().size(), std::size_t(1));
        QVERIFY(sink.error() == error);  // the first error stays
    }
    // At the end, the count of the whole run.
    const std::vector<std::string> lines = warnings.taken();
    QCOMPARE(lines.size(), std::size_t(2));
    QVERIFY2(lines[1].find("101 of 101 records were not written to '/dev/full' (101 to write errors") !=
                 std::string::npos,
             lines[1].c_str());
}

// A file size limit (RLIMIT_FSIZE) makes writes fail with EFBIG until it is raised again: a
// full disk that gets space back, without needing one.
void TestTelemetrySinkErrors::writes_resume_and_the_loss_is_written_where_it_happened() {
    struct rlimit original {};
    QCOMPARE(::getrlimit(RLIMIT_FSIZE, &original), 0);
    if (original.rlim_max != RLIM_INFINITY && original.rlim_max < (1 << 20)) QSKIP("file size limit too low");
    const auto restore = qScopeGuard([&] { ::setrlimit(RLIMIT_FSIZE, &original); });
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // else exceeding the limit kills us
    const auto restore_signal = qScopeGuard([&] { std::signal(SIGXFSZ, old_handler); });

    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("t.jsonl");
    Warnings warnings;
    {
        TelemetrySink sink(path.toStdString(), quick_retry(64, warnings));
        QVERIFY(sink.push(update(1)));
        sink.drain();
        const off_t size = QFileInfo(path).size();
        QVERIFY(size > 0);
        struct rlimit tight = original;
        tight.rlim_cur = rlim_t(size) + 10;  // room for a fragment of the next line, not the line
        QCOMPARE(::setrlimit(RLIMIT_FSIZE, &tight), 0);
        for (int step = 2; step <= 4; ++step) {
            QVERIFY(sink.push(update(step)));
            sink.drain();
        }
        QVERIFY(sink.health().failing);
        QCOMPARE(::setrlimit(RLIMIT_FSIZE, &original), 0);
        QVERIFY(sink.push(update(5)));
        sink.drain();
        const TelemetrySink::Health h = sink.health();
        QVERIFY(!h.failing);
        QCOMPARE(h.lost, std::uint64_t(3));
        QCOMPARE(h.lost_to_errors, std::uint64_t(3));
        const std::vector<std::string> lines = warnings.taken();
        QCOMPARE(lines.size(), std::size_t(2));
        QVERIFY2(lines[0].find("File too large") != std::string::npos, lines[0].c_str());
        QVERIFY2(lines[1].find("works again; 3 records were lost meanwhile") != std::string::npos,
                 lines[1].c_str());
    }
    // The file: record 1, the fragment the failed write left (one bad line, not two), the
    // dropped event with the count and the reason, record 5.
    const ReadBack back = read_records(read_file(path));
    QCOMPARE(back.problems.size(), std::size_t(1));
    QCOMPARE(back.records.size(), std::size_t(3));
    QCOMPARE(std::get<UpdateRecord>(back.records[0]).step_id, std::int64_t{1});
    const auto& dropped = std::get<EventRecord>(back.records[1]);
    QCOMPARE(QString::fromStdString(dropped.kind), QStringLiteral("dropped"));
    QCOMPARE(dropped.step, std::int64_t{5});
    const auto& j = std::get<DroppedPayload>(dropped.payload);
    QCOMPARE(j.count, std::uint64_t{3});
    QCOMPARE(j.total, std::optional<std::uint64_t>(3));
    QCOMPARE(j.write_errors, std::optional<std::uint64_t>(3));
    QVERIFY2(j.error.value_or("").find("File too large") != std::string::npos, j.error.value_or("").c_str());
    QCOMPARE(std::get<UpdateRecord>(back.records[2]).step_id, std::int64_t{5});
}

void TestTelemetrySinkErrors::reader_gone_is_a_write_error_not_a_signal() {
    // Without care this kills the process with SIGPIPE; the sink turns it into error().
    const Watchdog watchdog(std::chrono::seconds(60));
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("t.fifo").toStdString();
    QCOMPARE(::mkfifo(path.c_str(), 0600), 0);
    FifoReader reader(path);
    QVERIFY(reader.is_open());
    Warnings warnings;
    TelemetrySink sink(path, quick_retry(8, warnings));
    reader.close_now();
    QVERIFY(sink.push(update(1)));
    sink.drain();
    QVERIFY2(sink.error().find("Broken pipe") != std::string::npos, sink.error().c_str());
    QCOMPARE(sink.dropped(), std::uint64_t{1});
    QVERIFY(sink.push(update(2)));  // still accepted, and counted when its write fails too
    sink.drain();
    QCOMPARE(sink.dropped(), std::uint64_t{2});
    QCOMPARE(warnings.taken().size(), std::size_t(1));
}

void TestTelemetrySinkErrors::malformed_record_becomes_a_warning_event() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("t.jsonl");
    {
        TelemetrySink sink(path.toStdString(), 8);
        RunHeader bad = header();
        bad.config_json = "[1, 2]";  // not an object: to_json_line throws
        QVERIFY(sink.push(bad));
        EventRecord no_kind;  // no kind: to_json_line throws
        no_kind.step = 7;
        QVERIFY(sink.push(no_kind));
        QVERIFY(sink.push(update(8)));
        sink.drain();
        QVERIFY(sink.error().empty());  // not an I/O error: the sink keeps writing
        QCOMPARE(sink.dropped(), std::uint64_t{0});
        QCOMPARE(sink.written(), std::uint64_t{3});
    }
    const ReadBack back = read_records(read_file(path));
    QVERIFY(back.problems.empty());
    QCOMPARE(back.records.size(), std::size_t{3});
    const auto& w1 = std::get<EventRecord>(back.records[0]);
    QCOMPARE(QString::fromStdString(w1.kind), QStringLiteral("warning"));
    QCOMPARE(w1.step, std::int64_t{-1});
    QVERIFY(std::get<WarningPayload>(w1.payload).message.value_or("").find("not written") !=
            std::string::npos);
    const auto& w2 = std::get<EventRecord>(back.records[1]);
    QCOMPARE(QString::fromStdString(w2.kind), QStringLiteral("warning"));
    QCOMPARE(w2.step, std::int64_t{7});
    QCOMPARE(std::get<UpdateRecord>(back.records[2]).step_id, std::int64_t{8});
}

QTEST_APPLESS_MAIN(TestTelemetrySinkErrors)
#include "test_telemetry_sink_errors.moc"
