#pragma once
// The run's event log as the dashboard shows it: precision changes, rollbacks and warnings from
// the agent, operator commands with their state, connection changes and lost messages.
// Qt-free apart from QString; EventLogModel (event_log_model.h) presents it to views.
#include <cstdint>
#include <optional>
#include <string>
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
QString toString(EventCategory c);

enum class CommandState : std::uint8_t { none, pending, applied, rejected };
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
    // Finds the pending command with this id (the most recent), if any.
    std::optional<std::size_t> findCommand(const QString& request_id) const;
    EventEntry& at(std::size_t i) { return entries_[i]; }
    const EventEntry& at(std::size_t i) const { return entries_[i]; }
    std::size_t size() const { return entries_.size(); }
    void clear();
    // Which log this is: new for each log made or cleared (a copy or move keeps it), so a view that
    // shows its rows can tell a log that started over from one that grew.
    std::uint64_t serial() const { return serial_; }

  private:
    std::vector<EventEntry> entries_;
    std::uint64_t serial_;
};

}  // namespace sp::ui
