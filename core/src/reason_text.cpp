// sp::reason_text: a block's decision facts in words. The wording and the number formats are the
// telemetry files' (core/TELEMETRY.md "reason_text"): scores with 3 decimals, dB and percentages with 1,
// "unknown" for a missing number.
#include "sp/reason_text.h"

#include <cmath>
#include <cstdio>

namespace sp {

namespace {

void put_number(std::string& out, double v, int decimals = 3) {
    if (std::isnan(v)) {
        out += "unknown";
        return;
    }
    char text[32];
    const int n = std::snprintf(text, sizeof text, "%.*f", decimals, v);
    if (n > 0) out.append(text, std::size_t(n) < sizeof text ? std::size_t(n) : sizeof text - 1);
}

// Tiers off: the wanted low format, or bf16 when there is none or it is refused.
void put_untiered(std::string& out, const FormatChoiceFacts& c) {
    out += to_string(c.wanted);
    if (c.wanted != Precision::bf16 && c.refused) out += " not faster than bf16 (gate): bf16";
}

// Tiers on: each format tried, cheapest first, up to the chosen one.
void put_tiers(std::string& out, const FormatChoiceFacts& c, const PerFormat& snr_db) {
    bool first = true;
    for (Precision p : kLowFormatsCheapestFirst) {
        const auto i = std::size_t(p);
        const TierOutcome outcome = c.outcome[i];
        if (outcome == TierOutcome::not_tried) break;
        if (!first) out += "; ";
        first = false;
        out += to_string(p);
        switch (outcome) {
            case TierOutcome::gated:
                out += " not faster than bf16 (gate)";
                continue;
            case TierOutcome::unknown:
                out += " SNR unknown";
                continue;
            case TierOutcome::below:
            case TierOutcome::chosen:
            case TierOutcome::not_tried:
                break;
        }
        out += ' ';
        put_number(out, snr_db[i], 1);
        out += outcome == TierOutcome::chosen ? " dB >= " : " dB < ";
        put_number(out, c.need_db[i], 1);
        out += " dB";
        if (outcome == TierOutcome::chosen) {
            out += ": ";
            out += to_string(p);
            return;
        }
    }
    out += ": bf16";
}

void put_choice(std::string& out, const BlockDetail& d) {
    if (d.facts.choice.tiered)
        put_tiers(out, d.facts.choice, d.snr_db);
    else
        put_untiered(out, d.facts.choice);
}

// Rules 5 and 6: the sensitivity against a threshold, then (when it may leave bf16) the format choice.
void put_dynamic(std::string& out, const BlockDetail& d) {
    const ReasonFacts& f = d.facts;
    out += "sensitivity ";
    put_number(out, d.sensitivity);
    switch (f.rule) {
        case ReasonRule::reached_bf16:
            out += " >= bf16_threshold ";
            put_number(out, f.threshold);
            out += ": bf16";
            break;
        case ReasonRule::stays_bf16:
            out += " >= ";
            put_number(out, f.threshold);
            out += " (int8_threshold - hysteresis_margin): bf16";
            break;
        case ReasonRule::below_int8:
            out += " < int8_threshold ";
            put_number(out, f.threshold);
            out += "; ";
            put_choice(out, d);
            break;
        case ReasonRule::leaves_bf16:
            out += " < int8_threshold - hysteresis_margin ";
            put_number(out, f.threshold);
            out += "; ";
            put_choice(out, d);
            break;
        case ReasonRule::below_bf16_band:
            out += " < bf16_threshold ";
            put_number(out, f.threshold);
            out += "; ";
            put_choice(out, d);
            break;
        case ReasonRule::ambiguous:
            out += " in the ambiguous band: ambiguous_default ";
            out += to_string(f.format);
            out += "; ";
            if (f.format == Precision::bf16)
                out += "bf16";
            else
                put_choice(out, d);
            break;
        default:  // not a rule of rules 5 and 6: append_reason_text renders it
            break;
    }
    if (f.cooldown_until >= 0) {
        out += "; held in ";
        out += to_string(f.held_in);
        out += " by the cooldown until step ";
        out += std::to_string(f.cooldown_until);
    }
}

// A loss change or tolerance in percent, with 2 decimals (3 significant digits below 0.01, so that a
// small one does not read as 0), signed or not, and its "%".
void put_loss_pct(std::string& out, double pct, bool sign = true) {
    const bool small = std::fabs(pct) < 0.01 && pct != 0.0;
    const char* format = sign ? (small ? "%+.3g%%" : "%+.2f%%") : (small ? "%.3g%%" : "%.2f%%");
    char text[32];
    const int n = std::snprintf(text, sizeof text, format, pct);
    if (n > 0) out.append(text, std::size_t(n) < sizeof text ? std::size_t(n) : sizeof text - 1);
}

// Rules 18 and 21: the plan's format, and on the loss estimate what each format would cost.
void put_plan(std::string& out, const BlockDetail& d) {
    const ReasonFacts& f = d.facts;
    if (f.rule == ReasonRule::tolerance) {
        out += "tolerance ";
        put_loss_pct(out, f.threshold, false);
    } else {
        out += "budget ";
        put_number(out, f.threshold, 1);
        out += '%';
    }
    if (!f.on_loss) {
        out += ", sensitivity ";
        put_number(out, d.sensitivity);
        out += ": ";
        out += to_string(f.format);
        return;
    }
    out += ", on the loss estimate: ";
    out += to_string(f.format);
    const double own = f.format == Precision::bf16 ? NAN : d.loss_delta_pct[std::size_t(f.format)];
    if (std::isfinite(own)) {
        out += ", which costs \u2248 ";
        put_loss_pct(out, own);
        out += " loss";
    }
    bool first = true;
    for (Precision p : kLowFormatsCheapestFirst) {
        const double pct = d.loss_delta_pct[std::size_t(p)];
        if (p == f.format || !std::isfinite(pct)) continue;
        out += first ? "; " : ", ";
        out += to_string(p);
        out += first ? " would cost \u2248 " : " \u2248 ";
        put_loss_pct(out, pct);
        if (first) out += " loss";
        first = false;
    }
    if (first && !std::isfinite(own)) out += " (no loss estimate yet)";
}

}  // namespace

void append_reason_text(std::string& out, const BlockDetail& d) {
    if (!d.reason_text.empty()) {
        out += d.reason_text;
        return;
    }
    const ReasonFacts& f = d.facts;
    switch (f.rule) {
        case ReasonRule::none:
            return;
        case ReasonRule::pinned:
        case ReasonRule::forced:
            out += f.rule == ReasonRule::pinned ? "pinned to " : "forced to ";
            out += to_string(f.format);
            out += f.rule == ReasonRule::pinned ? " by the operator" : " by the config";
            return;
        case ReasonRule::mode:
            out += "mode ";
            out += to_string(f.mode);
            out += ": bf16";
            return;
        case ReasonRule::nonfinite:
            out += "non-finite gradients since the last update: bf16";
            return;
        case ReasonRule::budget:
        case ReasonRule::tolerance:
            put_plan(out, d);
            return;
        case ReasonRule::adopted:
            out += "as rank 0 decided (";
            out += to_string(d.reason);
            out += ')';
            return;
        case ReasonRule::reached_bf16:
        case ReasonRule::below_int8:
        case ReasonRule::ambiguous:
        case ReasonRule::leaves_bf16:
        case ReasonRule::stays_bf16:
        case ReasonRule::below_bf16_band:
            put_dynamic(out, d);
            return;
    }
}

std::string reason_text(const BlockDetail& d) {
    std::string out;
    append_reason_text(out, d);
    return out;
}

}  // namespace sp
