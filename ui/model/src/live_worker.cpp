#include "live_worker.h"

#include "sp/transport/client_socket.h"

#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sp::ui {
namespace {

namespace protocol = sp::protocol;

// Bad messages reported individually per second; the rest are summarised.
constexpr int kBadPerSecond = 10;
// The worker wakes at least this often even when nothing is due.
constexpr long kMaxPollMs = 1000;

double threadCpuSeconds(clockid_t clock) {
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) return 0.0;
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

LiveWorker::LiveWorker(LiveEndpoints endpoints, LiveOptions options, Post post)
    : endpoints_(std::move(endpoints)), options_(options), post_(std::move(post)) {}

LiveWorker::~LiveWorker() {
    stop();
}

void LiveWorker::start() {
    if (thread_.joinable()) return;
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("live source: cannot create the wake-up pipe");
    for (int fd : fds) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    wake_read_ = fds[0];
    wake_write_ = fds[1];
    stop_ = false;
    running_ = true;
    thread_ = std::thread([this] { run(); });
}

void LiveWorker::stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    const char c = 's';
    (void)!::write(wake_write_, &c, 1);
    thread_.join();
    running_ = false;
    state_ = SourceState::idle;
    ::close(wake_read_);
    ::close(wake_write_);
    wake_read_ = wake_write_ = -1;
}

bool LiveWorker::enqueue(const QString& request_id, const sp::Command& command) {
    const SourceState s = state_.load();
    if (s != SourceState::live && s != SourceState::stale) return false;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        queue_.push_back({request_id, command});
    }
    const char c = 'c';
    (void)!::write(wake_write_, &c, 1);  // a full pipe already means "wake up"
    return true;
}

LiveCounters LiveWorker::counters() const {
    LiveCounters c;
    c.messages = messages_;
    c.records = records_;
    c.bad_messages = bad_;
    c.lost = lost_;
    c.snapshots = snapshots_;
    c.restarts = restarts_;
    c.replies = replies_;
    return c;
}

double LiveWorker::cpuSeconds() const {
    if (!running_) return final_cpu_;
    clockid_t clock;
    if (pthread_getcpuclockid(const_cast<std::thread&>(thread_).native_handle(), &clock) != 0)
        return final_cpu_;
    return threadCpuSeconds(clock);
}

zmq::socket_t LiveWorker::openSocket(zmq::socket_type type, const QString& endpoint,
                                     sp::transport::HandshakeMonitor* monitor) {
    sp::transport::ClientSocketOptions options;
    options.follow_restarts = true;
    // Requests are refused at once while no agent is connected instead of waiting in the socket
    // to be delivered (and applied) long after the operator gave up on them.
    options.refuse_while_disconnected = true;
    if (!endpoints_.server_public_key.isEmpty())
        options.curve = sp::transport::ClientKeys{endpoints_.server_public_key.toStdString(),
                                                  endpoints_.client_public_key.toStdString(),
                                                  endpoints_.client_secret_key.toStdString()};
    return sp::transport::open_client_socket(*ctx_, type, endpoint.toStdString(), options, monitor);
}

void LiveWorker::resetDealer() {
    dealer_.reset();
    dealer_.emplace(openSocket(zmq::socket_type::dealer, endpoints_.control));
}

void LiveWorker::run() {
    started_ = last_flush_ = bad_window_ = Clock::now();
    try {
        ctx_.emplace(1);
        sub_.emplace(openSocket(zmq::socket_type::sub, endpoints_.telemetry, &sub_monitor_));
        sub_->set(zmq::sockopt::subscribe, "");
        resetDealer();
        setState(SourceState::connecting, "connecting to " + endpoints_.telemetry);
    } catch (const zmq::error_t& e) {
        setState(SourceState::disconnected, "cannot connect: " + q(e.what()));
        sub_monitor_ = {};
        sub_.reset();
        dealer_.reset();
        ctx_.reset();
        final_cpu_ = threadCpuSeconds(CLOCK_THREAD_CPUTIME_ID);
        return;
    }
    while (!stop_) {
        zmq_pollitem_t items[4] = {{sub_->handle(), 0, ZMQ_POLLIN, 0},
                                   {dealer_->handle(), 0, ZMQ_POLLIN, 0},
                                   {nullptr, wake_read_, ZMQ_POLLIN, 0},
                                   sub_monitor_.poll_item()};
        const int rc = zmq_poll(items, 4, pollTimeoutMs(Clock::now()));
        if (rc < 0 && zmq_errno() != EINTR) break;
        if (stop_) break;
        if (items[2].revents & ZMQ_POLLIN) {
            char sink[256];
            while (::read(wake_read_, sink, sizeof sink) > 0) {
            }
        }
        if (items[3].revents & ZMQ_POLLIN) onHandshakeEvents();
        const auto now = Clock::now();
        if (items[0].revents & ZMQ_POLLIN) drainTelemetry(now);
        if (items[1].revents & ZMQ_POLLIN) drainReplies();
        drainCommands(now);
        checkTimers(Clock::now());
    }
    sub_monitor_ = {};
    sub_.reset();
    dealer_.reset();
    ctx_.reset();
    final_cpu_ = threadCpuSeconds(CLOCK_THREAD_CPUTIME_ID);
}

