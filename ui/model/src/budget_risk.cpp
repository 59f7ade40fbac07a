#include "sp/ui/budget_risk.h"

#include <cmath>
#include <cstdio>

namespace sp::ui {

std::vector<BudgetRisk> BudgetRiskWatch::observe(const UpdateRecord& record, double bf16_threshold) {
    std::vector<BudgetRisk> entered;
    const bool budget = record.mode == Mode::budget;
    if (!budget && risky_count_ == 0) return entered;  // the common case, at no cost per block
    for (const BlockDetail& d : record.block_details) {
        if (d.id < 0) continue;
        const auto i = std::size_t(d.id);
        if (i >= risky_.size()) risky_.resize(i + 1, false);
        // The operator's pins and the config's forces are choices someone made knowingly.
        const bool chosen =
            d.reason == Reason::pin || d.reason == Reason::config || d.forced != ForcedBy::none;
        const bool risky =
            budget && !chosen && d.precision != Precision::bf16 && d.sensitivity >= bf16_threshold;
        if (risky && !risky_[i]) {
            BudgetRisk r;
            r.block = d.id;
            r.precision = d.precision;
            r.sensitivity = d.sensitivity;
            if (const double snr = d.snr_db[std::size_t(d.precision)]; std::isfinite(snr)) r.snr_db = snr;
            entered.push_back(r);
        }
        if (risky != risky_[i]) risky_count_ += risky ? 1 : -1;
        risky_[i] = risky;
    }
    return entered;
}

std::string describeBudgetRisk(const BudgetRisk& risk, const std::string& block_name, const Config& config) {
    const std::string format(to_string(risk.precision));
    char text[320];
    std::snprintf(text, sizeof text,
                  "budget mode put %s in %s with sensitivity %.3f, at or above bf16_threshold %.3g (a pin "
                  "there asks first)",
                  block_name.c_str(), format.c_str(), risk.sensitivity, config.bf16_threshold);
    std::string out = text;
    if (risk.snr_db) {
        const double threshold = config.snr_threshold_db[std::size_t(risk.precision)];
        std::snprintf(text, sizeof text, ": estimated %s SNR %.1f dB, %s %.1f dB", format.c_str(),
                      *risk.snr_db, *risk.snr_db >= threshold ? "above its threshold" : "below its threshold",
                      threshold);
        out += text;
    }
    return out + "; pin it to BF16 to keep it";
}

}  // namespace sp::ui
