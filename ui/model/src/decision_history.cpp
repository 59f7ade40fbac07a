#include "sp/ui/decision_history.h"

namespace sp::ui {

std::string holdHistory(const TelemetryStore& store, int block, std::size_t update) {
    if (block < 0 || block >= store.blockCount() || update >= store.updateCount()) return {};
    const BlockCell now = store.cell(block, update);
    if (!now.present || now.reason != Reason::hold || now.forced != ForcedBy::none) return {};
    // Back through the updates while the block kept this format: a pinned one there is the pin
    // that put it here, released at the next update.
    for (std::size_t u = update; u-- > 0;) {
        const BlockCell c = store.cell(block, u);
        if (!c.present) continue;
        if (c.precision != now.precision) return {};
        if (c.forced == ForcedBy::pin) {
            return "held at " + std::string(to_string(now.precision)) +
                   " since the pin was released at step " + std::to_string(store.row(u + 1).step);
        }
    }
    return {};
}

std::optional<std::int64_t> maySwitchAt(const TelemetryStore& store, int block, std::size_t update,
                                        std::int64_t min_steps_between_switches) {
    if (block < 0 || block >= store.blockCount() || update >= store.updateCount()) return std::nullopt;
    // Only the policy's own moves start a cooldown (core/POLICY.md); pins and force lists never do.
    for (std::size_t u = update + 1; u-- > 0;) {
        const BlockCell c = store.cell(block, u);
        if (!c.present || !c.changed || c.reason != Reason::policy) continue;
        const std::int64_t at = store.row(u).step + min_steps_between_switches;
        return at > store.row(update).step ? std::optional<std::int64_t>(at) : std::nullopt;
    }
    return std::nullopt;
}

}  // namespace sp::ui
