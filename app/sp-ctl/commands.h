#pragma once
// sp-ctl's commands. Each add_* declares its command on the root app (command_line.h) — its options and
// arguments, their checks and their help, once — and returns what runs it once the command line parsed.
// The run returns the process exit code: 0 success, 1 the operation failed, 2 bad usage or bad input
// (the message names what is wrong).
#include <functional>
#include <stdexcept>

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's own namespace
class App;
}

namespace sp::ctl {

// A usage error found only once the command runs, deep in a helper (a malformed endpoint, which only
// ZeroMQ's connect can judge): main prints "sp-ctl CMD: <what>" and exits 2, so every command that
// reaches that helper reports it the same way instead of aborting.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Command {
    CLI::App* app;             // the declared command; parsed() after `sp-ctl <its name> ...`
    std::function<int()> run;  // reads the values the parse left in the command's options
};

Command add_simulate(CLI::App& root);
Command add_validate(CLI::App& root);
Command add_summarize(CLI::App& root);
// Measures each format against BF16 on this machine and writes the format gate policy (core/GATE.md).
Command add_gate(CLI::App& root);

// Live commands: talk to a running agent (agent/PROTOCOL.md). Extra exit code 3: no answer.
Command add_pin(CLI::App& root);
Command add_release(CLI::App& root);
Command add_release_all(CLI::App& root);
Command add_mode(CLI::App& root);
Command add_budget(CLI::App& root);
Command add_tolerance(CLI::App& root);
Command add_snapshot(CLI::App& root);
Command add_ping(CLI::App& root);
Command add_tail(CLI::App& root);
Command add_keygen(CLI::App& root);

}  // namespace sp::ctl
