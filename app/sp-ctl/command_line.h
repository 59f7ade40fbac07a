#pragma once
// sp-ctl's command line on CLI11: the root app that every command declares itself on (commands.h), and
// how a parse ends that does not run a command: --help prints the help on stdout (exit 0); a usage error
// prints "sp-ctl CMD: what is wrong" on stderr, naming the flag or argument (exit 2).
#include <string>

#include <CLI/CLI.hpp>

#include "exit_codes.h"

namespace sp::ctl {

// Sets up `root` before any command is declared on it: the help layout (help_formatter.h), options
// whose last value wins when repeated (as sp-ctl always had it), and one command at most, so that a
// word after a command that happens to name another command (`sp-ctl validate run.jsonl ping`) is
// reported as an unexpected argument instead of starting that command too.
void configure_root(CLI::App& root);

// The root's own help, the list of commands (root.help() shows the chosen command's).
std::string root_help(const CLI::App& root);

// Reports how parsing ended and returns the exit code. `last_argument` is the command line's last word:
// an option there that wants a value did not get one. Arguments nothing took are reported first, as
// "unknown option '--x'" or "unexpected argument 'x'" (at the root: "unknown command 'x'"); a missing
// required option or argument, and those, come with the command's help.
int report_parse_error(const CLI::App& root, const CLI::ParseError& error, const std::string& last_argument);

}  // namespace sp::ctl
