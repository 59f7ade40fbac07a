#include "sp/ui/telemetry_source.h"

namespace sp::ui {

QString toString(SourceState s) {
    switch (s) {
        case SourceState::idle:
            return QStringLiteral("idle");
        case SourceState::loading:
            return QStringLiteral("loading");
        case SourceState::loaded:
            return QStringLiteral("loaded");
        case SourceState::failed:
            return QStringLiteral("failed");
        case SourceState::connecting:
            return QStringLiteral("connecting");
        case SourceState::live:
            return QStringLiteral("live");
        case SourceState::stale:
            return QStringLiteral("stale");
        case SourceState::disconnected:
            return QStringLiteral("disconnected");
    }
    return QStringLiteral("unknown");
}

void registerUiMetaTypes() {
    // The names must match the signal signatures' spelling so queued connections find them.
    qRegisterMetaType<sp::ui::RecordBatch>("sp::ui::RecordBatch");
    qRegisterMetaType<sp::ui::SourceState>("sp::ui::SourceState");
    qRegisterMetaType<sp::ui::LoadReport>("sp::ui::LoadReport");
    qRegisterMetaType<sp::RunHeader>("sp::RunHeader");
    qRegisterMetaType<sp::protocol::Snapshot>("sp::protocol::Snapshot");
}

}  // namespace sp::ui
