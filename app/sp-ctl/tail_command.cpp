// sp-ctl tail: follows the agent's telemetry PUB socket (agent/PROTOCOL.md §2-3) and prints each
// message, noticing seq gaps and publisher restarts.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "control_client.h"
#include "option_checks.h"
#include "sp/json_input.h"

namespace sp::ctl {
namespace {

namespace protocol = sp::protocol;
using ojson = nlohmann::ordered_json;

volatile sig_atomic_t g_interrupted = 0;

void on_sigint(int) {
    g_interrupted = 1;
}

std::string text_of(const ojson& j, const char* key, const char* fallback = "?") {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string fixed2(const ojson& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number()) return "?";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", it->get<double>());
    return buf;
}

// Block names come from the latest hello; before one arrives a block is shown by its id.
struct Printer {
    std::map<int, std::string> names;

    std::string block_name(const ojson& id) const {
        if (!id.is_number_integer()) return "block " + id.dump();
        const auto it = names.find(id.get<int>());
        return it != names.end() ? it->second : "block " + id.dump();
    }

    // `m` is `body` parsed; hello and heartbeat are read by sp::protocol, as the dashboard reads them.
    std::string line(protocol::Topic topic, const ojson& m, std::string_view body) {
        switch (topic) {
            case protocol::Topic::hello: {
                std::string error;
                const std::optional<protocol::Hello> hello = protocol::parse_hello(body, error);
                if (!hello) return "hello (unreadable: " + error + ")";
                names.clear();
                for (const sp::BlockInfo& b : hello->header.blocks) names[b.id] = b.name;
                return "hello: run " + hello->header.run_id + ", rank " + std::to_string(hello->rank) + ", " +
                       std::to_string(hello->header.blocks.size()) + " blocks, protocol " +
                       (hello->protocol ? std::to_string(*hello->protocol) : std::string("?"));
            }
            case protocol::Topic::update: {
                std::string s = "step " + text_of(m, "step_id") + ": " + text_of(m, "blocks_bf16", "0") +
                                " bf16 / " + text_of(m, "blocks_int8", "0") + " int8";
                if (m.value("blocks_fp8", 0) > 0) s += " / " + text_of(m, "blocks_fp8") + " fp8";
                if (m.value("blocks_int4", 0) > 0) s += " / " + text_of(m, "blocks_int4") + " int4";
                return s + ", saving " + fixed2(m, "estimated_bandwidth_saving_pct") + "%, changes " +
                       text_of(m, "precision_changes", "0");
            }
            case protocol::Topic::event: {
                const std::string kind = text_of(m, "kind");
                std::string s = "step " + text_of(m, "step") + " event " + kind;
                if (kind == "precision_change") {
                    s += " " + block_name(m.value("block", ojson())) + " " + text_of(m, "from") + " -> " +
                         text_of(m, "to");
                } else if (kind == "command") {
                    s += " " + (m.contains("command") ? m["command"].dump() : std::string("?"));
                    if (m.value("ok", true))
                        s += " applied, changes " + text_of(m, "changes", "0");
                    else
                        s += " refused: " + text_of(m, "error");
                    if (m.contains("id")) s += " (id " + text_of(m, "id") + ")";
                    return s;
                } else if (kind == "dropped") {
                    s += " " + text_of(m, "count");
                }
                if (m.contains("message")) s += ": " + text_of(m, "message");
                if (m.contains("reason")) s += " (" + text_of(m, "reason") + ")";
                return s;
            }
            case protocol::Topic::stats:
                return "stats: step " + text_of(m, "step") + ", " +
                       std::to_string(m.contains("blocks") ? m["blocks"].size() : 0) + " blocks";
            case protocol::Topic::heartbeat: {
                std::string error;
                const std::optional<protocol::Heartbeat> beat = protocol::parse_heartbeat(body, error);
                return beat ? "heartbeat: step " + std::to_string(beat->step)
                            : "heartbeat (unreadable: " + error + ")";
            }
        }
        return m.dump();
    }
};

constexpr const char* kDescription =
    "print the agent's live telemetry\n"
    "\n"
    "Prints the agent's telemetry as it arrives, one line per message (with --json\n"
    "{\"topic\":...,\"message\":{...}}). Topics: hello, update, stats, event, heartbeat (default: all).\n"
    "When subscribed to all topics, lost messages are reported on stderr as\n"
    "\"missed N messages (seq a..b)\"; with a topic filter they cannot be told from filtered ones.\n"
    "Stops after N messages, on Ctrl-C, or when --timeout seconds pass without a message.";

struct TailArgs {
    ConnectionArgs connection;
    std::string topics;  // as given; empty: all
    std::optional<std::uint64_t> count;
};

// --topics "update,event" -> its topics, and "" or what is wrong with the list.
std::string parse_topics(const std::string& list, std::vector<std::string>& out) {
    for (const std::string& t : split_list(list)) {
        if (!protocol::parse_topic(t))
            return "unknown topic '" + t + "' (hello, update, stats, event, heartbeat)";
        out.push_back(t);
    }
    return {};
}

// What the loop keeps between messages.
struct Follow {
    bool gaps_visible = true;  // subscribed to every topic: a jump in seq is a loss
    std::optional<std::uint64_t> last_seq;
    std::uint64_t printed = 0;
    Printer printer;
};

// Losses and restarts, from the message's seq (stderr).
void note_seq(Follow& f, const std::string& body) {
    const auto seq = protocol::seq_of(body);
    if (!seq) return;
    if (f.gaps_visible && f.last_seq && *seq > *f.last_seq + 1) {
        std::fprintf(stderr, "sp-ctl tail: missed %llu messages (seq %llu..%llu)\n",
                     static_cast<unsigned long long>(*seq - *f.last_seq - 1),
                     static_cast<unsigned long long>(*f.last_seq + 1),
                     static_cast<unsigned long long>(*seq - 1));
    } else if (f.last_seq && *seq <= *f.last_seq) {
        std::fprintf(stderr, "sp-ctl tail: publisher restarted (seq %llu after %llu)\n",
                     static_cast<unsigned long long>(*seq), static_cast<unsigned long long>(*f.last_seq));
    }
    f.last_seq = seq;
}

// One message printed (a line, or JSON with --json); a body that is no JSON object is reported and
// skipped. False when standard output failed.
bool print_message(const Connection& c, Follow& f, const std::string& topic_text, const std::string& body) {
    ojson message;
    sp::JsonError bad;
    if (!sp::parse_json(body, message, bad) || !message.is_object()) {
        const std::string why =
            message.is_discarded() ? "not valid JSON: " + bad.message() : "not a JSON object";
        std::fprintf(stderr, "sp-ctl tail: ignoring a '%s' message: %s\n", topic_text.c_str(), why.c_str());
        return true;
    }
    std::string out;
    const auto topic = protocol::parse_topic(topic_text);
    if (c.json)
        out = ojson{{"topic", topic_text}, {"message", message}}.dump() + "\n";
    else if (topic)
        out = f.printer.line(*topic, message, body) + "\n";
    else
        out = topic_text + ": " + body + "\n";  // a topic newer than this build: shown as is
    if (!write_stdout("tail", out)) return false;
    ++f.printed;
    return true;
}

// The SUB socket on the connection, subscribed to `topics` (all when empty). Throws UsageError for a
// malformed endpoint (open_socket), zmq::error_t for anything else.
zmq::socket_t subscribe(zmq::context_t& ctx, const Connection& c, const std::vector<std::string>& topics,
                        HandshakeMonitor& monitor) {
    zmq::socket_t sub = open_socket(ctx, zmq::socket_type::sub, c, &monitor);
    if (topics.empty()) sub.set(zmq::sockopt::subscribe, "");
    for (const std::string& t : topics) sub.set(zmq::sockopt::subscribe, t);
    return sub;
}

int run_tail(const TailArgs& args) {
    Connection c;
    if (!read_connection("tail", args.connection, c)) return kExitUsage;
    std::vector<std::string> topics;
    if (!args.topics.empty()) (void)parse_topics(args.topics, topics);  // checked when parsed
    zmq::context_t ctx(1);
    HandshakeMonitor monitor;
    std::optional<zmq::socket_t> sub;
    try {
        sub.emplace(subscribe(ctx, c, topics, monitor));
    } catch (const zmq::error_t& e) {
        std::fprintf(stderr, "sp-ctl tail: cannot connect to '%s': %s\n", c.endpoint.c_str(), e.what());
        return kExitUsage;
    }
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: zmq_poll returns early on Ctrl-C

    using Clock = std::chrono::steady_clock;
    Follow f;
    f.gaps_visible = topics.empty();
    auto last_arrival = Clock::now();
    while (!g_interrupted && (!args.count || f.printed < *args.count)) {
        // Short slices so Ctrl-C is noticed even where a signal does not interrupt the poll.
        zmq_pollitem_t items[] = {{sub->handle(), 0, ZMQ_POLLIN, 0}, monitor.poll_item()};
        const int rc = zmq_poll(items, 2, 200);
        if (rc > 0 && (items[1].revents & ZMQ_POLLIN)) {
            if (const std::string refusal = monitor.read(c.endpoint); !refusal.empty()) {
                std::fprintf(stderr, "sp-ctl tail: %s\n", refusal.c_str());
                return kExitNoAnswer;
            }
        }
        if (rc <= 0 || !(items[0].revents & ZMQ_POLLIN)) {
            if (c.timeout_s &&
                std::chrono::duration<double>(Clock::now() - last_arrival).count() >= *c.timeout_s) {
                const std::string why =
                    monitor.hint().empty() ? "is the agent running? check --endpoint" : monitor.hint();
                std::fprintf(stderr, "sp-ctl tail: nothing from %s within %g s (%s)\n", c.endpoint.c_str(),
                             *c.timeout_s, why.c_str());
                return kExitNoAnswer;
            }
            continue;
        }
        std::vector<zmq::message_t> frames;
        do {
            frames.emplace_back();
            if (!sub->recv(frames.back(), zmq::recv_flags::dontwait)) break;
        } while (frames.back().more());
        last_arrival = Clock::now();
        if (frames.size() != 2) {
            std::fprintf(stderr, "sp-ctl tail: ignoring a message of %zu frames (expected topic and body)\n",
                         frames.size());
            continue;
        }
        const std::string body = frames[1].to_string();
        note_seq(f, body);
        if (!print_message(c, f, frames[0].to_string(), body)) return kExitFailed;
    }
    return 0;
}

}  // namespace

Command add_tail(CLI::App& root) {
    auto args = std::make_shared<TailArgs>();
    CLI::App* command = root.add_subcommand("tail", kDescription);
    command->add_option("--topics", args->topics, "the topics to print")
        ->type_name("T,...")
        ->check(checked_by([](const std::string& list) {
            std::vector<std::string> unused;
            return parse_topics(list, unused);
        }));
    command
        ->add_option_function<std::uint64_t>(
            "--count", [&count = args->count](const std::uint64_t& n) { count = n; }, "stop after N messages")
        ->type_name("N")
        ->transform(whole_number(1));
    connection_options(*command, args->connection, protocol::kDefaultTelemetryEndpoint, std::nullopt,
                       "give up when nothing arrives for this long (default: wait forever)");
    command->footer(
        "Exit codes: 0 ok (count reached or interrupted), 1 failed, 2 bad usage, 3 nothing arrived in time.");
    return {command, [args] { return run_tail(*args); }};
}

}  // namespace sp::ctl
