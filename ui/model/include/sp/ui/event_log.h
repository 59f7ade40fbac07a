#pragma once
// The run's event log as the dashboard shows it: precision changes, rollbacks and warnings from
// the agent, operator commands with their state, connection changes and lost messages.
// Qt-free apart from QString; EventLogModel (event_log_model.h) presents it to views and
// EventLogFilter (event_log_filter.h) shows a kind up to a step.
//
// Indexed, so what the dashboard looks up costs the matches, not the log: a command by its request
// id (the entries with that id), the pending commands (those), and the entries of one kind up to a
// step (a binary search in that kind's entries sorted by step, then the matches).
#include <QHash>
#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <QString>

namespace sp::ui {

enum class EventCategory : std::uint8_t {
    precision_change,
    command,  // an operator command (ours or another client's)
    rollback,
    connection,  // source state changes
    dropped,     // agent-side drops ("dropped" events) and seq gaps seen by the live source
    warning,
    load,  // replay: bad lines, unknown records
    other,
};
inline constexpr std::size_t kEventCategories = 8;
QString toString(EventCategory c);

// unconfirmed: the agent answered with a command event nobody can read (a malformed payload): it may
// or may not have applied, and the operator is told so rather than "applied".
enum class CommandState : std::uint8_t { none, pending, applied, rejected, unconfirmed };
QString toString(CommandState s);

struct EventEntry {
    double timestamp = 0.0;  // wall-clock seconds (agent's clock for agent events)
    std::int64_t step = -1;  // -1: not tied to a step
    EventCategory category = EventCategory::other;
    QString text;        // one line for the log
    QString request_id;  // commands: the request id
    CommandState state = CommandState::none;
    QString detail;  // rejection reason, evidence, the raw payload
};

class EventLog {
  public:
    EventLog();
    // Index of the appended entry.
    std::size_t append(EventEntry e);
    // Finds the command entry with this id (the most recent; any state but none), if any.
    std::optional<std::size_t> findCommand(const QString& request_id) const;
    // An entry to change: its step, state, text and detail may change (the index catches up at the
    // next look-up), its category and request id may not.
    EventEntry& at(std::size_t i);
    const EventEntry& at(std::size_t i) const { return entries_[i]; }
    std::size_t size() const { return entries_.size(); }
    void clear();
    // Which log this is: new for each log made or cleared (a copy or move keeps it), so a view that
    // shows its rows can tell a log that started over from one that grew.
    std::uint64_t serial() const { return serial_; }

    // The entries of `category` (every kind: nullopt) at or before `step_limit` (an entry without a
    // step, -1, is before every step; no limit: nullopt), in log order.
    std::vector<std::size_t> select(std::optional<EventCategory> category,
                                    std::optional<std::int64_t> step_limit) const;
    // Whether entry `i` is one select(category, step_limit) returns.
    bool matches(std::size_t i, std::optional<EventCategory> category,
                 std::optional<std::int64_t> step_limit) const;
    // Our commands still pending, in log order.
    std::vector<std::size_t> pendingCommands() const;

  private:
    static constexpr std::size_t kAll = kEventCategories;                 // the index over every kind
    using StepIndex = std::vector<std::pair<std::int64_t, std::size_t>>;  // (step, entry), sorted
    void index(std::size_t i);
    void reindex() const;  // catches up with the entries at() handed out
    static void insertSorted(StepIndex& by_step, std::pair<std::int64_t, std::size_t> key);
    static void eraseSorted(StepIndex& by_step, std::pair<std::int64_t, std::size_t> key);

    std::vector<EventEntry> entries_;
    std::uint64_t serial_;
    QHash<QString, std::vector<std::size_t>> by_request_;                 // request id -> entries
    std::array<std::vector<std::size_t>, kEventCategories + 1> by_kind_;  // log order
    mutable std::array<StepIndex, kEventCategories + 1> by_step_;
    mutable std::vector<std::int64_t> indexed_step_;  // the step each entry is indexed under
    mutable std::set<std::size_t> pending_;           // pending command entries
    mutable std::vector<std::size_t> touched_;        // entries at() handed out since the last reindex
};

}  // namespace sp::ui
