#pragma once
// sp-experiment: trains the same model, data and seeds under every precision scheme and reports
// what each one costs in loss and saves in bytes (README.md next to this file). This header holds
// what the runner measures and the report prints; experiment_main.cpp runs sp-trainer,
// experiment_report.cpp writes results.md, results.csv and eval_loss.png.
#include <QString>
#include <QStringList>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace sp::experiment {

struct Settings {
    QString out_dir;
    QString trainer;  // the sp-trainer executable
    std::vector<std::uint64_t> seeds = {1, 2};
    std::int64_t steps = 200;
    int blocks = 4;
    int d_model = 64;
    int harsh_block = 2;               // sp-trainer --harsh-block: the block whose INT8 is a planted fault
    double harsh_step = 16.0;          // its stochastic ternary grid's step, in row absmaxes
    std::int64_t planted_warmup = 50;  // warmup_steps of the calibration-off rows (README.md)
    std::int64_t eval_every = 20;
    int jobs = 2;
};

// One row of the table: a precision scheme.
struct Variant {
    QString key;    // file names and the CSV
    QString label;  // the table and the legend
    QStringList trainer_args;
    QString config_json;      // the --config file's content; "" -> no --config
    QString unavailable_why;  // non-empty: not run, reported as not available
};

// What one sp-trainer run measured (from its --summary-json and its telemetry).
struct RunResult {
    std::uint64_t seed = 0;
    bool ok = false;
    QString error;
    double final_eval = 0.0;
    double saving_pct = 0.0;  // bytes copied vs the same copies in BF16, whole run
    double int8_share = 0.0;  // share of block-steps in INT8
    double wall_s = 0.0;      // the process, as the driver timed it
    std::int64_t switches = 0;
    std::int64_t rollbacks = 0;  // "rollback" events in the telemetry
    std::vector<std::pair<std::int64_t, double>> eval_curve;
    std::vector<double> train_loss;
    std::vector<std::int64_t> rollback_steps;
};

struct VariantResult {
    Variant variant;
    std::vector<RunResult> runs;  // one per seed, in Settings::seeds order
};

std::vector<Variant> make_variants(const Settings& s);

// Writes results.md, results.csv and eval_loss.png into s.out_dir; returns the Markdown table.
QString write_report(const Settings& s, const std::vector<VariantResult>& results, double total_wall_s);

}  // namespace sp::experiment
