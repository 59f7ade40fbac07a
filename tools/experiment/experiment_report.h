#pragma once
// What the report's two halves share (experiment_report.cpp, experiment_paired_report.cpp).
#include <QString>
#include <QTextStream>

#include "experiment.h"

namespace sp::experiment {

// A number with `decimals` digits; a value that rounds to zero prints as 0, not "-0.00".
QString num(double v, int decimals);
// "2.2345 (2.2301 .. 2.2389)": the mean over the seeds and the range; just the value for one seed.
QString with_range(const Spread& s, int decimals, const QString& unit = {});
// A scheme's bytes saved over its seeds.
Spread saved(const VariantResult& v);
// "-0.12, 0.30, ...": its Δ against all-BF16, one value per seed, in seed order.
QString per_seed(const VariantResult& v, const VariantResult& bf16);
// "INT8 62%, BF16 38%": the share of block-steps per format, summed over the seeds, largest first.
QString format_shares(const std::vector<RunResult>& runs, BlockSteps RunResult::*which);

// results.md's "Paired measures" (goal 3) and "What the saved bytes buy"; paired.csv.
void write_paired_section(QTextStream& o, const Settings& s, const std::vector<ModeResult>& modes);
void write_transfer_section(QTextStream& o, const std::vector<ModeResult>& modes);
void write_paired_csv(const QString& path, const std::vector<ModeResult>& modes);

// The agent's estimates against the measured single-block gaps at one profiled probe step.
struct Correlation {
    std::int64_t step = 0;
    int pairs = 0;  // (block, format) pairs with an estimate and a gap
    double rho_loss = 0, rho_sensitivity = 0;
    double noise = 0;  // the probe's noise: the largest negative gap's size
    int above = 0;     // pairs whose gap clears the noise
    double rho_loss_above = 0, rho_sensitivity_above = 0;
    double median_ratio = 0;  // measured / estimated, over pairs estimated above zero
};
std::vector<Correlation> correlations(const ModeResult& m);
// results.md's "The estimate against the measured gaps" (experiment_estimate_report.cpp).
void write_estimate_section(QTextStream& o, const std::vector<ModeResult>& modes);
// results.md's "Against the goals" (experiment_goals.cpp).
void write_goals(QTextStream& o, const Settings& s, const std::vector<ModeResult>& modes);

}  // namespace sp::experiment
