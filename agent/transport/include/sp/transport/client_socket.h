#pragma once
// The client half of the wire protocol's sockets (agent/PROTOCOL.md): what sp-ctl and the dashboard
// both need to reach an agent. One place configures a client socket (linger, reconnection, CURVE
// keys, the handshake monitor) so that the two cannot drift apart; the messages themselves are
// built and read by sp::protocol (core).
#include <optional>
#include <string>

#include <zmq.hpp>

#include "sp/transport/handshake_monitor.h"

namespace sp::transport {

// A CURVE client's keys, Z85 text of 40 characters each.
struct ClientKeys {
    std::string server_public;  // the agent's public key
    std::string client_public;
    std::string client_secret;
};

struct ClientSocketOptions {
    std::optional<ClientKeys> curve;  // nullopt: plain ZMTP
    // Reconnect quickly (100 ms, backing off to 1 s) instead of libzmq's default, for a client that
    // follows an agent across restarts (the dashboard). A one-shot command leaves it off.
    bool follow_restarts = false;
    // DEALER only: refuse a send while no connection is up, instead of queueing the request to be
    // delivered (and applied) long after the operator gave up on it. A one-shot command leaves it off
    // so that an agent that comes up within its timeout still gets the request.
    bool refuse_while_disconnected = false;
};

// A socket of `type` with linger 0 (closing it never waits for unsent requests) and the options
// above, connected to `endpoint`; `monitor`, when given, watches it from before the connect, so
// the first handshake is seen. Throws zmq::error_t for a malformed endpoint or keys.
zmq::socket_t open_client_socket(zmq::context_t& ctx, zmq::socket_type type, const std::string& endpoint,
                                 const ClientSocketOptions& options, HandshakeMonitor* monitor = nullptr);

}  // namespace sp::transport
