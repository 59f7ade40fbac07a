#pragma once
// The one way this project reads JSON text that comes from outside the process: config files,
// telemetry lines, protocol requests and replies, calibration and gate-policy files, the
// dashboard's sources. nlohmann's own entry points either throw (and an uncaught out_of_range for
// "1e309" kills a tool) or return a bare "discarded"; this one never throws and always says what
// was wrong, where, and at which key. The rules are documented in core/TELEMETRY.md ("Reading
// JSON").
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sp {

struct JsonLimits {
    // Larger documents are refused before parsing. Configs and policies are kilobytes, telemetry
    // lines a few hundred kilobytes for thousands of blocks.
    std::size_t max_bytes = std::size_t(16) << 20;
    // Deeper nesting is refused while parsing: no schema here nests beyond 4 levels, and copying
    // or printing a deeply nested DOM recurses.
    int max_depth = 64;
    // An object holding the same key twice is refused (Kind::duplicate_key) instead of keeping the
    // last one. Off by default; on for files a person writes (configs, gate policies), where a
    // second key silently overriding the first is a mistake nobody sees.
    bool reject_duplicate_keys = false;
};

struct JsonError {
    enum class Kind : std::uint8_t { syntax, too_large, too_deep, duplicate_key };
    Kind kind = Kind::syntax;  // syntax: anything the parser refused, out-of-range numbers included
    std::string what;          // "number beyond the range of a double: 1e309"
    std::string path;          // "blocks[2].l2_norm" (empty: the document itself)
    std::size_t byte = 0;      // offset into the text where it went wrong
    std::size_t line = 1;      // 1-based line and column of that byte
    std::size_t column = 1;
    bool multi_line = false;  // the text has more than one line: message() names the line
    // The document's top-level "id" string, when one was read before the error: lets the control
    // socket answer a broken request under its id.
    std::optional<std::string> id;

    // "column 31, key 'blocks[2].l2_norm': number beyond the range of a double: 1e309"
    // ("line 4, column 19, key ..." for a text of several lines).
    std::string message() const;
    // "line 4, column 19" ("column 19" for a text of one line).
    std::string location() const;
};

// Parses `text` as exactly one JSON value (surrounding whitespace allowed) into `out`. On failure
// returns false, fills `error` and leaves `out` discarded. Rejected: syntax errors, invalid UTF-8
// in strings, numbers beyond the range of a double (there is no JSON for infinity, so a value of
// 1e309 is an error, not infinity), nesting beyond limits.max_depth, text beyond limits.max_bytes,
// a NUL byte anywhere (located at the first; nlohmann alone would end the text there), and with
// limits.reject_duplicate_keys a key given twice in one object (located at the second).
bool parse_json(std::string_view text, nlohmann::json& out, JsonError& error, const JsonLimits& limits = {});
bool parse_json(std::string_view text, nlohmann::ordered_json& out, JsonError& error,
                const JsonLimits& limits = {});

// Reads the text of a JSON file for parse_json without ever blocking or growing without bound: the
// file is opened without blocking (a FIFO with no writer), then anything but a regular file is
// refused before a byte is read (a directory, a FIFO, a device such as /dev/zero or /dev/urandom),
// and so is a file larger than limits.max_bytes (also one that grows past it while being read).
// Returns false with `problem` saying why: "a directory", "not a regular file: a FIFO", "larger
// than 16 MiB (the limit for a JSON document)", or the system's reason ("No such file or
// directory"). Callers report it as "PATH: cannot read the file (PROBLEM)".
bool read_json_file(const std::string& path, std::string& text, std::string& problem,
                    const JsonLimits& limits = {});

}  // namespace sp
