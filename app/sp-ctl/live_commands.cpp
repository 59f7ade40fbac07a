// The control subcommands: pin, release, release-all, mode, budget, tolerance, snapshot, ping (one request
// each on the agent's control socket, agent/PROTOCOL.md §4).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "command_watch.h"
#include "commands.h"
#include "control_client.h"
#include "option_checks.h"
#include "sp/json_input.h"

namespace sp::ctl {
namespace {

namespace protocol = sp::protocol;

constexpr const char* kReplyTimeout = "how long to wait for the reply";
constexpr const char* kQueryExitCodes =
    "Exit codes: 0 ok, 1 rejected by the agent, 2 bad usage, 3 no answer.";

// A routing command's description: its summary (the line `sp-ctl --help` lists), its details, and
// what all of them share: the agent applies them at the next step boundary, and sp-ctl waits for that
// unless told not to.
std::string routing_description(const char* summary, const char* details = "") {
    return std::string(summary) + "\n\n" + details +
           "By default sp-ctl follows the agent's telemetry until the command has applied (or was\n"
           "rejected) at the next step boundary, and reports that.";
}

// What is wrong with a --blocks list ("" when nothing): an empty entry.
std::string block_list_problem(const std::string& text) {
    for (const std::string& token : split_list(text)) {
        if (token.empty())
            return "an empty entry in '" + text +
                   "' (expected ids or names, e.g. --blocks 3,4 or --blocks blocks.3)";
    }
    return {};
}

// "3,4" -> [3,4]; "blocks.3,4" -> ["blocks.3",4]: a token that is not an integer is a block name,
// which resolve_block_names() turns into its id from the agent's layout. The ids' range is the
// protocol layer's to judge, so a negative id gets the same message the agent would send.
nlohmann::json parse_blocks(const std::string& text) {
    nlohmann::json out = nlohmann::json::array();
    for (const std::string& token : split_list(text)) {
        long long id = 0;
        const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), id);
        if (ec == std::errc() && ptr == token.data() + token.size())
            out.push_back(id);
        else
            out.push_back(token);
    }
    return out;
}

// --blocks, required, of pin and release.
void add_blocks_option(CLI::App& command, std::string& blocks, const char* what) {
    command
        .add_option(
            "--blocks", blocks,
            std::string(what) + ": ids, or the names the dashboard shows, comma-separated (3,4 or blocks.3)")
        ->required()
        ->type_name("IDS")
        ->check(checked_by(block_list_problem));
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
        case sp::Command::Kind::set_tolerance:
            return "set loss tolerance " + json_number(cmd.tolerance_pct) + "%";
    }
    return "command";
}

// What every routing command takes besides its own options: the connection, and how it follows the
// command to its outcome.
struct RoutingArgs {
    ConnectionArgs connection;
    bool no_wait = false;
    std::optional<std::string> telemetry_endpoint;
    double wait_timeout_s = 60.0;
};

// Declares the options above on a routing command, after its own, and its exit codes.
void add_routing_options(CLI::App& command, RoutingArgs& args) {
    const char* group = "outcome options";
    command
        .add_flag("--no-wait", args.no_wait,
                  "report the acknowledgement alone (the command is queued, not yet applied)")
        ->group(group);
    command
        .add_option_function<std::string>(
            "--telemetry-endpoint", [&args](const std::string& e) { args.telemetry_endpoint = e; },
            "the agent's telemetry socket, followed for the outcome "
            "(default: the control endpoint's port - 1, e.g. tcp://127.0.0.1:5556)")
        ->type_name("E")
        ->group(group);
    command.add_option("--wait-timeout", args.wait_timeout_s, "how long to wait for the command to apply")
        ->type_name("SECONDS")
        ->check(seconds_up_to_a_day())
        ->capture_default_str()
        ->group(group);
    connection_options(command, args.connection, protocol::kDefaultControlEndpoint, 3.0, kReplyTimeout);
    command.footer(
        "Exit codes: 0 applied (queued, with --no-wait), 1 rejected by the agent (in the reply or when\n"
        "it applied) or the run ended first, 2 bad usage, 3 no answer or no outcome within the wait.");
}

// How to follow a routing command to its outcome: the telemetry connection and the wait.
struct Follow {
    Connection telemetry;
    double seconds = 60.0;
};

