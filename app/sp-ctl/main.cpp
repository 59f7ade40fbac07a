// sp-ctl: the command line for scripts and terminals. Each command declares itself on a CLI11 app
// (commands.h); this parses the command line and runs the command it names.
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command_line.h"
#include "commands.h"
#include "exit_codes.h"

int main(int argc, char** argv) {
    CLI::App root("", "sp-ctl");
    sp::ctl::configure_root(root);
    // In the order `sp-ctl --help` lists them.
    const std::vector<sp::ctl::Command> commands = {
        sp::ctl::add_simulate(root),    sp::ctl::add_validate(root), sp::ctl::add_summarize(root),
        sp::ctl::add_gate(root),        sp::ctl::add_pin(root),      sp::ctl::add_release(root),
        sp::ctl::add_release_all(root), sp::ctl::add_mode(root),     sp::ctl::add_budget(root),
        sp::ctl::add_tolerance(root),   sp::ctl::add_snapshot(root), sp::ctl::add_ping(root),
        sp::ctl::add_tail(root),        sp::ctl::add_keygen(root),
    };
    // `sp-ctl help` is `sp-ctl --help`, as it always was; in no group, so not listed.
    CLI::App* help = root.add_subcommand("help")->group("")->allow_extras();
    // Set last: a command takes its parent's footer when it is declared.
    root.footer("'sp-ctl <command> --help' shows a command's options.");
    try {
        root.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return sp::ctl::report_parse_error(root, e, argc > 1 ? argv[argc - 1] : "");
    }
    for (const sp::ctl::Command& c : commands) {
        if (!c.app->parsed()) continue;
        try {
            return c.run();
        } catch (const sp::ctl::UsageError& e) {
            std::fprintf(stderr, "sp-ctl %s: %s\n", c.app->get_name().c_str(), e.what());
            return sp::ctl::kExitUsage;
        }
    }
    if (help->parsed()) {
        std::fputs(sp::ctl::root_help(root).c_str(), stdout);
        return 0;
    }
    std::fputs(sp::ctl::root_help(root).c_str(), stderr);  // no command given
    return sp::ctl::kExitUsage;
}
