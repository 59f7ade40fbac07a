#pragma once
// The exact oracle's maps and the agent's estimates of the probed pairs (experiment_oracle.cpp), for
// the paired measures (experiment_paired.cpp) and the report (experiment_paired_report.cpp,
// experiment_estimate_report.cpp).
#include <QString>

#include <utility>
#include <vector>

#include "experiment.h"

namespace sp::experiment {

using NamedMap = std::pair<QString, PrecisionMap>;

QString format_key(Precision p);
// A map's saving by element widths (8 bits save 50%, 4 bits 75%), the planner's measure of bytes.
double element_saving_pct(const PrecisionMap& map);
// The prefix of every budget plan of the oracle: its measured frontier.
constexpr char kOracleBudgetPrefix[] = "oracle:budget:";
// "oracle:budget:65.625": the oracle's least-gap map saving at least that much (element widths).
QString oracle_budget_name(double element_saving);
// "oracle:tolerance:0.5000": the oracle's most-saving map whose single-block gaps sum to at most that.
QString oracle_tolerance_name(double tolerance_pct);

// The exact oracle at one step, from the first probe run's single-block gaps: the budget plans for a
// grid of savings and for every selective scheme's map at the step, and the tolerance plans for
// `tolerances` (percent).
std::vector<NamedMap> oracle_maps(const Settings& s, const std::vector<Probe>& first, std::int64_t step,
                                  const std::vector<double>& tolerances);

// The probe runs' config: the agent profiles at every probe step and writes every step's statistics.
QString probe_config_json(const Settings& s);
// What the agent estimated at each profiling step of a probe run, from its telemetry.
std::vector<Estimate> read_estimates(const Settings& s, const QString& telemetry);

}  // namespace sp::experiment
