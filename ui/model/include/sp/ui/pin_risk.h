#pragma once
// A pin that overrides the policy where it matters: moving a block whose sensitivity is at or above
// bf16_threshold (one the policy keeps at BF16) to a cheaper format. What the operator should see
// before confirming it: how sensitive the block is, the bytes it would save, and its calibrated
// error. Qt-free but for the text; the window asks, this decides what to ask about.
#include <optional>
#include <string>
#include <vector>

#include "sp/precision.h"

namespace sp::ui {

class RunSession;

struct PinRisk {
    int block = 0;
    std::string name;
    double sensitivity = 0;  // at the latest update
    double bytes_now = 0, bytes_pinned = 0;
    std::optional<double> calibrated_error;  // the header's calibration (INT8), when it ran
    // The pinned format's SNR estimate at the latest update and the threshold it is held to
    // (snr_threshold_db), when the record carried estimates: what an INT4 or FP8 pin risks.
    std::optional<double> snr_db;
    double snr_threshold_db = 0;
};

// The blocks among `blocks` that a pin to `precision` would move below BF16 against the policy's
// threshold; empty when the pin is safe (BF16, or every block below the threshold).
std::vector<PinRisk> riskyPins(const RunSession& session, const std::vector<int>& blocks,
                               Precision precision);

// "Pin to int8 against the policy? ..." with a line per block, for the confirmation.
std::string describeRisks(const std::vector<PinRisk>& risks, Precision precision, double bf16_threshold);

}  // namespace sp::ui
