#pragma once
// sp-ctl subcommands. Each takes the arguments after its name and returns the process exit code:
// 0 success, 1 the operation failed, 2 bad usage or bad input (the message names what is wrong).
#include <string>
#include <vector>

namespace sp::ctl {

using Args = std::vector<std::string>;

int run_simulate(const Args& args);
int run_validate(const Args& args);
int run_summarize(const Args& args);
// Measures each format against BF16 on this machine and writes the format gate policy (core/GATE.md).
int run_gate(const Args& args);

// Live commands: talk to a running agent (agent/PROTOCOL.md). Extra exit code 3: no answer.
int run_pin(const Args& args);
int run_release(const Args& args);
int run_release_all(const Args& args);
int run_mode(const Args& args);
int run_budget(const Args& args);
int run_snapshot(const Args& args);
int run_ping(const Args& args);
int run_tail(const Args& args);
int run_keygen(const Args& args);

}  // namespace sp::ctl
