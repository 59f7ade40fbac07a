// TelemetrySink: every record kind reaches the file in order, the destructor writes what is queued,
// and a full queue drops (counted, never blocking, reported in the file where the gap is). Write
// errors and malformed records, which never reach the training thread, are in
// test_telemetry_sink_errors.cpp.
//
// The full-queue tests stall the writer thread deterministically without test hooks: the sink
// writes into a FIFO that the test does not read yet, and its first record is larger than a pipe
// can hold, so the writer blocks inside write() with its queue empty.
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "sp/jsonl.h"
#include "telemetry_sink.h"
#include "telemetry_sink_fixtures.h"

using namespace sp;
using sp::agent::TelemetrySink;
using namespace sp::test::telemetry_sink_fixtures;

namespace {

StepStatsRecord step_stats(std::int64_t step) {
    StepStatsRecord s;
    s.step = step;
    s.timestamp = 1717171900.25;
    BlockGradStats b;
    b.block_id = 0;
    b.l2_norm = 1.5;
    b.max_abs = 0.25;
    b.variance = 0.125;
    b.mean = -0.5;
    b.numel = 4096;
    s.blocks = {b};
    return s;
}

// An event larger than any pipe buffer (at most /proc/sys/fs/pipe-max-size, 1 MiB by default; 64 KiB
// unless someone enlarges it): the writer cannot finish it until the test reads.
EventRecord big_event() {
    return make_event(0, "big", {{"blob", std::string(4u << 20, 'x')}});
}

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start < text.size()) {
        const std::size_t end = text.find('\n', start);
        if (end == std::string::npos) {
            lines.push_back(text.substr(start));  // a torn last line would show up here
            break;
        }
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

std::string marker_line_end(const std::string& id) {
    return "\"id\":\"" + id + "\"}\n";
}

}  // namespace

class TestTelemetrySink : public QObject {
    Q_OBJECT

  private slots:
    void writes_every_kind_in_order();
    void destructor_writes_everything_queued();
    void full_queue_drops_without_blocking_and_reports_the_gap();
    void drops_at_the_end_are_reported_at_shutdown();
    void decisions_are_kept_when_the_queue_is_full();
    void waiting_records_are_bounded_in_bytes();
    void concurrent_producers_account_for_every_record();
    void a_shared_record_is_written_as_its_line();
};

// The agent gives one record to this sink and to its PUB socket: whichever serializes it first, the
// file holds the very line the stream sent.
void TestTelemetrySink::a_shared_record_is_written_as_its_line() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("t.jsonl");
    const SharedRecord first = share_record(update(30));
    const SharedRecord second = share_record(update(40));
    const std::string& streamed = second->line();  // the I/O thread asked first for this one
    {
        TelemetrySink sink(path.toStdString(), 16);
        QVERIFY(sink.push(first));
        QVERIFY(sink.push(second));
        sink.drain();
        QCOMPARE(sink.written(), std::uint64_t{2});
    }
    QVERIFY(first->serialized());  // the writer serialized it into the record, for the stream to reuse
    QCOMPARE(read_file(path), first->line() + "\n" + streamed + "\n");
    QCOMPARE(&second->line(), &streamed);
}

