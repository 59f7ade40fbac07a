#include "control_client.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "option_checks.h"
#include "sp/keys/curve_key_file.h"
#include "sp/transport/client_socket.h"

namespace sp::ctl {
namespace {

using Clock = std::chrono::steady_clock;

// The keys through sp::keys, which refuses a secret key others may read, a public key given as
// a secret one (and the reverse), and says so naming the file.
bool read_keys(const char* command, const ConnectionArgs& args, Connection& out) {
    try {
        out.server_public = sp::keys::read_public_key(*args.server_key);
        const sp::keys::SecretKey mine =
            sp::keys::read_secret_key(sp::keys::secret_key_path(*args.client_key));
        out.client_secret = mine.secret_z85;
        out.client_public = mine.public_z85;
        return true;
    } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "sp-ctl %s: %s\n", command, e.what());
        return false;
    }
}

// The errnos zmq_connect gives for the endpoint string itself: malformed (EINVAL), an unknown
// transport (EPROTONOSUPPORT), one this socket type cannot use (ENOCOMPATPROTO, e.g. udp://), an
// IPC path too long (ENAMETOOLONG) or an unknown interface (ENODEV).
bool is_endpoint_error(int errnum) {
    return errnum == EINVAL || errnum == EPROTONOSUPPORT || errnum == ENOCOMPATPROTO ||
           errnum == ENAMETOOLONG || errnum == ENODEV;
}

}  // namespace

void connection_options(CLI::App& command, ConnectionArgs& args, const char* endpoint,
                        std::optional<double> timeout, const char* timeout_help) {
    const char* group = "connection options";
    args.endpoint = endpoint;
    command.add_option("--endpoint", args.endpoint, "the agent's socket")
        ->type_name("ENDPOINT")
        ->check(not_empty())
        ->capture_default_str()
        ->group(group);
    args.timeout_s = timeout;
    CLI::Option* seconds = command.add_option_function<double>(
        "--timeout", [&args](const double& t) { args.timeout_s = t; }, timeout_help);
    seconds->type_name("SECONDS")->check(seconds_up_to_a_day())->group(group);
    if (timeout) {
        char shown[32];
        std::snprintf(shown, sizeof shown, "%g", *timeout);
        seconds->default_str(shown);
    }
    command.add_flag("--json", args.json, "print JSON instead of text");
    command
        .add_option_function<std::string>(
            "--server-key", [&args](const std::string& file) { args.server_key = file; },
            "the agent's CURVE public key (with --client-key)")
        ->type_name("FILE.pub")
        ->group(group);
    command
        .add_option_function<std::string>(
            "--client-key", [&args](const std::string& name) { args.client_key = name; },
            "this client's CURVE secret key, NAME.key (sp-ctl keygen; mode 0600)")
        ->type_name("NAME")
        ->group(group);
}

bool read_connection(const char* command, const ConnectionArgs& args, Connection& out) {
    out.endpoint = args.endpoint;
    out.timeout_s = args.timeout_s;
    out.json = args.json;
    const bool server = args.server_key.has_value(), client = args.client_key.has_value();
    if (server != client) {
        std::fprintf(stderr, "sp-ctl %s: CURVE needs both --server-key and --client-key\n", command);
        return false;
    }
    if (server && !read_keys(command, args, out)) return false;
    out.curve = server;
    return true;
}

zmq::socket_t open_socket(zmq::context_t& ctx, zmq::socket_type type, const Connection& c,
                          HandshakeMonitor* monitor) {
    sp::transport::ClientSocketOptions options;
    if (c.curve) options.curve = sp::transport::ClientKeys{c.server_public, c.client_public, c.client_secret};
    try {
        return sp::transport::open_client_socket(ctx, type, c.endpoint, options, monitor);
    } catch (const zmq::error_t& e) {
        // Only the endpoint's own faults; anything else (no file descriptors left, ...) is no usage error.
        if (!is_endpoint_error(e.num())) throw;
        throw UsageError(std::string(c.endpoint_option) + ": '" + c.endpoint +
                         "' is not an endpoint sp-ctl can connect to (" + e.what() +
                         "; expected tcp://HOST:PORT or ipc://PATH)");
    }
}

std::string next_request_id() {
    static unsigned counter = 0;
    return "sp-ctl-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

namespace {

// Waits until `deadline` for the reply to request `id`; a certain handshake refusal ends it early.
Outcome await_reply(const char* command, const Connection& c, zmq::socket_t& s, HandshakeMonitor& monitor,
                    const std::string& id, Clock::time_point deadline) {
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return {std::nullopt, {}, monitor.hint()};
        zmq_pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0}, monitor.poll_item()};
        if (zmq_poll(items, 2, long(left.count())) <= 0) continue;
        if (items[1].revents & ZMQ_POLLIN) {
            std::string refusal = monitor.read(c.endpoint);
            if (!refusal.empty()) return {std::nullopt, refusal, {}};
        }
        if (!(items[0].revents & ZMQ_POLLIN)) continue;
        std::vector<zmq::message_t> frames;
        do {
            frames.emplace_back();
            if (!s.recv(frames.back(), zmq::recv_flags::dontwait)) break;
        } while (frames.back().more());
        // One frame back per request (a REQ-style empty delimiter would precede it).
        const std::string frame = frames.back().to_string();
        std::string error;
        std::optional<sp::protocol::Reply> reply = sp::protocol::parse_reply(frame, error);
        if (!reply) {
            std::fprintf(stderr, "sp-ctl %s: ignoring a malformed reply: %s\n", command, error.c_str());
            continue;
        }
        // A null id: the agent could not read our request's id; ours is the only one outstanding.
        if (reply->id && *reply->id != id) continue;
        return {reply, {}, {}};
    }
}

}  // namespace

Outcome exchange(const char* command, const Connection& c, bool retry,
                 const std::function<std::string(const std::string&)>& build) {
    zmq::context_t ctx(1);
    const auto total =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*c.timeout_s));
    const auto end = Clock::now() + total;
    const int attempts = retry ? 2 : 1;
    Outcome outcome;
    for (int attempt = 1; attempt <= attempts; ++attempt) {
        const auto deadline = attempt == attempts ? end : Clock::now() + total / 2;
        // A fresh socket per try: a reply to the abandoned request can then never be mistaken for
        // this one's, and whatever the old connection had queued is dropped (linger 0).
        HandshakeMonitor monitor;
        zmq::socket_t s = open_socket(ctx, zmq::socket_type::dealer, c, &monitor);
        const std::string id = next_request_id();
        // Without ZMQ_IMMEDIATE the frame waits in the socket until the connection is up, so an
        // agent that comes up within the timeout still gets it; closing the socket discards it.
        (void)s.send(zmq::buffer(build(id)), zmq::send_flags::dontwait);
        Outcome tried = await_reply(command, c, s, monitor, id, deadline);
        if (tried.reply || !tried.refusal.empty()) return tried;
        if (!tried.hint.empty()) outcome.hint = tried.hint;
    }
    return outcome;
}

int report_no_answer(const char* command, const Connection& c, const Outcome& outcome) {
    if (!outcome.refusal.empty()) {
        std::fprintf(stderr, "sp-ctl %s: %s\n", command, outcome.refusal.c_str());
    } else {
        const std::string why =
            outcome.hint.empty() ? "is the agent running? check --endpoint" : outcome.hint;
        std::fprintf(stderr, "sp-ctl %s: no answer from %s within %g s (%s)\n", command, c.endpoint.c_str(),
                     *c.timeout_s, why.c_str());
    }
    return kExitNoAnswer;
}

}  // namespace sp::ctl
