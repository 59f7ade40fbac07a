#include "sp/ui/run_session.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <type_traits>
#include <variant>

#include <QDateTime>
#include <QStringList>

#include "session_text.h"
#include "sp/event_payload.h"
#include "sp/json_input.h"

namespace sp::ui {

using namespace session_text;

namespace {
std::size_t live_retain_updates = RunSession::kDefaultLiveRetainUpdates;
}  // namespace

void RunSession::setLiveRetainUpdates(std::size_t updates) {
    live_retain_updates = updates;
}

std::size_t RunSession::liveRetainUpdates() {
    return live_retain_updates;
}

RunSession::RunSession(std::unique_ptr<TelemetrySource> source, QObject* parent)
    : QObject(parent), source_(std::move(source)) {
    registerUiMetaTypes();
    if (source_->isLive()) store_.setRetainUpdates(live_retain_updates);
    TelemetrySource* s = source_.get();
    connect(s, &TelemetrySource::headerReceived, this, [this](const sp::RunHeader& h) {
        // A file's header starts a run whose end is judged; live, the header is rebuilt from every
        // hello (which may still come after the run_end) and a new run shows as a new run id. After
        // onHeader: an earlier run it keeps takes its own end along.
        onHeader(h);
        if (!source_->isLive()) run_end_.see(h);
        flushEvents();
        touch();
    });
    connect(s, &TelemetrySource::snapshotReceived, this, &RunSession::onSnapshot);
    connect(s, &TelemetrySource::recordsReceived, this, &RunSession::onRecords);
    connect(s, &TelemetrySource::stateChanged, this, &RunSession::onState);
    connect(s, &TelemetrySource::messagesLost, this, &RunSession::onMessagesLost);
    connect(s, &TelemetrySource::commandReplied, this, &RunSession::onCommandReplied);
    connect(s, &TelemetrySource::progress, this, &RunSession::onLoadProgress);
    connect(s, &TelemetrySource::loadFinished, this, &RunSession::onLoadFinished);
    // A settled command (applied or rejected) is no longer pending on its blocks.
    connect(this, &RunSession::commandStateChanged, this, [this](const QString& id) {
        const auto index = events_.findCommand(id);
        if (!index || events_.at(*index).state != CommandState::pending) sent_commands_.erase(id);
    });
    connect(s, &TelemetrySource::badMessage, this, [this](const QString& why) {
        logLocal(EventCategory::warning, QStringLiteral("bad message from the agent: %1").arg(why));
        flushEvents();
        touch();
    });
}

RunSession::~RunSession() {
    // The source's worker must be gone before the store it feeds.
    if (source_) source_->stop();
}

void RunSession::start() {
    source_->start();
}

void RunSession::stop() {
    source_->stop();
}

bool RunSession::canControl() const {
    return source_->isLive() && !runEnd() && (state_ == SourceState::live || state_ == SourceState::stale);
}

const sp::Config& RunSession::runConfig() const {
    if (config_json_seen_ == header_.config_json) return run_config_;
    config_json_seen_ = header_.config_json;
    try {
        run_config_ = header_.config_json.empty() ? sp::Config{} : sp::parse_config(header_.config_json);
        nlohmann::json config;
        sp::JsonError bad;
        config_has_mode_ =
            sp::parse_json(header_.config_json, config, bad) && config.is_object() && config.contains("mode");
    } catch (const sp::ConfigError&) {  // a producer's config we cannot read: explain with the defaults
        run_config_ = sp::Config{};
        config_has_mode_ = false;
    }
    return run_config_;
}

bool RunSession::policyModeKnown() const {
    if (mode_seen_) return true;
    runConfig();  // reads the header's config, config_has_mode_ with it, when the header changed
    return config_has_mode_;
}

QString RunSession::cutMessage() const {
    if (!read_whole_file_) return {};
    return qs(run_end_.cut_message());
}

QString RunSession::stateText() const {
    if (!followed_by_.isEmpty())
        return earlierStateText() + QStringLiteral(" (then run %1)").arg(followed_by_);
    if (const std::optional<sp::RunEnd>& end = runEnd()) {
        const QString at = QStringLiteral("finished at step %1").arg(end->step);
        return end->reason == sp::kRunEndCompleted ? at : at + QStringLiteral(" (%1)").arg(qs(end->reason));
    }
    // Short, for the status bar: cutMessage() (in the log and the state's tooltip) says it in full.
    if (cutMessage().isEmpty()) return toString(state_);
    return toString(state_) +
           QStringLiteral(": cut at step %1 (no run_end record)").arg(run_end_.last_step().value_or(-1));
}

QString RunSession::shortStateText() const {
    if (!followed_by_.isEmpty()) return earlierStateText();
    if (const std::optional<sp::RunEnd>& end = runEnd()) {
        // "error: TypeError: ..." is said in full by stateText(); here its first word.
        const std::string& reason = end->reason;
        const QString word = end->reason == sp::kRunEndCompleted ? QStringLiteral("finished")
                                                                 : qs(reason.substr(0, reason.find(':')));
        return QStringLiteral("%1 at step %2").arg(word).arg(end->step);
    }
    if (cutMessage().isEmpty()) return toString(state_);
    return QStringLiteral("cut at step %1").arg(run_end_.last_step().value_or(-1));
}

// ---- Events ----

void RunSession::logEvent(EventEntry e) {
    events_.append(std::move(e));
    events_added_ = true;
}

void RunSession::logLocal(EventCategory category, QString text, QString detail, std::int64_t step) {
    EventEntry e;
    e.timestamp = nowSeconds();
    e.step = step;
    e.category = category;
    e.text = std::move(text);
    e.detail = std::move(detail);
    logEvent(std::move(e));
}

void RunSession::note(EventCategory category, const QString& text, const QString& detail, std::int64_t step) {
    logLocal(category, text, detail, step);
    flushEvents();
    touch();
}

void RunSession::flushEvents() {
    if (!events_added_) return;
    events_added_ = false;
    emit eventsAppended();
}

QString RunSession::blockName(int block) const {
    if (block >= 0 && block < store_.blockCount())
        return qs(store_.layout()[static_cast<std::size_t>(block)].name);
    return QStringLiteral("blocks.%1").arg(block);
}

// ---- Header, snapshot, restart ----

void RunSession::startOver(const sp::RunHeader& header, const QString& why) {
    logLocal(EventCategory::connection, why + keepEarlierRun(header.run_id));
    run_end_ = {};
    updates_after_end_ = 0;
    budget_risks_.reset();
    header_ = header;
    store_.reset(header.blocks);
    snapshot_pins_.clear();
    mode_seen_.reset();
    target_seen_.reset();
    tolerance_seen_.reset();
    snapshot_updates_ = 0;
    reserved_updates_ = 0;
    emit reset();
}

void RunSession::onHeader(const sp::RunHeader& header) {
    // A new run id means the agent restarted (even before its first update): start over, and
    // the commands the old agent had queued will never apply.
    const bool restarted = !header_.run_id.empty() && header.run_id != header_.run_id;
    if (restarted) {
        startOver(header, QStringLiteral("agent restarted: run %1 (was %2); starting over")
                              .arg(qs(header.run_id), qs(header_.run_id)));
        return;
    }
    if (store_.empty()) {
        // Nothing to keep: take the header's layout (hello repeats it every 2 s; rebuild views
        // only when something changed).
        const bool same = header_.run_id == header.run_id && store_.blockCount() == int(header.blocks.size());
        header_ = header;
        if (!same || store_.blockCount() == 0) {
            store_.reset(header.blocks);
            emit reset();
        }
        return;
    }
    // Same run with data already in (a header after the first records): keep the data, take
    // the names; views rebuild only when the layout actually differs.
    bool differs = int(header.blocks.size()) > store_.blockCount();
    for (std::size_t i = 0; !differs && i < header.blocks.size(); ++i)
        differs = header.blocks[i].name != store_.layout()[i].name;
    header_ = header;
    if (differs) {
        store_.adoptLayout(header.blocks);
        emit reset();
    }
}

void RunSession::onSnapshot(const sp::protocol::Snapshot& snapshot) {
    if (!header_.run_id.empty() && snapshot.run_id != header_.run_id) {
        const QString why = QStringLiteral("agent restarted: run %1 (was %2); starting over")
                                .arg(qs(snapshot.run_id), qs(header_.run_id));
        logLocal(EventCategory::connection, why + keepEarlierRun(snapshot.run_id));
    }
    const bool same_run = !store_.empty() && snapshot.run_id == header_.run_id;
    header_.run_id = snapshot.run_id;
    header_.blocks = snapshot.layout;
    header_.config_json = snapshot.config_json;
    snapshot_pins_ = snapshot.pins;
    mode_seen_ = snapshot.mode;
    if (snapshot.budget_target_pct) target_seen_ = snapshot.budget_target_pct;
    if (snapshot.loss_tolerance_pct) tolerance_seen_ = snapshot.loss_tolerance_pct;
    // The pins' terms as the agent holds them now (a late joiner missed the pins' command events).
    if (snapshot.pin_until.size() == snapshot.pins.size() &&
        snapshot.pin_release_on_spike.size() == snapshot.pins.size()) {
        pin_terms_.clear();
        for (std::size_t b = 0; b < snapshot.pins.size(); ++b) {
            if (!snapshot.pins[b] || (!snapshot.pin_until[b] && !snapshot.pin_release_on_spike[b])) continue;
            pin_terms_[int(b)] = PinTerms{snapshot.pin_until[b], bool(snapshot.pin_release_on_spike[b])};
        }
    }
    if (same_run) {
        // A reconnect to the same run (e.g. the agent was silent through a long checkpoint): the
        // history stays; only what happened while we were away and the pins are taken over.
        const std::size_t before = store_.updateCount();
        if (snapshot.last_update && snapshot.last_update->step_id > store_.row(before - 1).step)
            store_.append(*snapshot.last_update);
        if (store_.updateCount() > before) emit updatesAppended(before, store_.updateCount());
    } else {
        run_end_ = {};
        updates_after_end_ = 0;
        store_.reset(snapshot.layout);
        reserved_updates_ = 0;
        emit reset();
        if (snapshot.last_update) {
            store_.append(*snapshot.last_update);
            emit updatesAppended(0, store_.updateCount());
        }
        snapshot_updates_ = store_.updateCount();
    }
    logLocal(
        EventCategory::connection,
        QStringLiteral("%1 run %2 at step %3 (snapshot, seq %4)%5")
            .arg(same_run ? QStringLiteral("reconnected to") : QStringLiteral("joined"), qs(snapshot.run_id))
            .arg(snapshot.step)
            .arg(snapshot.seq)
            .arg(same_run ? QStringLiteral("; history kept") : QString()),
        QString(), snapshot.step);
    flushEvents();
    touch();
}

// ---- Records ----

void RunSession::onRecords(const RecordBatch& batch) {
    if (!batch) return;
    std::size_t first = store_.updateCount();
    const auto flush_updates = [&] {
        if (store_.updateCount() > first) emit updatesAppended(first, store_.updateCount());
        first = store_.updateCount();
    };
    for (const sp::TelemetryRecord& rec : *batch) {
        if (std::holds_alternative<sp::UpdateRecord>(rec) && runEnd()) {
            dropUpdateAfterEnd(std::get<sp::UpdateRecord>(rec));
            continue;
        }
        // A header is seen after onHeader: an earlier run it keeps takes its own end along.
        if (!std::holds_alternative<sp::RunHeader>(rec)) run_end_.see(rec);
        std::visit(
            [&](const auto& r) {
                using T = std::decay_t<decltype(r)>;
                if constexpr (std::is_same_v<T, sp::UpdateRecord>) {
                    // A block id outside the layout: a bad record, skipped (the first one named;
                    // a replay's load summary counts them all).
                    if (const auto bad = store_.append(r)) {
                        if (store_.rejectedCount() == 1)
                            logLocal(EventCategory::load,
                                     QStringLiteral("bad update record skipped: %1").arg(qs(*bad)), QString(),
                                     r.step_id);
                        return;
                    }
                    noteBudgetRisks(r);
                    mode_seen_ = r.mode;
                    if (r.budget_target_pct) target_seen_ = r.budget_target_pct;
                    if (r.loss_tolerance_pct) tolerance_seen_ = r.loss_tolerance_pct;
                } else if constexpr (std::is_same_v<T, sp::RunHeader>) {
                    flush_updates();
                    onHeader(r);
                    run_end_.see(rec);
                    first = store_.updateCount();
                } else if constexpr (std::is_same_v<T, sp::EventRecord>) {
                    onEvent(r);
                } else {
                    ++step_stats_;
                }
            },
            rec);
    }
    flush_updates();
    flushEvents();
    touch();
    if (run_ended_now_) {
        run_ended_now_ = false;
        emit stateChanged(state_, stateText());
    }
}

// An update after the run's run_end is not of that run (a late packet, a publisher that lies): it is
// dropped, and the first one logged, so that "finished at step N" stays true.
void RunSession::dropUpdateAfterEnd(const sp::UpdateRecord& update) {
    if (updates_after_end_++ > 0) return;
    logLocal(EventCategory::warning,
             QStringLiteral("update at step %1 after the run's run_end (step %2): dropped, and any after it")
                 .arg(update.step_id)
                 .arg(runEnd()->step),
             QString(), update.step_id);
}

void RunSession::noteBudgetRisks(const sp::UpdateRecord& update) {
    for (const BudgetRisk& risk : budget_risks_.observe(update, runConfig().bf16_threshold)) {
        EventEntry e;
        e.timestamp = update.timestamp;
        e.step = update.step_id;
        e.category = EventCategory::warning;
        e.text = qs(describeBudgetRisk(risk, blockName(risk.block).toStdString(), runConfig()));
        logEvent(std::move(e));
    }
}

// The payload was read on the source's worker thread (sp::read_event_payload): nothing here parses.
void RunSession::onEvent(const sp::EventRecord& rec) {
    const auto* untyped = std::get_if<sp::UntypedEvent>(&rec.payload);
    if (untyped && !untyped->problem.empty()) {
        // Anything that can publish on the telemetry port can send this: log it, never trust it.
        EventEntry e;
        e.timestamp = rec.timestamp;
        e.step = rec.step;
        e.category = EventCategory::warning;
        e.text = QStringLiteral("malformed %1 event: %2").arg(qs(rec.kind), qs(untyped->problem));
        e.detail = eventText(rec);
        logEvent(std::move(e));
        if (rec.kind == "command" && !untyped->id.empty()) settleUnreadable(qs(untyped->id), rec.step);
        return;
    }
    if (const auto* command = std::get_if<sp::CommandEventPayload>(&rec.payload)) {
        onCommandEvent(rec, *command);
        return;
    }
    EventEntry e;
    e.timestamp = rec.timestamp;
    e.step = rec.step;
    e.detail = eventText(rec);
    e.category = EventCategory::other;
    std::visit([&](const auto& payload) { describeEvent(rec, payload, e); }, rec.payload);
    logEvent(std::move(e));
}

QString RunSession::eventText(const sp::EventRecord& rec) {
    try {
        return compact(sp::to_json_line(rec));
    } catch (const std::exception& ex) {  // a record built in process with a kind of its own
        return qs(ex.what());
    }
}

void RunSession::describeEvent(const sp::EventRecord& rec, const sp::UntypedEvent& u, EventEntry& e) {
    e.text =
        qs(rec.kind) + QStringLiteral(": ") + (u.message.empty() ? compact(u.fields_json) : qs(u.message));
}

void RunSession::describeEvent(const sp::EventRecord&, const sp::PrecisionChangePayload& change,
                               EventEntry& e) {
    e.category = EventCategory::precision_change;
    e.text = QStringLiteral("%1: %2 → %3")
                 .arg(blockName(change.block), qs(std::string(sp::to_string(change.from))),
                      qs(std::string(sp::to_string(change.to))));
    if (change.reason && !change.reason->empty()) e.text += QStringLiteral(" (%1)").arg(qs(*change.reason));
}

void RunSession::describeEvent(const sp::EventRecord&, const sp::CommandEventPayload&, EventEntry&) {
    // onCommandEvent: a command event updates the entry of the command it answers.
}

void RunSession::describeEvent(const sp::EventRecord&, const sp::RollbackPayload& p, EventEntry& e) {
    QStringList names;
    for (int b : p.blocks) names << blockName(b);
    e.category = EventCategory::rollback;
    e.text = QStringLiteral("rollback (%1 loss): %2 back to bf16")
                 .arg(p.trigger == sp::EventTrigger::nonfinite ? QStringLiteral("non-finite")
                                                               : QStringLiteral("spiking"),
                      names.join(QStringLiteral(", ")));
    if (p.cooldown_until) e.text += QStringLiteral(" until step %1").arg(*p.cooldown_until);
}

void RunSession::describeEvent(const sp::EventRecord&, const sp::LossSpikePayload& p, EventEntry& e) {
    e.category = EventCategory::warning;
    e.text = QStringLiteral("%1 loss, no recent switch: nothing rolled back")
                 .arg(p.trigger == sp::EventTrigger::nonfinite ? QStringLiteral("non-finite")
                                                               : QStringLiteral("spiking"));
}

void RunSession::describeEvent(const sp::EventRecord&, const sp::WarningPayload& p, EventEntry& e) {
    e.category = EventCategory::warning;
    e.text = p.message ? qs(*p.message) : QStringLiteral("warning");
}

void RunSession::describeEvent(const sp::EventRecord&, const sp::DroppedPayload& p, EventEntry& e) {
    e.category = EventCategory::dropped;
    e.text = !p.write_errors ? QStringLiteral("agent dropped %1 telemetry records (queue full)").arg(p.count)
                             : QStringLiteral("agent lost %1 telemetry records (%2 to write errors: %3)")
                                   .arg(p.count)
                                   .arg(*p.write_errors)
                                   .arg(qs(p.error.value_or("")));
}

void RunSession::describeEvent(const sp::EventRecord& rec, const sp::RunEndPayload& p, EventEntry& e) {
    e.category = EventCategory::connection;
    e.text = QStringLiteral("run finished at step %1: %2").arg(rec.step).arg(qs(p.reason.value_or("")));
    run_ended_now_ = true;
}

void RunSession::describeEvent(const sp::EventRecord&, const sp::TelemetryLossPayload& p, EventEntry& e) {
    // Live only: the agent's JSONL file stopped (or resumed) taking records.
    e.category = p.failing ? EventCategory::warning : EventCategory::dropped;
    e.text = p.failing ? QStringLiteral("agent cannot write its telemetry file %1: %2")
                             .arg(qs(p.file), qs(p.error.value_or("")))
                       : QStringLiteral("agent writes its telemetry file %1 again; %2 records lost so far")
                             .arg(qs(p.file))
                             .arg(p.lost_to_errors);
}

void RunSession::describeEvent(const sp::EventRecord&, const sp::MapAdoptedPayload& p, EventEntry& e) {
    QStringList names;
    for (int b : p.blocks) names << blockName(b);
    e.text = QStringLiteral("map_adopted: rank 0's map for %1").arg(names.join(QStringLiteral(", ")));
    if (p.difference) e.text += QStringLiteral(" (%1)").arg(qs(*p.difference));
}

void RunSession::onState(SourceState state, const QString& detail) {
    const bool changed = state != state_;
    state_ = state;
    // After run_end the agent is expected to fall silent: the source still says stale, then
    // disconnected, but logging that would contradict the clean end the log just showed. A new
    // run on the endpoint (a restart) is seen by its header, not here.
    const bool silence_after_end =
        runEnd() && (state == SourceState::stale || state == SourceState::disconnected);
    if (changed && !silence_after_end) {
        logLocal(EventCategory::connection,
                 detail.isEmpty() ? toString(state) : QStringLiteral("%1: %2").arg(toString(state), detail),
                 source_->label());
    }
    flushEvents();
    touch();
    emit stateChanged(state, detail);
}

void RunSession::onMessagesLost(quint64 count) {
    messages_lost_ += count;
    logLocal(EventCategory::dropped, QStringLiteral("lost %1 telemetry messages (seq gap)").arg(count),
             QStringLiteral("%1 lost in total").arg(messages_lost_),
             store_.empty() ? -1 : store_.rows().back().step);
    flushEvents();
    touch();
}

void RunSession::onLoadProgress(qint64 done, qint64 total) {
    // Size the store once from the file size (and again if the estimate runs short), so a big
    // file does not pay for vector doubling: memory stays near kBytesPerBlockUpdate per cell.
    const std::size_t n = store_.updateCount();
    if (!source_->isLive() && n >= 4 && done > 0 && total > done) {
        // The updates the whole file holds at the density seen so far, with a small margin.
        const auto want = static_cast<std::size_t>(double(n) * double(total) / double(done) * 1.01) + 16;
        // Re-size only when about to run out, so a creeping estimate does not copy the store
        // again and again.
        if (reserved_updates_ == 0 || (want > reserved_updates_ && n + n / 50 >= reserved_updates_)) {
            const std::size_t target = std::max(want, n + n / 50 + 16);
            store_.reserve(target);
            reserved_updates_ = target;
        }
    }
    emit loadProgress(done, total);
}

void RunSession::onLoadFinished(const LoadReport& report) {
    load_report_ = report;
    read_whole_file_ = report.error.isEmpty() && !report.cancelled;
    if (!report.error.isEmpty()) {
        logLocal(EventCategory::load, report.error, source_->label());
    }
    if (report.problem_count > 0) {
        QString text = QStringLiteral("%1 bad lines").arg(report.problem_count);
        if (!report.problems.empty())
            text += QStringLiteral("; first: line %1: %2")
                        .arg(report.problems.front().line)
                        .arg(qs(report.problems.front().reason));
        QStringList lines;
        for (const sp::LineProblem& p : report.problems)
            lines << QStringLiteral("line %1: %2").arg(p.line).arg(qs(p.reason));
        logLocal(EventCategory::load, text, lines.join(QLatin1Char('\n')));
    }
    if (store_.rejectedCount() > 0) {
        logLocal(EventCategory::load,
                 QStringLiteral("%1 update records skipped: a block id outside the layout")
                     .arg(store_.rejectedCount()));
    }
    if (report.unknown_types > 0) {
        logLocal(EventCategory::load,
                 QStringLiteral("%1 records of a newer schema skipped").arg(report.unknown_types));
    }
    if (const QString cut = cutMessage(); !cut.isEmpty())
        logLocal(EventCategory::warning, QStringLiteral("the file %1").arg(cut), source_->label(),
                 run_end_.last_step().value_or(-1));
    if (report.cancelled) {
        logLocal(
            EventCategory::load,
            QStringLiteral("load cancelled after %1 records; showing what was read").arg(report.records));
    }
    flushEvents();
    touch();
    emit loadFinished(report);
}

}  // namespace sp::ui
