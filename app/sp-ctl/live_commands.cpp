// The control subcommands: pin, release, release-all, mode, snapshot, ping (one request each on the
// agent's control socket, agent/PROTOCOL.md §4) and keygen (a CURVE key pair for §9).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_watch.h"
#include "commands.h"
#include "control_client.h"
#include "sp/json_input.h"
#include "sp/keys/curve_key_file.h"

namespace sp::ctl {
namespace {

namespace protocol = sp::protocol;

std::string usage_of(const char* synopsis, const char* what) {
    return std::string("usage: sp-ctl ") + synopsis + "\n\n" + what + "\n\noptions:\n" +
           connection_help(protocol::kDefaultControlEndpoint, "how long to wait for the reply (default 3)") +
           "\nExit codes: 0 ok, 1 rejected by the agent, 2 bad usage, 3 no answer.\n";
}

// The routing commands' usage: the agent applies them at the next step boundary, and sp-ctl
// waits for that unless told not to.
std::string routing_usage(const char* synopsis, const char* what) {
    return std::string("usage: sp-ctl ") + synopsis + "\n\n" + what +
           "\nBy default sp-ctl then follows the agent's telemetry until the command has applied (or was\n"
           "rejected) at the step boundary, and reports that.\n\noptions:\n" +
           connection_help(protocol::kDefaultControlEndpoint, "how long to wait for the reply (default 3)") +
           "  --no-wait              report the acknowledgement alone (the command is queued, not yet\n"
           "                         applied)\n"
           "  --telemetry-endpoint E the agent's telemetry socket, followed for the outcome (default: the\n"
           "                         control endpoint's port - 1, e.g. tcp://127.0.0.1:5556)\n"
           "  --wait-timeout SECONDS how long to wait for the command to apply (default 60)\n"
           "\nExit codes: 0 applied (queued, with --no-wait), 1 rejected by the agent (in the reply or when\n"
           "it applied) or the run ended first, 2 bad usage, 3 no answer or no outcome within the wait.\n";
}

// "3,4" -> [3,4]; "blocks.3,4" -> ["blocks.3",4]: a token that is not an integer is a block name,
// which resolve_block_names() turns into its id from the agent's layout. The ids' range is the
// protocol layer's to judge, so a negative id gets the same message the agent would send.
bool parse_blocks(const char* command, const std::string& text, nlohmann::json& out) {
    out = nlohmann::json::array();
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = text.find(',', start);
        const std::string token =
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (token.empty()) {
            std::fprintf(stderr,
                         "sp-ctl %s: --blocks: an empty entry in '%s' (expected ids or names, e.g. --blocks "
                         "3,4 or --blocks blocks.3)\n",
                         command, text.c_str());
            return false;
        }
        long long id = 0;
        const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), id);
        if (ec == std::errc() && ptr == token.data() + token.size())
            out.push_back(id);
        else
            out.push_back(token);
        if (comma == std::string::npos) return true;
        start = comma + 1;
    }
}

// Block names in the request's "blocks" become ids, from the layout of the agent's snapshot (the
// names the dashboard shows, e.g. "blocks.4"). Returns an exit code on failure: no answer (3) or
// a name the run does not have (2, with the names it has).
std::optional<int> resolve_block_names(const char* command, const Connection& c, nlohmann::json& request) {
    auto blocks = request.find("blocks");
    if (blocks == request.end() ||
        std::none_of(blocks->begin(), blocks->end(), [](const nlohmann::json& b) { return b.is_string(); }))
        return std::nullopt;
    const Outcome outcome = exchange(command, c, true, [](const std::string& id) {
        return protocol::make_request(id, protocol::Request::Kind::snapshot);
    });
    if (!outcome.reply) return report_no_answer(command, c, outcome);
    protocol::Snapshot s;
    std::string error;
    if (!outcome.reply->ok || !protocol::parse_snapshot(outcome.reply->text, s, error)) {
        std::fprintf(stderr, "sp-ctl %s: --blocks: cannot read the agent's block names: %s\n", command,
                     outcome.reply->ok ? error.c_str() : outcome.reply->error.c_str());
        return kExitFailed;
    }
    for (nlohmann::json& b : *blocks) {
        if (!b.is_string()) continue;
        const std::string name = b.get<std::string>();
        const auto it = std::find_if(s.layout.begin(), s.layout.end(),
                                     [&](const sp::BlockInfo& info) { return info.name == name; });
        if (it == s.layout.end()) {
            const std::string range =
                s.layout.empty() ? "none" : s.layout.front().name + " .. " + s.layout.back().name;
            std::fprintf(stderr, "sp-ctl %s: --blocks: run %s has no block named '%s' (its blocks: %s)\n",
                         command, s.run_id.c_str(), name.c_str(), range.c_str());
            return kExitUsage;
        }
        b = it->id;
    }
    return std::nullopt;
}

