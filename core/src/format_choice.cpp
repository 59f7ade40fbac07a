#include "format_choice.h"

#include <cmath>

namespace sp::detail {

namespace {

FormatChoice untiered(Precision current, FormatMask admitted, Precision fallback) {
    FormatChoice out;
    out.facts.wanted = current != Precision::bf16 ? current : fallback;
    if (out.facts.wanted == Precision::bf16) return out;
    out.facts.refused = !has_format(admitted, out.facts.wanted);
    if (!out.facts.refused) out.format = out.facts.wanted;
    return out;
}

}  // namespace

FormatChoice choose_low_format(Precision current, bool first, const PerFormat& snr_db, FormatMask admitted,
                               Precision fallback, const Config& c) {
    if (!c.snr_tiers) return untiered(current, admitted, fallback);
    FormatChoice out;
    out.facts.tiered = true;
    for (Precision p : kLowFormatsCheapestFirst) {
        const auto i = std::size_t(p);
        if (!has_format(admitted, p)) {
            out.facts.outcome[i] = TierOutcome::gated;
            continue;
        }
        const double snr = snr_db[i];
        if (std::isnan(snr)) {
            out.facts.outcome[i] = TierOutcome::unknown;
            continue;
        }
        const double threshold = c.snr_threshold_db[i];
        const double need = first          ? threshold
                            : p == current ? threshold - c.snr_hysteresis_db
                                           : threshold + c.snr_hysteresis_db;
        out.facts.need_db[i] = need;
        if (!(snr >= need)) {
            out.facts.outcome[i] = TierOutcome::below;
            continue;
        }
        out.facts.outcome[i] = TierOutcome::chosen;
        out.format = p;
        return out;
    }
    return out;
}

}  // namespace sp::detail
