#pragma once
// Endpoint classification and the ZAP allow-list: the parts of the server
// that decide who may connect, kept apart from the I/O loop so they can be read (and reviewed) alone.
#include <array>
#include <string>
#include <vector>

namespace sp::transport::detail {

enum class EndpointKind { loopback, network };

// Classifies a bind endpoint. Loopback: tcp://127.x.x.x, tcp://localhost, tcp://[::1], ipc://,
// inproc://. Throws std::runtime_error naming the endpoint when it is not tcp/ipc/inproc or has no
// address.
EndpointKind classify_endpoint(const std::string& endpoint);

// The address a bind endpoint is bound to: tcp://localhost:PORT becomes tcp://127.0.0.1:PORT
// (libzmq would take "localhost" for a network interface's name and fail with "No such device");
// every other endpoint is bound as given. Clients may still connect to tcp://localhost:PORT.
std::string bind_address(const std::string& endpoint);

using CurveKey = std::array<unsigned char, 32>;

// The allow-list (sp::keys::read_allow_list), decoded for the ZAP handler's comparison.
std::vector<CurveKey> read_allow_list(const std::string& path);

}  // namespace sp::transport::detail
