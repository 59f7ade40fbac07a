#include "sp/ui/decision_history.h"

namespace sp::ui {

std::string holdHistory(const TelemetryStore& store, int block, std::size_t update) {
    if (block < 0 || block >= store.blockCount() || update >= store.updateCount()) return {};
    const BlockCell now = store.cell(block, update);
    if (!now.present || now.reason != Reason::hold || now.forced != ForcedBy::none) return {};
    // A pin that put it at this format, released since, with no change in between.
    const std::optional<std::size_t> pinned = store.pinnedUntil(block, update);
    if (!pinned) return {};
    return "held at " + std::string(to_string(now.precision)) + " since the pin was released at step " +
           std::to_string(store.row(*pinned + 1).step);
}

std::optional<std::int64_t> maySwitchAt(const TelemetryStore& store, int block, std::size_t update,
                                        std::int64_t min_steps_between_switches) {
    // Only the policy's own moves start a cooldown (core/POLICY.md); pins and force lists never do.
    const std::optional<std::size_t> moved = store.lastPolicyMove(block, update);
    if (!moved) return std::nullopt;
    const std::int64_t at = store.row(*moved).step + min_steps_between_switches;
    return at > store.row(update).step ? std::optional<std::int64_t>(at) : std::nullopt;
}

}  // namespace sp::ui
