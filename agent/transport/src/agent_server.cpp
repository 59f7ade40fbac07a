// The agent's I/O thread (agent/PROTOCOL.md). One thread owns every socket: PUB (telemetry),
// ROUTER (control) and, with CURVE, the ZAP handler's REP. The training thread touches only a
// mutex-protected bounded deque and a non-blocking pipe that wakes the poll, so nothing it does can
// wait on the network.
#include "agent_server.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <fcntl.h>
#include <unistd.h>
#include <zmq.hpp>

#include "record_queue.h"
#include "request_rate_limiter.h"
#include "security.h"
#include "sp/keys/curve_key_file.h"

namespace sp::transport {

namespace {

using Clock = std::chrono::steady_clock;

double wall_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Bounds per loop iteration so a flood on one socket cannot starve the others or the timers.
constexpr int kMaxZapPerIteration = 64;
constexpr std::size_t kMaxRecordsPerIteration = 1024;
constexpr auto kPollCap = std::chrono::milliseconds(50);
// How long the publisher may keep delivering its last records after the agent shuts down.
constexpr auto kShutdownFlush = std::chrono::milliseconds(500);
// A frame larger than this disconnects the peer inside libzmq instead of being buffered: requests
// are at most 64 KiB, so 1 MiB still lets oversized ones be answered with a clear rejection.
constexpr std::int64_t kMaxMessageBytes = 1 << 20;

}  // namespace

struct AgentServer::Impl {
    ServerOptions options;
    ServerBackend& backend;

    zmq::context_t context{1};
    zmq::socket_t pub{context, zmq::socket_type::pub};
    zmq::socket_t router{context, zmq::socket_type::router};
    std::optional<zmq::socket_t> zap;
    std::vector<detail::CurveKey> allowed;

    int wake_read = -1;
    int wake_write = -1;

    // Shared with the training thread.
    detail::RecordQueue records;
    std::mutex mutex;  // guards the run below
    std::string run_id, config_json;
    BlockLayout layout;
    std::vector<double> calibration_errors;  // empty until calibration ran
    bool run_set = false;
    bool hello_due = true;
    std::atomic<std::int64_t> step{0};
    std::atomic<std::uint64_t> published{0};
    std::atomic<std::uint64_t> dropped{0};
    std::atomic<bool> stop{false};

    // I/O thread only.
    std::uint64_t seq = 0;
    std::uint64_t drops_announced = 0;
    std::optional<protocol::Snapshot> snapshot;
    SharedRecord snapshot_last_update;  // the snapshot's last update record, as published
    std::uint64_t invalid_records = 0;
    detail::RequestRateLimiter limiter;
    bool backlog = false;  // records left in the queue after the last drain
    std::thread thread;

    Impl(ServerOptions o, ServerBackend& b)
        : options(std::move(o)),
          backend(b),
          records(options.queue_capacity),
          limiter(options.client_requests_per_second) {}

    void log(const std::string& message) const {
        if (options.log)
            options.log(message);
        else
            std::cerr << "sp transport: " << message << std::endl;
    }

    void wake() const {
        const char byte = 1;
        // Non-blocking: a full pipe already means "wake up", so EAGAIN is success.
        [[maybe_unused]] const ssize_t n = ::write(wake_write, &byte, 1);
    }

    void drain_wake_pipe() const {
        char buf[256];
        for (int i = 0; i < 1024; ++i)
            if (::read(wake_read, buf, sizeof buf) <= 0) break;
    }

    void setup();
    void run();
    void send_pub(protocol::Topic topic, std::string body);
    void send_hello();
    void drain_queue();
    void publish_record(const RecordLine& record);
    void flush_at_shutdown();
    void handle_control();
    void answer(std::vector<zmq::message_t>& parts);
    std::string rate_limited_error() const {
        char rate[32];
        std::snprintf(rate, sizeof rate, "%g", options.client_requests_per_second);
        return std::string("rate_limited: more than ") + rate +
               " requests per second from this client (control_requests_per_second); retry later";
    }
    void handle_zap();
};

void AgentServer::Impl::setup() {
    int fds[2];
    if (::pipe(fds) != 0)
        throw std::runtime_error(std::string("agent server: cannot create wake pipe: ") +
                                 std::strerror(errno));
    wake_read = fds[0];
    wake_write = fds[1];
    for (int fd : fds) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }

