// The live commands and keygen in an sp-ctl built without transport (SP_BUILD_TRANSPORT=OFF, the
// `device` preset): they need ZeroMQ and the CURVE keys library, so each is declared (it stays in
// `sp-ctl --help`, and scripts get a named error, not "unknown command") and refuses to run. The
// offline commands (simulate, validate, summarize, gate) are the same as in the full build.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "exit_codes.h"

namespace sp::ctl {
namespace {

Command refused(CLI::App& root, const std::string& name, const std::string& what) {
    CLI::App* command = root.add_subcommand(name, what + " (not in this build: built without transport)");
    command->allow_extras();  // whatever it is given, the answer is the same refusal
    command->footer(
        "Exit codes: 1 always: this sp-ctl was built without transport (SP_BUILD_TRANSPORT=OFF).");
    return {
        command, [name] {
            std::fprintf(
                stderr,
                "sp-ctl %s: built without transport (SP_BUILD_TRANSPORT=OFF): this command needs ZeroMQ\n",
                name.c_str());
            return kExitFailed;
        }};
}

}  // namespace

Command add_pin(CLI::App& root) {
    return refused(root, "pin", "pin blocks of a running agent to a precision");
}
Command add_release(CLI::App& root) {
    return refused(root, "release", "release operator pins of blocks");
}
Command add_release_all(CLI::App& root) {
    return refused(root, "release-all", "release every operator pin");
}
Command add_mode(CLI::App& root) {
    return refused(root, "mode", "switch the policy's mode");
}
Command add_budget(CLI::App& root) {
    return refused(root, "budget", "set the budget mode's target saving");
}
Command add_tolerance(CLI::App& root) {
    return refused(root, "tolerance", "set the tolerance mode's loss tolerance");
}
Command add_snapshot(CLI::App& root) {
    return refused(root, "snapshot", "show a running agent's routing state");
}
Command add_ping(CLI::App& root) {
    return refused(root, "ping", "check that the agent answers");
}
Command add_tail(CLI::App& root) {
    return refused(root, "tail", "print the agent's live telemetry");
}
Command add_keygen(CLI::App& root) {
    return refused(root, "keygen", "write a CURVE key pair for secured endpoints");
}

}  // namespace sp::ctl
