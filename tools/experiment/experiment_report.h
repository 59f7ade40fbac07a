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
// "INT8 62%, BF16 38%": the share of block-steps per format, summed over the seeds, largest first.
QString format_shares(const std::vector<RunResult>& runs, BlockSteps RunResult::*which);

// results.md's "Paired measures" (goal 3) and "What the saved bytes buy"; paired.csv.
void write_paired_section(QTextStream& o, const Settings& s, const std::vector<ModeResult>& modes);
void write_transfer_section(QTextStream& o, const std::vector<ModeResult>& modes);
void write_paired_csv(const QString& path, const std::vector<ModeResult>& modes);

}  // namespace sp::experiment
