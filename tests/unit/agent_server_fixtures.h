#pragma once
// What the agent server suites share (test_agent_server, test_agent_server_security): a backend
// that records what it is given, receiving and requesting over real sockets with deadlines, and
// the options of a server on ipc endpoints in a temporary directory.
#include <QTemporaryDir>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "agent_server.h"

namespace sp::test::agent_server_fixtures {

using Clock = std::chrono::steady_clock;

constexpr auto kDeadline = std::chrono::seconds(10);  // generous: a loaded CI machine

class FakeBackend : public sp::transport::ServerBackend {
  public:
    std::int64_t submit(const sp::Command& command, const std::string& request_id) override {
        std::lock_guard lock(mutex);
        commands.push_back(command);
        ids.push_back(request_id);
        return 42;
    }
    // Like an agent whose runtime cannot materialize INT4.
    std::string check(const sp::Command& command) const override {
        return command.kind == sp::Command::Kind::pin && command.precision == sp::Precision::int4
                   ? "precision 'int4' cannot be materialized by this trainer's runtime (it can: bf16, int8)"
                   : std::string();
    }
    std::mutex mutex;
    std::vector<sp::Command> commands;
    std::vector<std::string> ids;
};

inline std::vector<std::string> recv_multipart(zmq::socket_t& s, std::chrono::milliseconds timeout) {
    std::vector<zmq::pollitem_t> items = {{s.handle(), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, timeout) <= 0) return {};
    std::vector<std::string> parts;
    for (int i = 0; i < 64; ++i) {
        zmq::message_t m;
        if (!s.recv(m, zmq::recv_flags::dontwait)) break;
        parts.push_back(m.to_string());
        if (!m.more()) break;
    }
    return parts;
}

// Reads until a message on `topic` arrives; empty on deadline.
inline std::vector<std::string> wait_topic(zmq::socket_t& sub, const std::string& topic,
                                           Clock::duration within = kDeadline) {
    const auto end = Clock::now() + within;
    while (Clock::now() < end) {
        auto msg = recv_multipart(sub, std::chrono::milliseconds(100));
        if (msg.size() == 2 && msg[0] == topic) return msg;
    }
    return {};
}

inline std::optional<nlohmann::json> request(
    zmq::socket_t& dealer, const std::string& body,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    // Sockets here have a send timeout: a DEALER whose only connection was refused (CURVE) would
    // otherwise block in send forever.
    if (!dealer.send(zmq::buffer(body), zmq::send_flags::none)) return std::nullopt;
    auto reply = recv_multipart(dealer, timeout);
    if (reply.size() != 1) return std::nullopt;
    return nlohmann::json::parse(reply[0]);
}

inline sp::transport::ServerOptions ipc_options(const QTemporaryDir& dir) {
    sp::transport::ServerOptions o;
    o.telemetry_endpoint = "ipc://" + dir.filePath("tel").toStdString();
    o.control_endpoint = "ipc://" + dir.filePath("ctl").toStdString();
    o.hello_interval_s = 0.1;
    o.heartbeat_interval_s = 0.1;
    o.client_requests_per_second = 1e6;  // the rate limit has its own test
    o.log = [](const std::string&) {};
    return o;
}

}  // namespace sp::test::agent_server_fixtures
