// Endpoint classification and CURVE key handling (agent/PROTOCOL.md §9).
#include "security.h"

#include <cctype>
#include <cstring>
#include <stdexcept>

#include <zmq.h>

#include "sp/keys/curve_key_file.h"

namespace sp::transport::detail {

namespace {

bool starts_with(const std::string& s, const char* prefix) {
    return s.rfind(prefix, 0) == 0;
}

[[noreturn]] void bad_endpoint(const std::string& endpoint, const std::string& why) {
    throw std::runtime_error("invalid endpoint '" + endpoint + "': " + why +
                             " (expected tcp://host:port, ipc://path or inproc://name)");
}

}  // namespace

EndpointKind classify_endpoint(const std::string& endpoint) {
    if (starts_with(endpoint, "ipc://") || starts_with(endpoint, "inproc://")) {
        if (endpoint.size() <= std::strlen(starts_with(endpoint, "ipc://") ? "ipc://" : "inproc://"))
            bad_endpoint(endpoint, "no address");
        return EndpointKind::loopback;
    }
    if (!starts_with(endpoint, "tcp://")) bad_endpoint(endpoint, "unsupported transport");
    const std::string rest = endpoint.substr(6);
    std::string host;
    if (!rest.empty() && rest[0] == '[') {
        const auto close = rest.find(']');
        if (close == std::string::npos) bad_endpoint(endpoint, "unterminated IPv6 address");
        host = rest.substr(1, close - 1);
        if (close + 1 >= rest.size() || rest[close + 1] != ':') bad_endpoint(endpoint, "no port");
    } else {
        const auto colon = rest.rfind(':');
        if (colon == std::string::npos || colon + 1 >= rest.size()) bad_endpoint(endpoint, "no port");
        host = rest.substr(0, colon);
    }
    if (host.empty()) bad_endpoint(endpoint, "no host");
    if (host == "localhost" || host == "::1") return EndpointKind::loopback;
    // Only a dotted-quad 127.x.x.x is loopback: an interface name such as "127eth" is not.
    if (starts_with(host, "127.")) {
        int dots = 0;
        bool numeric = true;
        for (char c : host) {
            if (c == '.')
                ++dots;
            else if (!std::isdigit(static_cast<unsigned char>(c)))
                numeric = false;
        }
        if (numeric && dots == 3) return EndpointKind::loopback;
    }
    return EndpointKind::network;
}

std::string bind_address(const std::string& endpoint) {
    const std::string prefix = "tcp://localhost:";
    if (starts_with(endpoint, prefix.c_str())) return "tcp://127.0.0.1:" + endpoint.substr(prefix.size());
    return endpoint;
}

std::vector<CurveKey> read_allow_list(const std::string& path) {
    std::vector<CurveKey> allowed;
    for (const std::string& z85 : sp::keys::read_allow_list(path)) {
        allowed.emplace_back();
        zmq_z85_decode(allowed.back().data(), z85.c_str());  // read_allow_list checked that it decodes
    }
    return allowed;
}

}  // namespace sp::transport::detail
