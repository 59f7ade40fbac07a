#pragma once
// A telemetry record and its one JSONL line. The agent hands the same record to the JSONL file's
// writer and to the PUB socket's I/O thread; whichever asks first serializes it (off the training
// thread), and the other sends the same bytes. The record is immutable once shared.
#include <memory>
#include <mutex>
#include <string>

#include "sp/jsonl.h"

namespace sp {

class RecordLine {
  public:
    explicit RecordLine(TelemetryRecord record) : record_(std::move(record)) {}
    RecordLine(const RecordLine&) = delete;
    RecordLine& operator=(const RecordLine&) = delete;

    const TelemetryRecord& record() const noexcept { return record_; }

    // The record's line, as to_json_line writes it (no newline), serialized on the first call from
    // any thread. Throws what to_json_line throws for a malformed record, on every call: the
    // record stays malformed, and each consumer reports it its own way.
    const std::string& line() const;
    // Whether a consumer has asked for the line yet (tests: both consumers share this one).
    bool serialized() const {
        std::lock_guard lock(mutex_);
        return serialized_;
    }

  private:
    TelemetryRecord record_;
    // Not std::call_once: libstdc++'s does not recover from a callable that throws (GCC bug 66146).
    mutable std::mutex mutex_;
    mutable bool serialized_ = false;
    mutable std::string line_;
};

using SharedRecord = std::shared_ptr<const RecordLine>;

inline SharedRecord share_record(TelemetryRecord record) {
    return std::make_shared<const RecordLine>(std::move(record));
}

}  // namespace sp
