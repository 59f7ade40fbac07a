// Policy::adopt: a data-parallel follower takes rank 0's map (agent/PROTOCOL.md §11).
#include <stdexcept>
#include <string>

#include "sp/policy.h"

namespace sp {

std::vector<PrecisionChange> Policy::adopt(std::int64_t step, const std::vector<Precision>& map,
                                           const std::vector<Reason>& reasons) {
    if (map.size() != layout_.size() || reasons.size() != layout_.size())
        throw std::invalid_argument("Policy::adopt: a map of " + std::to_string(map.size()) + " blocks and " +
                                    std::to_string(reasons.size()) + " reasons for a layout of " +
                                    std::to_string(layout_.size()));
    std::vector<PrecisionChange> changes;
    const bool amend_record = last_update_ == step;
    for (int b = 0; b < block_count(); ++b) {
        const std::size_t i = std::size_t(b);
        if (effective_[i] == map[i]) continue;
        const Reason why = reasons[i];
        set_effective(b, map[i], step, why, &changes);
        // As apply_decision and the loss feedback keep them, so that later rules read the same state.
        if (why == Reason::policy || why == Reason::initial || why == Reason::nonfinite)
            cooldown_from_[i] = step;
        if (map[i] != Precision::bf16 && (why == Reason::policy || why == Reason::initial))
            lowered_at_[i] = step;
        if (why == Reason::rollback) rollback_until_[i] = step + config_.rollback_cooldown_steps;
        if (amend_record) {
            BlockDetail& d = record_.block_details[i];
            d.reason = why;
            d.facts = ReasonFacts{};  // the words name rank 0's reason, which d.reason now holds
            d.facts.rule = ReasonRule::adopted;
        }
    }
    if (amend_record && !changes.empty()) {
        recorded_ = recorded_before_update_;  // the record's `changed` is against the one before it
        tally(record_);
        recorded_ = effective_;
    }
    return changes;
}

}  // namespace sp
