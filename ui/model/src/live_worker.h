#pragma once
// LiveSource's worker thread (private to sp_ui_model): the sockets, the late-join state machine,
// liveness and the commands in flight. Everything it reports goes through `Post`, which runs a
// closure on the GUI thread; the worker never touches the LiveSource object itself.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "sp/transport/handshake_monitor.h"
#include "sp/ui/live_source.h"

namespace sp::ui {

// Bounds one poll iteration's reading of a socket so the other socket, commands and timers are
// never starved.
inline constexpr int kMaxMessagesPerIteration = 2000;

inline QString q(const std::string& s) {
    return QString::fromStdString(s);
}

// "1.2 s", for messages.
inline QString seconds(std::chrono::milliseconds ms) {
    return QString::number(double(ms.count()) / 1000.0, 'g', 4) + " s";
}

// The RunHeader of a `hello` body (sp::protocol::parse_hello) when this dashboard can follow its
// protocol; nullopt with `error` otherwise.
std::optional<sp::RunHeader> followableHello(std::string_view body, std::string& error);

class LiveWorker {
  public:
    using Emit = std::function<void(TelemetrySource&)>;
    using Post = std::function<void(Emit)>;

    LiveWorker(LiveEndpoints endpoints, LiveOptions options, Post post);
    ~LiveWorker();
    LiveWorker(const LiveWorker&) = delete;
    LiveWorker& operator=(const LiveWorker&) = delete;

    // Throws std::runtime_error when the wake-up pipe cannot be made.
    void start();
    void stop();  // joins the thread
    // Any thread: queues a command for the worker; false when the agent is not heard now.
    bool enqueue(const QString& request_id, const sp::Command& command);

    SourceState state() const { return state_.load(); }
    LiveCounters counters() const;
    double cpuSeconds() const;

  private:
    using Clock = std::chrono::steady_clock;
    struct Pending {
        std::string id;
        Clock::time_point deadline;
    };
    struct Queued {
        QString id;
        sp::Command command;
    };

    void run();
    zmq::socket_t openSocket(zmq::socket_type type, const QString& endpoint,
                             sp::transport::HandshakeMonitor* monitor = nullptr);
    void resetDealer();
    void onHandshakeEvents();
    long pollTimeoutMs(Clock::time_point now) const;

    void drainTelemetry(Clock::time_point now);
    void onTelemetry(const zmq::message_t& topic, const zmq::message_t& body, Clock::time_point now);
    void onRecord(std::uint64_t seq, std::string_view body, const char* topic);
    void onHeartbeat(std::string_view body);
    void onRestart();
    // A seq gap while synced: held until the snapshot says whether the run is still ours.
    void checkGap();
    void reportGap();
    void drainReplies();
    void onReply(const std::string& frame);
    void onSnapshotReply(const sp::protocol::Reply& reply);
    void drainCommands(Clock::time_point now);
    void checkTimers(Clock::time_point now);

    void requestSnapshot(Clock::time_point now);
    void snapshotTimedOut(Clock::time_point now);
    bool isSnapshotReply(const std::string& id) const;
    void forgetSnapshotRequests();
    void giveUpSnapshot(const std::string& why);
    void releaseBuffer(std::optional<std::uint64_t> after);
    void failPending(const std::string& why);
    void reply(const std::string& id, bool ok, const std::string& error, std::int64_t step);
    void flush();
    void setState(SourceState s, const QString& detail);
    void bad(const std::string& why);
    void post(Emit e) { post_(std::move(e)); }

    const LiveEndpoints endpoints_;
    const LiveOptions options_;
    const Post post_;

    // Shared with other threads.
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<SourceState> state_{SourceState::idle};
    int wake_read_ = -1, wake_write_ = -1;
    std::mutex queue_mutex_;
    std::vector<Queued> queue_;
    std::atomic<std::uint64_t> messages_{0}, records_{0}, bad_{0}, lost_{0}, snapshots_{0}, restarts_{0},
        replies_{0};
    std::atomic<double> final_cpu_{0.0};
    std::atomic<bool> running_{false};

    // Worker thread only.
    std::optional<zmq::context_t> ctx_;
    std::optional<zmq::socket_t> sub_, dealer_;
    sp::transport::HandshakeMonitor sub_monitor_;  // the telemetry socket's handshakes
    std::string refusal_shown_;                    // the handshake refusal last reported ("" after a message)
    std::optional<std::uint64_t> last_seq_;
    std::uint64_t deferred_gap_ = 0;                 // missing seqs not reported yet (see onTelemetry)
    std::string run_id_;                             // the run of the last header emitted
    bool header_needed_ = true;                      // the next snapshot must also announce its header
    bool header_calibrated_ = false;                 // the header last emitted carried calibration errors
    bool synced_ = false;                            // snapshot applied (or given up) for the current run
    bool checking_gap_ = false;                      // unsynced by a seq gap (checkGap), not a disconnect
    std::optional<std::string> snapshot_id_;         // the request in flight
    std::vector<std::string> earlier_snapshot_ids_;  // timed out, but a late answer is still taken
    int snapshot_attempts_ = 0;
    Clock::time_point snapshot_deadline_, snapshot_retry_, snapshot_first_try_;
    bool snapshot_wanted_ = false;
    // Late join: (seq, record, message bytes), oldest first; a deque, so dropping the oldest is O(1).
    struct Buffered {
        std::uint64_t seq;
        sp::TelemetryRecord record;
        std::size_t bytes;
    };
    std::deque<Buffered> buffer_;
    std::size_t buffered_bytes_ = 0;  // the messages' sizes, summed over buffer_
    void clearBuffer() {
        buffer_.clear();
        buffered_bytes_ = 0;
    }
    std::optional<std::uint64_t> in_snapshot_through_;  // records up to this seq are in the snapshot
    std::shared_ptr<std::vector<sp::TelemetryRecord>> batch_;
    Clock::time_point last_flush_{};
    Clock::time_point started_{}, last_message_{};
    bool heard_ = false;
    std::vector<Pending> pending_;
    std::uint64_t request_counter_ = 0;
    Clock::time_point bad_window_{};
    int bad_in_window_ = 0;
    std::uint64_t bad_suppressed_ = 0;
};

}  // namespace sp::ui