void TestTelemetrySink::writes_every_kind_in_order() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("t.jsonl");
    {
        // A stale file is truncated: the run's header must be the first line.
        std::ofstream(path.toStdString()) << "stale line\n";
    }
    TelemetrySink sink(path.toStdString(), 16);
    QCOMPARE(QString::fromStdString(sink.path()), path);
    QVERIFY(sink.push(header()));
    QVERIFY(sink.push(update(10)));
    QVERIFY(sink.push(make_event(10, "precision_change", {{"block", 0}, {"from", "bf16"}, {"to", "int8"}})));
    QVERIFY(sink.push(step_stats(11)));
    QVERIFY(sink.push(update(20)));
    sink.drain();
    QCOMPARE(sink.written(), std::uint64_t{5});
    QCOMPARE(sink.dropped(), std::uint64_t{0});
    QVERIFY(sink.error().empty());

    // Written and flushed: visible to another reader before the sink is destroyed.
    const std::string text = read_file(path);
    const std::vector<std::string> lines = split_lines(text);
    QCOMPARE(lines.size(), std::size_t{5});
    QVERIFY(text.back() == '\n');

    // Every line reads back through JsonlReader as its own kind, in order.
    const ReadBack back = read_records(text);
    QCOMPARE(back.problems.size(), std::size_t{0});
    QCOMPARE(back.records.size(), std::size_t{5});
    QVERIFY(std::holds_alternative<StepStatsRecord>(back.records[3]));
    QCOMPARE(std::get<StepStatsRecord>(back.records[3]).step, std::int64_t{11});
    QVERIFY(std::holds_alternative<RunHeader>(back.records[0]));
    QCOMPARE(QString::fromStdString(std::get<RunHeader>(back.records[0]).run_id), QStringLiteral("test-run"));
    QCOMPARE(std::get<RunHeader>(back.records[0]).blocks.size(), std::size_t{2});
    QVERIFY(std::holds_alternative<UpdateRecord>(back.records[1]));
    QCOMPARE(std::get<UpdateRecord>(back.records[1]).step_id, std::int64_t{10});
    QCOMPARE(std::get<UpdateRecord>(back.records[1]).block_details.size(), std::size_t{2});
    QVERIFY(std::holds_alternative<EventRecord>(back.records[2]));
    QCOMPARE(QString::fromStdString(std::get<EventRecord>(back.records[2]).kind),
             QStringLiteral("precision_change"));
    QCOMPARE(std::get<EventRecord>(back.records[2]).step, std::int64_t{10});
    QVERIFY(std::holds_alternative<UpdateRecord>(back.records[4]));
    QCOMPARE(std::get<UpdateRecord>(back.records[4]).step_id, std::int64_t{20});

    // Same bytes as the core serialiser, so the sink adds nothing of its own to a line.
    QCOMPARE(lines[3], to_json_line(step_stats(11)));
    const nlohmann::json stats = nlohmann::json::parse(lines[3]);
    QCOMPARE(stats.at("step").get<std::int64_t>(), std::int64_t{11});
    QCOMPARE(stats.at("timestamp").get<double>(), 1717171900.25);
    QCOMPARE(stats.at("blocks").size(), std::size_t{1});
    QCOMPARE(stats.at("blocks")[0].at("id").get<int>(), 0);
    QCOMPARE(stats.at("blocks")[0].at("l2_norm").get<double>(), 1.5);
    QCOMPARE(stats.at("blocks")[0].at("numel").get<std::uint64_t>(), std::uint64_t{4096});
    QCOMPARE(lines[1], to_json_line(update(10)));
}

void TestTelemetrySink::destructor_writes_everything_queued() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("t.jsonl");
    constexpr int kCount = 2000;
    {
        TelemetrySink sink(path.toStdString(), kCount);
        for (int i = 0; i < kCount; ++i) QVERIFY(sink.push(update(i)));
        // No drain(): the destructor must write the backlog before it returns.
    }
    const ReadBack back = read_records(read_file(path));
    QVERIFY(back.problems.empty());
    QCOMPARE(back.records.size(), std::size_t{kCount});
    for (int i = 0; i < kCount; ++i) {
        QVERIFY(std::holds_alternative<UpdateRecord>(back.records[std::size_t(i)]));
        QCOMPARE(std::get<UpdateRecord>(back.records[std::size_t(i)]).step_id, std::int64_t{i});
    }
}

