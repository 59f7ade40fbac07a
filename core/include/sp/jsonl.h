#pragma once
// JSONL telemetry: one record per line (update, header or event), serialisation, parsing,
// a streaming reader that skips and reports corrupt lines, and an appending writer.
// The wire format is documented in core/TELEMETRY.md.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "sp/event_payload.h"
#include "sp/telemetry.h"

namespace sp {

// Every kind of line a telemetry file holds (StepStatsRecord: only with telemetry_every_step).
using TelemetryRecord = std::variant<UpdateRecord, RunHeader, EventRecord, StepStatsRecord>;

// ---- Serialisation: one line of JSON, without the trailing newline. ----
// Update records: the seed's ten fields in the seed's order, then the additive ones; no "type".
// Non-finite doubles are written as null; finite doubles round-trip exactly.
std::string to_json_line(const UpdateRecord& r);
// Throws std::invalid_argument when config_json is not a JSON object (empty means {}).
std::string to_json_line(const RunHeader& h);
// "type", "kind", "step" and "timestamp", then the payload's fields (sp/event_payload.h). Throws
// std::invalid_argument when the record has no kind or its payload is of another kind.
std::string to_json_line(const EventRecord& e);
std::string to_json_line(const TelemetryRecord& rec);
// `{"step":S,"timestamp":T,"blocks":[{"id","l2_norm","max_abs","variance","mean","numel",
// "nonfinite_count"}]}` with exact doubles, non-finite statistics as null (core/SIMULATOR.md).
std::string to_json_line(const StepStatsRecord& r);
// Appends the update record's line to `out` (no newline): lets a writer reuse one buffer.
void append_json(std::string& out, const UpdateRecord& r);

// ---- Parsing ----
enum class ParseStatus : std::uint8_t {
    ok,
    corrupt,       // not JSON, not an object, or a known record with missing/mistyped fields
    unknown_type,  // valid JSON object whose "type" this version does not know (a newer producer)
};

// Parses one line (surrounding whitespace allowed). On failure `error` says why and `out` is
// unspecified. Unknown keys are ignored. An UpdateRecord already held by `out` is reused, so
// parsing in a loop does not reallocate block_details.
ParseStatus parse_record(std::string_view line, TelemetryRecord& out, std::string& error);
inline bool parse_record_line(std::string_view line, TelemetryRecord& out, std::string& error) {
    return parse_record(line, out, error) == ParseStatus::ok;
}

namespace detail {
// Header/event/unknown-type lines through nlohmann's DOM (they are rare); used by parse_record.
// nullopt: the line is a valid JSON object with no "type" or "type":"update" (an update record).
// A line without "type" that has "step" and "blocks" but no "step_id" is a StepStatsRecord.
std::optional<ParseStatus> parse_typed_record_dom(std::string_view line, TelemetryRecord& out,
                                                  std::string& error);
}  // namespace detail

// ---- Streaming reader ----
struct LineProblem {
    std::uint64_t line = 0;  // 1-based
    std::string reason;
};

class JsonlReader {
  public:
    static constexpr std::size_t kMaxStoredProblems = 1000;
    // A longer line is reported as a problem and skipped without being held in memory.
    static constexpr std::size_t kMaxLineBytes = std::size_t(16) << 20;

    // Reads from `in`, which must outlive the reader.
    explicit JsonlReader(std::istream& in);
    // Opens `path`; throws std::runtime_error naming the path and the OS reason on failure.
    explicit JsonlReader(const std::string& path);
    JsonlReader(const JsonlReader&) = delete;
    JsonlReader& operator=(const JsonlReader&) = delete;
    ~JsonlReader();

    // The next good record; false at end of input. Corrupt lines are recorded in problems(),
    // unknown-type records are counted, blank lines are skipped silently.
    bool next(TelemetryRecord& out);

    // Parses on two threads from here on: the reader splits batches of about batch_bytes of lines
    // (up to four ahead), a worker thread parses some while the calling thread parses the others.
    // next() and every count and problem stay exactly what they are on one thread, record for
    // record; lines_read() and bytes_read() still count the lines returned so far. Worth it for a
    // large file on a machine with a core to spare (tests/bench/bench_jsonl_read).
    static constexpr std::size_t kParallelBatchBytes = std::size_t(1) << 20;
    void parse_on_two_threads(std::size_t batch_bytes = kParallelBatchBytes);

