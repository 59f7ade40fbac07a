// The exact oracle and the agent's estimates of the probed pairs (results.md, "Paired measures" and
// "The estimate against the measured gaps").
//
// The oracle is the product's own exact planner (sp::LossPlanner, POLICY.md rule 23) fed the
// measured single-block gaps in place of the estimates: the frontier a perfect single-block cost
// model reaches. The estimates are what the agent would have planned on at the same steps: the probe
// run's telemetry replayed through the simulator in mode static, which fills every block's
// sensitivity, SNR and loss-change estimate without routing anything.
#include <QDir>
#include <QFile>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "experiment.h"
#include "experiment_oracle.h"
#include "sp/budget.h"
#include "sp/config.h"
#include "sp/jsonl.h"
#include "sp/loss_plan.h"
#include "sp/simulator.h"

namespace sp::experiment {

QString format_key(Precision p) {
    return QString::fromStdString(std::string(to_string(p)));
}

double element_saving_pct(const PrecisionMap& map) {
    double saved = 0;
    for (Precision p : map) saved += 1.0 - bytes_per_element(p) / 2.0;
    return map.empty() ? 0.0 : 100.0 * saved / double(map.size());
}

QString oracle_budget_name(double element_saving) {
    return QString(kOracleBudgetPrefix) + QString::number(element_saving, 'f', 3);
}

QString oracle_tolerance_name(double tolerance_pct) {
    return "oracle:tolerance:" + QString::number(tolerance_pct, 'f', 4);
}

namespace {

// The planner's blocks at one step: every block of one size, each low format costing its measured
// single-block gap. A gap below zero counts as zero: rounding noise that no plan should chase.
std::vector<BudgetBlock> measured_blocks(const Settings& s, const std::vector<Probe>& first,
                                         std::int64_t step) {
    std::vector<BudgetBlock> blocks(std::size_t(s.blocks));
    for (BudgetBlock& b : blocks) b.bytes_bf16 = 1.0;
    for (const Probe* p : probes_at(first, step, "single:")) {
        const QStringList parts = p->name.split(':');
        const auto f = parse_precision(parts.at(2).toStdString());
        blocks.at(std::size_t(parts.at(1).toInt())).loss_pct[std::size_t(*f)] = std::max(0.0, p->gap_pct);
    }
    return blocks;
}

// The savings the budget oracle plans for: a grid, and every selective scheme's map at the step (so
// that each has the oracle at equal bytes).
std::set<double> budget_targets(const std::vector<Probe>& first, std::int64_t step) {
    std::set<double> targets = {25.0, 50.0, 55.0, 60.0, 65.0, 70.0};
    for (const Probe* p : probes_at(first, step, ""))
        if (!p->name.contains(':')) targets.insert(element_saving_pct(p->map));
    return targets;
}

}  // namespace

std::vector<NamedMap> oracle_maps(const Settings& s, const std::vector<Probe>& first, std::int64_t step,
                                  const std::vector<double>& tolerances) {
    const std::vector<BudgetBlock> blocks = measured_blocks(s, first, step);
    LossPlanner planner;
    std::vector<NamedMap> maps;
    for (double target : budget_targets(first, step)) {
        if (target <= 0) continue;
        // A hair below the map's own saving: the map itself meets it, and so must the oracle.
        const LossPlan plan = planner.plan_budget(blocks, target - 1e-6, 0.0);
        if (plan.feasible) maps.emplace_back(oracle_budget_name(target), plan.precision);
    }
    for (double tolerance : tolerances) {
        const LossPlan plan = planner.plan_tolerance(blocks, std::max(0.0, tolerance), 0.0);
        maps.emplace_back(oracle_tolerance_name(tolerance), plan.precision);
    }
    return maps;
}

QString probe_config_json(const Settings& s) {
    // The agent profiles at every probe step (step 0 too) and writes every step's statistics, so
    // that the simulator can replay what it would have estimated there.
    const std::int64_t interval = std::max<std::int64_t>(1, probe_steps(s).front());
    return QString(
               "{\"selective_precision\": {\"log_decisions\": false, \"run_calibration\": false, "
               "\"snr_estimator\": \"sample\", \"telemetry_every_step\": true, "
               "\"distribution_interval_steps\": %1, \"update_interval_steps\": %1, \"warmup_steps\": 0}}")
        .arg(interval);
}

namespace {

// Per profiling step, each block's sensitivity product per format: the run's statistics replayed
// through the policy in mode static (every block stays BF16, every score and SNR is filled).
std::map<std::int64_t, std::map<int, PerFormat>> sensitivity_costs(const Settings& s, const std::string& text,
                                                                   const std::string& source) {
    auto j = nlohmann::json::parse(probe_config_json(s).toStdString());
    j["selective_precision"]["mode"] = "static";
    SimulationOptions options;
    options.config = config_from_json(j);
    std::istringstream in(text);
    const SimulationResult sim = simulate(in, source, options);
    std::map<std::int64_t, std::map<int, PerFormat>> out;
    for (const UpdateRecord& r : sim.records)
        for (const BlockDetail& d : r.block_details) {
            PerFormat cost = kNoSnr;
            for (Precision p : kAllPrecisions)
                cost[std::size_t(p)] = d.sensitivity * std::pow(10.0, -d.snr_db[std::size_t(p)] / 10.0);
            out[r.step_id][d.id] = cost;
        }
    return out;
}

}  // namespace

std::vector<Estimate> read_estimates(const Settings& s, const QString& telemetry) {
    QFile f(telemetry);
    if (!f.open(QIODevice::ReadOnly)) throw std::runtime_error("cannot read " + telemetry.toStdString());
    const std::string text = f.readAll().toStdString();
    const auto sensitivity = sensitivity_costs(s, text, telemetry.toStdString());
    // The loss estimates as the step lines carry them (the loss's units), in percent of that step's
    // loss: the policy's own percent needs a loss seen before the update, which step 0 lacks.
    std::vector<Estimate> out;
    JsonlReader reader(telemetry.toStdString());
    TelemetryRecord rec;
    while (reader.next(rec)) {
        const auto* stats = std::get_if<StepStatsRecord>(&rec);
        if (!stats || stats->loss_estimates.empty() || !stats->loss || !(*stats->loss > 0)) continue;
        const auto at = sensitivity.find(stats->step);
        for (const BlockLossEstimate& e : stats->loss_estimates)
            for (Precision p : kAllPrecisions) {
                const double loss = e.loss_delta[std::size_t(p)];
                if (p == Precision::bf16 || !std::isfinite(loss)) continue;
                double cost = std::numeric_limits<double>::quiet_NaN();
                if (at != sensitivity.end() && at->second.count(e.block_id))
                    cost = at->second.at(e.block_id)[std::size_t(p)];
                out.push_back({stats->step, e.block_id, p, 100.0 * loss / *stats->loss, cost});
            }
    }
    return out;
}

}  // namespace sp::experiment
