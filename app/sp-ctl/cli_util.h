#pragma once
// Helpers the sp-ctl subcommands share: one argument parser (so every command reports bad flags the
// same way), stdout writing that notices a closed pipe, and the telemetry-file open check.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "sp/jsonl.h"

namespace sp::ctl {

struct OptionSpec {
    const char* name;  // e.g. "--json"
    bool takes_value;  // "--max-problems N" takes one; "--json" is a flag
};

struct ParsedArgs {
    std::map<std::string, std::string> options;  // by name; a flag maps to ""; the last one wins
    std::vector<std::string> positionals;

    bool has(const std::string& name) const { return options.count(name) != 0; }
    std::string value(const std::string& name, const std::string& fallback = {}) const {
        const auto it = options.find(name);
        return it == options.end() ? fallback : it->second;
    }
};

// Parses `args` left to right: "--help"/"-h" prints `usage` to stdout; an option that takes a value
// consumes the next argument whatever it looks like. Anything else starting with '-' (other than
// "-" itself, stdin by convention) is an unknown option. Up to `max_positionals` other arguments are
// collected. Returns the exit code to return at once (0 after --help, 2 after a usage error, whose
// message goes to stderr as "sp-ctl <command>: ..."), or nullopt to go on.
std::optional<int> parse_args(const char* command, const Args& args, const std::vector<OptionSpec>& spec,
                              const char* usage, std::size_t max_positionals, ParsedArgs& out);

// A non-negative decimal integer (the whole string); nullopt otherwise.
std::optional<std::uint64_t> parse_count(const std::string& text);

// Writes `text` to stdout and flushes; false (after perror) when that fails, e.g. a closed pipe.
bool write_stdout(const char* command, const std::string& text);

// True when `path` names a file that can be opened for reading; otherwise prints
// "sp-ctl <command>: cannot read 'PATH': reason" to stderr and returns false. JsonlReader alone would
// accept a directory and report a read error as a bad line, which is not what a user means.
bool check_readable(const char* command, const std::string& path);

// check_readable, then a JsonlReader on the file; on failure prints why (as above) and returns null.
std::unique_ptr<sp::JsonlReader> open_telemetry_file(const char* command, const std::string& path);

}  // namespace sp::ctl
