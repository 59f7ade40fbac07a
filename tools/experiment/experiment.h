#pragma once
// sp-experiment: trains the same model, data and seeds under every precision scheme and reports
// what each one costs in loss and saves in bytes (README.md next to this file). This header holds
// what the runner measures and the report prints:
//   experiment_main.cpp    flags, the job queue, the console;
//   experiment_runs.cpp    the schemes and one sp-trainer run (with its cache);
//   experiment_report.cpp  results.md (table and verdict) and results.csv;
//   experiment_plots.cpp   frontier.png and eval_loss.png.
#include <QString>
#include <QStringList>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sp/precision.h"

namespace sp::experiment {

struct Settings {
    QString out_dir;
    QString trainer;  // the sp-trainer executable
    std::vector<std::uint64_t> seeds = {1, 2, 3};
    std::int64_t steps = 350;
    int blocks = 8;
    int d_model = 128;
    std::optional<int> outlier_block = 3;  // sp-trainer --outlier-block; unset: no plant
    double outlier_scale = 64.0;           // sp-trainer --outlier-scale
    std::int64_t eval_every = 50;
    int jobs = 2;
    QStringList schemes;  // keys to run; empty: all
    bool rerun = false;   // ignore cached runs
};

// How a scheme routes: every block in one format, or the policy.
enum class Family : std::uint8_t { uniform, selective };

// One row of the table: a precision scheme.
struct Variant {
    QString key;    // file names, the CSV, --schemes
    QString label;  // the table and the plots
    Family family = Family::selective;
    QStringList trainer_args;
    QString config_json;  // the --config file's content
};

using BlockSteps = std::array<std::int64_t, kPrecisionCount>;  // block-steps per format

// What one sp-trainer run measured (from its --summary-json and its telemetry).
struct RunResult {
    std::uint64_t seed = 0;
    bool ok = false;
    bool cached = false;  // read back from an earlier run with the same settings
    QString error;
    double final_eval = 0.0;
    double saving_pct = 0.0;  // bytes copied vs the same copies in BF16, whole run
    double wall_s = 0.0;      // the process, as the driver timed it
    std::int64_t switches = 0;
    std::int64_t rollbacks = 0;  // "rollback" events in the telemetry
    BlockSteps block_steps{};    // all blocks
    BlockSteps outlier_steps{};  // the planted block alone (zero without a plant)
    std::vector<std::pair<std::int64_t, double>> eval_curve;
    std::vector<std::int64_t> rollback_steps;
};

struct VariantResult {
    Variant variant;
    std::vector<RunResult> runs;  // one per seed, in Settings::seeds order
};

// Every scheme, in table order.
std::vector<Variant> make_variants(const Settings& s);
// Writes the scheme's config file into OUT/runs (once per scheme, before the runs).
void write_config(const Settings& s, const Variant& v);
// Runs sp-trainer for one scheme and seed, or reads the result back when OUT/runs holds a run with
// exactly these settings (the trainer's bytes, its arguments and the config) and --rerun is off.
RunResult run_one(const Settings& s, const Variant& v, std::uint64_t seed);

// Writes results.md, results.csv, frontier.png and eval_loss.png into s.out_dir; returns the table.
QString write_report(const Settings& s, const std::vector<VariantResult>& results, double total_wall_s);

// ---- shared by the report and the plots ----
struct Spread {
    double mean = 0, lo = 0, hi = 0;
};
template <typename F>
Spread spread(const std::vector<RunResult>& runs, F value) {
    Spread s{0, 1e300, -1e300};
    for (const RunResult& r : runs) {
        const double v = value(r);
        s.mean += v / double(runs.size());
        s.lo = v < s.lo ? v : s.lo;
        s.hi = v > s.hi ? v : s.hi;
    }
    return s;
}
const VariantResult* find(const std::vector<VariantResult>& results, const QString& key);
// Per-seed relative difference of the final eval loss to all-BF16 with the same seed, in percent.
double delta_pct(const RunResult& r, const VariantResult& bf16);
void write_frontier_png(const QString& path, const Settings& s, const std::vector<VariantResult>& results);
void write_eval_png(const QString& path, const Settings& s, const std::vector<VariantResult>& results);

}  // namespace sp::experiment
