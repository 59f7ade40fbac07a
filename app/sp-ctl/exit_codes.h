#pragma once
// sp-ctl's exit statuses, the same for every command (app/sp-ctl/README.md).

namespace sp::ctl {

inline constexpr int kExitFailed = 1;    // the command ran and failed (a file, a refused command, ...)
inline constexpr int kExitUsage = 2;     // a usage error, said on stderr naming the flag or argument
inline constexpr int kExitNoAnswer = 3;  // the live commands: no answer from the agent in time

}  // namespace sp::ctl