// Where to follow the command: --telemetry-endpoint, or the one beside the control endpoint. On a bad
// endpoint prints why and returns false.
bool read_follow(const char* command, const RoutingArgs& args, const Connection& control, Follow& out) {
    out.telemetry = control;  // the same keys and connection timeout
    out.seconds = args.wait_timeout_s;
    if (args.telemetry_endpoint) {
        out.telemetry.endpoint = *args.telemetry_endpoint;
        out.telemetry.endpoint_option = "--telemetry-endpoint";
    } else if (const auto beside = telemetry_beside(control.endpoint)) {
        out.telemetry.endpoint = *beside;
        out.telemetry.endpoint_option = "--telemetry-endpoint (by default --endpoint's port - 1)";
    } else {
        // A malformed --endpoint lands here too; only a connect could tell it from a valid ipc:// one.
        std::fprintf(stderr,
                     "sp-ctl %s: cannot tell the telemetry endpoint that goes with --endpoint '%s' (only "
                     "tcp://HOST:PORT has one beside it); give --telemetry-endpoint (or --no-wait)\n",
                     command, control.endpoint.c_str());
        return false;
    }
    if (out.telemetry.endpoint.empty() || out.telemetry.endpoint == control.endpoint) {
        std::fprintf(stderr,
                     "sp-ctl %s: --telemetry-endpoint must be the agent's telemetry socket, not '%s'\n",
                     command, out.telemetry.endpoint.c_str());
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
// someone else and undo it, so a lost reply is reported instead. `fill` writes the command's fields.
int run_routing(const char* command, const RoutingArgs& args,
                const std::function<void(nlohmann::json&)>& fill) {
    Connection c;
    if (!read_connection(command, args.connection, c)) return kExitUsage;
    const bool follow = !args.no_wait;
    Follow f;
    if (follow && !read_follow(command, args, c, f)) return kExitUsage;
    nlohmann::json request = {{"id", "local-check"}};
    fill(request);
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

std::string json_scalar(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return "?";
    return it->is_string() ? it->get<std::string>() : it->dump();
}

int run_snapshot(const ConnectionArgs& args) {
    const char* command = "snapshot";
    Connection c;
    if (!read_connection(command, args, c)) return kExitUsage;
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
        if (s.loss_tolerance_pct) {
            char tolerance[80];
            std::snprintf(tolerance, sizeof tolerance, " (loss tolerance %.2f%%%s)", *s.loss_tolerance_pct,
                          s.mode == sp::Mode::tolerance ? "" : ", used in mode tolerance only");
            mode += tolerance;
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

int run_ping(const ConnectionArgs& args) {
    const char* command = "ping";
    Connection c;
    if (!read_connection(command, args, c)) return kExitUsage;
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

}  // namespace

Command add_pin(CLI::App& root) {
    struct PinArgs {
        RoutingArgs routing;
        std::string blocks, precision;
        std::optional<long long> for_steps;
        bool release_on_spike = false;
    };
    auto args = std::make_shared<PinArgs>();
    CLI::App* command = root.add_subcommand(
        "pin", routing_description("pin blocks of a running agent to a precision",
                                   "A format the agent's runtime cannot materialize is rejected.\n"));
    add_blocks_option(*command, args->blocks, "the blocks to pin");
    command->add_option("--precision", args->precision, "bf16, int8, fp8_e4m3, fp8_e5m2 or int4, in any case")
        ->required()
        ->type_name("P");
    command
        ->add_option_function<long long>(
            "--for-steps", [&steps = args->for_steps](const long long& n) { steps = n; },
            "the pin ends by itself N steps after it applied")
        ->type_name("N")
        ->transform(integer("a number of steps"));  // its range is the protocol layer's to judge
    command->add_flag("--release-on-spike", args->release_on_spike,
                      "a loss spike ends the pin (a block pinned below BF16 goes back to BF16, as a rollback "
                      "would move it)");
    add_routing_options(*command, args->routing);
    return {command, [args] {
                return run_routing("pin", args->routing, [&a = *args](nlohmann::json& r) {
                    r["cmd"] = "pin";
                    // As the dashboard writes them too ("INT8"): the protocol's names are lower case.
                    std::string precision = a.precision;
                    for (char& ch : precision) ch = char(std::tolower(static_cast<unsigned char>(ch)));
                    r["precision"] = precision;
                    if (a.for_steps) r["for_steps"] = *a.for_steps;
                    if (a.release_on_spike) r["release_on_spike"] = true;
                    r["blocks"] = parse_blocks(a.blocks);
                });
            }};
}

Command add_release(CLI::App& root) {
    struct ReleaseArgs {
        RoutingArgs routing;
        std::string blocks;
    };
    auto args = std::make_shared<ReleaseArgs>();
    CLI::App* command =
        root.add_subcommand("release", routing_description("release operator pins of blocks"));
    add_blocks_option(*command, args->blocks, "the blocks to release");
    add_routing_options(*command, args->routing);
    return {command, [args] {
                return run_routing("release", args->routing, [&a = *args](nlohmann::json& r) {
                    r["cmd"] = "release";
                    r["blocks"] = parse_blocks(a.blocks);
                });
            }};
}

Command add_release_all(CLI::App& root) {
    auto args = std::make_shared<RoutingArgs>();
    CLI::App* command = root.add_subcommand("release-all", routing_description("release every operator pin"));
    add_routing_options(*command, *args);
    return {command, [args] {
                return run_routing("release-all", *args, [](nlohmann::json& r) { r["cmd"] = "release_all"; });
            }};
}

Command add_mode(CLI::App& root) {
    struct ModeArgs {
        RoutingArgs routing;
        std::string mode;
    };
    auto args = std::make_shared<ModeArgs>();
    CLI::App* command = root.add_subcommand(
        "mode", routing_description("switch the policy's mode: dynamic, static, off, budget or tolerance"));
    // The names are the protocol layer's to judge, as the agent would.
    command->add_option("MODE", args->mode, "dynamic, static, off, budget or tolerance")->required();
    add_routing_options(*command, args->routing);
    return {command, [args] {
                return run_routing("mode", args->routing, [&a = *args](nlohmann::json& r) {
                    r["cmd"] = "set_mode";
                    r["mode"] = a.mode;
                });
            }};
}

// A command that sets one percentage of the policy: `name --FLAG X` sends {"cmd": cmd, field: X}.
// The texts are literals (the lambdas keep the pointers).
Command add_percent_command(CLI::App& root, const char* name, const char* summary, const char* details,
                            const char* flag, const char* flag_help, const char* cmd, const char* field) {
    struct PercentArgs {
        RoutingArgs routing;
        double pct = 0.0;
    };
    auto args = std::make_shared<PercentArgs>();
    CLI::App* command = root.add_subcommand(name, routing_description(summary, details));
    command->add_option(flag, args->pct, flag_help)
        ->required()
        ->type_name("X")
        ->check(number("a number"));  // its range is the protocol layer's to judge
    add_routing_options(*command, args->routing);
    return {command, [args, name, cmd, field] {
                return run_routing(name, args->routing, [&a = *args, cmd, field](nlohmann::json& r) {
                    r["cmd"] = cmd;
                    r[field] = a.pct;
                });
            }};
}

Command add_budget(CLI::App& root) {
    return add_percent_command(
        root, "budget", "set the budget mode's target saving (percent)",
        "Sets the budget mode's target: bytes to save against all-BF16, in percent (0 to 100).\n"
        "The next update plans for it; `sp-ctl mode budget` switches to the budget mode.\n",
        "--target-pct", "the saving to aim for, in percent", "set_budget", "target_pct");
}

Command add_tolerance(CLI::App& root) {
    return add_percent_command(
        root, "tolerance", "set the tolerance mode's loss tolerance (percent)",
        "Sets the tolerance mode's loss tolerance: the estimated increase of the training loss the\n"
        "plan may cost, in percent of the loss (0 to 100). The next update saves the most bytes\n"
        "within it; `sp-ctl mode tolerance` switches to the tolerance mode.\n",
        "--pct", "the loss increase allowed, in percent", "set_tolerance", "loss_tolerance_pct");
}

Command add_snapshot(CLI::App& root) {
    auto args = std::make_shared<ConnectionArgs>();
    CLI::App* command =
        root.add_subcommand("snapshot",
                            "show a running agent's routing state\n\n"
                            "Shows the agent's routing state: step, mode, and per block precision and pin.");
    connection_options(*command, *args, protocol::kDefaultControlEndpoint, 3.0, kReplyTimeout);
    command->footer(kQueryExitCodes);
    return {command, [args] { return run_snapshot(*args); }};
}

Command add_ping(CLI::App& root) {
    auto args = std::make_shared<ConnectionArgs>();
    CLI::App* command = root.add_subcommand(
        "ping",
        "check that the agent answers\n\nChecks that the agent answers; prints its step and the round trip.");
    connection_options(*command, *args, protocol::kDefaultControlEndpoint, 3.0, kReplyTimeout);
    command->footer(kQueryExitCodes);
    return {command, [args] { return run_ping(*args); }};
}

}  // namespace sp::ctl
