// sp-ctl: the command line for scripts and terminals.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"

namespace {

struct Subcommand {
    const char* name;
    int (*run)(const spctl::Args&);
    const char* summary;
};

constexpr Subcommand kSubcommands[] = {
    {"simulate", spctl::run_simulate, "re-run the policy offline on recorded gradient statistics"},
    {"validate", spctl::run_validate, "check a telemetry file: parse errors and inconsistent records"},
    {"summarize", spctl::run_summarize, "per-block precision time, switches and savings of a telemetry file"},
    {"gate", spctl::run_gate, "measure each format against BF16 here; write the format gate policy"},
    {"pin", spctl::run_pin, "pin blocks of a running agent to a precision"},
    {"release", spctl::run_release, "release operator pins of blocks"},
    {"release-all", spctl::run_release_all, "release every operator pin"},
    {"mode", spctl::run_mode, "switch the policy's mode: dynamic, static, off or budget"},
    {"budget", spctl::run_budget, "set the budget mode's target saving (percent)"},
    {"snapshot", spctl::run_snapshot, "show a running agent's routing state"},
    {"ping", spctl::run_ping, "check that the agent answers"},
    {"tail", spctl::run_tail, "print the agent's live telemetry"},
    {"keygen", spctl::run_keygen, "write a CURVE key pair for secured endpoints"},
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
        if (name == c.name) return c.run(spctl::Args(argv + 2, argv + argc));
    }
    std::fprintf(stderr, "sp-ctl: unknown command '%s'\n\n", name.c_str());
    print_usage(stderr);
    return 2;
}
