#pragma once
// The control socket's limits, kept by the I/O thread alone (no locking): a token bucket per client
// (ROUTER identity), so one flooding client is answered "rate_limited" without reaching the
// training thread, and one shared read budget for all clients together, so a flood costs a bounded
// share of a core and flooding clients wait in ZeroMQ's fair queue instead of spinning.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sp::transport::detail {

class RequestRateLimiter {
  public:
    using Clock = std::chrono::steady_clock;

    // `per_client_per_second` tokens a second per client, at most one second's worth saved up.
    explicit RequestRateLimiter(double per_client_per_second, Clock::time_point now = Clock::now());

    // One request from `identity` at `now`: false when its bucket is empty.
    bool admit(std::string_view identity, Clock::time_point now);
    // Refills the shared read budget; how many requests may be read now (at most
    // kMaxReadsPerIteration, so the other sockets and the timers are never starved).
    int reads_allowed(Clock::time_point now);
    // One request was read from the socket.
    void count_read() { shared_.tokens -= 1.0; }

    static constexpr int kMaxReadsPerIteration = 512;
    static constexpr double kReadsPerSecond = 1000;  // all clients together
    static constexpr double kReadBurst = 256;
    // Buckets of clients that went away are forgotten once this many are known.
    static constexpr std::size_t kMaxClients = 4096;

  private:
    struct Bucket {
        double tokens = 0;
        Clock::time_point last;
    };
    double rate_;
    std::unordered_map<std::string, Bucket> clients_;
    Bucket shared_;
};

}  // namespace sp::transport::detail
