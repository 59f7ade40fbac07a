#include "sp/ui/event_log.h"

#include <algorithm>
#include <atomic>

namespace sp::ui {

namespace {
std::uint64_t nextLogSerial() {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

bool isPending(const EventEntry& e) {
    return e.category == EventCategory::command && e.state == CommandState::pending;
}
}  // namespace

EventLog::EventLog() : serial_(nextLogSerial()) {}

void EventLog::clear() {
    entries_.clear();
    by_request_.clear();
    for (auto& list : by_kind_) list.clear();
    for (auto& list : by_step_) list.clear();
    indexed_step_.clear();
    pending_.clear();
    touched_.clear();
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
        case CommandState::unconfirmed:
            return QStringLiteral("unconfirmed");
    }
    return QString();
}

void EventLog::insertSorted(StepIndex& by_step, std::pair<std::int64_t, std::size_t> key) {
    // Steps mostly arrive in order: the end, in constant time.
    if (by_step.empty() || by_step.back() < key) {
        by_step.push_back(key);
        return;
    }
    by_step.insert(std::lower_bound(by_step.begin(), by_step.end(), key), key);
}

void EventLog::eraseSorted(StepIndex& by_step, std::pair<std::int64_t, std::size_t> key) {
    const auto at = std::lower_bound(by_step.begin(), by_step.end(), key);
    if (at != by_step.end() && *at == key) by_step.erase(at);
}

void EventLog::index(std::size_t i) {
    const EventEntry& e = entries_[i];
    if (!e.request_id.isEmpty()) by_request_[e.request_id].push_back(i);
    by_kind_[std::size_t(e.category)].push_back(i);
    by_kind_[kAll].push_back(i);
    insertSorted(by_step_[std::size_t(e.category)], {e.step, i});
    insertSorted(by_step_[kAll], {e.step, i});
    indexed_step_.push_back(e.step);
    if (isPending(e)) pending_.insert(i);
}

std::size_t EventLog::append(EventEntry e) {
    reindex();  // the index of earlier entries first: indexed_step_ grows in order
    entries_.push_back(std::move(e));
    index(entries_.size() - 1);
    return entries_.size() - 1;
}

EventEntry& EventLog::at(std::size_t i) {
    // Seen at most once per entry between look-ups; a caller that only reads adds nothing lasting.
    if (touched_.size() >= entries_.size()) reindex();
    touched_.push_back(i);
    return entries_[i];
}

void EventLog::reindex() const {
    for (std::size_t i : touched_) {
        const EventEntry& e = entries_[i];
        if (isPending(e)) {
            pending_.insert(i);
        } else {
            pending_.erase(i);
        }
        const std::int64_t old = indexed_step_[i];
        if (old == e.step) continue;
        for (std::size_t list : {std::size_t(e.category), kAll}) {
            eraseSorted(by_step_[list], {old, i});
            insertSorted(by_step_[list], {e.step, i});
        }
        indexed_step_[i] = e.step;
    }
    touched_.clear();
}

std::optional<std::size_t> EventLog::findCommand(const QString& request_id) const {
    if (request_id.isEmpty()) return std::nullopt;
    const auto found = by_request_.find(request_id);
    if (found == by_request_.end()) return std::nullopt;
    // The most recent command entry with this id, whatever its state: a command event that
    // arrives after a timed-out reply still belongs to the request that was sent.
    const std::vector<std::size_t>& list = found.value();
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
        const EventEntry& e = entries_[*it];
        if (e.category == EventCategory::command && e.state != CommandState::none) return *it;
    }
    return std::nullopt;
}

std::vector<std::size_t> EventLog::select(std::optional<EventCategory> category,
                                          std::optional<std::int64_t> step_limit) const {
    const std::size_t list = category ? std::size_t(*category) : kAll;
    if (!step_limit) return by_kind_[list];
    reindex();
    const StepIndex& by_step = by_step_[list];
    const auto end = std::upper_bound(by_step.begin(), by_step.end(),
                                      std::pair<std::int64_t, std::size_t>{*step_limit, SIZE_MAX});
    std::vector<std::size_t> out;
    out.reserve(std::size_t(end - by_step.begin()));
    for (auto it = by_step.begin(); it != end; ++it) out.push_back(it->second);
    std::sort(out.begin(), out.end());
    return out;
}

bool EventLog::matches(std::size_t i, std::optional<EventCategory> category,
                       std::optional<std::int64_t> step_limit) const {
    const EventEntry& e = entries_[i];
    return (!category || e.category == *category) && (!step_limit || e.step <= *step_limit);
}

std::vector<std::size_t> EventLog::pendingCommands() const {
    reindex();
    return {pending_.begin(), pending_.end()};
}

}  // namespace sp::ui
