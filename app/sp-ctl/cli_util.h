#pragma once
// Helpers the sp-ctl subcommands share: stdout writing that notices a closed pipe, and the
// telemetry-file open check. (The command line itself is CLI11's: command_line.h.)
#include <memory>
#include <string>

#include "sp/jsonl.h"

namespace sp::ctl {

// Writes `text` to stdout and flushes; false (after perror) when that fails, e.g. a closed pipe.
bool write_stdout(const char* command, const std::string& text);

// True when `path` names a file that can be opened for reading; otherwise prints
// "sp-ctl <command>: cannot read 'PATH': reason" to stderr and returns false. JsonlReader alone would
// accept a directory and report a read error as a bad line, which is not what a user means.
bool check_readable(const char* command, const std::string& path);
// The part of check_readable that refuses a directory, a device or a socket (a FIFO passes), with the
// same messages; true when `path` is none of them or does not exist.
bool check_not_special(const char* command, const std::string& path);
// Whether `path` is a FIFO (a named pipe, or a process substitution's /dev/fd/N): its contents can be
// read once only, and an open without a writer waits for one.
bool read_once(const std::string& path);

// check_readable, then a JsonlReader on the file; on failure prints why (as above) and returns null.
std::unique_ptr<sp::JsonlReader> open_telemetry_file(const char* command, const std::string& path);

}  // namespace sp::ctl