std::string json_number(double v) {
    return nlohmann::json(v).dump();
}

std::string join_blocks(const std::vector<int>& blocks) {
    std::string out;
    for (const int b : blocks) out += (out.empty() ? "" : ",") + std::to_string(b);
    return out;
}

// Prints the reply (raw JSON with --json) or the rejection; returns the exit code.
int finish(const char* command, const Connection& c, const Outcome& outcome,
           const std::function<std::string(const protocol::Reply&)>& human) {
    const std::optional<protocol::Reply>& reply = outcome.reply;
    if (!reply) return report_no_answer(command, c, outcome);
    if (c.json && !write_stdout(command, reply->text + "\n")) return kExitFailed;
    if (!reply->ok) {
        std::fprintf(stderr, "sp-ctl %s: rejected: %s\n", command, reply->error.c_str());
        return kExitFailed;
    }
    if (!c.json && !write_stdout(command, human(*reply))) return kExitFailed;
    return 0;
}

std::string describe(const sp::Command& cmd) {
    switch (cmd.kind) {
        case sp::Command::Kind::pin:
            return "pin blocks " + join_blocks(cmd.blocks) + " -> " +
                   std::string(sp::to_string(cmd.precision)) +
                   (cmd.for_steps > 0 ? " for " + std::to_string(cmd.for_steps) + " steps" : "") +
                   (cmd.release_on_spike ? " (ends at a loss spike)" : "");
        case sp::Command::Kind::release:
            return "release blocks " + join_blocks(cmd.blocks);
        case sp::Command::Kind::release_all:
            return "release all";
        case sp::Command::Kind::set_mode:
            return "set mode " + std::string(sp::to_string(cmd.mode));
        case sp::Command::Kind::set_budget:
            return "set budget target " + json_number(cmd.target_pct) + "%";
    }
    return "command";
}

// How to follow a routing command to its outcome: the telemetry connection and the wait.
struct Follow {
    Connection telemetry;
    double seconds = 60.0;
};

// Reads --telemetry-endpoint and --wait-timeout. On a bad value prints why and returns false.
bool read_follow(const char* command, const ParsedArgs& p, const Connection& control, Follow& out) {
    out.telemetry = control;  // the same keys and connection timeout
    if (p.has("--telemetry-endpoint")) {
        out.telemetry.endpoint = p.value("--telemetry-endpoint");
    } else if (const auto beside = telemetry_beside(control.endpoint)) {
        out.telemetry.endpoint = *beside;
    } else {
        std::fprintf(stderr,
                     "sp-ctl %s: cannot tell the telemetry endpoint that goes with '%s'; give "
                     "--telemetry-endpoint (or --no-wait)\n",
                     command, control.endpoint.c_str());
        return false;
    }
    if (out.telemetry.endpoint.empty() || out.telemetry.endpoint == control.endpoint) {
        std::fprintf(stderr,
                     "sp-ctl %s: --telemetry-endpoint must be the agent's telemetry socket, not '%s'\n",
                     command, out.telemetry.endpoint.c_str());
        return false;
    }
    if (!p.has("--wait-timeout")) return true;
    const std::string text = p.value("--wait-timeout");
    char* end = nullptr;
    out.seconds = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(out.seconds) || out.seconds <= 0.0 ||
        out.seconds > 86400.0) {
        std::fprintf(stderr,
                     "sp-ctl %s: --wait-timeout must be a number of seconds in (0, 86400], got '%s'\n",
                     command, text.c_str());
        return false;
    }
    return true;
}

// Reports what became of an acknowledged command; returns the exit code.
int report_outcome(const char* command, const Connection& c, const sp::Command& cmd,
                   const protocol::Reply& ack, const CommandWatch::Outcome& o, double waited_s) {
    using Kind = CommandWatch::Outcome::Kind;
    const std::string queued = ack.effective_step ? std::to_string(*ack.effective_step) : "?";
    if (c.json && o.kind != Kind::timed_out && !write_stdout(command, o.event + "\n")) return kExitFailed;
    switch (o.kind) {
        case Kind::applied:
            if (c.json) return 0;
            return write_stdout(command, "applied: " + describe(cmd) + " at step " + std::to_string(o.step) +
                                             " (" + std::to_string(o.changes) +
                                             (o.changes == 1 ? " change)\n" : " changes)\n"))
                       ? 0
                       : kExitFailed;
        case Kind::rejected:
            std::fprintf(stderr, "sp-ctl %s: rejected by the agent at step %lld: %s\n", command,
                         static_cast<long long>(o.step), o.error.c_str());
            return kExitFailed;
        case Kind::run_ended:
            std::fprintf(stderr, "sp-ctl %s: the run ended at step %lld (%s) before the command applied\n",
                         command, static_cast<long long>(o.step), o.error.c_str());
            return kExitFailed;
        case Kind::timed_out:
            break;
    }
    std::fprintf(stderr,
                 "sp-ctl %s: accepted for step %s, but it had not applied within %g s (is training paused "
                 "or slow? --wait-timeout waits longer); its outcome is unknown\n",
                 command, queued.c_str(), waited_s);
    return kExitNoAnswer;
}