void TestTelemetrySink::full_queue_drops_without_blocking_and_reports_the_gap() {
    const Watchdog watchdog(std::chrono::seconds(60));
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("t.fifo").toStdString();
    QCOMPARE(::mkfifo(path.c_str(), 0600), 0);
    FifoReader reader(path);
    QVERIFY(reader.is_open());
    constexpr std::size_t kCapacity = 4;
    auto sink = std::make_unique<TelemetrySink>(path, kCapacity);
    // Whatever fails below, the pipe is read before the sink is destroyed, or its destructor
    // would wait forever for the stalled writer. (Declared after the sink: runs before its deletion.)
    const auto unstall = qScopeGuard([&] {
        if (!reader.running()) reader.start();
    });

    // Stall the writer inside the write of the oversized record. Once bytes arrive the writer has
    // taken that record out of the queue, so the queue is empty and will stay exactly as the test
    // fills it.
    QVERIFY(sink->push(big_event()));
    QVERIFY(reader.wait_readable(10000));
    for (std::int64_t step = 1; step <= std::int64_t(kCapacity); ++step) QVERIFY(sink->push(update(step)));

    constexpr int kRejected = 10000;
    const auto t0 = std::chrono::steady_clock::now();
    int accepted = 0;
    for (int i = 0; i < kRejected; ++i) accepted += sink->push(update(1000 + i)) ? 1 : 0;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    QCOMPARE(accepted, 0);
    QVERIFY2(seconds < 1.0, qPrintable(QStringLiteral("10000 rejected pushes took %1 s").arg(seconds)));
    QCOMPARE(sink->dropped(), std::uint64_t(kRejected));
    QCOMPARE(sink->written(), std::uint64_t{0});  // still stuck in the first record

    // Release the writer. The drops are reported only in front of the next record.
    reader.start(marker_line_end("round1"));
    sink->drain();
    QCOMPARE(sink->written(), std::uint64_t(1 + kCapacity));
    QVERIFY(sink->push(update(99)));
    QVERIFY(sink->push(make_event(99, "marker", {{"id", "round1"}})));
    sink->drain();
    QCOMPARE(sink->written(), std::uint64_t(1 + kCapacity + 3));
    QVERIFY(sink->error().empty());

    reader.join();  // stopped right after the marker line: the pipe is empty again
    sink.reset();
    reader.start();
    reader.join();

    const std::vector<std::string> lines = split_lines(reader.data());
    QCOMPARE(lines.size(), std::size_t(1 + kCapacity + 3));
    const ReadBack back = read_records(reader.data());
    QVERIFY(back.problems.empty());
    QCOMPARE(back.records.size(), lines.size());
    QCOMPARE(QString::fromStdString(std::get<EventRecord>(back.records[0]).kind), QStringLiteral("big"));
    for (std::size_t i = 1; i <= kCapacity; ++i)
        QCOMPARE(std::get<UpdateRecord>(back.records[i]).step_id, std::int64_t(i));
    // The gap sits between the accepted records and the next one, and carries the next one's step.
    const nlohmann::json dropped = nlohmann::json::parse(lines[1 + kCapacity]);
    QCOMPARE(QString::fromStdString(dropped.at("type").get<std::string>()), QStringLiteral("event"));
    QCOMPARE(QString::fromStdString(dropped.at("kind").get<std::string>()), QStringLiteral("dropped"));
    QCOMPARE(dropped.at("step").get<std::int64_t>(), std::int64_t{99});
    QCOMPARE(dropped.at("count").get<std::uint64_t>(), std::uint64_t(kRejected));
    QCOMPARE(dropped.at("total").get<std::uint64_t>(), std::uint64_t(kRejected));
    QVERIFY(dropped.at("timestamp").get<double>() > 1.6e9);  // wall-clock seconds
    QCOMPARE(std::get<UpdateRecord>(back.records[2 + kCapacity]).step_id, std::int64_t{99});
    QCOMPARE(QString::fromStdString(std::get<EventRecord>(back.records[3 + kCapacity]).kind),
             QStringLiteral("marker"));
}

void TestTelemetrySink::decisions_are_kept_when_the_queue_is_full() {
    const Watchdog watchdog(std::chrono::seconds(60));
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("t.fifo").toStdString();
    QCOMPARE(::mkfifo(path.c_str(), 0600), 0);
    FifoReader reader(path);
    QVERIFY(reader.is_open());
    TelemetrySink::Options options;
    options.capacity = 4;
    options.ceiling = 300;
    auto sink = std::make_unique<TelemetrySink>(path, options);
    const auto unstall = qScopeGuard([&] {
        if (!reader.running()) reader.start();
    });
    QVERIFY(sink->push(big_event()));  // stalls the writer with an empty queue (see above)
    QVERIFY(reader.wait_readable(10000));
    for (std::int64_t step = 1; step <= 4; ++step) QVERIFY(sink->push(update(step)));
    QVERIFY(!sink->push(update(5)));  // an observation: dropped at the capacity
    // Decisions and what a re-simulation needs are kept beyond it, up to the ceiling.
    for (int i = 0; i < 296; ++i) QVERIFY(sink->push(make_event(6, "command", {{"id", i}})));
    QVERIFY(!sink->push(make_event(6, "command", {{"id", 296}})));
    QCOMPARE(sink->dropped(), std::uint64_t(2));

    reader.start();
    sink.reset();
    reader.join();
    const ReadBack back = read_records(reader.data());
    QVERIFY(back.problems.empty());
    // The big event, 4 updates, the gap where update 5 went missing, 296 commands, and at shutdown
    // the command beyond the ceiling.
    QCOMPARE(back.records.size(), std::size_t(1 + 4 + 1 + 296 + 1));
    const auto& gap = std::get<EventRecord>(back.records[5]);
    QCOMPARE(QString::fromStdString(gap.kind), QStringLiteral("dropped"));
    QCOMPARE(std::get<DroppedPayload>(gap.payload).count, std::uint64_t{1});  // update 5
    for (int i = 0; i < 296; ++i) {
        const auto& e = std::get<EventRecord>(back.records[6 + std::size_t(i)]);
        // {"id": i}: not a command event's string id, so kept as the untyped fields it came as.
        QCOMPARE(nlohmann::json::parse(std::get<UntypedEvent>(e.payload).fields_json).at("id").get<int>(), i);
    }
    const auto& last = std::get<EventRecord>(back.records.back());
    QCOMPARE(QString::fromStdString(last.kind), QStringLiteral("dropped"));
    QCOMPARE(last.step, std::int64_t{-1});
}

