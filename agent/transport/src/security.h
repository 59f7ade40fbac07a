#pragma once
// Endpoint classification, CURVE key files and the ZAP allow-list check: the parts of the server
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

using CurveKey = std::array<unsigned char, 32>;

// A Z85 key file: 40 characters, surrounding whitespace ignored. Throws naming the file.
std::string read_z85_key_file(const std::string& path);
// The allow-list: one Z85 public key per line; blank lines and '#' comment lines (that are not
// themselves a valid key: '#' is a Z85 digit) are skipped; no trailing comments. Throws naming
// the file and the line for an unreadable file or a malformed key.
std::vector<CurveKey> read_allow_list(const std::string& path);
// zmq_curve_public on a Z85 secret key; throws when the key is not valid.
std::string curve_public_from_secret(const std::string& secret_z85);

}  // namespace sp::transport::detail