// pin, release, release-all, mode, budget: validated locally by the protocol layer (an unknown
// block count checks shape only), then sent once and, unless --no-wait, followed until the agent
// applied or rejected it. Never retried: a second copy could land after a later command from
// someone else and undo it, so a lost reply is reported instead.
int run_routing(const char* command, const Args& args, std::vector<OptionSpec> extra, std::size_t positionals,
                const std::string& usage,
                const std::function<bool(const ParsedArgs&, nlohmann::json&)>& fill) {
    extra.insert(extra.end(),
                 {{"--no-wait", false}, {"--telemetry-endpoint", true}, {"--wait-timeout", true}});
    ParsedArgs parsed;
    if (auto rc = parse_args(command, args, connection_options(extra), usage.c_str(), positionals, parsed))
        return *rc;
    Connection c;
    if (!read_connection(command, parsed, protocol::kDefaultControlEndpoint, 3.0, c)) return kExitUsage;
    const bool follow = !parsed.has("--no-wait");
    Follow f;
    if (follow && !read_follow(command, parsed, c, f)) return kExitUsage;
    nlohmann::json request = {{"id", "local-check"}};
    if (!fill(parsed, request)) return kExitUsage;
    if (const std::optional<int> rc = resolve_block_names(command, c, request)) return *rc;
    const auto checked = protocol::parse_request(request.dump(), protocol::kUnknownBlockCount);
    if (const auto* bad = std::get_if<protocol::RequestError>(&checked)) {
        std::fprintf(stderr, "sp-ctl %s: %s\n", command, bad->error.c_str());
        return kExitUsage;
    }
    const sp::Command cmd = std::get<protocol::Request>(checked).command;
    // Subscribed before the request goes out, so the command event cannot slip past.
    CommandWatch watch;
    if (std::string error; follow && !watch.open(f.telemetry, error)) {
        // Silence on the telemetry side: ask the control side whether any agent is there at all, so
        // that a user with no trainer running is told that, not to check --telemetry-endpoint.
        const Outcome probe = exchange(command, c, false, [](const std::string& id) {
            return protocol::make_request(id, protocol::Request::Kind::ping);
        });
        if (!probe.reply) return report_no_answer(command, c, probe);
        std::fprintf(stderr, "sp-ctl %s: %s\n", command, error.c_str());
        return kExitNoAnswer;
    }
    std::string sent_id;
    const Outcome outcome = exchange(command, c, false, [&](const std::string& id) {
        sent_id = id;
        return protocol::make_request(id, cmd);
    });
    if (!follow || !outcome.reply || !outcome.reply->ok) {
        return finish(command, c, outcome, [&](const protocol::Reply& r) {
            const std::string step = r.effective_step ? std::to_string(*r.effective_step) : "?";
            return "accepted: " + describe(cmd) + ", queued for step " + step + "\n";
        });
    }
    if (c.json && !write_stdout(command, outcome.reply->text + "\n")) return kExitFailed;
    return report_outcome(command, c, cmd, *outcome.reply, watch.wait(sent_id, f.seconds), f.seconds);
}

bool require(const char* command, const ParsedArgs& p, const char* option) {
    if (p.has(option)) return true;
    std::fprintf(stderr, "sp-ctl %s: %s is required\n", command, option);
    return false;
}

