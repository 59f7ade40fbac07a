#pragma once
// The agent's real network side (sp::transport::AgentServer) behind a small test backend, on
// ipc:// endpoints: what the dashboard's live suites follow when they need a well-behaved agent.
// The server is the product's own (hello and heartbeats on its timers, snapshots stitched to the
// stream, rate limits, CURVE); this class only plays the training loop around it, as the Agent
// does: commands the server accepted are applied at the next step boundary, where they change the
// pins and are announced by a "command" event carrying the request id, and each update becomes
// the snapshot's state. Tests that need a misbehaving peer (bad frames, lost seqs, silent or
// lying replies) use FakeAgent instead. Qt-free; publishing calls are thread-safe.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sp/jsonl.h"
#include "sp/protocol.h"
#include "sp/transport/server_options.h"

namespace sp::transport {
class AgentServer;
}

namespace sp::test {

class ServedAgent {
  public:
    struct Options {
        int blocks = 4;
        int rank = 0;  // what hello and snapshots announce
        double heartbeat_interval_s = 0.1;
        double hello_interval_s = 2.0;
        // CURVE: the server's NAME.key (sp::keys) and, optionally, the allowed clients' list.
        std::string server_secret_key_file;
        std::string allowed_clients_file;
    };

    // `dir` is a directory for the ipc socket files (a test's temporary directory).
    ServedAgent(const std::string& dir, Options options);
    explicit ServedAgent(const std::string& dir) : ServedAgent(dir, Options{}) {}
    ~ServedAgent();
    ServedAgent(const ServedAgent&) = delete;
    ServedAgent& operator=(const ServedAgent&) = delete;

    const std::string& telemetry_endpoint() const { return telemetry_; }
    const std::string& control_endpoint() const { return control_; }
    // "ipc://tel,ipc://ctl", what the dashboard's --connect takes.
    std::string spec() const { return telemetry_ + "," + control_; }

    // Starts the server for a new run (step 0, no pins). Throws std::runtime_error as the server does.
    void start(const std::string& run_id);
    // Stops the server (its endpoints can be bound again).
    void stop();
    bool running() const;

    // A step boundary: applies the commands accepted since the last one at the step their ack
    // promised (each announced by a "command" event), then publishes the update (block i INT8 when i + step
    // is even, as FakeAgent's) and makes it the snapshot's state.
    void publish_update(std::int64_t step);
    // The same with the test's own record (its step is the boundary's).
    void publish_update(sp::UpdateRecord r);
    void publish_event(const sp::EventRecord& e);
    void set_calibration(std::vector<double> errors);

    std::optional<sp::Precision> pin_of(int block) const;
    // The commands the server handed over (request id, command), in order.
    std::vector<std::pair<std::string, sp::Command>> submitted() const;

  private:
    class Backend;
    void apply_pending();  // with mutex_ held

    const std::string telemetry_, control_;
    const Options options_;
    mutable std::mutex mutex_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<sp::transport::AgentServer> server_;
    // The training loop's state, kept as the snapshot that answers late joiners (seq is the server's).
    sp::protocol::Snapshot state_;
    struct Accepted {
        std::string id;
        sp::Command command;
        std::int64_t effective_step;  // what the server's ack promised
    };
    std::vector<Accepted> pending_;
    std::vector<std::pair<std::string, sp::Command>> submitted_;
};

}  // namespace sp::test
