// The transport of a build without ZeroMQ (SP_BUILD_TRANSPORT=OFF, the `device` preset): the same
// interface, so that the agent links alike in both builds, and a server that refuses to start with a
// message that says why. No instance ever exists, so the other members are never reached.
#include <stdexcept>

#include "agent_server.h"

namespace sp::transport {

struct AgentServer::Impl {};

bool transport_available() {
    return false;
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): agent_server.h's signature
AgentServer::AgentServer(ServerOptions options, ServerBackend& /*backend*/) {
    throw std::runtime_error("cannot serve " + options.telemetry_endpoint + " and " +
                             options.control_endpoint +
                             ": this build has no network transport (configured with "
                             "SP_BUILD_TRANSPORT=OFF); telemetry goes to the file only");
}

AgentServer::~AgentServer() = default;

void AgentServer::set_run(const std::string& /*run_id*/, const BlockLayout& /*layout*/,
                          const std::string& /*config_json*/) {}

// NOLINTNEXTLINE(performance-unnecessary-value-param): agent_server.h's signature
void AgentServer::set_calibration(std::vector<double> /*errors*/) {}

// NOLINTNEXTLINE(performance-unnecessary-value-param): agent_server.h's signature
bool AgentServer::publish(SharedRecord /*record*/) {
    return false;
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): agent_server.h's signature
void AgentServer::update_snapshot(protocol::Snapshot /*snapshot*/, SharedRecord /*last_update*/) {}

void AgentServer::set_step(std::int64_t /*step*/) {}

std::uint64_t AgentServer::dropped() const {
    return 0;
}

std::uint64_t AgentServer::published() const {
    return 0;
}

}  // namespace sp::transport