    // The first kMaxStoredProblems corrupt lines; problem_count() counts them all.
    const std::vector<LineProblem>& problems() const { return problems_; }
    std::uint64_t problem_count() const { return problem_count_; }
    std::uint64_t unknown_type_count() const { return unknown_types_; }
    std::uint64_t records_read() const { return records_; }
    std::uint64_t lines_read() const { return lines_; }
    std::uint64_t bytes_read() const { return bytes_; }  // bytes of the lines consumed so far

  private:
    struct Parallel;  // jsonl_reader_parallel.cpp
    struct Batch;

    bool next_line(std::string_view& line, bool& had_newline);
    void skip_rest_of_long_line();
    void end_long_line(bool had_newline);
    void add_problem(std::string reason);
    // Counts a parsed line (a record, an unknown type or a problem); true for a good record.
    bool count_parsed(ParseStatus status, bool had_newline, const std::string& error);
    bool next_parallel(TelemetryRecord& out);
    bool advance_parallel();
    bool split_next();
    bool fill_batch(Batch& batch);
    bool defer_problem(std::string& reason);

    std::unique_ptr<std::ifstream> owned_;
    std::istream* in_;
    std::vector<char> buf_;
    std::size_t pos_ = 0;  // start of the unconsumed data in buf_
    std::size_t len_ = 0;  // end of the valid data in buf_
    bool eof_ = false;
    bool skipping_ = false;            // inside a line longer than kMaxLineBytes
    std::uint64_t skipped_bytes_ = 0;  // of that line so far
    std::string error_;
    std::vector<LineProblem> problems_;
    std::uint64_t problem_count_ = 0;
    std::uint64_t unknown_types_ = 0;
    std::uint64_t records_ = 0;
    std::uint64_t lines_ = 0;
    std::uint64_t bytes_ = 0;
    std::unique_ptr<Parallel> parallel_;  // null: parsing on the calling thread
};

// ---- Writer ----
class JsonlWriter {
  public:
    enum class OpenMode : std::uint8_t { append, truncate };

    // Throws std::runtime_error naming the path and the OS reason when it cannot be opened, and
    // when the path is a symbolic link (dangling or not): it is opened with O_NOFOLLOW, so a link
    // planted there can neither have its target truncated nor make one be created.
    // In append mode a file whose last line lacks its newline (a crashed writer) gets one first,
    // so the torn line stays a single bad line instead of corrupting our first record too.
    explicit JsonlWriter(const std::string& path, OpenMode mode = OpenMode::append,
                         bool flush_each_line = false);
    JsonlWriter(const JsonlWriter&) = delete;
    JsonlWriter& operator=(const JsonlWriter&) = delete;
    ~JsonlWriter();

    // Each writes one line plus '\n'; throws std::runtime_error naming the file and the system's
    // reason on an I/O error. The lines not yet on disk when a write fails are discarded (the error
    // says how many); the writer stays usable, and when a failed write left part of a line in the
    // file, the next line starts on a new line so the fragment stays one bad line.
    void write(const UpdateRecord& r);
    void write(const RunHeader& h);
    void write(const EventRecord& e);
    void write(const StepStatsRecord& r);
    void write(const TelemetryRecord& rec);
    void write_line(std::string_view json_line);  // an already serialised record

    void flush();
    const std::string& path() const { return path_; }
    std::uint64_t lines_written() const { return lines_; }  // lines handed to write*(), lost ones included

  private:
    void put(std::string_view line);
    void clear_pending();

    std::string path_;
    int fd_ = -1;
    bool flush_each_line_ = false;
    std::string line_;     // reused serialisation buffer
    std::string pending_;  // complete lines not yet written
    std::size_t pending_lines_ = 0;
    bool pending_repair_ = false;  // pending_ starts with the newline that ends a torn line
    bool torn_ = false;            // a failed write left part of a line in the file
    std::uint64_t lines_ = 0;
};

}  // namespace sp