std::string json_scalar(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return "?";
    return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

int run_pin(const Args& args) {
    const std::string usage = routing_usage(
        "pin --blocks IDS --precision P [--for-steps N] [--release-on-spike] [options]",
        "Pins blocks (ids or names: --blocks 3,4 or --blocks blocks.3) to a precision: bf16, int8, fp8_e4m3, "
        "fp8_e5m2, int4.\nThe agent applies it at the next step boundary; a format its "
        "runtime cannot materialize is rejected.\n"
        "  --for-steps N          the pin ends by itself N steps after it applied\n"
        "  --release-on-spike     a loss spike ends the pin (a block pinned below BF16 goes\n"
        "                         back to BF16, as a rollback would move it)");
    return run_routing(
        "pin", args,
        {{"--blocks", true}, {"--precision", true}, {"--for-steps", true}, {"--release-on-spike", false}}, 0,
        usage, [](const ParsedArgs& p, nlohmann::json& r) {
            if (!require("pin", p, "--blocks") || !require("pin", p, "--precision")) return false;
            r["cmd"] = "pin";
            // As the dashboard writes them too ("INT8"): the protocol's names are lower case.
            std::string precision = p.value("--precision");
            for (char& ch : precision) ch = char(std::tolower(static_cast<unsigned char>(ch)));
            r["precision"] = precision;
            if (p.has("--for-steps")) {
                long long steps = 0;
                const std::string text = p.value("--for-steps");
                const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), steps);
                if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
                    std::fprintf(stderr, "sp-ctl pin: --for-steps: '%s' is not a number of steps\n",
                                 text.c_str());
                    return false;
                }
                r["for_steps"] = steps;  // its range is the protocol layer's to judge
            }
            if (p.has("--release-on-spike")) r["release_on_spike"] = true;
            return parse_blocks("pin", p.value("--blocks"), r["blocks"]);
        });
}

int run_release(const Args& args) {
    const std::string usage =
        routing_usage("release --blocks IDS [options]",
                      "Releases operator pins of blocks (ids or names: --blocks 3,4 or --blocks blocks.3).");
    return run_routing("release", args, {{"--blocks", true}}, 0, usage,
                       [](const ParsedArgs& p, nlohmann::json& r) {
                           if (!require("release", p, "--blocks")) return false;
                           r["cmd"] = "release";
                           return parse_blocks("release", p.value("--blocks"), r["blocks"]);
                       });
}

int run_release_all(const Args& args) {
    const std::string usage = routing_usage("release-all [options]", "Releases every operator pin.");
    return run_routing("release-all", args, {}, 0, usage, [](const ParsedArgs&, nlohmann::json& r) {
        r["cmd"] = "release_all";
        return true;
    });
}

int run_mode(const Args& args) {
    const std::string usage =
        routing_usage("mode dynamic|static|off|budget [options]", "Switches the policy's mode.");
    return run_routing("mode", args, {}, 1, usage, [&usage](const ParsedArgs& p, nlohmann::json& r) {
        if (p.positionals.empty()) {
            std::fprintf(stderr, "sp-ctl mode: which mode? dynamic, static, off or budget\n\n%s",
                         usage.c_str());
            return false;
        }
        r["cmd"] = "set_mode";
        r["mode"] = p.positionals[0];
        return true;
    });
}

int run_budget(const Args& args) {
    const std::string usage = routing_usage(
        "budget --target-pct X [options]",
        "Sets the budget mode's target: bytes to save against all-BF16, in percent (0 to 100).\n"
        "The next update plans for it; `sp-ctl mode budget` switches to the budget mode.");
    return run_routing(
        "budget", args, {{"--target-pct", true}}, 0, usage, [](const ParsedArgs& p, nlohmann::json& r) {
            if (!require("budget", p, "--target-pct")) return false;
            const std::string text = p.value("--target-pct");
            double v = 0;
            const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
                std::fprintf(stderr, "sp-ctl budget: --target-pct: '%s' is not a number\n", text.c_str());
                return false;
            }
            r["cmd"] = "set_budget";
            r["target_pct"] = v;
            return true;
        });
}