// Issue 30, defect 11: the bound counts bytes, not only records. With the writer stalled on a 4 MiB
// event, 100 KiB events fill a 4.5 MiB allowance after a handful, far below the record ceiling
// (2^20); the rest are dropped and counted, and the file says so once the reader comes back.
void TestTelemetrySink::waiting_records_are_bounded_in_bytes() {
    const Watchdog watchdog(std::chrono::seconds(60));
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("t.fifo").toStdString();
    QCOMPARE(::mkfifo(path.c_str(), 0600), 0);
    FifoReader reader(path);
    QVERIFY(reader.is_open());
    TelemetrySink::Options options;
    options.ceiling_bytes = (std::size_t(4) << 20) + (std::size_t(512) << 10);
    auto sink = std::make_unique<TelemetrySink>(path, options);
    const auto unstall = qScopeGuard([&] {
        if (!reader.running()) reader.start();
    });
    QVERIFY(sink->push(big_event()));  // stalls the writer, and its 4 MiB count until written
    QVERIFY(reader.wait_readable(10000));
    int kept = 0;
    for (int i = 0; i < 20; ++i)
        kept +=
            sink->push(make_event(1, "command", {{"id", i}, {"blob", std::string(100u << 10, 'y')}})) ? 1 : 0;
    QVERIFY2(kept >= 1 && kept <= 5, std::to_string(kept).c_str());
    QCOMPARE(sink->dropped(), std::uint64_t(20 - kept));

    reader.start();
    sink.reset();
    reader.join();
    const ReadBack back = read_records(reader.data());
    QVERIFY(back.problems.empty());
    // The big event, the kept commands, and at shutdown the report of the dropped ones.
    QCOMPARE(back.records.size(), std::size_t(1 + kept + 1));
    const auto& last = std::get<EventRecord>(back.records.back());
    QCOMPARE(QString::fromStdString(last.kind), QStringLiteral("dropped"));
    QCOMPARE(std::get<DroppedPayload>(last.payload).count, std::uint64_t(20 - kept));
}

void TestTelemetrySink::drops_at_the_end_are_reported_at_shutdown() {
    const Watchdog watchdog(std::chrono::seconds(60));
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("t.fifo").toStdString();
    QCOMPARE(::mkfifo(path.c_str(), 0600), 0);
    FifoReader reader(path);
    QVERIFY(reader.is_open());
    auto sink = std::make_unique<TelemetrySink>(path, 2);
    const auto unstall = qScopeGuard([&] {
        if (!reader.running()) reader.start();
    });

    // Round 1: stall, 2 accepted, 5 dropped, then a record that carries the report.
    QVERIFY(sink->push(big_event()));
    QVERIFY(reader.wait_readable(10000));
    QVERIFY(sink->push(update(1)));
    QVERIFY(sink->push(update(2)));
    for (int i = 0; i < 5; ++i) QVERIFY(!sink->push(update(100 + i)));
    reader.start(marker_line_end("round1"));
    sink->drain();  // room in the queue again
    QVERIFY(sink->push(make_event(3, "marker", {{"id", "round1"}})));
    reader.join();  // everything so far is read; the pipe is empty

    // Round 2: stall again, 2 accepted, 7 dropped, and no record after them.
    QVERIFY(sink->push(big_event()));
    QVERIFY(reader.wait_readable(10000));
    QVERIFY(sink->push(update(4)));
    QVERIFY(sink->push(update(5)));
    for (int i = 0; i < 7; ++i) QVERIFY(!sink->push(update(200 + i)));
    QCOMPARE(sink->dropped(), std::uint64_t{12});
    reader.start();
    sink.reset();
    reader.join();

    const std::vector<std::string> lines = split_lines(reader.data());
    // big, 1, 2, dropped(5), marker, big, 4, 5, dropped(7)
    QCOMPARE(lines.size(), std::size_t{9});
    const nlohmann::json first = nlohmann::json::parse(lines[3]);
    QCOMPARE(QString::fromStdString(first.at("kind").get<std::string>()), QStringLiteral("dropped"));
    QCOMPARE(first.at("step").get<std::int64_t>(), std::int64_t{3});
    QCOMPARE(first.at("count").get<std::uint64_t>(), std::uint64_t{5});
    QCOMPARE(first.at("total").get<std::uint64_t>(), std::uint64_t{5});
    const nlohmann::json last = nlohmann::json::parse(lines[8]);
    QCOMPARE(QString::fromStdString(last.at("kind").get<std::string>()), QStringLiteral("dropped"));
    QCOMPARE(last.at("step").get<std::int64_t>(), std::int64_t{-1});
    QCOMPARE(last.at("count").get<std::uint64_t>(), std::uint64_t{7});
    QCOMPARE(last.at("total").get<std::uint64_t>(), std::uint64_t{12});
    const ReadBack back = read_records(reader.data());
    QVERIFY(back.problems.empty());
    QCOMPARE(std::get<UpdateRecord>(back.records[6]).step_id, std::int64_t{4});
    QCOMPARE(std::get<UpdateRecord>(back.records[7]).step_id, std::int64_t{5});
}

