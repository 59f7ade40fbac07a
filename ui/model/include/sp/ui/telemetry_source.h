#pragma once
// One small interface for where telemetry comes from: a live agent (ZeroMQ) or a saved JSONL file.
// Everything above a source (RunSession, store, views) is the same for both.
//
// Threading: a source does its I/O and parsing on its own worker thread, but emits every signal
// on the thread the source object lives in (the GUI thread), so receivers need no locking and
// the signals can be connected directly. Records arrive in batches, in order.
#include <cstdint>
#include <memory>
#include <vector>

#include <QMetaType>
#include <QObject>
#include <QString>

#include "sp/command.h"
#include "sp/jsonl.h"
#include "sp/protocol.h"

namespace sp::ui {

using RecordBatch = std::shared_ptr<const std::vector<sp::TelemetryRecord>>;

enum class SourceState : std::uint8_t {
    idle,          // not started
    loading,       // replay: reading the file
    loaded,        // replay: the whole file is in (or the load was cancelled: see LoadReport)
    failed,        // replay: the file could not be read at all
    connecting,    // live: sockets up, nothing heard yet
    live,          // live: heard from the agent within the stale timeout
    stale,         // live: no message (heartbeat included) for longer than the stale timeout
    disconnected,  // live: nothing for longer than the disconnect timeout; reconnecting
};
QString toString(SourceState s);

// Registers every type the source signals carry (RecordBatch, SourceState, LoadReport, RunHeader,
// Snapshot), so QSignalSpy and queued connections can copy them. Idempotent; call once early.
void registerUiMetaTypes();

// What a replay load found.
struct LoadReport {
    std::uint64_t records = 0;
    std::uint64_t lines = 0;
    std::uint64_t bytes = 0;
    std::vector<sp::LineProblem> problems;  // the first JsonlReader::kMaxStoredProblems bad lines
    std::uint64_t problem_count = 0;        // all bad lines
    std::uint64_t unknown_types = 0;        // records of a newer schema, skipped
    bool cancelled = false;
    QString error;  // set when the file could not be opened/read
    double seconds = 0.0;
};

class TelemetrySource : public QObject {
    Q_OBJECT
  public:
    using QObject::QObject;
    ~TelemetrySource() override = default;

    // The file path or endpoint, for titles and the event log.
    virtual QString label() const = 0;
    virtual bool isLive() const = 0;
    // Non-blocking; progress arrives through the signals.
    virtual void start() = 0;
    // Stops the worker and waits for it; no signal is emitted after stop() returns.
    virtual void stop() = 0;
    // Replay: stops loading early, keeping what was read. Live: no effect.
    virtual void cancel() {}

    // Live only: sends a routing command with this request id. The answer arrives as
    // commandReplied (exactly once per request, a timeout included). Returns false when the
    // source cannot send (replay, or not connected).
    virtual bool sendCommand(const QString& request_id, const sp::Command& command) {
        (void)request_id;
        (void)command;
        return false;
    }

  signals:
    // Replay: the file's header line. Live: built from `hello` (producer "hello") — the
    // layout, config and run id. A new run id means the agent restarted: receivers start over.
    void headerReceived(const sp::RunHeader& header);
    // Live late join: the agent's whole state; records after it continue from it.
    void snapshotReceived(const sp::protocol::Snapshot& snapshot);
    void recordsReceived(const sp::ui::RecordBatch& batch);
    void stateChanged(sp::ui::SourceState state, const QString& detail);
    // Live: messages lost between seq numbers (count of missing seqs).
    void messagesLost(quint64 count);
    // Live: a heartbeat (about one a second) with the agent's current step. The other ranks of a
    // data-parallel job use it to tell a rank that falls behind or goes silent (RankStatusModel).
    void heartbeatReceived(qint64 step);
    void commandReplied(const QString& request_id, bool ok, const QString& error, qint64 effective_step);
    // Replay: bytes read so far of the total.
    void progress(qint64 done, qint64 total);
    void loadFinished(const sp::ui::LoadReport& report);
    // Live: a message that could not be used (not JSON, no seq, unknown topic, a bad record or
    // reply), or a late join without a snapshot. Nothing is lost but that message; at most ten
    // a second are reported one by one, the rest as a count.
    void badMessage(const QString& why);
};

}  // namespace sp::ui

Q_DECLARE_METATYPE(sp::ui::RecordBatch)
Q_DECLARE_METATYPE(sp::ui::SourceState)
Q_DECLARE_METATYPE(sp::ui::LoadReport)
Q_DECLARE_METATYPE(sp::RunHeader)
Q_DECLARE_METATYPE(sp::protocol::Snapshot)
