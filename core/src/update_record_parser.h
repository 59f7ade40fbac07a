#pragma once
// Internal to sp_core: the hand-written parser for update-record lines. Update records are nearly
// every line of a telemetry file, and nlohmann's DOM (80-100 MB/s) and even a do-nothing SAX
// handler (115-145 MB/s) are too slow for the 150 MB/s the dashboard needs; this parser fills the
// struct directly (tests/bench/bench_jsonl_read.cpp measures all three).
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "sp/jsonl.h"

namespace sp::detail {

struct FastParse {
    bool ok = false;
    bool syntax_error = false;  // the line is not well-formed JSON as far as it was read
    bool other_type = false;    // a "type" other than "update" was seen: a header/event/unknown record
};

// Parses `line` as an update record into `out` (reusing its block_details capacity). On failure
// `error` says why and `out` is unspecified.
FastParse parse_update_record(std::string_view line, UpdateRecord& out, std::string& error);

// The same rules over an already parsed DOM (update_record_dom.cpp): slow, plain, and independent
// of the fast path, which the tests and the fuzzer check against it. False with `error` set when
// `j` is not a valid update record (a "type" other than "update" included).
bool update_record_from_json(const nlohmann::ordered_json& j, UpdateRecord& out, std::string& error);

}  // namespace sp::detail
