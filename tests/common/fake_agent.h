#pragma once
// An in-test stand-in for the agent's transport (agent/PROTOCOL.md): a PUB and a ROUTER socket on
// ipc:// endpoints, its own thread answering requests, and messages built with sp::protocol only,
// so what a client sees is what the real agent sends. Qt-free: the dashboard's suites
// (tests/gui), sp-ctl's live commands (tests/integration) and bench_dashboard_live use it.
//
// Publishing calls are thread-safe. The agent thread answers `snapshot` with the state this
// object tracks (layout, pins, last update, seq), `ping` with a pong, and routing commands
// according to the command behaviour: ack (then a "command" event carrying the request id, as
// the real agent does at the next step boundary), reject with a reason, or stay silent. A request
// that does not parse is rejected with the reason the real agent gives.
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "sp/jsonl.h"
#include "sp/protocol.h"

namespace sp::test {

// An update record for a model of `blocks` blocks at `step`: block i is INT8 when (i + step) is
// even, so consecutive updates differ.
sp::UpdateRecord make_update(int blocks, std::int64_t step, double timestamp = 1.7e9);

class FakeAgent {
  public:
    // ack: acknowledged, then applied (a "command" event with ok true); reject: refused in the reply;
    // fail_at_apply: acknowledged, then refused when applied (the event says ok false and why);
    // silent: no reply at all.
    enum class CommandBehaviour : std::uint8_t { ack, reject, fail_at_apply, silent };

    struct Options {
        int blocks = 4;
        // Published by the agent thread at these periods; 0 turns them off.
        int heartbeat_ms = 100;
        int hello_ms = 0;
        bool hello_at_start = true;
        // Z85 secret key: both sockets are CURVE servers (no ZAP handler, so any client key that
        // knows the server's public key is admitted).
        std::string curve_secret_key;
        // Called on the agent thread every tick_ms (0: never), between requests; it may publish
        // (e.g. a steady stream of messages for a subscriber to read).
        int tick_ms = 0;
        std::function<void(FakeAgent&)> on_tick;
    };

    // `dir` is a directory for the ipc socket files (a test's temporary directory).
    FakeAgent(const std::string& dir, Options options);
    FakeAgent(const std::string& dir) : FakeAgent(dir, Options{}) {}
    ~FakeAgent();
    FakeAgent(const FakeAgent&) = delete;
    FakeAgent& operator=(const FakeAgent&) = delete;

    const std::string& telemetry_endpoint() const { return telemetry_; }
    const std::string& control_endpoint() const { return control_; }
    // "ipc://tel,ipc://ctl", what the dashboard's --connect takes.
    std::string spec() const { return telemetry_ + "," + control_; }

    // Binds both sockets and starts the thread; seq starts again at 1. Throws zmq::error_t.
    void start(const std::string& run_id);
    // From the next hello on, it carries these calibration errors (as the real agent's does once
    // it has calibrated).
    void set_calibration(std::vector<double> errors);
    // Joins the thread and closes both sockets (the endpoints can be bound again).
    void stop();
    bool running() const { return thread_.joinable(); }

    // ---- Publishing (any thread) ----
    void publish_hello();
    void publish_heartbeat();
    // Also becomes the snapshot's last update; the step becomes the agent's step.
    void publish_update(const sp::UpdateRecord& r);
    void publish_update(std::int64_t step) { publish_update(make_update(options_.blocks, step)); }
    void publish_event(const sp::EventRecord& e);
    // A raw two-frame message, for bad input. With `takes_seq` the body (a JSON object text) gets
    // the next seq as its first key, as every real message does.
    void publish_raw(const std::string& topic, const std::string& body, bool takes_seq = false);
    // The next `n` seqs are never published (a loss on the wire).
    void skip_seqs(std::uint64_t n);
    std::uint64_t last_seq() const;
    std::int64_t step() const;

    // ---- Control ----
    void set_command_behaviour(CommandBehaviour b, std::string reason = {});
    // Run on the agent thread when a snapshot request arrives: `before` ahead of taking the state,
    // `after` between taking it and sending the reply (both may publish). Lets a test put
    // messages on both sides of the snapshot's seq.
    void set_snapshot_hooks(std::function<void()> before, std::function<void()> after);
    // Every request frame received, in order (the exact JSON a client sent).
    std::vector<std::string> requests() const;
    // The requests that parsed (so were not rejected as malformed), in order.
    std::vector<sp::protocol::Request> parsed_requests() const;
    int snapshot_requests() const { return snapshot_requests_; }
    std::optional<sp::Precision> pin_of(int block) const;

  private:
    void run();
    void handle(std::vector<zmq::message_t>& frames);
    std::uint64_t next_seq();  // with mutex_ held
    static double now();

    const std::string telemetry_, control_;
    const Options options_;
    std::optional<zmq::context_t> ctx_;
    std::thread thread_;
    std::atomic<bool> stop_{false};

    mutable std::mutex mutex_;  // guards everything below and the PUB socket
    std::optional<zmq::socket_t> pub_, router_;
    std::string run_id_;
    std::uint64_t seq_ = 0;
    std::int64_t step_ = 0;
    sp::BlockLayout layout_;
    std::vector<sp::Precision> precision_;
    std::vector<std::optional<sp::Precision>> pins_;
    std::vector<double> calibration_errors_;              // in hello once set
    std::vector<std::optional<std::int64_t>> pin_until_;  // the pins' terms, reported in snapshots
    std::vector<bool> pin_on_spike_;
    std::optional<sp::UpdateRecord> last_update_;
    CommandBehaviour behaviour_ = CommandBehaviour::ack;
    std::string reject_reason_;
    std::function<void()> before_snapshot_, after_snapshot_;
    std::vector<std::string> requests_;
    std::vector<sp::protocol::Request> parsed_requests_;
    std::atomic<int> snapshot_requests_{0};
};

}  // namespace sp::test
