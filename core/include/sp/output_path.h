#pragma once
// The one check of a file a program is about to write (telemetry, probe results), made before it is
// opened: sp-trainer's options, the agent and the Python package refuse the same paths in the same
// words.
#include <string>

namespace sp {

// Why `path` must not be written, or "" when it may be. Refused: a symbolic link (never written
// through; `what` names the file in that message, e.g. "telemetry"), a directory, a FIFO, a socket
// or a block device (opening a FIFO for writing waits for a reader: the program would hang without
// a word), and a path whose folder does not exist. A character device (/dev/null, /dev/full) is
// taken as given. Each message begins with the quoted path or "the folder".
std::string output_path_problem(const std::string& path, const std::string& what);

}  // namespace sp
