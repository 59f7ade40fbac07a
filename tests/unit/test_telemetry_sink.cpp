// TelemetrySink: every record kind reaches the file in order, the destructor writes what is queued,
// a full queue drops (counted, never blocking, reported in the file where the gap is), and write
// errors or malformed records never reach the training thread.
//
// The full-queue tests stall the writer thread deterministically without test hooks: the sink
// writes into a FIFO that the test does not read yet, and its first record is larger than a pipe
// can hold, so the writer blocks inside write() with its queue empty.
#include <QFileInfo>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sp/jsonl.h"
#include "telemetry_sink.h"

using namespace sp;
using sp::agent::TelemetrySink;

namespace {

UpdateRecord update(std::int64_t step) {
    UpdateRecord r;
    r.step_id = step;
    r.timestamp = 1717171717.5 + double(step);
    r.blocks_bf16 = 1;
    r.blocks_int8 = 1;
    r.mean_sensitivity = 0.25;
    r.max_sensitivity = 0.5;
    r.min_sensitivity = 0.0;
    r.mode = Mode::dynamic;
    BlockDetail d;
    d.id = 0;
    d.precision = Precision::int8;
    d.reason = Reason::policy;
    BlockDetail e;
    e.id = 1;
    r.block_details = {d, e};
    return r;
}

EventRecord make_event(std::int64_t step, const std::string& kind, const nlohmann::json& payload) {
    EventRecord e;
    e.step = step;
    e.timestamp = 1717171800.0;
    e.kind = kind;
    e.payload_json = payload.dump();
    return e;
}

RunHeader header() {
    RunHeader h;
    h.run_id = "test-run";
    h.producer = "test_telemetry_sink";
    h.blocks = uniform_layout(2, 1024);
    h.config_json = R"({"mode":"dynamic"})";
    return h;
}

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

std::string read_file(const QString& path) {
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
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

struct ReadBack {
    std::vector<TelemetryRecord> records;
    std::vector<LineProblem> problems;
};

ReadBack read_records(const std::string& text) {
    std::istringstream in(text);
    JsonlReader reader(in);
    ReadBack out;
    TelemetryRecord rec;
    while (reader.next(rec)) out.records.push_back(rec);
    out.problems = reader.problems();
    return out;
}

// Aborts the test binary when a test hangs (a blocking push, a writer that never finishes): a hang
// must fail loudly and fast, not sit until CTest's 600 s timeout.
class Watchdog {
  public:
    explicit Watchdog(std::chrono::seconds limit) {
        thread_ = std::thread([this, limit] {
            std::unique_lock<std::mutex> lock(mutex_);
            if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
                std::fprintf(stderr, "FATAL: test_telemetry_sink hung for %lld s\n",
                             static_cast<long long>(limit.count()));
                std::abort();
            }
        });
    }
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        cv_.notify_one();
        thread_.join();
    }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;
};

// The reading end of a FIFO, opened before the sink so that the sink's open() for writing does
// not block (a FIFO's writer waits for a reader). Nothing is read until start(); reading happens on
// a thread because drain() and the sink's destructor block the test thread until the writer is done.
class FifoReader {
  public:
    explicit FifoReader(const std::string& path) { fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK); }
    ~FifoReader() {
        join();
        if (fd_ >= 0) ::close(fd_);
    }
    FifoReader(const FifoReader&) = delete;
    FifoReader& operator=(const FifoReader&) = delete;

    bool is_open() const { return fd_ >= 0; }
    void close_now() {
        ::close(fd_);
        fd_ = -1;
    }

    // True once the writer has put bytes into the pipe (i.e. it is inside its first write).
    bool wait_readable(int timeout_ms) const {
        pollfd p{fd_, POLLIN, 0};
        return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
    }

    // Reads on a thread until EOF (the sink closed the file) or, when `stop_after` is not empty,
    // until the data read so far ends with it.
    void start(std::string stop_after = {}) {
        join();
        const int flags = ::fcntl(fd_, F_GETFL);
        ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);  // blocking reads from now on
        thread_ = std::thread([this, stop = std::move(stop_after)] {
            std::vector<char> buf(1 << 16);
            for (;;) {
                const ssize_t n = ::read(fd_, buf.data(), buf.size());
                if (n <= 0) break;
                data_.append(buf.data(), static_cast<std::size_t>(n));
                if (!stop.empty() && data_.size() >= stop.size() &&
                    data_.compare(data_.size() - stop.size(), stop.size(), stop) == 0)
                    break;
            }
        });
    }
    bool running() const { return thread_.joinable(); }
    void join() {
        if (thread_.joinable()) thread_.join();
    }
    const std::string& data() const { return data_; }

  private:
    int fd_ = -1;
    std::string data_;
    std::thread thread_;
};

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
    void unopenable_path_throws_naming_it();
    void write_errors_are_loud_and_counted();
    void writes_resume_and_the_loss_is_written_where_it_happened();
    void reader_gone_is_a_write_error_not_a_signal();
    void malformed_record_becomes_a_warning_event();
};

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
    QCOMPARE(nlohmann::json::parse(gap.payload_json).at("count").get<int>(), 1);  // update 5
    for (int i = 0; i < 296; ++i) {
        const auto& e = std::get<EventRecord>(back.records[6 + std::size_t(i)]);
        QCOMPARE(nlohmann::json::parse(e.payload_json).at("id").get<int>(), i);
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
    QCOMPARE(nlohmann::json::parse(last.payload_json).at("count").get<int>(), 20 - kept);
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

void TestTelemetrySink::unopenable_path_throws_naming_it() {
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

void TestTelemetrySink::write_errors_are_loud_and_counted() {
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
void TestTelemetrySink::writes_resume_and_the_loss_is_written_where_it_happened() {
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
    const nlohmann::json j = nlohmann::json::parse(dropped.payload_json);
    QCOMPARE(j.at("count").get<int>(), 3);
    QCOMPARE(j.at("total").get<int>(), 3);
    QCOMPARE(j.at("write_errors").get<int>(), 3);
    QVERIFY2(j.at("error").get<std::string>().find("File too large") != std::string::npos, j.dump().c_str());
    QCOMPARE(std::get<UpdateRecord>(back.records[2]).step_id, std::int64_t{5});
}

void TestTelemetrySink::reader_gone_is_a_write_error_not_a_signal() {
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

void TestTelemetrySink::malformed_record_becomes_a_warning_event() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("t.jsonl");
    {
        TelemetrySink sink(path.toStdString(), 8);
        RunHeader bad = header();
        bad.config_json = "[1, 2]";  // not an object: to_json_line throws
        QVERIFY(sink.push(bad));
        EventRecord no_kind;  // neither a kind nor a payload with one
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
    const nlohmann::json j1 = nlohmann::json::parse(w1.payload_json);
    QVERIFY(j1.at("message").get<std::string>().find("not written") != std::string::npos);
    const auto& w2 = std::get<EventRecord>(back.records[1]);
    QCOMPARE(QString::fromStdString(w2.kind), QStringLiteral("warning"));
    QCOMPARE(w2.step, std::int64_t{7});
    QCOMPARE(std::get<UpdateRecord>(back.records[2]).step_id, std::int64_t{8});
}

QTEST_APPLESS_MAIN(TestTelemetrySink)
#include "test_telemetry_sink.moc"
