#pragma once
// JSONL telemetry on its own thread behind a bounded queue: the training thread only moves a record
// into the queue (never waits on the disk); a full queue drops the record and counts it, and the
// count is written as a "dropped" event as soon as there is room again, so nothing is lost silently.
// Each record is flushed when written: a killed trainer leaves at most a partial last line.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

#include "sp/jsonl.h"
#include "sp/telemetry.h"

namespace sp::agent {

class TelemetrySink {
public:
    using Item = std::variant<UpdateRecord, RunHeader, EventRecord, StepStatsRecord>;

    // Opens (truncates) `path`; throws std::runtime_error naming the path when it cannot.
    // `capacity` is the most records waiting to be written.
    TelemetrySink(const std::string& path, std::size_t capacity = 1024);
    // Writes everything still queued, then stops the thread.
    ~TelemetrySink();
    TelemetrySink(const TelemetrySink&) = delete;
    TelemetrySink& operator=(const TelemetrySink&) = delete;

    // Never blocks on I/O. Returns false (and counts a drop) when the queue is full.
    bool push(Item item);

    // Blocks until everything pushed so far is written and flushed (for tests and shutdown).
    void drain();

    std::uint64_t dropped() const;   // records dropped so far
    std::uint64_t written() const;   // records written so far (drop events included)
    const std::string& path() const { return path_; }
    // The first write error, if any (the sink then drops everything and counts it).
    std::string error() const;

private:
    void run();

    std::string path_;
    std::size_t capacity_;
    mutable std::mutex mutex_;
    std::condition_variable wake_, idle_;
    std::deque<Item> queue_;
    bool stopping_ = false;
    bool busy_ = false;
    std::uint64_t dropped_ = 0, reported_dropped_ = 0, written_ = 0;
    std::string error_;
    std::unique_ptr<JsonlWriter> writer_;
    std::thread thread_;
};

}  // namespace sp::agent