void LiveWorker::onHandshakeEvents() {
    // A refused key (or CURVE on one side only) is certain and the same on every retry, so the
    // operator is told at once instead of watching "connecting" forever. libzmq keeps retrying:
    // an agent restarted with the right keys makes the source live with its first message.
    const std::string refusal = sub_monitor_.read(endpoints_.telemetry.toStdString());
    if (refusal.empty() || refusal == refusal_shown_) return;
    refusal_shown_ = refusal;
    const SourceState s = state_.load();
    if (s != SourceState::connecting && s != SourceState::disconnected) return;
    flush();
    state_ = SourceState::disconnected;
    post([detail = q(refusal)](TelemetrySource& src) {
        emit src.stateChanged(SourceState::disconnected, detail);
    });
}

long LiveWorker::pollTimeoutMs(Clock::time_point now) const {
    Clock::time_point due = now + std::chrono::milliseconds(kMaxPollMs);
    auto consider = [&due](Clock::time_point t) { due = std::min(due, t); };
    const Clock::time_point heard = heard_ ? last_message_ : started_;
    const SourceState s = state_.load();
    if (s == SourceState::live) consider(heard + options_.stale_timeout);
    if (s == SourceState::live || s == SourceState::stale || s == SourceState::connecting)
        consider(heard + options_.disconnect_timeout);
    for (const Pending& p : pending_) consider(p.deadline);
    if (snapshot_id_) consider(snapshot_deadline_);
    if (snapshot_wanted_ && !snapshot_id_) consider(snapshot_retry_);
    if (batch_ && !batch_->empty()) consider(last_flush_ + options_.coalesce_window);
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(due - now).count();
    return std::max<long>(0, long(ms));
}

void LiveWorker::drainReplies() {
    for (int i = 0; i < kMaxMessagesPerIteration; ++i) {
        zmq::message_t frame;
        if (!dealer_->recv(frame, zmq::recv_flags::dontwait)) break;
        std::string text = frame.to_string();
        // A REQ-style envelope would put an empty delimiter first; the reply is the last frame.
        while (frame.more()) {
            if (!dealer_->recv(frame, zmq::recv_flags::dontwait)) break;
            text = frame.to_string();
        }
        onReply(text);
    }
}

void LiveWorker::onReply(const std::string& frame) {
    // Counted when handled: whatever the reply causes is emitted before a later message's records.
    struct CountOnReturn {
        std::atomic<std::uint64_t>& count;
        ~CountOnReturn() { ++count; }
    } counted{replies_};
    std::string error;
    const std::optional<protocol::Reply> r = protocol::parse_reply(frame, error);
    if (!r) {
        bad("bad reply from the agent: " + error);
        return;
    }
    if (r->id && isSnapshotReply(*r->id)) {
        onSnapshotReply(*r);
        return;
    }
    // A null id: the agent could not read the request's id; it answers the oldest one.
    auto it = r->id ? std::find_if(pending_.begin(), pending_.end(),
                                   [&](const Pending& p) { return p.id == *r->id; })
                    : pending_.begin();
    if (it == pending_.end()) {
        if (!r->id && snapshot_id_) onSnapshotReply(*r);
        return;  // a late reply to a request that already timed out
    }
    const std::string id = it->id;
    pending_.erase(it);
    reply(id, r->ok, r->error, r->effective_step.value_or(-1));
}

