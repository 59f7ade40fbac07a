#pragma once
// Checks of sp-ctl's option values, as CLI11 validators: each returns what is wrong with a value ("" when
// nothing), which CLI11 reports as "--flag: <that>" and sp-ctl prints as "sp-ctl CMD: --flag: <that>"
// (exit 2, command_line.h). Numbers are read as sp-ctl always read them, in base 10: CLI11's own
// conversion reads a leading 0 as octal and takes "-4" for a huge unsigned number, so the integer checks
// also rewrite the value in plain decimal before CLI11 converts it. They are given with ->transform()
// (->check() would hand them a copy of the value); the others with ->check().
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace sp::ctl {

// A whole number in [least, most] (--count, --repeats, ...); ->transform().
CLI::Validator whole_number(std::uint64_t least,
                            std::uint64_t most = std::numeric_limits<std::uint64_t>::max());

// Any integer (its range is for someone else to judge, e.g. the protocol layer). `what` names it in the
// message: integer("a number of steps") says "'soon' is not a number of steps"; ->transform().
CLI::Validator integer(const char* what);

// A number, finite or not (its range is for someone else to judge), named `what` as above.
CLI::Validator number(const char* what);

// A finite number > 0 (--threshold).
CLI::Validator positive_number();

// Seconds in (0, 86400] (--timeout, --wait-timeout): the upper bound keeps the millisecond arithmetic
// far from overflow (a day is plenty).
CLI::Validator seconds_up_to_a_day();

// Any text but the empty one (an endpoint, a file to write).
CLI::Validator not_empty();

// One of `choices`, exactly: "must be 'jsonl' or 'table', got 'xml'".
CLI::Validator one_of(std::vector<std::string> choices);

// A check by the parser that later converts the value, so both read it alike: `problem(text)` says what
// is wrong with it, "" when nothing (e.g. a comma-separated list with an entry that is no shape).
CLI::Validator checked_by(std::function<std::string(const std::string&)> problem);

// "3,4," -> {"3", "4", ""}: the entries of a comma-separated list, the empty ones included (a list option
// refuses those, naming the list).
std::vector<std::string> split_list(const std::string& text);

// A non-negative decimal integer (the whole string); nullopt otherwise.
std::optional<std::uint64_t> parse_count(const std::string& text);

}  // namespace sp::ctl
