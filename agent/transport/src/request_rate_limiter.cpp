#include "request_rate_limiter.h"

#include <algorithm>
#include <iterator>

namespace sp::transport::detail {

RequestRateLimiter::RequestRateLimiter(double per_client_per_second, Clock::time_point now)
    : rate_(per_client_per_second), shared_{kReadBurst, now} {}

bool RequestRateLimiter::admit(std::string_view identity, Clock::time_point now) {
    if (clients_.size() >= kMaxClients) {  // forget the buckets that have refilled (idle clients)
        for (auto it = clients_.begin(); it != clients_.end();) {
            const double idle = std::chrono::duration<double>(now - it->second.last).count();
            it = it->second.tokens + idle * rate_ >= rate_ ? clients_.erase(it) : std::next(it);
        }
    }
    auto [it, fresh] = clients_.try_emplace(std::string(identity));
    Bucket& b = it->second;
    if (fresh) {
        b.tokens = rate_;
    } else {
        b.tokens = std::min(rate_, b.tokens + std::chrono::duration<double>(now - b.last).count() * rate_);
    }
    b.last = now;
    if (b.tokens < 1.0) return false;
    b.tokens -= 1.0;
    return true;
}

int RequestRateLimiter::reads_allowed(Clock::time_point now) {
    shared_.tokens =
        std::min(kReadBurst, shared_.tokens +
                                 std::chrono::duration<double>(now - shared_.last).count() * kReadsPerSecond);
    shared_.last = now;
    return std::min(kMaxReadsPerIteration, int(shared_.tokens));
}

}  // namespace sp::transport::detail
