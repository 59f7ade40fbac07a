#pragma once
// Whether a TCP port on 127.0.0.1 can be bound now: for tests that must hand a program a fixed port
// (a c10d rendezvous, a tcp://localhost endpoint). Another process may still take it afterwards;
// the tests retry with another port when a bind fails.
#include <cstdint>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sp::test {

inline bool loopback_port_free(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(std::uint16_t(port));
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
}

}  // namespace sp::test