    const bool curve = !options.server_secret_key_file.empty();
    // Without a server key there is no CURVE, so no ZAP handler would ever consult the allow-list:
    // every client would get in while the operator believes only the listed ones do.
    if (!curve && !options.allowed_clients_file.empty())
        throw std::runtime_error("agent server: allowed_clients_file '" + options.allowed_clients_file +
                                 "' needs server_secret_key_file (without CURVE nothing checks it)");
    for (const std::string* ep : {&options.telemetry_endpoint, &options.control_endpoint}) {
        if (detail::classify_endpoint(*ep) != detail::EndpointKind::network || curve) continue;
        if (!options.insecure)
            throw std::runtime_error("agent server: refusing to bind non-loopback endpoint '" + *ep +
                                     "' without CURVE keys (--insecure to override)");
        log("WARNING: binding non-loopback endpoint '" + *ep +
            "' without CURVE: anyone who can reach it can read telemetry and change routing");
    }

    for (zmq::socket_t* s : {&pub, &router}) s->set(zmq::sockopt::linger, 0);
    pub.set(zmq::sockopt::sndhwm, 10000);
    router.set(zmq::sockopt::sndhwm, 10000);
    router.set(zmq::sockopt::rcvhwm, 10000);
    router.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);

    if (curve) {
        if (options.allowed_clients_file.empty())
            throw std::runtime_error(
                "agent server: CURVE needs allowed_clients_file (the client public keys to admit)");
        std::string secret;
        try {
            secret = sp::keys::read_secret_key(options.server_secret_key_file).secret_z85;
            allowed = detail::read_allow_list(options.allowed_clients_file);
        } catch (const std::runtime_error& e) {
            throw std::runtime_error(std::string("agent server: ") + e.what());
        }
        if (allowed.empty())
            log("WARNING: CURVE allow-list '" + options.allowed_clients_file +
                "' is empty: no client can connect");
        // The ZAP handler must be bound before the CURVE sockets: without one, libzmq admits every
        // client that knows the server key.
        zap.emplace(context, zmq::socket_type::rep);
        zap->set(zmq::sockopt::linger, 0);
        zap->bind("inproc://zeromq.zap.01");
        for (zmq::socket_t* s : {&pub, &router}) {
            s->set(zmq::sockopt::curve_server, 1);
            s->set(zmq::sockopt::curve_secretkey, secret);
        }
    }

    auto bind = [](zmq::socket_t& s, const std::string& ep, const char* what) {
        try {
            s.bind(detail::bind_address(ep));  // tcp://localhost:P binds 127.0.0.1:P
        } catch (const zmq::error_t& e) {
            throw std::runtime_error(std::string("agent server: cannot bind ") + what + " endpoint '" + ep +
                                     "': " + e.what());
        }
    };
    bind(pub, options.telemetry_endpoint, "telemetry");
    bind(router, options.control_endpoint, "control");
}

