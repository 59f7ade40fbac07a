#pragma once
// The live source: follows a running agent over ZeroMQ (agent/PROTOCOL.md). A worker thread owns
// a SUB socket (telemetry, everything subscribed) and a DEALER (control); it parses messages,
// notices seq gaps and agent restarts, takes a snapshot on first contact and after a restart
// (PROTOCOL.md §5 "late join"), tracks liveness from any message (heartbeats included) and sends
// operator commands with a deadline. Signals reach the GUI thread through queued calls.
//
// Order of signals for one run: headerReceived (from hello, or from the snapshot when no hello was
// heard), snapshotReceived, then recordsReceived with only what came after the snapshot's seq.
// After a disconnect the source takes a fresh snapshot, so a snapshot can also arrive again for
// the same run id (a gap before it is reported with messagesLost): receivers should keep their
// history then. A restart (new run id, or seq going back) always brings a new header first.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include <QByteArray>
#include <QString>

#include "sp/ui/telemetry_source.h"

namespace sp::ui {

// Where the agent is, and the CURVE keys when its sockets are encrypted.
struct LiveEndpoints {
    QString telemetry;  // the agent's PUB, e.g. tcp://127.0.0.1:5556
    QString control;    // the agent's ROUTER, e.g. tcp://127.0.0.1:5557
    // Z85 keys (40 characters each). When server_public_key is set, both sockets use CURVE with
    // the client key pair; otherwise all three are empty.
    QByteArray server_public_key, client_public_key, client_secret_key;
};

// Parses the dashboard's --connect SPEC:
//   "tcp://host:5556"                   control on the same host, port + 1 (the defaults 5556/5557)
//   "tcp://h:5556,tcp://h:5557"         telemetry and control given explicitly
//   "ipc:///path/tel,ipc:///path/ctl"   ipc always needs both
// nullopt with `error` (when given) saying what is wrong.
std::optional<LiveEndpoints> parseEndpointSpec(const QString& spec, QString* error);

// Reads the CURVE keys as sp-ctl does (sp::keys): `server_key_file` holds the agent's public key,
// `client_key` names this client's secret key, NAME.key or NAME (files from `sp-ctl keygen`; the
// public half is derived from it). False with `error` for a refused file (a secret key that group or
// others may read, a public key given as a secret one, ...); `endpoints` is then unchanged.
bool loadCurveKeys(const QString& server_key_file, const QString& client_key, LiveEndpoints& endpoints,
                   QString* error);

struct LiveOptions {
    // No message at all (heartbeats come every second) for this long: stale.
    std::chrono::milliseconds stale_timeout{3000};
    // No message for this long: disconnected (ZeroMQ keeps reconnecting; the control socket is
    // recreated so requests to a dead peer do not pile up).
    std::chrono::milliseconds disconnect_timeout{10000};
    // A request (command or snapshot) without a reply for this long fails.
    std::chrono::milliseconds command_timeout{5000};
    // Records that arrive in a burst are delivered together, at most one batch per window.
    std::chrono::milliseconds coalesce_window{30};
    // Late join: the records held while the snapshot is on its way, at most this many bytes of
    // messages (and 100,000 records); beyond it the oldest are dropped and counted as lost, so a
    // silent control socket cannot grow memory without bound.
    std::size_t late_join_buffer_bytes = std::size_t(64) << 20;
};

// Counters the worker keeps; readable from any thread (tests, benchmarks, a status bar).
struct LiveCounters {
    std::uint64_t messages = 0;      // telemetry messages received (all topics)
    std::uint64_t records = 0;       // records delivered through recordsReceived
    std::uint64_t bad_messages = 0;  // not JSON, no seq, unknown topic, bad record, bad reply
    std::uint64_t lost = 0;          // missing seqs
    std::uint64_t snapshots = 0;     // snapshots applied
    std::uint64_t restarts = 0;      // agent restarts noticed
    std::uint64_t replies = 0;       // control replies received: taken, late or bad (tests wait on it)
};

class LiveWorker;

class LiveSource : public TelemetrySource {
    Q_OBJECT
  public:
    explicit LiveSource(LiveEndpoints endpoints, LiveOptions options = {}, QObject* parent = nullptr);
    ~LiveSource() override;

    QString label() const override;
    bool isLive() const override { return true; }
    void start() override;
    void stop() override;
    bool sendCommand(const QString& request_id, const sp::Command& command) override;

    const LiveEndpoints& endpoints() const { return endpoints_; }
    const LiveOptions& options() const { return options_; }
    // After stop(): the stopped worker's final counts.
    LiveCounters counters() const;
    // CPU seconds the worker thread has used so far (after stop(): in total); for benchmarks.
    double workerCpuSeconds() const;

  private:
    LiveEndpoints endpoints_;
    LiveOptions options_;
    std::unique_ptr<LiveWorker> worker_;
    // Bumped by stop(): a queued emission from an older worker sees a different value and is
    // dropped, so nothing is emitted after stop() returns. GUI thread only.
    std::uint64_t generation_ = 0;
    // What the last worker counted, kept after stop().
    LiveCounters last_counters_;
    double last_cpu_ = 0.0;
};

}  // namespace sp::ui
