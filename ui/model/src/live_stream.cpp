// LiveWorker, the telemetry half: reading the SUB socket, seq gaps and restarts, the late-join
// snapshot (PROTOCOL.md §5) and the batches of records for the GUI thread.
#include "live_worker.h"

#include <utility>

namespace sp::ui {
namespace {

namespace protocol = sp::protocol;

// A batch this large is delivered at once, whatever the coalescing window says.
constexpr std::size_t kMaxBatch = 4096;
// Late join: messages held while the snapshot is on its way; older ones are dropped (and counted
// as lost) beyond this, so a silent control socket cannot grow memory without bound.
constexpr std::size_t kMaxBuffered = 100000;
// A snapshot request that cannot be sent yet (the control connection is still coming up).
constexpr auto kSnapshotRetry = std::chrono::milliseconds(100);
// Snapshot requests sent, each given the command timeout, before showing the stream without one.
constexpr int kSnapshotAttempts = 3;

}  // namespace

std::optional<sp::RunHeader> followableHello(std::string_view body, std::string& error) {
    std::optional<protocol::Hello> hello = protocol::parse_hello(body, error);
    if (!hello) return std::nullopt;
    if (hello->protocol && *hello->protocol != protocol::kVersion) {
        error = "the agent speaks protocol " + std::to_string(*hello->protocol) + "; this dashboard knows " +
                std::to_string(protocol::kVersion);
        return std::nullopt;
    }
    return std::move(hello->header);
}

void LiveWorker::drainTelemetry(Clock::time_point now) {
    for (int i = 0; i < kMaxMessagesPerIteration; ++i) {
        zmq::message_t topic, body;
        if (!sub_->recv(topic, zmq::recv_flags::dontwait)) break;
        if (!topic.more()) {
            ++messages_;
            bad("a telemetry message of one frame (expected topic and body)");
            continue;
        }
        (void)sub_->recv(body, zmq::recv_flags::dontwait);
        bool extra = false;
        while (body.more()) {
            zmq::message_t rest;
            if (!sub_->recv(rest, zmq::recv_flags::dontwait)) break;
            extra = true;
            if (!rest.more()) break;
        }
        if (extra) {
            ++messages_;
            bad("a telemetry message of more than two frames");
            continue;
        }
        onTelemetry(topic, body, now);
    }
    if (batch_ && (batch_->size() >= kMaxBatch || now - last_flush_ >= options_.coalesce_window)) flush();
}

void LiveWorker::onTelemetry(const zmq::message_t& topic_frame, const zmq::message_t& body_frame,
                             Clock::time_point now) {
    ++messages_;
    // Any message, even one we cannot read, shows that the agent is there.
    heard_ = true;
    last_message_ = now;
    refusal_shown_.clear();
    if (state_.load() != SourceState::live)
        setState(SourceState::live, "receiving from " + endpoints_.telemetry);

    const std::string_view topic_text(static_cast<const char*>(topic_frame.data()), topic_frame.size());
    const std::string_view body(static_cast<const char*>(body_frame.data()), body_frame.size());
    const std::optional<protocol::Topic> topic = protocol::parse_topic(topic_text);
    const std::string topic_name(topic_text.substr(0, 40));
    const std::optional<std::uint64_t> seq = protocol::seq_of(body);
    if (!seq) {
        bad(topic_name + " message without a seq (or not JSON)");
        return;
    }
    std::optional<sp::RunHeader> hello;
    std::string bad_hello;
    if (topic == protocol::Topic::hello) hello = followableHello(body, bad_hello);

    // (After a restart noticed from the seq, header_needed_ holds until the new run announces
    // itself: its hello is then the news, not a second restart.)
    const bool restarted = (last_seq_ && *seq <= *last_seq_) ||
                           (hello && !header_needed_ && !run_id_.empty() && hello->run_id != run_id_);
    if (restarted) {
        onRestart();
    } else if (last_seq_ && *seq > *last_seq_ + 1) {
        // A jump may be lost messages, or just as well a restarted agent whose first messages (its
        // hello among them) went by while we reconnected: its records must not join the old run.
        // The stream is held until the agent's snapshot names the run (checkGap, onSnapshotReply).
        deferred_gap_ += *seq - *last_seq_ - 1;
        if (synced_) checkGap();
    }
    last_seq_ = *seq;
    // After the seq bookkeeping: every topic (a newer agent's too) shares the one seq counter, so
    // a message we cannot use is still not a gap.
    if (!topic) {
        bad("unknown topic '" + topic_name + "'");
        return;
    }
    if (*topic == protocol::Topic::hello && !hello) {
        bad("hello seq " + std::to_string(*seq) + ": " + bad_hello);
        return;
    }

    // Hello repeats every 2 s; it is news for a new run, and when it first carries the calibration
    // (the agent calibrates after it starts announcing the run).
    const bool calibration_news = hello && !hello->calibration_errors.empty() && !header_calibrated_;
    if (hello && (hello->run_id != run_id_ || header_needed_ || calibration_news)) {
        flush();
        run_id_ = hello->run_id;
        header_needed_ = false;
        header_calibrated_ = !hello->calibration_errors.empty();
        post([h = std::move(*hello)](TelemetrySource& s) { emit s.headerReceived(h); });
    }
    if (!synced_ && !snapshot_id_ && !snapshot_wanted_) {
        snapshot_wanted_ = true;
        snapshot_first_try_ = now;
        snapshot_attempts_ = 0;
        requestSnapshot(now);
    }
    switch (*topic) {
        case protocol::Topic::hello:
            return;
        case protocol::Topic::heartbeat:
            onHeartbeat(body);
            return;
        case protocol::Topic::update:
        case protocol::Topic::stats:
        case protocol::Topic::event:
            onRecord(*seq, body, protocol::to_string(*topic).data());
            return;
    }
}

void LiveWorker::onRecord(std::uint64_t seq, std::string_view body, const char* topic) {
    sp::TelemetryRecord rec;
    std::string why;
    const sp::ParseStatus status = sp::parse_record(body, rec, why);
    if (status != sp::ParseStatus::ok) {
        bad(std::string(topic) + " seq " + std::to_string(seq) +
            (status == sp::ParseStatus::unknown_type ? ": a record type this dashboard does not know"
                                                     : ": " + why));
        return;
    }
    if (!synced_) {
        while (!buffer_.empty() && (buffer_.size() >= kMaxBuffered ||
                                    buffered_bytes_ + body.size() > options_.late_join_buffer_bytes)) {
            buffered_bytes_ -= buffer_.front().bytes;
            buffer_.pop_front();
            ++lost_;
        }
        buffered_bytes_ += body.size();
        buffer_.push_back({seq, std::move(rec), body.size()});
        return;
    }
    if (in_snapshot_through_ && seq <= *in_snapshot_through_) return;  // already in the snapshot
    if (!batch_) batch_ = std::make_shared<std::vector<sp::TelemetryRecord>>();
    batch_->push_back(std::move(rec));
}

void LiveWorker::onHeartbeat(std::string_view body) {
    std::string error;
    const std::optional<protocol::Heartbeat> beat = protocol::parse_heartbeat(body, error);
    if (!beat) return;  // liveness was noted already
    post([s = qint64(beat->step)](TelemetrySource& source) { emit source.heartbeatReceived(s); });
}

void LiveWorker::reportGap() {
    const quint64 missing = deferred_gap_;
    deferred_gap_ = 0;
    if (missing == 0) return;
    lost_ += missing;
    flush();
    post([missing](TelemetrySource& s) { emit s.messagesLost(missing); });
}

void LiveWorker::checkGap() {
    flush();  // what came before the gap is the run's for certain
    synced_ = false;
    checking_gap_ = true;
}

void LiveWorker::onRestart() {
    ++restarts_;
    checking_gap_ = false;
    deferred_gap_ = 0;
    flush();
    last_seq_.reset();
    synced_ = false;
    forgetSnapshotRequests();
    clearBuffer();
    in_snapshot_through_.reset();
    header_needed_ = true;
    header_calibrated_ = false;
}

void LiveWorker::requestSnapshot(Clock::time_point now) {
    const std::string id = "dash-snapshot-" + std::to_string(++request_counter_);
    const std::string text = protocol::make_request(id, protocol::Request::Kind::snapshot);
    if (dealer_->send(zmq::buffer(text), zmq::send_flags::dontwait)) {
        snapshot_id_ = id;
        snapshot_deadline_ = now + options_.command_timeout;
        ++snapshot_attempts_;
        return;
    }
    // Not connected yet: the control socket usually comes up a moment after the telemetry one.
    if (now - snapshot_first_try_ >= options_.command_timeout) {
        giveUpSnapshot("the agent's control socket " + endpoints_.control.toStdString() +
                       " is not reachable");
        return;
    }
    snapshot_retry_ = now + kSnapshotRetry;
}

void LiveWorker::snapshotTimedOut(Clock::time_point now) {
    if (snapshot_attempts_ >= kSnapshotAttempts) {
        giveUpSnapshot("no answer to " + std::to_string(snapshot_attempts_) + " requests within " +
                       seconds(options_.command_timeout).toStdString() + " each");
        return;
    }
    // A busy agent (a long step holding its control thread) answers late: ask again, and still take
    // a late answer to an earlier request.
    earlier_snapshot_ids_.push_back(*snapshot_id_);
    snapshot_id_.reset();
    snapshot_first_try_ = now;
    requestSnapshot(now);
}

bool LiveWorker::isSnapshotReply(const std::string& id) const {
    return (snapshot_id_ && id == *snapshot_id_) ||
           std::find(earlier_snapshot_ids_.begin(), earlier_snapshot_ids_.end(), id) !=
               earlier_snapshot_ids_.end();
}

void LiveWorker::forgetSnapshotRequests() {
    snapshot_id_.reset();
    earlier_snapshot_ids_.clear();
    snapshot_wanted_ = false;
}

void LiveWorker::giveUpSnapshot(const std::string& why) {
    bad(std::exchange(checking_gap_, false)
            ? "no snapshot after a seq gap (" + why + "); taking the messages after it as the same run's"
            : "no snapshot (" + why + "); showing live messages without the agent's earlier state");
    forgetSnapshotRequests();
    synced_ = true;
    reportGap();
    releaseBuffer(std::nullopt);
}

void LiveWorker::releaseBuffer(std::optional<std::uint64_t> after) {
    for (Buffered& b : buffer_) {
        if (after && b.seq <= *after) continue;
        if (!batch_) batch_ = std::make_shared<std::vector<sp::TelemetryRecord>>();
        batch_->push_back(std::move(b.record));
    }
    clearBuffer();
    flush();
}

void LiveWorker::onSnapshotReply(const protocol::Reply& r) {
    forgetSnapshotRequests();
    if (!r.ok) {
        giveUpSnapshot("the agent refused: " + r.error);
        return;
    }
    protocol::Snapshot snap;
    std::string error;
    if (!protocol::parse_snapshot(r.text, snap, error)) {
        giveUpSnapshot("bad snapshot: " + error);
        return;
    }
    flush();
    if (std::exchange(checking_gap_, false) && !header_needed_ && snap.run_id == run_id_) {
        // The same run: the gap was lost messages, and the records held since follow on from what
        // the run already has (none of them was shown), so they all go out and the snapshot is not news.
        ++snapshots_;
        synced_ = true;
        reportGap();
        releaseBuffer(std::nullopt);
        return;
    }
    if (!run_id_.empty() && snap.run_id != run_id_ && !header_needed_) {
        ++restarts_;  // restarted while we were away, its hello missed: not a loss
        deferred_gap_ = 0;
    }
    reportGap();
    if (header_needed_ || snap.run_id != run_id_) {
        sp::RunHeader h;
        h.producer = "snapshot";
        h.run_id = snap.run_id;
        h.blocks = snap.layout;
        h.config_json = snap.config_json.empty() ? "{}" : snap.config_json;
        run_id_ = snap.run_id;
        header_needed_ = false;
        post([h = std::move(h)](TelemetrySource& s) { emit s.headerReceived(h); });
    }
    ++snapshots_;
    synced_ = true;
    in_snapshot_through_ = snap.seq;
    post([snap = std::move(snap)](TelemetrySource& s) { emit s.snapshotReceived(snap); });
    releaseBuffer(in_snapshot_through_);
}

void LiveWorker::flush() {
    if (!batch_ || batch_->empty()) return;
    last_flush_ = Clock::now();
    records_ += batch_->size();
    RecordBatch batch = std::move(batch_);
    batch_.reset();
    post([batch = std::move(batch)](TelemetrySource& s) { emit s.recordsReceived(batch); });
}

}  // namespace sp::ui
