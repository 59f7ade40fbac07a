#include "sp/ui/event_log.h"

#include <atomic>

namespace sp::ui {

namespace {
std::uint64_t nextLogSerial() {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

EventLog::EventLog() : serial_(nextLogSerial()) {}

void EventLog::clear() {
    entries_.clear();
    serial_ = nextLogSerial();
}

QString toString(EventCategory c) {
    switch (c) {
        case EventCategory::precision_change:
            return QStringLiteral("precision");
        case EventCategory::command:
            return QStringLiteral("command");
        case EventCategory::rollback:
            return QStringLiteral("rollback");
        case EventCategory::connection:
            return QStringLiteral("connection");
        case EventCategory::dropped:
            return QStringLiteral("dropped");
        case EventCategory::warning:
            return QStringLiteral("warning");
        case EventCategory::load:
            return QStringLiteral("load");
        case EventCategory::other:
            return QStringLiteral("other");
    }
    return QStringLiteral("other");
}

QString toString(CommandState s) {
    switch (s) {
        case CommandState::none:
            return QString();
        case CommandState::pending:
            return QStringLiteral("pending");
        case CommandState::applied:
            return QStringLiteral("applied");
        case CommandState::rejected:
            return QStringLiteral("rejected");
    }
    return QString();
}

std::size_t EventLog::append(EventEntry e) {
    entries_.push_back(std::move(e));
    return entries_.size() - 1;
}

std::optional<std::size_t> EventLog::findCommand(const QString& request_id) const {
    if (request_id.isEmpty()) return std::nullopt;
    // The most recent command entry with this id, whatever its state: a command event that
    // arrives after a timed-out reply still belongs to the request that was sent.
    for (std::size_t i = entries_.size(); i-- > 0;) {
        const EventEntry& e = entries_[i];
        if (e.category == EventCategory::command && e.state != CommandState::none &&
            e.request_id == request_id)
            return i;
    }
    return std::nullopt;
}

}  // namespace sp::ui
