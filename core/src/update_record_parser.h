#pragma once
// Internal to sp_core: the one parser for update-record lines, simdjson On-Demand filling the
// struct directly. Update records are nearly every line of a telemetry file; nlohmann's DOM
// (80-100 MB/s) is far too slow for them (tests/bench/bench_jsonl_read.cpp measures both). The
// rules are core/TELEMETRY.md's ("Reading JSON", "Update record"); tests/common/update_record_oracle.h
// states them again over nlohmann's DOM, for the tests and the fuzzer only.
#include <string>
#include <string_view>

#include "sp/jsonl.h"

namespace sp::detail {

// Readable bytes a caller of a *_padded function guarantees after the line (simdjson's padding).
inline constexpr std::size_t kLinePadding = 64;

// parse_record without copying the line: `line.data() + line.size()` starts kLinePadding readable
// bytes (any values). JsonlReader's buffer keeps them.
ParseStatus parse_record_padded(std::string_view line, TelemetryRecord& out, std::string& error);

// Whether the line holds only spaces, tabs and carriage returns (JsonlReader skips it).
bool is_blank_line(std::string_view line);

// Parses `line` as an update record into `out` (reusing its block_details capacity). False with
// `error` set when it is not one: not JSON, not an object, a "type" other than "update", a field
// missing, mistyped or out of range. `out` is then unspecified.
bool parse_update_record(std::string_view line, UpdateRecord& out, std::string& error);

// The same, without a copy: the caller guarantees kLinePadding readable bytes after the line's
// last byte (their values do not matter), as JsonlReader's buffer does.
bool parse_update_record_padded(std::string_view line, UpdateRecord& out, std::string& error);

}  // namespace sp::detail
