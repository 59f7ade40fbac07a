#include "sp/ui/what_if.h"

#include <exception>
#include <fstream>

#include "sp/simulator.h"

namespace sp::ui {

WhatIfSettings whatIfSettingsOf(const Config& c) {
    return {c.bf16_threshold, c.int8_threshold, c.hysteresis_margin, c.budget_target_pct};
}

Config applyWhatIf(Config base, const WhatIfSettings& s) {
    base.bf16_threshold = s.bf16_threshold;
    base.int8_threshold = s.int8_threshold;
    base.hysteresis_margin = s.hysteresis_margin;
    base.budget_target_pct = s.budget_target_pct;
    return base;
}

RoutingSummary summarize(const std::vector<UpdateRecord>& records, std::size_t blocks) {
    RoutingSummary s;
    s.updates = records.size();
    s.final_precision.assign(blocks, Precision::bf16);
    double saving = 0;
    for (const UpdateRecord& r : records) {
        saving += r.estimated_bandwidth_saving_pct;
        s.switches += r.precision_changes;
        for (const BlockDetail& d : r.block_details)
            if (d.id >= 0 && std::size_t(d.id) < blocks) s.final_precision[std::size_t(d.id)] = d.precision;
    }
    if (!records.empty()) s.mean_estimated_saving_pct = saving / double(records.size());
    return s;
}

RoutingSummary summarize(const TelemetryStore& store) {
    RoutingSummary s;
    s.updates = store.updateCount();
    s.final_precision.assign(std::size_t(store.blockCount()), Precision::bf16);
    double saving = 0;
    for (std::size_t u = 0; u < store.updateCount(); ++u) {
        saving += double(store.row(u).estimated_saving_pct);
        for (int b = 0; b < store.blockCount(); ++b) {
            const BlockCell c = store.cell(b, u);
            if (!c.present) continue;
            s.final_precision[std::size_t(b)] = c.precision;
            s.switches += c.changed ? 1 : 0;
        }
    }
    if (s.updates > 0) s.mean_estimated_saving_pct = saving / double(s.updates);
    return s;
}

WhatIfResult simulateWhatIf(const std::string& path, const Config& config,
                            const std::shared_ptr<const std::atomic<bool>>& cancel) {
    WhatIfResult out;
    if (const auto problems = validate(config); !problems.empty()) {
        out.error = problems.front();
        return out;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        out.error = path + ": cannot read the file";
        return out;
    }
    try {
        SimulationOptions options;
        options.config = config;
        if (cancel) options.cancelled = [cancel] { return cancel->load(); };
        SimulationResult sim = simulate(in, path, options);
        out.records = std::move(sim.records);
        out.config = sim.config;
    } catch (const SimulationCancelled& e) {
        out.error = e.what();
        out.cancelled = true;
    } catch (const std::exception& e) {  // SimulationError, ConfigError: the file's problem, in words
        out.error = e.what();
    }
    return out;
}

}  // namespace sp::ui
