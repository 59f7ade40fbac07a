// Telemetry writer thread. The training thread's cost per record is one short critical section and
// a move into a deque; serialisation (here or on the PUB socket's I/O thread, whichever comes first:
// RecordLine), the write, the flush and freeing the record all happen off the training thread,
// outside the lock. Losses are counted and reported, never silent (header).
#include "telemetry_sink.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <utility>
#include <variant>

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
    return std::visit(visitor, item->record());
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

TelemetrySink::Options capacity_options(std::size_t capacity) {
    TelemetrySink::Options options;
    options.capacity = capacity;
    return options;
}

}  // namespace

TelemetrySink::TelemetrySink(const std::string& path, std::size_t capacity)
    : TelemetrySink(path, capacity_options(capacity)) {}

TelemetrySink::TelemetrySink(const std::string& path, Options options)
    : path_(path), options_(std::move(options)) {
    if (options_.capacity == 0) options_.capacity = 1;
    options_.ceiling = std::max(options_.ceiling, options_.capacity);
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
    if (!item) throw std::invalid_argument("TelemetrySink::push: no record");
    // Update records are observations a re-simulation recomputes; everything else decides or
    // explains routing and is kept beyond the capacity.
    const std::size_t limit =
        std::holds_alternative<UpdateRecord>(item->record()) ? options_.capacity : options_.ceiling;
    const std::size_t bytes = estimated_bytes(item);
    bool was_empty = false;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ++offered_;
        if (dead_ || queue_.size() >= limit || held_bytes_ + bytes > options_.ceiling_bytes) {
            ++queue_drops_;
            return false;  // `item` is freed after the lock is released
        }
        was_empty = queue_.empty();
        held_bytes_ += bytes;
        queue_.push_back(Entry{std::move(item), queue_drops_});
    }
    // The writer only sleeps on an empty queue, so only the push that makes it non-empty needs to
    // wake it; the others save the futex call. Notified outside the lock so the woken writer does
    // not immediately block on the mutex we still hold.
    if (was_empty) wake_.notify_one();
    return true;
}

std::size_t TelemetrySink::estimated_bytes(const Item& item) {
    struct Estimate {
        std::size_t operator()(const UpdateRecord& r) const {
            return sizeof(UpdateRecord) + r.block_details.size() * (sizeof(BlockDetail) + 64);
        }
        std::size_t operator()(const StepStatsRecord& r) const {
            return sizeof(StepStatsRecord) + r.blocks.size() * sizeof(BlockGradStats) +
                   r.snr.size() * sizeof(BlockSnr);
        }
        std::size_t operator()(const RunHeader& h) const {
            return sizeof(RunHeader) + h.run_id.size() + h.producer.size() + h.config_json.size() +
                   h.blocks.size() * (sizeof(BlockInfo) + 32) + h.calibration_errors.size() * sizeof(double) +
                   h.admitted_formats.size() * sizeof(FormatMask);
        }
        std::size_t operator()(const EventRecord& e) const {
            const auto* untyped = std::get_if<UntypedEvent>(&e.payload);
            return sizeof(EventRecord) + e.kind.size() + (untyped ? untyped->fields_json.size() : 0);
        }
    };
    return sizeof(Entry) + std::visit(Estimate{}, item->record());
}

void TelemetrySink::drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

std::uint64_t TelemetrySink::dropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_drops_ + lost_to_errors_;
}

std::uint64_t TelemetrySink::written() const {
    return written_.load(std::memory_order_relaxed);
}

TelemetrySink::Health TelemetrySink::health() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return Health{offered_,   queue_drops_ + lost_to_errors_, lost_to_errors_, failing_, failures_,
                  last_error_};
}

std::string TelemetrySink::error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_error_;
}

void TelemetrySink::warn(const std::string& message) const {
    if (options_.warn) {
        options_.warn(message);
    } else {
        std::fprintf(stderr, "%s\n", message.c_str());
    }
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
            const std::size_t batch_bytes = held_bytes_;  // all of it: the queue is empty now
            busy_ = true;
            lock.unlock();
            write_batch(batch);
            batch.clear();  // frees the records here, not on the training thread
            lock.lock();
            held_bytes_ -= batch_bytes;
            busy_ = false;
            if (queue_.empty()) idle_.notify_all();
        }
        lock.unlock();
        finish();
    } catch (const std::exception& ex) {
        warn(std::string("telemetry writer thread for '") + path_ + "' stopped: " + ex.what());
    } catch (...) {
        warn("telemetry writer thread for '" + path_ + "' stopped: unknown exception");
    }
    // Whatever happened, nobody may wait on this thread any more.
    try {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_ = false;
        queue_drops_ += queue_.size();
        queue_.clear();
        held_bytes_ = 0;
        dead_ = true;
    } catch (...) {
    }
    idle_.notify_all();
}

