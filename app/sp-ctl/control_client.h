#pragma once
// What the live subcommands (pin, release, ..., ping, tail) share: the connection options
// (endpoint, timeout, CURVE keys), opening a socket configured with them, and one control
// request/reply exchange with a deadline. The protocol is agent/PROTOCOL.md.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "exit_codes.h"
#include "sp/protocol.h"
#include "sp/transport/handshake_monitor.h"

namespace CLI {  // NOLINT(readability-identifier-naming): CLI11's own namespace
class App;
}

namespace sp::ctl {

using sp::transport::HandshakeMonitor;

// The connection options' values as given on the command line (connection_options binds them).
struct ConnectionArgs {
    std::string endpoint;
    std::optional<double> timeout_s;  // nullopt: no --timeout and the command has no default
    bool json = false;
    std::optional<std::string> server_key, client_key;  // key files; CURVE needs both
};

// Declares --json, and --endpoint, --timeout, --server-key and --client-key in the help group
// "connection options", on `command`, bound to `args`, which must outlive the parse. `endpoint` and `timeout`
// are the command's defaults (nullopt: none); `timeout_help` says what the timeout bounds.
void connection_options(CLI::App& command, ConnectionArgs& args, const char* endpoint,
                        std::optional<double> timeout, const char* timeout_help);

struct Connection {
    std::string endpoint;
    const char* endpoint_option = "--endpoint";  // the option that gave `endpoint`, for messages
    std::optional<double> timeout_s;             // nullopt: no --timeout and the command has no default
    bool json = false;
    bool curve = false;  // true: the three keys below are set (Z85, 40 characters each)
    std::string server_public, client_public, client_secret;
};

// Reads the connection options' values (the keys from their files). On a bad value prints
// "sp-ctl CMD: ..." and returns false (exit 2).
bool read_connection(const char* command, const ConnectionArgs& args, Connection& out);

// sp::transport::open_client_socket with this connection's endpoint and CURVE keys (a one-shot
// command: no fast reconnection, requests queue until the connection is up). Throws UsageError
// (commands.h) naming the option and the endpoint when ZeroMQ refuses the endpoint itself: every
// live command connects here, so each reports a malformed endpoint the same way, before any send.
zmq::socket_t open_socket(zmq::context_t& ctx, zmq::socket_type type, const Connection& c,
                          HandshakeMonitor* monitor = nullptr);

// "sp-ctl-<pid>-<n>": unique per request of this process, and across processes on one host.
std::string next_request_id();

// How an exchange ended: the reply, or none and why when the handshakes tell.
struct Outcome {
    std::optional<sp::protocol::Reply> reply;
    std::string refusal;  // the agent certainly refused this client (its key, or CURVE on one side only)
    std::string hint;     // what the handshakes suggest otherwise ("" when nothing)
};

// Sends build(id) on a fresh DEALER and waits up to the timeout for the reply with that id, dropping
// others (late replies, noise). With `retry`, gives the first try half the timeout and then resends
// once, with a fresh id, on a fresh socket. A refused handshake ends the wait at once.
Outcome exchange(const char* command, const Connection& c, bool retry,
                 const std::function<std::string(const std::string&)>& build);

// "sp-ctl CMD: <refusal>" or "sp-ctl CMD: no answer from ENDPOINT within T s (<hint, or is the agent
// running?>)" on stderr; returns kExitNoAnswer.
int report_no_answer(const char* command, const Connection& c, const Outcome& outcome);

}  // namespace sp::ctl