void AgentServer::Impl::send_pub(protocol::Topic topic, std::string body) {
    const std::string_view name = protocol::to_string(topic);
    // PUB never blocks: at the high-water mark it drops, and subscribers see the gap in seq.
    pub.send(zmq::buffer(name), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    pub.send(zmq::message_t(body.data(), body.size()), zmq::send_flags::dontwait);
}

void AgentServer::Impl::send_hello() {
    std::string id, config;
    BlockLayout blocks;
    std::vector<double> errors;
    {
        std::lock_guard lock(mutex);
        id = run_id;
        config = config_json;
        blocks = layout;
        errors = calibration_errors;
    }
    send_pub(protocol::Topic::hello, protocol::hello(++seq, id, options.rank, blocks,
                                                     config.empty() ? "{}" : config, wall_now(), errors));
}

void AgentServer::Impl::drain_queue() {
    // A bounded batch per iteration, so a burst of large records cannot hold control requests back
    // for long; the loop does not wait in poll while a backlog remains.
    detail::RecordQueue::Batch batch = records.take(kMaxRecordsPerIteration);
    backlog = batch.backlog;
    auto stamp_snapshot = [&] {
        batch.snapshot->snapshot.seq = seq;
        snapshot = std::move(batch.snapshot->snapshot);
        snapshot_last_update = std::move(batch.snapshot->last_update);
        batch.snapshot.reset();
    };
    for (detail::RecordQueue::Item& item : batch.items) {
        if (batch.snapshot && item.index >= batch.snapshot->after) stamp_snapshot();
        publish_record(*item.record);
    }
    if (batch.snapshot) stamp_snapshot();
    if (batch.drops_total > drops_announced) {
        const EventRecord ev = make_event(step.load(), wall_now(),
                                          DroppedPayload{batch.drops_total - drops_announced,
                                                         batch.drops_total, std::nullopt, std::nullopt});
        send_pub(protocol::Topic::event, protocol::with_seq(to_json_line(ev), ++seq));
        drops_announced = batch.drops_total;
    }
}

void AgentServer::Impl::publish_record(const RecordLine& record) {
    std::optional<protocol::Topic> topic;
    if (std::holds_alternative<UpdateRecord>(record.record()))
        topic = protocol::Topic::update;
    else if (std::holds_alternative<EventRecord>(record.record()))
        topic = protocol::Topic::event;
    else if (std::holds_alternative<StepStatsRecord>(record.record()))
        topic = protocol::Topic::stats;
    if (!topic) return;  // RunHeader: hello carries the same
    const std::string* line = nullptr;
    try {
        line = &record.line();  // serialized once: the JSONL file holds the same line
    } catch (const std::exception& e) {
        // A caller's malformed event payload: it never gets a seq; log the first few.
        if (++invalid_records <= 5) log(std::string("not publishing an invalid record: ") + e.what());
        return;
    }
    send_pub(*topic, protocol::with_seq(*line, ++seq));
    published.fetch_add(1, std::memory_order_relaxed);
}

void AgentServer::Impl::answer(std::vector<zmq::message_t>& parts) {
    // [identity, payload] from a DEALER, [identity, "", payload] from a REQ: reply on the same route.
    std::size_t envelope = 1;
    if (parts.size() >= 3 && parts[1].size() == 0) envelope = 2;
    std::string reply;
    if (parts.size() - envelope != 1) {
        reply = protocol::reject(
            std::nullopt, "expected one frame, got " + std::to_string(parts.size() - envelope) + " frames");
    } else {
        const std::string_view frame(parts[envelope].data<char>(), parts[envelope].size());
        int block_count = protocol::kUnknownBlockCount;
        {
            std::lock_guard lock(mutex);
            if (run_set) block_count = static_cast<int>(layout.size());
        }
        auto parsed = protocol::parse_request(frame, block_count);
        const bool admitted =
            limiter.admit(std::string_view(parts[0].data<char>(), parts[0].size()), Clock::now());
        if (auto* err = std::get_if<protocol::RequestError>(&parsed)) {
            reply = protocol::reject(*err);
        } else if (!admitted) {
            // Answered here, on the I/O thread: a flood costs the training thread nothing.
            reply = protocol::reject(std::get<protocol::Request>(parsed).id, rate_limited_error());
        } else {
            const auto& req = std::get<protocol::Request>(parsed);
            try {
                switch (req.kind) {
                    case protocol::Request::Kind::ping:
                        reply = protocol::pong(req, step.load(), wall_now());
                        break;
                    case protocol::Request::Kind::snapshot:
                        reply = snapshot
                                    ? protocol::snapshot_reply(req, *snapshot, snapshot_last_update.get())
                                    : protocol::reject(req.id, "no snapshot yet: the agent has not started");
                        break;
                    case protocol::Request::Kind::command:
                        if (const std::string why = backend.check(req.command); !why.empty()) {
                            reply = protocol::reject(req.id, why);
                        } else {
                            reply = protocol::ack(req, backend.submit(req.command, req.id));
                        }
                        break;
                }
            } catch (const std::exception& e) {
                reply = protocol::reject(req.id, std::string("internal error: ") + e.what());
            }
        }
    }
    for (std::size_t i = 0; i < envelope; ++i)
        router.send(parts[i], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    router.send(zmq::message_t(reply.data(), reply.size()), zmq::send_flags::dontwait);
}

void AgentServer::Impl::handle_control() {
    const int readable = limiter.reads_allowed(Clock::now());
    for (int n = 0; n < readable; ++n, limiter.count_read()) {
        std::vector<zmq::message_t> parts;
        zmq::message_t part;
        if (!router.recv(part, zmq::recv_flags::dontwait)) return;
        parts.push_back(std::move(part));
        // The rest of a multipart message is already there: libzmq delivers messages atomically.
        while (parts.back().more() && parts.size() < 1024) {
            zmq::message_t next;
            if (!router.recv(next, zmq::recv_flags::dontwait)) break;
            parts.push_back(std::move(next));
        }
        while (parts.back().more()) {  // absurdly many frames: discard the rest, answer once
            zmq::message_t rest;
            if (!router.recv(rest, zmq::recv_flags::dontwait)) break;
            if (!rest.more()) break;
        }
        try {
            answer(parts);
        } catch (const std::exception& e) {
            log(std::string("control request failed: ") + e.what());
        }
    }
}

void AgentServer::Impl::handle_zap() {
    for (int n = 0; n < kMaxZapPerIteration; ++n) {
        std::vector<zmq::message_t> req;
        zmq::message_t part;
        if (!zap->recv(part, zmq::recv_flags::dontwait)) return;
        req.push_back(std::move(part));
        while (req.back().more() && req.size() < 16) {
            zmq::message_t next;
            if (!zap->recv(next, zmq::recv_flags::dontwait)) break;
            req.push_back(std::move(next));
        }
        // ZAP (RFC 27): version, request id, domain, address, identity, mechanism, credentials...
        bool ok = false;
        if (req.size() >= 7 && req[0].to_string_view() == "1.0" && req[5].to_string_view() == "CURVE" &&
            req[6].size() == 32) {
            for (const auto& key : allowed)
                if (std::memcmp(key.data(), req[6].data(), 32) == 0) ok = true;
        }
        const std::string request_id = req.size() >= 2 ? req[1].to_string() : std::string();
        const char* status = ok ? "200" : "400";
        const char* text = ok ? "OK" : "client key not allowed";
        zap->send(zmq::buffer(std::string_view("1.0")), zmq::send_flags::sndmore);
        zap->send(zmq::buffer(request_id), zmq::send_flags::sndmore);
        zap->send(zmq::buffer(std::string_view(status)), zmq::send_flags::sndmore);
        zap->send(zmq::buffer(std::string_view(text)), zmq::send_flags::sndmore);
        zap->send(zmq::buffer(std::string_view(ok ? "client" : "")), zmq::send_flags::sndmore);
        zap->send(zmq::message_t(), zmq::send_flags::none);
    }
}

void AgentServer::Impl::run() {
    auto seconds = [](double s) {
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s > 0 ? s : 1.0));
    };
    const auto hello_every = seconds(options.hello_interval_s);
    const auto heartbeat_every = seconds(options.heartbeat_interval_s);
    auto next_hello = Clock::now();
    auto next_heartbeat = Clock::now() + heartbeat_every;
    while (!stop.load()) {
        try {
            const auto now = Clock::now();
            auto wait = std::min(next_hello, next_heartbeat) - now;
            wait = std::max(Clock::duration::zero(), std::min<Clock::duration>(wait, kPollCap));
            if (backlog) wait = Clock::duration::zero();
            // Out of read budget: leave the requests queued and wake when a few can be read.
            const bool may_read = limiter.reads_allowed(Clock::now()) > 0;
            if (!may_read) wait = std::min<Clock::duration>(wait, std::chrono::milliseconds(5));
            std::vector<zmq::pollitem_t> items = {
                {router.handle(), 0, short(may_read ? ZMQ_POLLIN : 0), 0},
                {nullptr, wake_read, ZMQ_POLLIN, 0},
            };
            if (zap) items.push_back({zap->handle(), 0, ZMQ_POLLIN, 0});
            zmq::poll(items, std::chrono::duration_cast<std::chrono::milliseconds>(wait));
            if (items[1].revents & ZMQ_POLLIN) drain_wake_pipe();
            if (stop.load()) break;
            if (zap) handle_zap();
            {
                std::lock_guard lock(mutex);
                if (hello_due) next_hello = Clock::now();
                hello_due = false;
            }
            if (Clock::now() >= next_hello) {
                send_hello();
                next_hello = Clock::now() + hello_every;
            }
            drain_queue();
            handle_control();
            if (Clock::now() >= next_heartbeat) {
                send_pub(protocol::Topic::heartbeat, protocol::heartbeat(++seq, step.load(), wall_now()));
                next_heartbeat = Clock::now() + heartbeat_every;
            }
        } catch (const std::exception& e) {
            // Keep serving: one bad iteration must not take the agent's control channel down.
            log(std::string("I/O loop error: ") + e.what());
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    flush_at_shutdown();
}

// The last records (the run's run_end among them) must reach the subscribers: send what is queued,
// then let ZeroMQ deliver it while the socket closes, for a bounded time (a subscriber that stopped
// reading costs the shutdown at most kShutdownFlush, never a hang).
void AgentServer::Impl::flush_at_shutdown() {
    try {
        do drain_queue();
        while (backlog);
        pub.set(zmq::sockopt::linger, int(kShutdownFlush.count()));
    } catch (const std::exception& e) {
        log(std::string("shutdown flush: ") + e.what());
    }
}

AgentServer::AgentServer(ServerOptions options, ServerBackend& backend)
    : impl_(std::make_unique<Impl>(std::move(options), backend)) {
    try {
        impl_->setup();
    } catch (...) {
        if (impl_->wake_read >= 0) ::close(impl_->wake_read);
        if (impl_->wake_write >= 0) ::close(impl_->wake_write);
        throw;
    }
    impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

AgentServer::~AgentServer() {
    impl_->stop.store(true);
    impl_->wake();
    if (impl_->thread.joinable()) impl_->thread.join();
    ::close(impl_->wake_read);
    ::close(impl_->wake_write);
}

void AgentServer::set_calibration(std::vector<double> errors) {
    {
        std::lock_guard lock(impl_->mutex);
        impl_->calibration_errors = std::move(errors);
        impl_->hello_due = true;
    }
    impl_->wake();
}

void AgentServer::set_run(const std::string& run_id, const BlockLayout& layout,
                          const std::string& config_json) {
    {
        std::lock_guard lock(impl_->mutex);
        impl_->run_id = run_id;
        impl_->layout = layout;
        impl_->config_json = config_json;
        impl_->run_set = true;
        impl_->hello_due = true;
    }
    impl_->wake();
}

bool AgentServer::publish(SharedRecord record) {
    if (!record) throw std::invalid_argument("AgentServer::publish: no record");
    bool was_empty = false;
    if (!impl_->records.push(std::move(record), was_empty)) {
        impl_->dropped.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    // One wake per batch, not per record: the I/O thread empties the whole queue when it wakes.
    if (was_empty) impl_->wake();
    return true;
}

void AgentServer::update_snapshot(protocol::Snapshot snapshot, SharedRecord last_update) {
    impl_->records.set_snapshot(std::move(snapshot), std::move(last_update));
    impl_->wake();
}

void AgentServer::set_step(std::int64_t step) {
    impl_->step.store(step);
}

std::uint64_t AgentServer::dropped() const {
    return impl_->dropped.load();
}

bool transport_available() {
    return true;
}

std::uint64_t AgentServer::published() const {
    return impl_->published.load();
}

}  // namespace sp::transport
