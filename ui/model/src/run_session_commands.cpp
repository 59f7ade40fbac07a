// RunSession's operator commands: sending, their pending -> applied/rejected life from the agent's
// reply and command event, and what is pending on a block.
#include <algorithm>
#include <functional>

#include <QStringList>

#include "session_text.h"
#include "sp/ui/run_session.h"

namespace sp::ui {

using namespace session_text;

namespace {

// A pin's terms in words: " for 200 steps (ends at a loss spike)"; "" for a plain pin. The spike
// term is in parentheses so that a step number after it cannot read as the step of a spike.
QString pinTermsText(const sp::Command& c) {
    QString terms;
    if (c.for_steps > 0) terms += QStringLiteral(" for %1 steps").arg(c.for_steps);
    if (c.release_on_spike) terms += QStringLiteral(" (ends at a loss spike)");
    return terms;
}

QString describe(const sp::Command& c, const std::function<QString(int)>& name) {
    QStringList blocks;
    for (int b : c.blocks) blocks << name(b);
    switch (c.kind) {
        case sp::Command::Kind::pin:
            return QStringLiteral("pin %1 → %2%3")
                .arg(blocks.join(QStringLiteral(", ")), qs(std::string(to_string(c.precision))),
                     pinTermsText(c));
        case sp::Command::Kind::release:
            return QStringLiteral("release %1").arg(blocks.join(QStringLiteral(", ")));
        case sp::Command::Kind::release_all:
            return QStringLiteral("release all pins");
        case sp::Command::Kind::set_mode:
            return QStringLiteral("set mode %1").arg(qs(std::string(to_string(c.mode))));
        case sp::Command::Kind::set_budget:
            return QStringLiteral("set budget target %1%").arg(c.target_pct);
        case sp::Command::Kind::set_tolerance:
            return QStringLiteral("set loss tolerance %1%").arg(c.tolerance_pct);
    }
    return QStringLiteral("command");
}

}  // namespace

QString RunSession::pendingFor(int block) const {
    QStringList what;
    for (const auto& [id, c] : sent_commands_) {
        const auto index = events_.findCommand(id);
        if (!index || events_.at(*index).state != CommandState::pending) continue;
        const bool touches = c.kind == sp::Command::Kind::release_all ||
                             std::find(c.blocks.begin(), c.blocks.end(), block) != c.blocks.end();
        if (!touches) continue;
        switch (c.kind) {
            case sp::Command::Kind::pin:
                what << QStringLiteral("pin %1").arg(qs(std::string(to_string(c.precision))));
                break;
            case sp::Command::Kind::release:
                what << QStringLiteral("release");
                break;
            case sp::Command::Kind::release_all:
                what << QStringLiteral("release all");
                break;
            default:
                break;
        }
    }
    return what.join(QStringLiteral(", "));
}

QString RunSession::pinTermsFor(int block) const {
    const auto it = pin_terms_.find(block);
    if (it == pin_terms_.end() || !pinOf(block)) return {};
    const PinTerms& t = it->second;
    if (t.until && t.on_spike) return QStringLiteral("until step %1 or a loss spike").arg(*t.until);
    if (t.until) return QStringLiteral("until step %1").arg(*t.until);
    return t.on_spike ? QStringLiteral("until a loss spike") : QString();
}

void RunSession::notePinTerms(const sp::Command& c, std::int64_t step) {
    switch (c.kind) {
        case sp::Command::Kind::pin:
            for (int b : c.blocks) {
                PinTerms t;
                if (c.for_steps > 0) t.until = step + c.for_steps;
                t.on_spike = c.release_on_spike;
                pin_terms_[b] = t;
            }
            break;
        case sp::Command::Kind::release:
            for (int b : c.blocks) pin_terms_.erase(b);
            break;
        case sp::Command::Kind::release_all:
            pin_terms_.clear();
            break;
        default:
            break;
    }
}

// The agent ended pins by itself (their for_steps ran out, or a loss alarm): the log says which and
// why, and their terms are gone.
void RunSession::describeEvent(const sp::EventRecord& rec, const sp::PinReleasePayload& p, EventEntry& e) {
    QStringList names;
    for (int b : p.blocks) {
        pin_terms_.erase(b);
        names << blockName(b);
    }
    const bool expired = p.trigger == sp::EventTrigger::expired;
    e.category = expired ? EventCategory::command : EventCategory::rollback;
    e.text = expired
                 ? QStringLiteral("pin ended (its steps ran out): %1").arg(names.join(QStringLiteral(", ")))
                 : QStringLiteral("pin released by a %1 loss at step %2: %3")
                       .arg(p.trigger == sp::EventTrigger::nonfinite ? QStringLiteral("non-finite")
                                                                     : QStringLiteral("spiking"))
                       .arg(rec.step)
                       .arg(names.join(QStringLiteral(", ")));
}

QString RunSession::newRequestId() {
    return QStringLiteral("dash-%1").arg(next_request_++);
}

QString RunSession::pin(const std::vector<int>& blocks, sp::Precision precision) {
    sp::Command c;
    c.kind = sp::Command::Kind::pin;
    c.blocks = blocks;
    c.precision = precision;
    return send(c);
}

QString RunSession::release(const std::vector<int>& blocks) {
    sp::Command c;
    c.kind = sp::Command::Kind::release;
    c.blocks = blocks;
    return send(c);
}

QString RunSession::releaseAll() {
    sp::Command c;
    c.kind = sp::Command::Kind::release_all;
    return send(c);
}

QString RunSession::send(const sp::Command& command) {
    QString id = newRequestId();
    EventEntry e;
    e.timestamp = nowSeconds();
    e.step = store_.empty() ? -1 : store_.rows().back().step;
    e.category = EventCategory::command;
    e.text = describe(command, [this](int b) { return blockName(b); });
    e.request_id = id;
    e.state = CommandState::pending;
    e.detail = QStringLiteral("sent as %1").arg(id);
    const std::size_t index = events_.append(std::move(e));
    events_added_ = true;
    const bool sent = source_->sendCommand(id, command);
    if (!sent) {
        EventEntry& entry = events_.at(index);
        entry.state = CommandState::rejected;
        entry.detail =
            source_->isLive() ? QStringLiteral("not connected") : QStringLiteral("replay is read-only");
    }
    flushEvents();
    touch();
    if (!sent) return QString();
    sent_commands_[id] = command;
    emit commandStateChanged(id);  // now pending
    return id;
}

void RunSession::onCommandReplied(const QString& request_id, bool ok, const QString& error,
                                  qint64 effective_step) {
    const auto index = events_.findCommand(request_id);
    // A reply we are not waiting for (or one that lost the race with the command event).
    if (!index || events_.at(*index).state != CommandState::pending) return;
    EventEntry& e = events_.at(*index);
    if (!ok) {
        e.state = CommandState::rejected;
        e.detail = error.isEmpty() ? QStringLiteral("rejected") : error;
    } else {
        e.detail = QStringLiteral("acknowledged; effective at step %1").arg(effective_step);
    }
    emit commandStateChanged(request_id);
    touch();
}

void RunSession::onCommandEvent(const sp::EventRecord& rec, const sp::CommandEventPayload& p) {
    const QString id = p.id ? qs(*p.id) : QString();
    const bool ok = p.ok.value_or(true);
    QString what = QStringLiteral("command");
    if (p.command) {
        what = describe(*p.command, [this](int b) { return blockName(b); });
        if (ok) {
            notePinTerms(*p.command, rec.step);
            if (p.command->kind == sp::Command::Kind::set_mode) mode_seen_ = p.command->mode;
            if (p.command->kind == sp::Command::Kind::set_budget) target_seen_ = p.command->target_pct;
            if (p.command->kind == sp::Command::Kind::set_tolerance)
                tolerance_seen_ = p.command->tolerance_pct;
        }
    }
    QString outcome;
    if (ok) {
        outcome = p.changes ? QStringLiteral("applied at step %1 (%2 changes)").arg(rec.step).arg(*p.changes)
                            : QStringLiteral("applied at step %1").arg(rec.step);
    } else {
        outcome = p.error && !p.error->empty() ? qs(*p.error) : QStringLiteral("refused by the agent");
    }

    if (const auto index = events_.findCommand(id)) {
        EventEntry& e = events_.at(*index);
        e.state = ok ? CommandState::applied : CommandState::rejected;
        e.step = rec.step;
        e.detail = outcome;
        emit commandStateChanged(id);
        return;
    }
    // Another client's command (or one from before we joined): shown, not tracked.
    EventEntry e;
    e.timestamp = rec.timestamp;
    e.step = rec.step;
    e.category = EventCategory::command;
    e.text = what + (id.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(id));
    e.state = ok ? CommandState::applied : CommandState::rejected;
    e.detail = outcome;
    logEvent(std::move(e));
}

void RunSession::settleUnreadable(const QString& id, std::int64_t step) {
    const auto index = events_.findCommand(id);
    if (!index || events_.at(*index).state != CommandState::pending) return;
    EventEntry& e = events_.at(*index);
    e.state = CommandState::unconfirmed;
    e.step = step;
    e.detail = QStringLiteral(
                   "the agent's command event for it at step %1 is malformed (see the warning): "
                   "whether it applied is unknown; the next update's map shows what holds")
                   .arg(step);
    emit commandStateChanged(id);
    touch();
}

void RunSession::rejectPending(const QString& reason) {
    for (std::size_t i : events_.pendingCommands()) {  // the index's, not a scan of the log
        EventEntry& e = events_.at(i);
        e.state = CommandState::rejected;
        e.detail = reason;
        emit commandStateChanged(e.request_id);
    }
}

std::optional<sp::Precision> RunSession::pinOf(int block) const {
    // The latest update is the truth once it is newer than the snapshot.
    if (store_.updateCount() > snapshot_updates_ || snapshot_pins_.empty()) {
        if (!store_.empty()) {
            const BlockCell c = store_.cell(block, store_.updateCount() - 1);
            if (c.present)
                return c.forced == sp::ForcedBy::pin ? std::optional<sp::Precision>(c.precision)
                                                     : std::nullopt;
        }
    }
    if (block >= 0 && static_cast<std::size_t>(block) < snapshot_pins_.size())
        return snapshot_pins_[static_cast<std::size_t>(block)];
    return std::nullopt;
}

// ---- Source state, losses, replay progress ----

}  // namespace sp::ui
