#pragma once
// Why a block has its precision at an update, as data (POLICY.md "Reasons as data"): the rule that
// fired, the threshold the block's sensitivity was compared with, and what the SNR tiers found per
// format. The policy fills it on the training thread without formatting a word; the words
// (`reason_text`) are rendered where they are read, by sp::reason_text (sp/reason_text.h).
#include <array>
#include <cstdint>

#include "sp/config.h"
#include "sp/precision.h"

namespace sp {

// The rule that decided. The compared value is always the block's `sensitivity` (BlockDetail).
enum class ReasonRule : std::uint8_t {
    none,             // no facts: a record read back from a file or a stream (its reason_text has the words)
    pinned,           // rule 9: an operator pin to `format`
    forced,           // rule 9: a config force list, to `format`
    mode,             // rule 8: mode `mode` (off or static) keeps bf16
    nonfinite,        // rule 4: non-finite gradients since the last update: bf16
    budget,           // rule 18 (or 23 when `on_loss`): the plan for the target `threshold` (percent) put it
                      // in `format`
    tolerance,        // rule 23: the plan for the loss tolerance `threshold` (percent) put it in `format`
    adopted,          // a data-parallel follower took rank 0's map; the block's `reason` is rank 0's
    reached_bf16,     // rules 5/6: sensitivity >= bf16_threshold `threshold`: bf16
    below_int8,       // rule 5 (first assignment): sensitivity < int8_threshold `threshold`; then `choice`
    ambiguous,        // rule 5 (first assignment): in the ambiguous band, ambiguous_default `format`;
                      // then bf16 when that is bf16, else `choice`
    leaves_bf16,      // rule 6, from bf16: sensitivity < int8_threshold - hysteresis_margin `threshold`;
                      // then `choice`
    stays_bf16,       // rule 6, from bf16: sensitivity >= that `threshold`: bf16
    below_bf16_band,  // rule 6, below bf16: sensitivity < bf16_threshold `threshold`; then `choice`
};

// What one low format's test gave in the SNR tiers' walk (rule 17), cheapest format first.
enum class TierOutcome : std::uint8_t {
    not_tried,  // the walk stopped at a cheaper format
    gated,      // the gate or the runtime does not admit the format (rules 16, 19)
    unknown,    // no SNR estimate for it
    below,      // its SNR (the block's snr_db) was under `need_db`
    chosen,     // its SNR cleared `need_db`: the block's format
};

// Which low format the block would take once its sensitivity let it leave bf16 (rules 16, 17).
struct FormatChoiceFacts {
    bool tiered = false;  // snr_tiers on
    // Tiers off: the low format wanted (the current one, or the fallback: int8 or ambiguous_default),
    // and whether it was refused (not admitted): then bf16.
    Precision wanted = Precision::bf16;
    bool refused = false;
    // Tiers on, indexed by Precision (bf16's entries unused): each format's outcome and the dB its SNR
    // had to reach (the threshold, +/- snr_hysteresis_db after the first assignment; set for `below`
    // and `chosen`). No format `chosen`: bf16.
    std::array<TierOutcome, kPrecisionCount> outcome{};
    PerFormat need_db{};
};

struct ReasonFacts {
    ReasonRule rule = ReasonRule::none;
    Precision format =
        Precision::bf16;        // pinned, forced: the format; ambiguous: the default; budget: the plan's
    Mode mode = Mode::dynamic;  // rule mode: the mode
    double threshold = 0.0;     // the one the rule compared the sensitivity with; budget: the target %
    bool on_loss = false;       // budget: planned on the loss estimate (rule 23), not the sensitivity
    FormatChoiceFacts choice;   // below_int8, ambiguous, leaves_bf16, below_bf16_band
    // Rule 7: >= 0 when the policy wanted another format but the cooldown held the block in `held_in`
    // until this step.
    std::int64_t cooldown_until = -1;
    Precision held_in = Precision::bf16;
};

}  // namespace sp
