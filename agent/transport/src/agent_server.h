#pragma once
// The agent's network side: telemetry on a PUB socket and operator commands on a ROUTER socket,
// both owned by one I/O thread (agent/PROTOCOL.md). The training thread only pushes into a bounded
// queue and swaps in snapshots; it never waits for the network. No LibTorch here.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "sp/jsonl.h"
#include "sp/protocol.h"
#include "sp/record_line.h"
#include "sp/transport/server_options.h"

namespace sp::transport {

// What the server needs from the agent. Called on the I/O thread.
class ServerBackend {
  public:
    virtual ~ServerBackend() = default;
    // A validated routing command (pin/release/release_all/set_mode): queue it for the next step
    // boundary and return that step (the reply's effective_step).
    virtual std::int64_t submit(const Command& command, const std::string& request_id) = 0;
    // Why the command would be rejected when applied ("" when it would be applied): checked before
    // submit(), so the reply tells the truth instead of acknowledging a command that is dropped later.
    virtual std::string check(const Command& /*command*/) const { return {}; }
};

class AgentServer {
  public:
    // Binds both sockets and starts the I/O thread. Throws std::runtime_error with a clear message for
    // a bad or busy endpoint, a refused key file or allow-list (also one without a server key), or a
    // non-loopback bind without CURVE or `insecure`.
    AgentServer(ServerOptions options, ServerBackend& backend);
    ~AgentServer();  // stops the I/O thread; unsent records are dropped (the JSONL file has them)
    AgentServer(const AgentServer&) = delete;
    AgentServer& operator=(const AgentServer&) = delete;

    // What `hello` announces and how many blocks commands may name. Call before the first publish.
    void set_run(const std::string& run_id, const BlockLayout& layout, const std::string& config_json);
    // The calibrated INT8 errors per block, once calibration ran: `hello` carries them from then on.
    void set_calibration(std::vector<double> errors);

    // Non-blocking: queues the record for the I/O thread (update/event/stats topics by kind; headers are
    // not published: `hello` carries the same). Returns false and counts a drop when the queue is full;
    // drops are announced as a `dropped` event once there is room.
    // The record is serialized once (RecordLine), by this server's I/O thread or the JSONL writer,
    // whichever comes first; a record that cannot be serialized is logged and never gets a seq.
    bool publish(SharedRecord record);
    bool publish(TelemetryRecord record) { return publish(share_record(std::move(record))); }

    // The state a `snapshot` request answers with (swapped in under a short lock). `last_update`: the
    // last update record as published, whose line the reply carries as it is (no re-serializing);
    // when null, the reply serializes `snapshot.last_update` instead.
    void update_snapshot(protocol::Snapshot snapshot, SharedRecord last_update = nullptr);
    // The step heartbeats report (atomic).
    void set_step(std::int64_t step);

    std::uint64_t dropped() const;
    std::uint64_t published() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace sp::transport
