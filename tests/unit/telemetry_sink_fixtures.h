#pragma once
// What the TelemetrySink suites share (test_telemetry_sink, test_telemetry_sink_errors): records
// to push, reading a file back, a watchdog that turns a hang into a fast failure, and the reading
// end of a FIFO that the test controls.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <QString>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sp/jsonl.h"

namespace sp::test::telemetry_sink_fixtures {

inline UpdateRecord update(std::int64_t step) {
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

inline EventRecord make_event(std::int64_t step, const std::string& kind, const nlohmann::json& payload) {
    return event_from_json_text(kind, step, 1717171800.0, payload.dump());
}

inline RunHeader header() {
    RunHeader h;
    h.run_id = "test-run";
    h.producer = "test_telemetry_sink";
    h.blocks = uniform_layout(2, 1024);
    h.config_json = R"({"mode":"dynamic"})";
    return h;
}

inline std::string read_file(const QString& path) {
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

struct ReadBack {
    std::vector<TelemetryRecord> records;
    std::vector<LineProblem> problems;
};

inline ReadBack read_records(const std::string& text) {
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
                std::fprintf(stderr, "FATAL: a TelemetrySink test hung for %lld s\n",
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

}  // namespace sp::test::telemetry_sink_fixtures
