#include "format_choice.h"

#include <cmath>
#include <cstdio>

namespace sp::detail {

std::string fmt(double v, int decimals) {
    if (std::isnan(v)) return "unknown";
    char text[32];
    std::snprintf(text, sizeof text, "%.*f", decimals, v);
    return text;
}

namespace {

FormatChoice untiered(Precision current, FormatMask admitted, Precision fallback) {
    const Precision wanted = current != Precision::bf16 ? current : fallback;
    if (wanted == Precision::bf16) return {Precision::bf16, "bf16"};
    if (!has_format(admitted, wanted))
        return {Precision::bf16, std::string(to_string(wanted)) + " not faster than bf16 (gate): bf16"};
    return {wanted, std::string(to_string(wanted))};
}

}  // namespace

FormatChoice choose_low_format(Precision current, bool first, const PerFormat& snr_db, FormatMask admitted,
                               Precision fallback, const Config& c) {
    if (!c.snr_tiers) return untiered(current, admitted, fallback);
    FormatChoice out;
    for (Precision p : kLowFormatsCheapestFirst) {
        const std::string name(to_string(p));
        if (!out.why.empty()) out.why += "; ";
        if (!has_format(admitted, p)) {
            out.why += name + " not faster than bf16 (gate)";
            continue;
        }
        const double snr = snr_db[std::size_t(p)];
        const double threshold = c.snr_threshold_db[std::size_t(p)];
        const double need = first          ? threshold
                            : p == current ? threshold - c.snr_hysteresis_db
                                           : threshold + c.snr_hysteresis_db;
        if (std::isnan(snr)) {
            out.why += name + " SNR unknown";
            continue;
        }
        if (!(snr >= need)) {
            out.why += name + " " + fmt(snr, 1) + " dB < " + fmt(need, 1) + " dB";
            continue;
        }
        out.format = p;
        out.why += name + " " + fmt(snr, 1) + " dB >= " + fmt(need, 1) + " dB: " + name;
        return out;
    }
    out.why += ": bf16";
    return out;
}

}  // namespace sp::detail
