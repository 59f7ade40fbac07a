#pragma once
// Internal to sp_core: the state of JsonlReader::parse_on_two_threads (jsonl_reader_parallel.cpp),
// complete here so that jsonl_reader.cpp can construct and destroy a reader.
#include <array>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sp/jsonl.h"
#include "update_record_parser.h"

namespace sp {

struct JsonlReader::Batch {
    enum class Kind : std::uint8_t { line, blank, problem };
    // free: holds nothing; split: lines taken from the input, not parsed; parsing: a thread has
    // claimed it; parsed: next() hands its records out.
    enum class State : std::uint8_t { free, split, parsing, parsed };
    struct Entry {
        Kind kind = Kind::line;
        bool had_newline = false;
        ParseStatus status = ParseStatus::ok;
        std::size_t offset = 0;  // of the line in `text`
        std::size_t size = 0;
        std::string error;        // the parse error, or the problem the splitting met
        std::uint64_t lines = 0;  // lines_read() and bytes_read() once the entry is taken
        std::uint64_t bytes = 0;
    };
    std::vector<char> text;  // the lines, each followed by '\n', then detail::kLinePadding bytes
    std::vector<Entry> entries;
    std::vector<TelemetryRecord> records;  // the record of entries[i]; kept to reuse their memory
    std::size_t used = 0;                  // entries of this round
    std::size_t taken = 0;                 // entries next() has handed out
    State state = State::free;             // changed and read under Parallel's lock

    Entry& add(Kind kind, std::uint64_t lines, std::uint64_t bytes) {
        if (used == entries.size()) {
            entries.emplace_back();
            records.emplace_back();
        }
        Entry& e = entries[used++];
        e.kind = kind;
        e.lines = lines;
        e.bytes = bytes;
        e.error.clear();
        return e;
    }
    void parse() {
        for (std::size_t i = 0; i < used; ++i) {
            Entry& e = entries[i];
            if (e.kind != Kind::line) continue;
            e.status = detail::parse_record_padded(std::string_view(text.data() + e.offset, e.size),
                                                   records[i], e.error);
        }
    }
};

// The batches in input order and a worker thread. The calling thread splits every batch (the input
// is one stream), up to kBatches ahead; the worker and the calling thread each claim the oldest split
// batch when they are free to parse one, so the worker parses while the caller reads, splits and
// hands records out. The ring's bookkeeping is under the lock; a claimed batch's lines and records
// belong to its claimer until it is parsed.
struct JsonlReader::Parallel {
    static constexpr std::size_t kBatches = 4;

    explicit Parallel(std::size_t bytes) : batch_bytes(bytes), worker_([this] { run(); }) {}
    Parallel(const Parallel&) = delete;
    Parallel& operator=(const Parallel&) = delete;
    ~Parallel() {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        worker_.join();
    }

    // The i-th batch in input order (i < count, or i == count: the next free one). Only the calling
    // thread moves head and count, so it reads them without the lock.
    Batch& at(std::size_t i) { return batches[(head + i) % kBatches]; }
    bool oldest_parsed() {
        const std::lock_guard<std::mutex> lock(mutex_);
        return count > 0 && at(0).state == Batch::State::parsed;
    }
    // The batch at(count), filled by the caller, joins the ring for either thread to parse.
    void publish_split() {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            at(count).state = Batch::State::split;
            ++count;
        }
        wake_.notify_all();
    }
    void pop_oldest() {
        const std::lock_guard<std::mutex> lock(mutex_);
        at(0).state = Batch::State::free;
        head = (head + 1) % kBatches;
        --count;
    }
    // Claims the oldest split batch for the calling thread; null when every one is claimed.
    Batch* claim() {
        const std::lock_guard<std::mutex> lock(mutex_);
        return claim_locked();
    }
    void mark_parsed(Batch& b) {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            b.state = Batch::State::parsed;
        }
        wake_.notify_all();
    }
    void wait_oldest_parsed() {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return at(0).state == Batch::State::parsed; });
    }

    std::size_t batch_bytes;
    std::array<Batch, kBatches> batches;
    std::size_t head = 0;           // batches[head] is the oldest
    std::size_t count = 0;          // batches not yet handed out entirely
    bool input_done = false;        // the splitting reached the end of the input
    Batch* filling = nullptr;       // the batch being split into: add_problem records there
    std::uint64_t split_lines = 0;  // lines_ and bytes_ where the splitting stands
    std::uint64_t split_bytes = 0;

  private:
    Batch* claim_locked() {
        for (std::size_t i = 0; i < count; ++i) {
            Batch& b = at(i);
            if (b.state != Batch::State::split) continue;
            b.state = Batch::State::parsing;
            return &b;
        }
        return nullptr;
    }
    void run() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            Batch* batch = nullptr;
            wake_.wait(lock, [&] { return stop_ || (batch = claim_locked()) != nullptr; });
            if (stop_) return;
            lock.unlock();
            batch->parse();
            lock.lock();
            batch->state = Batch::State::parsed;
            wake_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::thread worker_;  // last: starts once the members it uses exist
};

}  // namespace sp
