#pragma once
// Internal to sp_core: the state of JsonlReader::parse_on_two_threads (jsonl_reader_parallel.cpp),
// complete here so that jsonl_reader.cpp can construct and destroy a reader.
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

struct JsonlReader::Parallel {
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

    // Parses batches[0] here and batches[1] on the worker; returns when both are parsed.
    void parse_both() {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            job_ = &batches[1];
        }
        wake_.notify_all();
        batches[0].parse();
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return job_ == nullptr; });
    }

    std::size_t batch_bytes;
    Batch batches[2];
    std::size_t current = 1;        // the batch next() takes from; both empty: split a round first
    Batch* filling = nullptr;       // the batch being split into: add_problem records there
    std::uint64_t split_lines = 0;  // lines_ and bytes_ where the splitting stands
    std::uint64_t split_bytes = 0;

  private:
    void run() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return stop_ || job_ != nullptr; });
            if (stop_) return;
            Batch* const batch = job_;
            lock.unlock();
            batch->parse();
            lock.lock();
            job_ = nullptr;
            wake_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    Batch* job_ = nullptr;  // the batch the worker is to parse; null when done
    bool stop_ = false;
    std::thread worker_;  // last: starts once the members it uses exist
};

}  // namespace sp