int run_snapshot(const Args& args) {
    const char* command = "snapshot";
    const std::string usage =
        usage_of("snapshot [options]",
                 "Shows the agent's routing state: step, mode, and per block precision and pin.");
    ParsedArgs parsed;
    if (auto rc = parse_args(command, args, connection_options(), usage.c_str(), 0, parsed)) return *rc;
    Connection c;
    if (!read_connection(command, parsed, protocol::kDefaultControlEndpoint, 3.0, c)) return kExitUsage;
    // A read changes nothing, so a lost request or reply is safe to retry.
    const Outcome outcome = exchange(command, c, true, [](const std::string& id) {
        return protocol::make_request(id, protocol::Request::Kind::snapshot);
    });
    const auto& reply = outcome.reply;
    if (reply && reply->ok && !c.json) {
        protocol::Snapshot s;
        std::string error;
        if (!protocol::parse_snapshot(reply->text, s, error)) {
            std::fprintf(stderr, "sp-ctl snapshot: bad snapshot from the agent: %s\n", error.c_str());
            return kExitFailed;
        }
        std::string mode = std::string(sp::to_string(s.mode));
        if (s.budget_target_pct) {
            char target[64];
            std::snprintf(target, sizeof target, " (budget target %.1f%%%s)", *s.budget_target_pct,
                          s.mode == sp::Mode::budget ? "" : ", used in mode budget only");
            mode += target;
        }
        std::string out = "step " + std::to_string(s.step) + ", mode " + mode + ", run " + s.run_id +
                          ", rank " + std::to_string(s.rank) + ", seq " + std::to_string(s.seq) + "\n";
        char line[256];
        std::snprintf(line, sizeof line, "%5s  %-24s %-10s %s\n", "block", "name", "precision", "pin");
        out += line;
        for (std::size_t i = 0; i < s.layout.size(); ++i) {
            std::string pin = i < s.pins.size() && s.pins[i] ? std::string(sp::to_string(*s.pins[i])) : "-";
            // How the pin ends besides a release (POLICY.md rule 20), when the agent says.
            std::string terms;
            if (pin != "-" && i < s.pin_until.size() && s.pin_until[i])
                terms = "until step " + std::to_string(*s.pin_until[i]);
            if (pin != "-" && i < s.pin_release_on_spike.size() && s.pin_release_on_spike[i])
                terms += (terms.empty() ? "" : " or ") + std::string("a loss spike");
            if (!terms.empty()) pin += " (" + terms + ")";
            const std::string prec =
                i < s.precision.size() ? std::string(sp::to_string(s.precision[i])) : "?";
            std::snprintf(line, sizeof line, "%5d  %-24s %-10s %s\n", s.layout[i].id,
                          s.layout[i].name.c_str(), prec.c_str(), pin.c_str());
            out += line;
        }
        return write_stdout(command, out) ? 0 : kExitFailed;
    }
    return finish(command, c, outcome, [](const protocol::Reply&) { return std::string(); });
}

int run_ping(const Args& args) {
    const char* command = "ping";
    const std::string usage =
        usage_of("ping [options]", "Checks that the agent answers; prints its step and the round trip.");
    ParsedArgs parsed;
    if (auto rc = parse_args(command, args, connection_options(), usage.c_str(), 0, parsed)) return *rc;
    Connection c;
    if (!read_connection(command, parsed, protocol::kDefaultControlEndpoint, 3.0, c)) return kExitUsage;
    const auto start = std::chrono::steady_clock::now();
    const Outcome outcome = exchange(command, c, true, [](const std::string& id) {
        return protocol::make_request(id, protocol::Request::Kind::ping);
    });
    // Includes a retry when there was one: the time the user actually waited.
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return finish(command, c, outcome, [ms](const protocol::Reply& r) {
        nlohmann::json j;
        sp::JsonError bad;
        sp::parse_json(r.text, j, bad);  // parse_reply already accepted it; a failure shows "?"
        char line[160];
        std::snprintf(line, sizeof line, "pong: step %s, protocol %s, %.2f ms\n",
                      json_scalar(j, "step").c_str(), json_scalar(j, "protocol").c_str(), ms);
        return std::string(line);
    });
}

int run_keygen(const Args& args) {
    const char* command = "keygen";
    const char* usage =
        "usage: sp-ctl keygen NAME [--force] [--json]\n"
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
        "NAME must name a file: an empty NAME, or one ending in '/', is refused.\n"
        "Exit codes: 0 ok, 1 cannot write (or files exist), 2 bad usage.\n";
    ParsedArgs parsed;
    if (auto rc = parse_args(command, args, {{"--force", false}, {"--json", false}}, usage, 1, parsed))
        return *rc;
    if (parsed.positionals.empty()) {
        std::fprintf(stderr, "sp-ctl keygen: NAME is required\n\n%s", usage);
        return kExitUsage;
    }
    const std::string base = parsed.positionals[0];
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
        pub = sp::keys::write_key_pair(
            base, parsed.has("--force") ? sp::keys::Replace::yes : sp::keys::Replace::no);
    } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "sp-ctl keygen: %s\n", e.what());
        return kExitFailed;
    }
    std::string out;
    if (parsed.has("--json")) {
        out =
            nlohmann::json{{"public_key", pub}, {"key_file", key_path}, {"pub_file", pub_path}}.dump() + "\n";
    } else {
        out = "wrote " + key_path + " (secret, mode 0600) and " + pub_path + "\npublic key: " + pub + "\n";
    }
    return write_stdout(command, out) ? 0 : kExitFailed;
}

}  // namespace sp::ctl
