// sp-ctl keygen NAME: a CURVE key pair for the agent's secured sockets (agent/PROTOCOL.md §9).
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "control_client.h"
#include "sp/keys/curve_key_file.h"

namespace sp::ctl {
namespace {

constexpr const char* kDescription =
    "write a CURVE key pair for secured endpoints\n"
    "\n"
    "Writes a CURVE key pair for the agent's sockets (agent/PROTOCOL.md §9):\n"
    "  NAME.key  the secret key (mode 0600; lines 'public-key = ...' and 'secret-key = ...'):\n"
    "            the agent's --server-key, or a client's --client-key NAME\n"
    "  NAME.pub  the public key ('public-key = ...'): clients' --server-key, or a line of the\n"
    "            agent's --allowed-clients file (cat NAME.pub >> allowed)\n"
    "Every program refuses a NAME.key that group or others may access (chmod 600 NAME.key) and a\n"
    "public key where a secret one is expected, or the reverse.\n"
    "Existing files are left alone unless --force is given. Each file is written as a new file\n"
    "beside its target and then renamed over it: a symlink at NAME.key or NAME.pub is replaced\n"
    "itself, never written through.\n"
    "NAME must name a file: an empty NAME, or one ending in '/', is refused.";

struct KeygenArgs {
    std::string base;
    bool force = false, json = false;
};

int run_keygen(const KeygenArgs& args) {
    const char* command = "keygen";
    const std::string& base = args.base;
    // "" or "dir/" would write the hidden files .key and .pub, which nobody asked for.
    if (base.empty() || base.back() == '/') {
        std::fprintf(
            stderr,
            "sp-ctl keygen: NAME %s; give a file name such as 'agent' (writes agent.key and agent.pub)\n",
            base.empty() ? "is empty" : ("'" + base + "' ends in '/'").c_str());
        return kExitUsage;
    }
    const std::string key_path = base + ".key", pub_path = base + ".pub";
    std::string pub;
    try {
        pub = sp::keys::write_key_pair(base, args.force ? sp::keys::Replace::yes : sp::keys::Replace::no);
    } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "sp-ctl keygen: %s\n", e.what());
        return kExitFailed;
    }
    std::string out;
    if (args.json) {
        out =
            nlohmann::json{{"public_key", pub}, {"key_file", key_path}, {"pub_file", pub_path}}.dump() + "\n";
    } else {
        out = "wrote " + key_path + " (secret, mode 0600) and " + pub_path + "\npublic key: " + pub + "\n";
    }
    return write_stdout(command, out) ? 0 : kExitFailed;
}

}  // namespace

Command add_keygen(CLI::App& root) {
    auto args = std::make_shared<KeygenArgs>();
    CLI::App* command = root.add_subcommand("keygen", kDescription);
    command->add_option("NAME", args->base, "the files to write: NAME.key and NAME.pub")->required();
    command->add_flag("--force", args->force, "replace existing files");
    command->add_flag("--json", args->json, "print JSON instead of text");
    command->footer("Exit codes: 0 ok, 1 cannot write (or files exist), 2 bad usage.");
    return {command, [args] { return run_keygen(*args); }};
}

}  // namespace sp::ctl