void TestTelemetrySink::concurrent_producers_account_for_every_record() {
    // Timing decides how many records are dropped here; the bookkeeping must hold for any timing:
    // every push is either in the file or counted in exactly one dropped event.
    const Watchdog watchdog(std::chrono::seconds(120));
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("t.jsonl");
    constexpr int kProducers = 4;
    constexpr int kPerProducer = 20000;
    std::vector<int> accepted(kProducers, 0);
    std::uint64_t dropped = 0;
    std::uint64_t written = 0;
    {
        TelemetrySink sink(path.toStdString(), 16);
        std::vector<std::thread> producers;
        producers.reserve(std::size_t(kProducers));
        for (int p = 0; p < kProducers; ++p) {
            producers.emplace_back([&sink, &accepted, p] {
                for (int i = 0; i < kPerProducer; ++i)
                    if (sink.push(update(std::int64_t(p) * 1000000 + i))) ++accepted[std::size_t(p)];
            });
        }
        for (auto& t : producers) t.join();
        sink.drain();
        dropped = sink.dropped();
        written = sink.written();
        QVERIFY(sink.error().empty());
    }
    qInfo("%llu of %d records dropped", static_cast<unsigned long long>(dropped), kProducers * kPerProducer);

    const ReadBack back = read_records(read_file(path));
    QVERIFY(back.problems.empty());
    std::vector<std::int64_t> last(kProducers, -1);
    std::vector<int> seen(kProducers, 0);
    std::uint64_t reported = 0;
    std::uint64_t events = 0;
    for (std::size_t i = 0; i < back.records.size(); ++i) {
        if (const auto* e = std::get_if<EventRecord>(&back.records[i])) {
            QCOMPARE(QString::fromStdString(e->kind), QStringLiteral("dropped"));
            const nlohmann::json j = nlohmann::json::parse(to_json_line(*e));
            const auto count = j.at("count").get<std::uint64_t>();
            QVERIFY(count > 0);
            reported += count;
            QCOMPARE(j.at("total").get<std::uint64_t>(), reported);
            ++events;
            if (i + 1 < back.records.size()) {
                QCOMPARE(e->step, std::get<UpdateRecord>(back.records[i + 1]).step_id);
            } else {
                QCOMPARE(e->step, std::int64_t{-1});
            }
            continue;
        }
        const std::int64_t step = std::get<UpdateRecord>(back.records[i]).step_id;
        const std::size_t p = std::size_t(step / 1000000);
        QVERIFY(p < std::size_t(kProducers));
        QVERIFY(step > last[p]);  // each producer's records stay in its order
        last[p] = step;
        ++seen[p];
    }
    QCOMPARE(reported, dropped);
    int total_accepted = 0;
    for (int p = 0; p < kProducers; ++p) {
        QCOMPARE(seen[std::size_t(p)], accepted[std::size_t(p)]);
        total_accepted += accepted[std::size_t(p)];
    }
    QCOMPARE(std::uint64_t(total_accepted) + dropped, std::uint64_t(kProducers) * kPerProducer);
    // drain() saw every accepted record and the dropped events in front of them; a final event for
    // trailing drops is written later, by the destructor.
    QVERIFY(written == std::uint64_t(total_accepted) + events ||
            written + 1 == std::uint64_t(total_accepted) + events);
}

QTEST_APPLESS_MAIN(TestTelemetrySink)
#include "test_telemetry_sink.moc"
