#pragma once
// What happened to a routing command after the agent acknowledged it. The ack only says the request
// was admissible and queued; the agent applies it at the next step boundary and announces the
// outcome as a `command` event carrying the request's id (agent/PROTOCOL.md §4.3). CommandWatch
// subscribes to the agent's telemetry before the request goes out, so that event cannot slip past,
// and then waits for it.
#include <cstdint>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "control_client.h"

namespace sp::ctl {

// "tcp://host:P" -> "tcp://host:(P-1)": the telemetry socket beside a control socket by the
// default pairing (telemetry 5556, control 5557). nullopt for other transports or port 1.
std::optional<std::string> telemetry_beside(const std::string& control_endpoint);

class CommandWatch {
  public:
    // Subscribes to events and heartbeats on `telemetry` (its endpoint and keys) and waits up to its
    // timeout for a first message, which proves the subscription is in place (heartbeats come every
    // second). False with `error` set when nothing arrived or the connection was refused. A malformed
    // endpoint throws UsageError (open_socket), before any request goes out.
    bool open(const Connection& telemetry, std::string& error);

    struct Outcome {
        enum class Kind : std::uint8_t { applied, rejected, run_ended, timed_out };
        Kind kind = Kind::timed_out;
        std::int64_t step = -1;  // where it applied, was rejected, or where the run ended
        std::int64_t changes = 0;
        std::string error;  // rejected: the agent's reason; run_ended: the run's reason
        std::string event;  // the event's JSON text (applied, rejected, run_ended)
    };
    // Waits up to `seconds` for the command event with request id `id`, or the run's end.
    Outcome wait(const std::string& id, double seconds);

  private:
    // The next message's body on the event or heartbeat topic, waiting until `deadline`.
    std::optional<std::string> next(std::chrono::steady_clock::time_point deadline, std::string& topic);

    zmq::context_t ctx_{1};
    std::optional<zmq::socket_t> sub_;
};

}  // namespace sp::ctl
