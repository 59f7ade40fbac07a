#pragma once
// Budget mode moving a block the policy would otherwise keep at BF16 (sensitivity at or above
// bf16_threshold) to a cheaper format: the very move that a pin of that block asks about first
// (pin_risk.h). The allocator may rightly make it to meet the target, but the operator must hear of
// it, once, when it starts; not at every update while it lasts. Qt-free but for the text.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sp/config.h"
#include "sp/telemetry.h"

namespace sp::ui {

struct BudgetRisk {
    int block = 0;
    Precision precision = Precision::bf16;  // where budget mode put it
    double sensitivity = 0;
    std::optional<double> snr_db;  // that format's estimate at the update, when the record had one
};

// Follows a run's update records and reports each block when it enters the risky state; it is
// reported again only after it left it (back at BF16, pinned or forced, below the threshold, or the
// policy out of budget mode).
class BudgetRiskWatch {
  public:
    std::vector<BudgetRisk> observe(const UpdateRecord& record, double bf16_threshold);
    void reset() {
        risky_.clear();
        risky_count_ = 0;
    }

  private:
    std::vector<bool> risky_;  // by block id
    long risky_count_ = 0;     // how many are set
};

// "budget mode put blocks.3 in int4 with sensitivity 0.720, at or above bf16_threshold 0.6 (a pin
// there asks first): estimated int4 SNR 18.2 dB, below its threshold 20.0 dB; pin it to BF16 to keep it"
std::string describeBudgetRisk(const BudgetRisk& risk, const std::string& block_name, const Config& config);

}  // namespace sp::ui
