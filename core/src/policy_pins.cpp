// Pin lifetimes (POLICY.md rules 9 and 20): how a pin ends, whether by a release command, by its
// `for_steps` running out, or by a loss spike when it was given `release_on_spike`.
#include "sp/policy.h"

namespace sp {

std::optional<std::int64_t> Policy::pin_expires_at(int block) const {
    const std::size_t i = std::size_t(block);
    if (!pins_.at(i) || pin_until_[i] == kForever) return std::nullopt;
    return pin_until_[i];
}

void Policy::release_pin(int block, std::int64_t step, std::vector<PrecisionChange>* changes) {
    const std::size_t i = std::size_t(block);
    if (!pins_[i]) return;
    pins_[i].reset();
    pin_until_[i] = kForever;
    pin_on_spike_[i] = 0;
    cooldown_from_[i] = kNever;  // no cooldown penalty: the policy may move it at the next update
    rollback_until_[i] = kNever;
    if (config_force_[i]) set_effective(block, *config_force_[i], step, Reason::config, changes);
    // Otherwise it keeps its precision until the next update decides from it (with hysteresis).
}

const PinExpiry& Policy::expire_pins(std::int64_t step) {
    expiry_.blocks.clear();
    expiry_.changes.clear();
    for (int b = 0; b < block_count(); ++b) {
        const std::size_t i = std::size_t(b);
        if (!pins_[i] || pin_until_[i] > step) continue;
        expiry_.blocks.push_back(b);
        release_pin(b, step, &expiry_.changes);
    }
    return expiry_;
}

// The operator asked to be undone by a spike: the pin ends and a block pinned below BF16 is treated
// as a rollback suspect (back to BF16, held until fb.cooldown_until), whatever rollback_enabled says.
void Policy::release_pins_on_spike(LossFeedback& fb, std::int64_t step) {
    for (int b = 0; b < block_count(); ++b) {
        const std::size_t i = std::size_t(b);
        if (!pins_[i] || !pin_on_spike_[i]) continue;
        fb.released_pins.push_back(b);
        const bool below_bf16 = *pins_[i] != Precision::bf16;
        release_pin(b, step, &fb.changes);
        if (!below_bf16 || effective_[i] == Precision::bf16) continue;
        ForcedBy by;
        if (forced_precision(b, &by)) continue;  // released to a config force: the config decides
        set_effective(b, Precision::bf16, step, Reason::rollback, &fb.changes);
        cooldown_from_[i] = step;
        rollback_until_[i] = fb.cooldown_until;
    }
}

}  // namespace sp
