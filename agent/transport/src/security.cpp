// Endpoint classification and CURVE key handling (agent/PROTOCOL.md §9).
#include "security.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "sp/transport/agent_server.h"

namespace sp::transport {
namespace detail {

namespace {

std::string trim(const std::string& s) {
    std::size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

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

std::string read_z85_key_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read CURVE key file '" + path + "': " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string key = trim(ss.str());
    CurveKey raw{};
    if (key.size() != 40 || zmq_z85_decode(raw.data(), key.c_str()) == nullptr)
        throw std::runtime_error("CURVE key file '" + path + "' does not hold a 40-character Z85 key");
    return key;
}

std::vector<CurveKey> read_allow_list(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read CURVE allow-list '" + path + "': " + std::strerror(errno));
    std::vector<CurveKey> keys;
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        // '#' is also a Z85 digit, so a key may contain or even start with it: a line is a key when it
        // decodes as one, a comment when it does not and starts with '#'.
        const std::string key = trim(line);
        if (key.empty()) continue;
        CurveKey raw{};
        const bool valid = key.size() == 40 && zmq_z85_decode(raw.data(), key.c_str()) != nullptr;
        if (!valid && key[0] == '#') continue;
        if (!valid)
            throw std::runtime_error("CURVE allow-list '" + path + "' line " + std::to_string(number) +
                                     ": not a 40-character Z85 public key");
        keys.push_back(raw);
    }
    return keys;
}

std::string curve_public_from_secret(const std::string& secret_z85) {
    char pub[41] = {};
    if (zmq_curve_public(pub, secret_z85.c_str()) != 0)
        throw std::runtime_error(std::string("cannot derive the CURVE public key: ") +
                                 zmq_strerror(zmq_errno()));
    return pub;
}

}  // namespace detail

namespace {

void write_file(const std::string& path, const std::string& text, mode_t mode) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
    // open() does not change the mode of an existing file: a secret must never stay world-readable.
    bool ok = ::fchmod(fd, mode) == 0;
    std::size_t done = 0;
    while (ok && done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            ok = false;
        else
            done += static_cast<std::size_t>(n);
    }
    const int saved = errno;
    if (::close(fd) != 0) ok = false;
    if (!ok) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(saved));
}

}  // namespace

void write_curve_keypair(const std::string& path) {
    char pub[41] = {};
    char secret[41] = {};
    if (zmq_curve_keypair(pub, secret) != 0)
        throw std::runtime_error("cannot generate a CURVE key pair for '" + path +
                                 "': " + zmq_strerror(zmq_errno()));
    write_file(path + ".key", std::string(secret) + "\n", 0600);
    write_file(path + ".pub", std::string(pub) + "\n", 0644);
}

}  // namespace sp::transport
