#pragma once
// Why a client's connection to the agent failed at the handshake, from a ZeroMQ socket monitor.
// Without it a refused key looks exactly like an agent that is not running: requests get no answer
// and the telemetry stays silent. sp-ctl and the dashboard both watch their sockets with it.
#include <optional>
#include <string>

#include <zmq.hpp>

namespace sp::transport {

class HandshakeMonitor {
  public:
    // Starts watching `s` (which must outlive this monitor's use). Call before s.connect(), or the
    // first handshake may go unseen. `curve`: whether this client speaks CURVE. Throws zmq::error_t.
    void watch(zmq::context_t& ctx, zmq::socket_t& s, bool curve);
    // For zmq_poll: readable when events wait (an inert item before watch()).
    zmq_pollitem_t poll_item();
    // Reads the waiting events. Returns why the agent refused this client when it certainly did
    // ("" otherwise), naming the options --server-key and --client-key that both tools take; keeps
    // weaker signs for hint().
    std::string read(const std::string& endpoint);
    // What the handshakes suggest when no answer came ("" when nothing), e.g. a wrong --server-key.
    const std::string& hint() const { return hint_; }

  private:
    std::optional<zmq::socket_t> pair_;
    bool curve_ = false;
    std::string hint_;
};

}  // namespace sp::transport