void LiveWorker::drainCommands(Clock::time_point now) {
    std::vector<Queued> queued;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        queued.swap(queue_);
    }
    for (Queued& c : queued) {
        const std::string id = c.id.toStdString();
        std::string text;
        try {
            text = protocol::make_request(id, c.command);
        } catch (const std::exception& e) {
            reply(id, false, std::string("cannot build the request: ") + e.what(), -1);
            continue;
        }
        if (!dealer_->send(zmq::buffer(text), zmq::send_flags::dontwait)) {
            reply(id, false,
                  "not connected to the agent's control socket " + endpoints_.control.toStdString(), -1);
            continue;
        }
        pending_.push_back({id, now + options_.command_timeout});
    }
}

void LiveWorker::checkTimers(Clock::time_point now) {
    for (std::size_t i = 0; i < pending_.size();) {
        if (pending_[i].deadline <= now) {
            const std::string id = pending_[i].id;
            pending_.erase(pending_.begin() + std::ptrdiff_t(i));
            reply(id, false, "no answer within " + seconds(options_.command_timeout).toStdString(), -1);
        } else {
            ++i;
        }
    }
    if (snapshot_id_ && snapshot_deadline_ <= now) {
        snapshotTimedOut(now);
    } else if (snapshot_wanted_ && !snapshot_id_ && snapshot_retry_ <= now) {
        requestSnapshot(now);
    }

    const auto quiet = now - (heard_ ? last_message_ : started_);
    const SourceState s = state_.load();
    if ((s == SourceState::live || s == SourceState::stale) && quiet >= options_.disconnect_timeout) {
        flush();
        setState(SourceState::disconnected, "no message for " + seconds(options_.disconnect_timeout) +
                                                "; reconnecting to " + endpoints_.telemetry);
        failPending("no answer from the agent (timeout)");
        // A fresh control socket: nothing queued for the dead peer survives, and the snapshot
        // after reconnecting goes out on a clean connection.
        resetDealer();
        synced_ = false;
        checking_gap_ = false;  // the resync after the reconnect decides
        forgetSnapshotRequests();
        clearBuffer();
    } else if (s == SourceState::live && quiet >= options_.stale_timeout) {
        setState(SourceState::stale, "no message for " + seconds(options_.stale_timeout));
    } else if (s == SourceState::connecting && quiet >= options_.disconnect_timeout) {
        // Never heard at all (a wrong endpoint, an agent not started yet): say so rather than show
        // "connecting" forever. The sockets keep trying; the first message makes the source live.
        const std::string& hint = sub_monitor_.hint();
        setState(SourceState::disconnected,
                 "nothing heard from " + endpoints_.telemetry + " in " +
                     seconds(options_.disconnect_timeout) + "; still trying (" +
                     (hint.empty() ? QStringLiteral("is an agent publishing there?") : q(hint)) + ")");
    }

    if (bad_suppressed_ > 0 && now - bad_window_ >= std::chrono::seconds(1)) {
        const QString text = QString::number(bad_suppressed_) + " more bad messages (not shown one by one)";
        bad_suppressed_ = 0;
        bad_in_window_ = 0;
        bad_window_ = now;
        post([text](TelemetrySource& src) { emit src.badMessage(text); });
    }
    if (batch_ && !batch_->empty() && now - last_flush_ >= options_.coalesce_window) flush();
}

void LiveWorker::failPending(const std::string& why) {
    std::vector<Pending> pending;
    pending.swap(pending_);
    for (const Pending& p : pending) reply(p.id, false, why, -1);
}

void LiveWorker::reply(const std::string& id, bool ok, const std::string& error, std::int64_t step) {
    flush();  // records that arrived before the reply are delivered before it
    post([id = q(id), ok, error = q(error), step](TelemetrySource& s) {
        emit s.commandReplied(id, ok, error, step);
    });
}

void LiveWorker::setState(SourceState s, const QString& detail) {
    if (state_.exchange(s) == s) return;
    flush();
    post([s, detail](TelemetrySource& src) { emit src.stateChanged(s, detail); });
}

void LiveWorker::bad(const std::string& why) {
    ++bad_;
    const auto now = Clock::now();
    if (now - bad_window_ >= std::chrono::seconds(1)) {
        bad_window_ = now;
        bad_in_window_ = 0;
    }
    if (++bad_in_window_ > kBadPerSecond) {
        ++bad_suppressed_;
        return;
    }
    post([text = q(why)](TelemetrySource& s) { emit s.badMessage(text); });
}

}  // namespace sp::ui
