#pragma once
// What-if: the routing and the saving core's Policy would have produced on a recorded run under
// other thresholds (or another budget target), re-simulated in process from the file's per-step
// statistics exactly as `sp-ctl simulate --config` does (core/SIMULATOR.md). Qt-free; the panel
// runs it off the GUI thread.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sp/config.h"
#include "sp/precision.h"
#include "sp/telemetry.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

// The run's config with what the operator changed.
struct WhatIfSettings {
    double bf16_threshold = 0.6;
    double int8_threshold = 0.3;
    double hysteresis_margin = 0.1;
    double budget_target_pct = 50.0;  // used in budget mode
};
WhatIfSettings whatIfSettingsOf(const Config& c);
Config applyWhatIf(Config base, const WhatIfSettings& s);

// A run's routing in numbers: what the panel compares side by side.
struct RoutingSummary {
    std::size_t updates = 0;
    double mean_estimated_saving_pct = 0;    // over the updates
    std::int64_t switches = 0;               // precision changes over all blocks
    std::vector<Precision> final_precision;  // per block id, at the last update
};
RoutingSummary summarize(const std::vector<UpdateRecord>& records, std::size_t blocks);
// The same for the run as recorded (the store keeps cells, not records).
RoutingSummary summarize(const TelemetryStore& store);

struct WhatIfResult {
    std::vector<UpdateRecord> records;  // one per update, as sp-ctl simulate writes them
    Config config;                      // what the policy ran with
    std::string error;                  // set when the file cannot be re-simulated
    bool cancelled = false;             // stopped by `cancel` (error says so too)
};
// Blocking: reads and re-simulates `path` with `config`. Never throws. When `cancel` becomes true
// (from any thread) it stops within 4096 lines or one step.
WhatIfResult simulateWhatIf(const std::string& path, const Config& config,
                            const std::shared_ptr<const std::atomic<bool>>& cancel = {});

}  // namespace sp::ui
