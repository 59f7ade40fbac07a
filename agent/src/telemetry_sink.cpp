// Telemetry writer thread. The training thread's cost per record is one short critical section and
// a move into a deque; serialisation, the write, the flush and freeing the record all happen here,
// on the writer thread, outside the lock.
#include "sp/agent/telemetry_sink.h"

#include <chrono>
#include <exception>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include <nlohmann/json.hpp>

#if defined(__unix__) || defined(__APPLE__)
#include <csignal>

#include <pthread.h>
#endif

namespace sp::agent {

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::int64_t step_of(const TelemetrySink::Item& item) {
    struct {
        std::int64_t operator()(const UpdateRecord& r) const { return r.step_id; }
        std::int64_t operator()(const RunHeader&) const { return -1; }
        std::int64_t operator()(const EventRecord& e) const { return e.step; }
        std::int64_t operator()(const StepStatsRecord& r) const { return r.step; }
    } visitor;
    return std::visit(visitor, item);
}

// Writing to a pipe whose reader went away (telemetry piped into `head`, a dashboard that quit)
// raises SIGPIPE, whose default action kills the whole trainer. Blocked in this thread only, the
// signal stays pending here and write() fails with EPIPE instead: an ordinary write error.
void block_sigpipe_in_this_thread() {
#if defined(__unix__) || defined(__APPLE__)
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
#endif
}

}  // namespace

TelemetrySink::TelemetrySink(const std::string& path, std::size_t capacity)
    : path_(path), capacity_(capacity == 0 ? 1 : capacity) {
    // Opened here, not on the thread, so a bad path fails the constructor (JsonlWriter's message
    // names the path and the OS reason). Truncate: one file per run, the header comes first.
    writer_ = std::make_unique<JsonlWriter>(path, JsonlWriter::OpenMode::truncate, /*flush_each_line=*/true);
    thread_ = std::thread([this] { run(); });
}

TelemetrySink::~TelemetrySink() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

bool TelemetrySink::push(Item item) {
    bool was_empty = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (failed_ || queue_.size() >= capacity_) {
            ++dropped_;
            return false;  // `item` is freed after the lock is released
        }
        was_empty = queue_.empty();
        queue_.push_back(Entry{std::move(item), dropped_});
    }
    // The writer only sleeps on an empty queue, so only the push that makes it non-empty needs to
    // wake it; the others save the futex call. Notified outside the lock so the woken writer does
    // not immediately block on the mutex we still hold.
    if (was_empty) wake_.notify_one();
    return true;
}

void TelemetrySink::drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

std::uint64_t TelemetrySink::dropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
}

std::uint64_t TelemetrySink::written() const {
    return written_.load(std::memory_order_relaxed);
}

std::string TelemetrySink::error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
}

void TelemetrySink::run() {
    // Nothing may escape this function: an exception leaving a std::thread calls std::terminate and
    // would take the training run down with it. Records are written by write_entry(), which catches
    // everything itself; the outer catch is for the unexpected (a failing mutex, ...).
    try {
        block_sigpipe_in_this_thread();
        // Two deques swapped back and forth: clear() keeps a deque's first chunk, so in the steady
        // state the producer's push_back rarely has to allocate.
        std::deque<Entry> batch;
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return !queue_.empty() || stopping_; });
            if (queue_.empty()) break;  // stopping, and everything is written
            batch.swap(queue_);
            busy_ = true;
            lock.unlock();
            write_batch(batch);
            batch.clear();  // frees the records here, not on the training thread
            lock.lock();
            busy_ = false;
            if (queue_.empty()) idle_.notify_all();
        }
        lock.unlock();
        // Drops after the last record: no record follows them to carry the report.
        std::uint64_t total = 0;
        {
            std::lock_guard<std::mutex> guard(mutex_);
            total = dropped_;
        }
        if (!write_failed_ && total > reported_dropped_) write_dropped_event(-1, total);
        if (!write_failed_) {
            try {
                writer_->flush();
            } catch (const std::exception& ex) {
                fail(ex.what());
            }
        }
    } catch (const std::exception& ex) {
        fail(std::string("telemetry writer thread: ") + ex.what());
    } catch (...) {
        fail("telemetry writer thread: unknown exception");
    }
    // Whatever happened, nobody may wait on this thread any more.
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_ = false;
        dropped_ += queue_.size();
        queue_.clear();
        failed_ = true;
    } catch (...) {
    }
    idle_.notify_all();
}

void TelemetrySink::write_batch(std::deque<Entry>& batch) {
    std::uint64_t lost = 0;  // accepted records that were not written because the sink failed
    for (const Entry& entry : batch) {
        if (write_failed_) {
            ++lost;
            continue;
        }
        write_entry(entry);
        if (write_failed_) ++lost;  // this very record (or its dropped event) hit the error
    }
    if (lost > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        dropped_ += lost;
    }
}

void TelemetrySink::write_entry(const Entry& entry) {
    const std::int64_t step = step_of(entry.item);
    if (entry.drops_before > reported_dropped_) {
        write_dropped_event(step, entry.drops_before);
        if (write_failed_) return;
    }
    try {
        line_.clear();
        std::visit(
            [this](const auto& rec) {
                using T = std::decay_t<decltype(rec)>;
                if constexpr (std::is_same_v<T, UpdateRecord>) {
                    append_json(line_, rec);  // the frequent kind: into the reused buffer
                } else {
                    line_ = to_json_line(rec);
                }
            },
            entry.item);
    } catch (const std::exception& ex) {
        // A malformed record is the producer's bug, not a broken disk: keep writing, and leave a
        // trace in the file where the record would have been.
        EventRecord warning;
        warning.step = step;
        warning.timestamp = now_seconds();
        warning.kind = "warning";
        warning.payload_json =
            nlohmann::json{{"message", std::string("telemetry record not written: ") + ex.what()}}.dump();
        try {
            line_ = to_json_line(warning);
        } catch (const std::exception& inner) {
            fail(inner.what());
            return;
        }
    }
    write_line(line_);
}

void TelemetrySink::write_dropped_event(std::int64_t step, std::uint64_t total) {
    EventRecord e;
    e.step = step;
    e.timestamp = now_seconds();
    e.kind = "dropped";
    e.payload_json = "{\"count\":" + std::to_string(total - reported_dropped_) +
                     ",\"total\":" + std::to_string(total) + "}";
    try {
        line_ = to_json_line(e);
    } catch (const std::exception& ex) {
        fail(ex.what());
        return;
    }
    if (write_line(line_)) reported_dropped_ = total;
}

bool TelemetrySink::write_line(const std::string& line) {
    try {
        writer_->write_line(line);  // line + '\n', flushed (flush_each_line)
    } catch (const std::exception& ex) {
        fail(ex.what());
        return false;
    }
    written_.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void TelemetrySink::fail(const std::string& what) {
    write_failed_ = true;
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        failed_ = true;
        if (error_.empty()) error_ = what;
    } catch (...) {
    }
}

}  // namespace sp::agent
