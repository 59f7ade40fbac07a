#include "sp/transport/client_socket.h"

namespace sp::transport {

zmq::socket_t open_client_socket(zmq::context_t& ctx, zmq::socket_type type, const std::string& endpoint,
                                 const ClientSocketOptions& options, HandshakeMonitor* monitor) {
    zmq::socket_t s(ctx, type);
    s.set(zmq::sockopt::linger, 0);
    if (options.follow_restarts) {
        s.set(zmq::sockopt::reconnect_ivl, 100);
        s.set(zmq::sockopt::reconnect_ivl_max, 1000);
    }
    if (options.curve) {
        s.set(zmq::sockopt::curve_serverkey, options.curve->server_public);
        s.set(zmq::sockopt::curve_publickey, options.curve->client_public);
        s.set(zmq::sockopt::curve_secretkey, options.curve->client_secret);
    }
    if (options.refuse_while_disconnected && type == zmq::socket_type::dealer)
        s.set(zmq::sockopt::immediate, 1);
    if (monitor) monitor->watch(ctx, s, options.curve.has_value());
    s.connect(endpoint);
    return s;
}

}  // namespace sp::transport
