// sp-ctl: the command line for scripts and terminals.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"

namespace {

struct Subcommand {
    const char* name;
    int (*run)(const sp::ctl::Args&);
    const char* summary;
};

constexpr Subcommand kSubcommands[] = {
    {"simulate", sp::ctl::run_simulate, "re-run the policy offline on recorded gradient statistics"},
    {"validate", sp::ctl::run_validate, "check a telemetry file: parse errors and inconsistent records"},
    {"summarize", sp::ctl::run_summarize,
     "per-block precision time, switches and savings of a telemetry file"},
    {"gate", sp::ctl::run_gate, "measure each format against BF16 here; write the format gate policy"},
    {"pin", sp::ctl::run_pin, "pin blocks of a running agent to a precision"},
    {"release", sp::ctl::run_release, "release operator pins of blocks"},
    {"release-all", sp::ctl::run_release_all, "release every operator pin"},
    {"mode", sp::ctl::run_mode, "switch the policy's mode: dynamic, static, off or budget"},
    {"budget", sp::ctl::run_budget, "set the budget mode's target saving (percent)"},
    {"snapshot", sp::ctl::run_snapshot, "show a running agent's routing state"},
    {"ping", sp::ctl::run_ping, "check that the agent answers"},
    {"tail", sp::ctl::run_tail, "print the agent's live telemetry"},
    {"keygen", sp::ctl::run_keygen, "write a CURVE key pair for secured endpoints"},
};

void print_usage(std::FILE* to) {
    std::fprintf(to, "usage: sp-ctl <command> [options]\n\ncommands:\n");
    for (const Subcommand& c : kSubcommands) std::fprintf(to, "  %-12s %s\n", c.name, c.summary);
    std::fprintf(to, "\n'sp-ctl <command> --help' shows a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const std::string name = argv[1];
    if (name == "--help" || name == "-h" || name == "help") {
        print_usage(stdout);
        return 0;
    }
    for (const Subcommand& c : kSubcommands) {
        if (name == c.name) return c.run(sp::ctl::Args(argv + 2, argv + argc));
    }
    std::fprintf(stderr, "sp-ctl: unknown command '%s'\n\n", name.c_str());
    print_usage(stderr);
    return 2;
}
