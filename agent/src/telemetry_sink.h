#pragma once
// JSONL telemetry on its own thread behind a bounded queue: the training thread only moves a record
// into the queue (never waits on the disk). Records are lost in two ways, and neither is silent:
//  - the queue is full: an update record (a pure observation, which a re-simulation recomputes) is
//    dropped and counted; every other record (the header, the step statistics, command,
//    precision-change, rollback and other events: what a re-simulation needs to reach the same
//    decisions) is kept beyond the capacity, up to a ceiling in records and one in bytes
//    (Options::ceiling, ceiling_bytes) that bound the memory a stalled disk can take;
//  - a write fails (a full disk, a pipe whose reader left): the first failure prints a warning
//    naming the file and the system's reason, records are counted as lost while writes keep
//    failing (one retry per retry_interval), and recovery prints a second line.
// The count is written as a "dropped" event as soon as a write succeeds again, right where the
// records went missing: `{"type":"event","kind":"dropped","step":<the next record's step, -1 for a
// header or at shutdown>,"timestamp":<now>,"count":<lost since the previous report>,"total":<lost so
// far>}`, plus `"write_errors":<of count, lost to write errors>,"error":<the reason>` when a write
// failed. Each record is flushed when written: a killed trainer leaves at most a partial last line.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

#include "sp/jsonl.h"
#include "sp/record_line.h"
#include "sp/telemetry.h"

namespace sp::agent {

class TelemetrySink {
  public:
    // Every kind of telemetry line; shared with the PUB socket, which sends the same serialized line.
    using Item = SharedRecord;
    using Warn = std::function<void(const std::string&)>;

    struct Options {
        std::size_t capacity = 1024;  // the most update records waiting to be written (0 is taken as 1)
        // The most records of any kind waiting: beyond it even decisions are dropped (and counted),
        // so a disk that stalls for hours cannot take the trainer's memory with it.
        std::size_t ceiling = std::size_t(1) << 20;
        // The most memory the waiting records may hold, in bytes (each record's estimate: its
        // strings and per-block entries), the batch being written included: a record that would pass
        // it is dropped and counted whatever its kind, so a stalled disk costs at most this much
        // even when every step writes statistics of many blocks.
        std::size_t ceiling_bytes = std::size_t(256) << 20;
        // While writes fail, records are counted as lost without touching the file, and a write is
        // tried again once per interval.
        std::chrono::milliseconds retry_interval{1000};
        Warn warn;  // the failure and recovery lines; empty: standard error
    };

    // What the sink has lost so far, for a summary or a live warning.
    struct Health {
        std::uint64_t offered = 0;         // records pushed
        std::uint64_t lost = 0;            // of them, not in the file (queue full or write failed)
        std::uint64_t lost_to_errors = 0;  // of those, lost to write errors
        bool failing = false;              // the last write failed
        std::uint64_t failures = 0;        // times writes started failing
        std::string error;                 // the latest write error ("" when none)
    };

    // Opens (truncates) `path`; throws std::runtime_error naming the path when it cannot.
    TelemetrySink(const std::string& path, std::size_t capacity = 1024);
    TelemetrySink(const std::string& path, Options options);
    // Writes everything still queued (and a final dropped event when losses are unreported), then
    // stops the thread. Waits for the disk: a writer stuck on a pipe nobody reads blocks here.
    ~TelemetrySink();
    TelemetrySink(const TelemetrySink&) = delete;
    TelemetrySink& operator=(const TelemetrySink&) = delete;

    // Never blocks on I/O. Returns false (and counts a loss) when the queue is full: at the capacity
    // for update records, at the ceiling for the others. Thread-safe; meant for one producer but
    // any number works. A null item is a caller's bug: std::invalid_argument.
    bool push(Item item);
    bool push(TelemetryRecord record) { return push(share_record(std::move(record))); }

    // Blocks until everything pushed so far is written or counted lost (for tests and shutdown).
    void drain();

    std::uint64_t dropped() const;  // records lost so far, for either reason
    std::uint64_t written() const;  // lines written so far (dropped events included)
    Health health() const;
    const std::string& path() const { return path_; }
    // The first write error, if any. A record that cannot be serialised (a header whose
    // config_json is not an object, an event without a kind) is not an error: a "warning" event
    // with the reason takes its place in the file.
    std::string error() const;

  private:
    using Clock = std::chrono::steady_clock;

    // A queued record and the queue-full drop total when it was accepted: the writer reports the
    // drops that happened before it right in front of it, so the file shows where the gap is.
    struct Entry {
        Item item;
        std::uint64_t drops_before = 0;
    };
    // What a queued record holds in memory, estimated from its content (Options::ceiling_bytes).
    static std::size_t estimated_bytes(const Item& item);

    void run();
    void finish();
    void write_batch(std::deque<Entry>& batch);
    void write_entry(const Entry& entry);
    bool report_losses(std::int64_t step, std::uint64_t queue_drops);  // false: the write failed
    bool write_line(const std::string& line);  // false on an I/O error (see write_failed)
    void write_failed(const std::string& what);
    void lose_one();  // a record that will not reach the file
    void warn(const std::string& message) const;

    std::string path_;
    Options options_;

    // Shared between the producer(s) and the writer thread, guarded by mutex_.
    mutable std::mutex mutex_;
    std::condition_variable wake_;  // writer: records queued or stopping_
    std::condition_variable idle_;  // drain(): queue empty and writer idle
    std::deque<Entry> queue_;
    std::size_t held_bytes_ = 0;  // estimated bytes of the queue and the batch being written
    bool stopping_ = false;
    bool busy_ = false;  // the writer holds a batch it has not finished
    bool dead_ = false;  // the writer thread ended unexpectedly: push() drops without queueing
    std::uint64_t offered_ = 0;
    std::uint64_t queue_drops_ = 0;
    std::uint64_t lost_to_errors_ = 0;
    bool failing_ = false;
    std::uint64_t failures_ = 0;
    std::string first_error_, last_error_;

    // Written by the writer thread only; read anywhere.
    std::atomic<std::uint64_t> written_{0};

    // The writer thread's own state (no lock).
    std::uint64_t reported_queue_drops_ = 0;  // already written in dropped events
    std::uint64_t write_losses_ = 0;          // mirror of lost_to_errors_
    std::uint64_t reported_write_losses_ = 0;
    bool writing_fails_ = false;  // the writer thread's view; failing_ follows once a record is lost
    std::uint64_t lost_this_failure_ = 0;
    Clock::time_point next_retry_{};
    std::unique_ptr<JsonlWriter> writer_;

    std::thread thread_;  // last: starts after every other member is constructed
};

}  // namespace sp::agent
