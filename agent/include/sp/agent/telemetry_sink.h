#pragma once
// JSONL telemetry on its own thread behind a bounded queue: the training thread only moves a record
// into the queue (never waits on the disk); a full queue drops the record and counts it, and the
// count is written as a "dropped" event as soon as there is room again, so nothing is lost silently.
// Each record is flushed when written: a killed trainer leaves at most a partial last line.
//
// The dropped event sits exactly where the records went missing: before the first record accepted
// after the drops, `{"type":"event","kind":"dropped","step":<that record's step, -1 for a header>,
// "timestamp":<now>,"count":<dropped since the previous report>,"total":<dropped so far>}`; drops
// that no record follows are reported at shutdown with step -1.
#include <atomic>
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
    using Item = TelemetryRecord;  // every kind of telemetry line

    // Opens (truncates) `path`; throws std::runtime_error naming the path when it cannot.
    // `capacity` is the most records waiting to be written (0 is taken as 1).
    TelemetrySink(const std::string& path, std::size_t capacity = 1024);
    // Writes everything still queued (and a final dropped event when drops are unreported), then
    // stops the thread. Waits for the disk: a writer stuck on a pipe nobody reads blocks here.
    ~TelemetrySink();
    TelemetrySink(const TelemetrySink&) = delete;
    TelemetrySink& operator=(const TelemetrySink&) = delete;

    // Never blocks on I/O. Returns false (and counts a drop) when the queue is full or the sink has
    // failed (see error()). Thread-safe; meant for one producer but any number works.
    bool push(Item item);

    // Blocks until everything pushed so far is written and flushed (for tests and shutdown).
    void drain();

    std::uint64_t dropped() const;  // records dropped so far
    std::uint64_t written() const;  // records written so far (drop events included)
    const std::string& path() const { return path_; }
    // The first write error, if any (the sink then drops everything and counts it). A record that
    // cannot be serialised (a header whose config_json is not an object, an event without a kind)
    // is not an error: a "warning" event with the reason takes its place in the file.
    std::string error() const;

  private:
    // A queued record and the drop total when it was accepted: the writer reports the drops that
    // happened before it right in front of it, so the file shows where the gap is.
    struct Entry {
        Item item;
        std::uint64_t drops_before = 0;
    };

    void run();
    void write_batch(std::deque<Entry>& batch);
    void write_entry(const Entry& entry);
    void write_dropped_event(std::int64_t step, std::uint64_t total);
    bool write_line(const std::string& line);  // false (and the sink failed) on an I/O error
    void fail(const std::string& what);

    std::string path_;
    std::size_t capacity_;

    // Shared between the producer(s) and the writer thread, guarded by mutex_.
    mutable std::mutex mutex_;
    std::condition_variable wake_;  // writer: records queued or stopping_
    std::condition_variable idle_;  // drain(): queue empty and writer idle
    std::deque<Entry> queue_;
    bool stopping_ = false;
    bool busy_ = false;    // the writer holds a batch it has not finished
    bool failed_ = false;  // after a write error push() drops without queueing
    std::uint64_t dropped_ = 0;
    std::string error_;

    // Written by the writer thread only; read anywhere.
    std::atomic<std::uint64_t> written_{0};

    // The writer thread's own state (no lock).
    std::uint64_t reported_dropped_ = 0;  // drop total already written as dropped events
    bool write_failed_ = false;
    std::string line_;  // reused serialisation buffer
    std::unique_ptr<JsonlWriter> writer_;

    std::thread thread_;  // last: starts after every other member is constructed
};

}  // namespace sp::agent
