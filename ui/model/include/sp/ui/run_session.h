#pragma once
// One run the dashboard shows: a source, the store it fills, the event log, and the operator
// commands in flight. The session is the only writer of its store; views read the store and
// repaint on a timer when revision() moved (batched repaints, not one per record).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <QElapsedTimer>
#include <QObject>
#include <QString>

#include "sp/command.h"
#include "sp/config.h"
#include "sp/run_end.h"
#include "sp/ui/budget_risk.h"
#include "sp/ui/event_log.h"
#include "sp/ui/telemetry_source.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

class RunSession : public QObject {
    Q_OBJECT
  public:
    // A source that starts a new run (an agent restart; a file holding several runs) keeps the runs
    // before it as sessions of their own, at most this many: each holds its whole store (about 7
    // bytes per block-update: 70 MB for 1,000 blocks x 10,000 updates), so an agent in a restart
    // loop costs at most three earlier runs.
    static constexpr std::size_t kEarlierRunsKept = 3;

    // Live sessions keep the per-block columns of this many latest updates (TelemetryStore::
    // setRetainUpdates; older ones as the summary); sp-dashboard's --retain-updates sets it before
    // any session starts, 0 keeps all. Replays keep everything.
    static constexpr std::size_t kDefaultLiveRetainUpdates = 50000;
    static void setLiveRetainUpdates(std::size_t updates);
    static std::size_t liveRetainUpdates();

    // Takes the source and connects to it; call start() to begin.
    explicit RunSession(std::unique_ptr<TelemetrySource> source, QObject* parent = nullptr);
    ~RunSession() override;

    void start();
    void stop();

    TelemetrySource& source() { return *source_; }
    const TelemetrySource& source() const { return *source_; }
    const TelemetryStore& store() const { return store_; }
    const EventLog& events() const { return events_; }
    const sp::RunHeader& header() const { return header_; }
    // The run's effective config, read from the header (the defaults when it has none or it does
    // not parse): thresholds for what the views explain.
    const sp::Config& runConfig() const;
    // The policy's mode, budget target and loss tolerance as the run last said them: its header's
    // config, then a snapshot, the update records and the applied set_mode / set_budget /
    // set_tolerance commands (any client's).
    sp::Mode policyMode() const { return mode_seen_.value_or(runConfig().mode); }
    // Whether the run says its mode (an update's "mode", or a "mode" in the header's readable config);
    // else policyMode() is the configuration's default, not the run's (the original tool's files).
    bool policyModeKnown() const;
    double budgetTargetPct() const { return target_seen_.value_or(runConfig().budget_target_pct); }
    double lossTolerancePct() const { return tolerance_seen_.value_or(runConfig().loss_tolerance_pct); }
    SourceState state() const { return state_; }
    bool isLive() const { return source_->isLive(); }
    // Commands can be sent: a live source that currently hears the agent.
    bool canControl() const;
    // Bumps on every change that a view may need to show (records, events, state).
    std::uint64_t revision() const { return revision_; }
    const LoadReport& loadReport() const { return load_report_; }
    quint64 messagesLost() const { return messages_lost_; }
    // How the run ended: its run_end record, once one arrived (live or replay).
    const std::optional<sp::RunEnd>& runEnd() const { return run_end_.end(); }
    // Replay: the file, read to its end, stops without a run_end record, so the run was cut; says
    // where ("" when not).
    QString cutMessage() const;
    // The state as the status bar words it: "finished at step N" once the run ended, otherwise the
    // source's state ("loaded: cut at step N (no run_end record)" for a replayed file that was cut).
    QString stateText() const;
    // The state in a few words, for the run picker: "finished at step 5999", "interrupted at step 80",
    // "cut at step 5140", or the source state ("loading", "live", ...).
    QString shortStateText() const;
    // Per-step stats records seen (the dashboard does not show them yet).
    std::uint64_t stepStatsSeen() const { return step_stats_; }

    // The runs this session's source had before the current one, oldest first (at most
    // kEarlierRunsKept; children of this session). Each is a session of its own, over a source that
    // sends nothing more (not live: nothing to control), holding the store, log, header, pins and
    // state the run had when the next began; earlierRunKept announces each.
    const std::vector<RunSession*>& earlierRuns() const { return earlier_runs_; }
    // An earlier run: the id of the run that followed it (empty for a current run).
    const QString& followedBy() const { return followed_by_; }
    // Read from an agent: a live session, or an earlier run of one (its source label is an endpoint).
    bool fromAgent() const { return source_->isLive() || from_agent_; }
    // What names the run in the picker and the charts' legends: the source's label, and for an earlier
    // run, which shares its source with the runs after it, its run id too ("tcp://h:5556 · run A").
    QString runLabel() const;

    // Operator commands (live only). Each gets a request id, appears in the event log as
    // pending, and becomes applied (when the agent's "command" event with that id arrives) or
    // rejected (with the agent's reason, or a timeout). Returns the request id; empty when the
    // command could not be sent (the log then says why).
    QString pin(const std::vector<int>& blocks, sp::Precision precision);
    QString release(const std::vector<int>& blocks);
    QString releaseAll();
    QString send(const sp::Command& command);

    // Adds an entry the dashboard observed about this run from elsewhere (e.g. the other ranks of
    // its data-parallel job: RankJob), stamped with the local clock; -1: not tied to a step.
    void note(EventCategory category, const QString& text, const QString& detail = {},
              std::int64_t step = -1);

