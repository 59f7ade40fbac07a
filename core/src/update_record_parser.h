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

// Parses `line` as an update record into `out` (reusing its block_details capacity). False with
// `error` set when it is not one: not JSON, not an object, a "type" other than "update", a field
// missing, mistyped or out of range. `out` is then unspecified.
bool parse_update_record(std::string_view line, UpdateRecord& out, std::string& error);

// The same, without a copy: the caller guarantees kLinePadding readable bytes after the line's
// last byte (their values do not matter), as JsonlReader's buffer does.
bool parse_update_record_padded(std::string_view line, UpdateRecord& out, std::string& error);

}  // namespace sp::detail
