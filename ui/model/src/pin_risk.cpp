#include "sp/ui/pin_risk.h"

#include <cmath>
#include <cstdio>

#include "sp/ui/run_session.h"

namespace sp::ui {
namespace {

std::string bytesText(double bytes) {
    char text[32];
    if (bytes >= 1024.0 * 1024.0)
        std::snprintf(text, sizeof text, "%.1f MiB", bytes / (1024.0 * 1024.0));
    else
        std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
    return text;
}

}  // namespace

std::vector<PinRisk> riskyPins(const RunSession& session, const std::vector<int>& blocks,
                               Precision precision) {
    std::vector<PinRisk> risks;
    const TelemetryStore& store = session.store();
    if (precision == Precision::bf16 || store.empty()) return risks;
    const std::size_t last = store.updateCount() - 1;
    const double threshold = session.runConfig().bf16_threshold;
    const std::vector<double>& errors = session.header().calibration_errors;
    for (const int b : blocks) {
        if (b < 0 || b >= store.blockCount()) continue;
        const float s = store.value(b, last, BlockField::sensitivity);
        if (!(double(s) >= threshold)) continue;  // a missing value is not a known risk
        const BlockInfo& info = store.layout()[std::size_t(b)];
        PinRisk r;
        r.block = b;
        r.name = info.name;
        r.sensitivity = double(s);
        r.bytes_now = info.bytes_at(store.cell(b, last).precision);
        r.bytes_pinned = info.bytes_at(precision);
        if (std::size_t(b) < errors.size() && std::isfinite(errors[std::size_t(b)]))
            r.calibrated_error = errors[std::size_t(b)];
        if (const double snr = store.snr(b, last)[std::size_t(precision)]; std::isfinite(snr)) r.snr_db = snr;
        r.snr_threshold_db = session.runConfig().snr_threshold_db[std::size_t(precision)];
        risks.push_back(std::move(r));
    }
    return risks;
}

std::string describeRisks(const std::vector<PinRisk>& risks, Precision precision, double bf16_threshold) {
    const std::string format(to_string(precision));
    char line[256];
    std::snprintf(line, sizeof line,
                  "The policy keeps these blocks at BF16 (sensitivity at or above bf16_threshold %.3g).\n"
                  "Pin them to %s anyway?\n",
                  bf16_threshold, format.c_str());
    std::string text = line;
    for (const PinRisk& r : risks) {
        std::snprintf(line, sizeof line, "\n%s: sensitivity %.3f; %s -> %s per step", r.name.c_str(),
                      r.sensitivity, bytesText(r.bytes_now).c_str(), bytesText(r.bytes_pinned).c_str());
        text += line;
        // What the pin risks in its own format: the SNR estimate against the threshold the policy
        // holds that format to; the calibrated INT8 error only where INT8 is what is asked.
        if (r.snr_db) {
            std::snprintf(line, sizeof line, "; estimated %s SNR %.1f dB (%s %.1f dB)", format.c_str(),
                          *r.snr_db, *r.snr_db >= r.snr_threshold_db ? "threshold" : "below the threshold",
                          r.snr_threshold_db);
            text += line;
        }
        if (precision == Precision::int8 && r.calibrated_error) {
            std::snprintf(line, sizeof line, "; calibrated INT8 error %.3g", *r.calibrated_error);
            text += line;
        } else if (precision == Precision::int8 && !r.snr_db) {
            text += "; no calibrated INT8 error or SNR estimate in this run";
        }
    }
    return text;
}

}  // namespace sp::ui
