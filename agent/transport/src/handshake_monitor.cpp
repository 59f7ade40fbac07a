#include "sp/transport/handshake_monitor.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace sp::transport {
namespace {

// A client key the agent's ZAP handler did not admit, or one side speaking CURVE and the other not:
// both are certain, and the same on every retry, so they are reported at once.
std::string refusal(std::uint16_t event, std::uint32_t value, const std::string& endpoint, bool curve) {
    const std::string agent = "the agent at " + endpoint;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return agent + " refused this client's key (authentication failed): is its public key in the " +
               "agent's --allowed-clients file?";
    if (event != ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) return {};
    if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        return curve ? agent + " does not use CURVE: drop --server-key and --client-key, or start the " +
                           "agent with --server-key"
                     : agent + " requires CURVE: pass --server-key AGENT.pub and --client-key NAME";
    char code[16];
    std::snprintf(code, sizeof code, "0x%08x", unsigned(value));
    return agent + " failed the handshake (ZMTP protocol error " + code + ")";
}

}  // namespace

void HandshakeMonitor::watch(zmq::context_t& ctx, zmq::socket_t& s, bool curve) {
    // Unique within the process (inproc names are per context, but one context may hold many
    // monitors); atomic because the dashboard opens sockets on several worker threads.
    static std::atomic<unsigned> counter{0};
    const std::string address = "inproc://sp-handshake-" + std::to_string(++counter);
    const int events = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    if (zmq_socket_monitor(s.handle(), address.c_str(), events) != 0) throw zmq::error_t();
    pair_.emplace(ctx, zmq::socket_type::pair);
    pair_->set(zmq::sockopt::linger, 0);
    pair_->connect(address);
    curve_ = curve;
}

zmq_pollitem_t HandshakeMonitor::poll_item() {
    return {pair_ ? pair_->handle() : nullptr, -1, short(pair_ ? ZMQ_POLLIN : 0), 0};
}

std::string HandshakeMonitor::read(const std::string& endpoint) {
    zmq::message_t head, address;
    // Each event is two frames: 16-bit event and 32-bit value, then the endpoint.
    while (pair_ && pair_->recv(head, zmq::recv_flags::dontwait)) {
        if (head.more()) (void)pair_->recv(address, zmq::recv_flags::dontwait);
        if (head.size() < 6) continue;
        std::uint16_t event = 0;
        std::uint32_t value = 0;
        std::memcpy(&event, head.data(), sizeof event);
        std::memcpy(&value, static_cast<const char*>(head.data()) + 2, sizeof value);
        if (std::string why = refusal(event, value, endpoint, curve_); !why.empty()) return why;
        // The agent hung up mid-handshake: with CURVE, what a wrong server key looks like (the agent
        // cannot decrypt our hello), but also an agent going down, so only a hint.
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && curve_)
            hint_ =
                "the agent closed the connection during the CURVE handshake: is --server-key its public key?";
    }
    return {};
}

}  // namespace sp::transport