// Losses after the last record: no record follows them to carry the report, so one last try
// (whatever the retry interval) writes it, and the summary line says what was lost.
void TelemetrySink::finish() {
    std::uint64_t queue_drops = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_drops = queue_drops_;
    }
    if (queue_drops > reported_queue_drops_ || write_losses_ > reported_write_losses_) {
        if (report_losses(-1, queue_drops)) writing_fails_ = false;
    }
    const Health h = health();
    if (h.lost_to_errors > 0) {
        warn("telemetry: " + std::to_string(h.lost) + " of " + std::to_string(h.offered) +
             " records were not written to '" + path_ + "' (" + std::to_string(h.lost_to_errors) +
             " to write errors: " + h.error + ")");
    }
}

void TelemetrySink::write_batch(std::deque<Entry>& batch) {
    for (const Entry& entry : batch) write_entry(entry);
}

void TelemetrySink::write_entry(const Entry& entry) {
    // While writes fail, records are counted, not tried: one retry per interval.
    if (writing_fails_ && Clock::now() < next_retry_) {
        lose_one();
        return;
    }
    const std::int64_t step = step_of(entry.item);
    if (entry.drops_before > reported_queue_drops_ || write_losses_ > reported_write_losses_) {
        if (!report_losses(step, entry.drops_before)) {
            lose_one();
            return;
        }
    }
    const std::string* line = nullptr;
    std::string warning_line;
    try {
        line = &entry.item->line();  // serialized once: the PUB socket sends the same line
    } catch (const std::exception& ex) {
        // A malformed record is the producer's bug, not a broken disk: keep writing, and leave a
        // trace in the file where the record would have been.
        warning_line = to_json_line(make_event(
            step, now_seconds(), WarningPayload{std::string("telemetry record not written: ") + ex.what()}));
        line = &warning_line;
    }
    if (!write_line(*line)) lose_one();
}

// The dropped event for the losses not reported yet; on success they count as reported.
bool TelemetrySink::report_losses(std::int64_t step, std::uint64_t queue_drops) {
    const std::uint64_t errors = write_losses_ - reported_write_losses_;
    const std::uint64_t total = queue_drops + write_losses_;
    const std::uint64_t reported = reported_queue_drops_ + reported_write_losses_;
    DroppedPayload payload{total - reported, total, std::nullopt, std::nullopt};
    if (errors > 0) {
        payload.write_errors = errors;
        payload.error = health().error;
    }
    if (!write_line(to_json_line(make_event(step, now_seconds(), std::move(payload))))) return false;
    reported_queue_drops_ = queue_drops;
    reported_write_losses_ = write_losses_;
    return true;
}

bool TelemetrySink::write_line(const std::string& line) {
    try {
        writer_->write_line(line);  // line + '\n', written at once (flush_each_line)
    } catch (const std::exception& ex) {
        write_failed(ex.what());
        return false;
    }
    written_.fetch_add(1, std::memory_order_relaxed);
    if (writing_fails_) {
        writing_fails_ = false;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            failing_ = false;
        }
        warn("telemetry: writing '" + path_ + "' works again; " + std::to_string(lost_this_failure_) +
             " records were lost meanwhile");
    }
    return true;
}

void TelemetrySink::write_failed(const std::string& what) {
    next_retry_ = Clock::now() + options_.retry_interval;
    if (writing_fails_) return;
    writing_fails_ = true;
    lost_this_failure_ = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ++failures_;
        last_error_ = what;
        if (first_error_.empty()) first_error_ = what;
    }
    warn("telemetry: warning: " + what + "; records are lost until writes succeed again (training goes on)");
}

void TelemetrySink::lose_one() {
    ++write_losses_;
    ++lost_this_failure_;
    std::lock_guard<std::mutex> lock(mutex_);
    ++lost_to_errors_;
    // Published here, with the count, not in write_failed (every failed write ends here): a reader
    // of health() never sees "failing" with nothing lost yet.
    if (writing_fails_) failing_ = true;
}

}  // namespace sp::agent