    // The pin on `block` as of the latest update (or snapshot), if any.
    std::optional<sp::Precision> pinOf(int block) const;
    // Our commands still pending (sent, not yet applied or rejected) that touch `block`, in words
    // ("pin int8", "release", "release all"); "" when none. Shown where the user looks: the table.
    QString pendingFor(int block) const;
    // How the pin on `block` ends besides a release, as the applied pin command said (POLICY.md rule
    // 20): "until step 1200", "until a loss spike", "until step 1200 or a loss spike"; "" for a pin
    // until released, or none.
    QString pinTermsFor(int block) const;

  signals:
    // The layout changed (new header, agent restart): views rebuild from scratch.
    void reset();
    // A new run began on the source (the agent restarted): the run before it moved, store and log,
    // into `earlier` (earlierRuns()), and this session goes on with the new one.
    void earlierRunKept(sp::ui::RunSession* earlier);
    // More than kEarlierRunsKept earlier runs: the oldest leaves earlierRuns() and is deleted once
    // control returns to the event loop. Drop every pointer to it now.
    void earlierRunDropped(sp::ui::RunSession* earlier);
    // Updates [first, last) were appended to the store.
    void updatesAppended(std::size_t first, std::size_t last);
    void eventsAppended();
    void commandStateChanged(const QString& request_id);
    void stateChanged(sp::ui::SourceState state, const QString& detail);
    void loadProgress(qint64 done, qint64 total);
    void loadFinished(const sp::ui::LoadReport& report);

  private:
    void onHeader(const sp::RunHeader& header);
    void onSnapshot(const sp::protocol::Snapshot& snapshot);
    void onRecords(const RecordBatch& batch);
    void onState(SourceState state, const QString& detail);
    void onMessagesLost(quint64 count);
    void onCommandReplied(const QString& request_id, bool ok, const QString& error, qint64 effective_step);
    void touch() { ++revision_; }
    void onLoadProgress(qint64 done, qint64 total);
    void onLoadFinished(const LoadReport& report);
    void onEvent(const sp::EventRecord& e);
    void onCommandEvent(const sp::EventRecord& e, const sp::CommandEventPayload& payload);
    // A malformed command event names our command `id` (still pending): its outcome is unknown.
    void settleUnreadable(const QString& id, std::int64_t step);
    // The log entry of each kind of event (e: its time, step and detail already set).
    void describeEvent(const sp::EventRecord& rec, const sp::UntypedEvent& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::PrecisionChangePayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::CommandEventPayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::PinReleasePayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::RollbackPayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::LossSpikePayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::MapAdoptedPayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::DroppedPayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::WarningPayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::TelemetryLossPayload& payload, EventEntry& e);
    void describeEvent(const sp::EventRecord& rec, const sp::RunEndPayload& payload, EventEntry& e);
    // The event's line, cut for the log's detail column.
    static QString eventText(const sp::EventRecord& rec);
    void startOver(const sp::RunHeader& header, const QString& why);
    // A new run (`next_run_id`) begins: the pending commands are rejected, and the run so far moves
    // into a new earlier run unless it holds nothing (no update, no run_end). The log then starts
    // empty. Says what the log's restart entry should add ("" when nothing was kept).
    QString keepEarlierRun(const std::string& next_run_id);
    // The state of an earlier run in words: "restarted after step 80", "finished at step 80".
    QString earlierStateText() const;
    void rejectPending(const QString& reason);
    void logEvent(EventEntry e);
    void noteBudgetRisks(const sp::UpdateRecord& update);
    void dropUpdateAfterEnd(const sp::UpdateRecord& update);
    // An event the dashboard itself observed (connection, load, loss), stamped with the local clock.
    void logLocal(EventCategory category, QString text, QString detail = {}, std::int64_t step = -1);
    void flushEvents();
    QString blockName(int block) const;
    QString newRequestId();

    std::unique_ptr<TelemetrySource> source_;
    TelemetryStore store_;
    EventLog events_;
    sp::RunHeader header_;
    SourceState state_ = SourceState::idle;
    LoadReport load_report_;
    std::uint64_t revision_ = 0;
    quint64 messages_lost_ = 0;
    std::uint64_t next_request_ = 1;
    std::map<QString, sp::Command> sent_commands_;  // by request id: what our pending entries ask
    struct PinTerms {
        std::optional<std::int64_t> until;  // the step its for_steps ends at
        bool on_spike = false;
    };
    std::map<int, PinTerms> pin_terms_;  // by block, from applied pin commands (any client's)
    void notePinTerms(const sp::Command& command, std::int64_t step);
    std::vector<std::optional<sp::Precision>> snapshot_pins_;
    std::optional<sp::Mode> mode_seen_;     // policyMode() beyond the header's config
    std::optional<double> target_seen_;     // budgetTargetPct() beyond the header's config
    std::optional<double> tolerance_seen_;  // lossTolerancePct() beyond it
    std::uint64_t step_stats_ = 0;
    sp::RunEndTracker run_end_;
    BudgetRiskWatch budget_risks_;  // warns when budget mode moves a block a pin would ask about
    mutable std::optional<std::string> config_json_seen_;  // the header config run_config_ is for
    mutable sp::Config run_config_;
    mutable bool config_has_mode_ = false;   // run_config_ is the header's, and it names the mode
    bool run_ended_now_ = false;             // a run_end arrived in this batch: the state's wording changes
    std::size_t updates_after_end_ = 0;      // updates dropped for coming after the run_end
    bool read_whole_file_ = false;           // replay: the load finished, not cancelled, without an error
    std::size_t reserved_updates_ = 0;       // replay: updates the store was sized for
    std::size_t snapshot_updates_ = 0;       // store updates right after the last snapshot
    bool events_added_ = false;              // eventsAppended is due at the end of this handler
    std::vector<RunSession*> earlier_runs_;  // oldest first, owned as children
    QString followed_by_;                    // an earlier run: the next run's id
    bool from_agent_ = false;                // an earlier run of a live session
};

}  // namespace sp::ui
