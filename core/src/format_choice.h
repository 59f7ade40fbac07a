#pragma once
// Which format below BF16 a block takes once its sensitivity lets it leave BF16 (POLICY.md rules 16
// and 17), with the facts that explain the choice (rendered in words by sp::reason_text). Internal to
// sp_core: Policy uses it.
#include "sp/config.h"
#include "sp/precision.h"
#include "sp/reason_facts.h"

namespace sp::detail {

struct FormatChoice {
    Precision format = Precision::bf16;  // bf16 when no low format qualifies
    FormatChoiceFacts facts;             // e.g. int4 below its need, int8 chosen
};

// `admitted`: the formats the gate lets this block take. With snr_tiers off the low format is the
// block's current one when it is already low, else `fallback` (int8, or ambiguous_default in the
// ambiguous band). With the tiers on, the cheapest admitted format whose SNR clears its threshold:
// `first` (the first assignment) uses the plain threshold; later, staying in the current format needs
// threshold - snr_hysteresis_db and entering another one threshold + snr_hysteresis_db.
FormatChoice choose_low_format(Precision current, bool first, const PerFormat& snr_db, FormatMask admitted,
                               Precision fallback, const Config& c);

}  // namespace sp::detail
