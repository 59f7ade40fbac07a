#pragma once
// How an embedding trainer configures the agent's network side (AgentOptions::server): endpoints,
// CURVE keys, rate limits (agent/PROTOCOL.md). The server itself is internal to the agent.
#include <cstddef>
#include <functional>
#include <string>

#include "sp/protocol.h"

namespace sp::transport {

struct ServerOptions {
    std::string telemetry_endpoint = protocol::kDefaultTelemetryEndpoint;
    std::string control_endpoint = protocol::kDefaultControlEndpoint;
    // CURVE: when server_secret_key_file is set, both sockets are CURVE servers and only clients whose
    // public key is listed in allowed_clients_file (one Z85 key per line, '#' comments) get through
    // (ZAP). A non-loopback endpoint without CURVE is refused unless `insecure` is set (then a warning
    // is logged). Key files are read with sp::keys (a secret key must be mode 0600 and labelled as
    // one); an allow-list without a server key is refused, since nothing would check it.
    std::string server_secret_key_file;  // NAME.key, as written by `sp-ctl keygen`
    std::string allowed_clients_file;
    bool insecure = false;
    // Per control client (one connection): requests per second, in bursts of up to as many. Beyond
    // it a request is answered at once with a "rate_limited" error, without reaching the backend.
    double client_requests_per_second = 10.0;
    std::size_t queue_capacity = 4096;  // records waiting for the I/O thread
    int rank = 0;
    double hello_interval_s = 2.0;
    double heartbeat_interval_s = 1.0;
    std::function<void(const std::string&)> log;  // warnings; null -> stderr
};

// False in a build without ZeroMQ (SP_BUILD_TRANSPORT=OFF): there an AgentServer refuses to start
// (std::runtime_error), and a trainer binds nothing and writes file telemetry only.
bool transport_available();

}  // namespace sp::transport
