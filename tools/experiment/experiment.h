#pragma once
// sp-experiment: pretrains sp-trainer's model once in BF16, fine-tunes it under every precision
// scheme, in each setting (a fine-tuning mode in a precision scope) and with several seeds, measures every
// scheme's maps against all-BF16 on the same weights and batches (paired, noise-free), and reports what each
// scheme costs in loss and saves in bytes (README.md next to this file). This header holds what the runner
// measures and the report prints:
//   experiment_main.cpp          flags, the job queue, the console;
//   experiment_runs.cpp          the schemes and one sp-trainer run (with its cache);
//   experiment_paired.cpp        the probed maps and the probe runs;
//   experiment_oracle.cpp        the exact oracle's maps and the agent's estimates of the probed pairs;
//   experiment_report.cpp        results.md's fine-tune tables and verdicts, results.csv;
//   experiment_paired_report.cpp results.md's paired measures and transfer-time table, paired.csv;
//   experiment_plots.cpp         the PNGs.
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
    std::vector<std::uint64_t> seeds = {6, 7, 8, 9, 10};
    std::uint64_t pretrain_seed = 1;     // the pretrained model's initial weights and batches
    std::int64_t pretrain_steps = 2000;  // BF16, on the text's pretrain part
    std::int64_t finetune_steps = 100;   // per scheme and seed, on the fine-tune part
    // The settings: mode i runs in scope i (the headline first: block-swapped adapters); a single
    // mode or scope pairs with each of the other list (settings_of).
    QStringList modes = {"adapters", "full"};
    QStringList scopes = {"weights", "compute"};
    int adapter_rank = 8;
    double finetune_lr = 1e-3;
    int blocks = 16;
    int d_model = 64;
    std::optional<int> outlier_block = 3;  // sp-trainer --outlier-block; unset: no plant
    double outlier_scale = 64.0;           // sp-trainer --outlier-scale
    int probe_points = 4;                  // paired measures at this many steps of the fine-tune
    int probe_batches = 4;                 // held-out batches per paired measure
    int jobs = 2;
    QStringList schemes;  // keys to run; empty: all
    bool rerun = false;   // ignore cached runs
    // Set per setting by the driver: "full" or "adapters", and "weights" or "compute".
    QString mode;
    QString scope = "compute";
};

// One setting's name in file names and headings: "adapters-weights".
QString setting_name(const Settings& s);
// The (mode, scope) pairs to run, in order: zipped when the lists are as long, else every pair.
std::vector<std::pair<QString, QString>> settings_of(const Settings& s);

// The steps at which the paired measures are taken: probe_points evenly spaced, the last at the end.
std::vector<std::int64_t> probe_steps(const Settings& s);

// How a scheme routes: every block in one format, or the policy.
enum class Family : std::uint8_t { uniform, selective };

// One row of the table: a precision scheme.
struct Variant {
    QString key;    // file names, the CSV, --schemes
    QString label;  // the table and the plots
    Family family = Family::selective;
    QStringList trainer_args;
    QString config_json;  // the --config file's content
    QString estimator;    // the cost model it plans on: "loss", "sensitivity", empty for uniform ones
};

using BlockSteps = std::array<std::int64_t, kPrecisionCount>;  // block-steps per format
using PrecisionMap = std::vector<Precision>;

// What one sp-trainer run measured (from its --summary-json and its telemetry).
struct RunResult {
    std::uint64_t seed = 0;
    bool ok = false;
    bool cached = false;  // read back from an earlier run with the same settings
    QString error;
    double initial_eval = 0.0;  // before the first step: the checkpoint's loss on this run's eval set
    double final_eval = 0.0;
    double saving_pct = 0.0;  // bytes copied vs the same copies in BF16, whole run
    double wall_s = 0.0;      // the process, as the driver timed it
    std::int64_t switches = 0;
    std::int64_t rollbacks = 0;  // "rollback" events in the telemetry
    BlockSteps block_steps{};    // all blocks
    BlockSteps outlier_steps{};  // the planted block alone (zero without a plant)
    std::vector<std::pair<std::int64_t, double>> eval_curve;
    std::vector<std::int64_t> rollback_steps;
    // The map each probe step's weights were computed with (probe_steps order; from the telemetry).
    std::vector<PrecisionMap> maps_at_probes;
};

struct VariantResult {
    Variant variant;
    std::vector<RunResult> runs;  // one per seed, in Settings::seeds order
};

// One map measured against all-BF16 on the BF16 fine-tune's weights (sp-trainer --probe-maps).
struct Probe {
    std::int64_t step = 0;
    QString name;  // a scheme key, "single:B:FORMAT" or "oracle:K"
    PrecisionMap map;
    double gap_pct = 0, grad_rel_error = 0, grad_cosine = 0, saving_pct = 0;
};

// What the agent estimated for one (block, format) pair at a profiling step of the probed run: the
// loss-change estimate in percent of that step's loss (POLICY.md rule 23) and the sensitivity
// product s * 10^(-SNR/10) the greedy budget ranks by (rule 18).
struct Estimate {
    std::int64_t step = 0;
    int block = 0;
    Precision format = Precision::bf16;
    double loss_pct = 0, sensitivity_cost = 0;
};

// The paired measures of one setting.
struct Paired {
    std::uint64_t seed = 0;  // the BF16 fine-tune whose weights were probed
    std::vector<Probe> probes;
    std::vector<Estimate> estimates;  // at the probe steps the agent profiled
    bool ok = false;
    QString error;
};

struct ModeResult {
    QString mode;
    QString scope;
    std::vector<VariantResult> schemes;
    Paired paired;
};

// The BF16 pretraining run: the checkpoint every fine-tune starts from.
struct Pretrain {
    RunResult run;
    QString checkpoint;
};

// Every scheme, in table order.
std::vector<Variant> make_variants(const Settings& s);
// Writes the scheme's config file into OUT/runs (once per scheme, before the runs).
void write_config(const Settings& s, const Variant& v);
// The pretraining run (cached like the others); run.ok false with run.error when it failed.
Pretrain run_pretrain(const Settings& s);
// Fine-tunes the checkpoint under one scheme, mode (s.mode) and seed, or reads the result back when
// OUT/runs holds a run with exactly these settings (the trainer's bytes, its arguments, the config
// and the checkpoint's bytes) and --rerun is off.
RunResult run_finetune(const Settings& s, const Pretrain& pretrain, const Variant& v, std::uint64_t seed);
// The paired measures of the setting (s.mode, s.scope) on seed `seed`'s BF16 fine-tune: the uniform
// formats, every single-block map and the schemes' maps at the probe steps with the agent's
// estimates, then the exact oracle's maps.
Paired run_paired(const Settings& s, const Pretrain& pretrain, const std::vector<VariantResult>& schemes,
                  std::uint64_t seed);

// Writes results.md, results.csv, paired.csv and the PNGs into s.out_dir; returns the tables.
QString write_report(const Settings& s, const Pretrain& pretrain, const std::vector<ModeResult>& modes,
                     double total_wall_s);

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
QString mode_label(const QString& mode);
// The probes at `step` whose name starts with `prefix`.
std::vector<const Probe*> probes_at(const std::vector<Probe>& probes, std::int64_t step,
                                    const QString& prefix);

void write_frontier_png(const QString& path, const Settings& s, const std::vector<VariantResult>& results);
void write_eval_png(const QString& path, const Settings& s, const std::vector<VariantResult>& results);
void write_pretrain_png(const QString& path, const Settings& s, const Pretrain& pretrain);
void write_paired_png(const QString& path, const Settings& s, const ModeResult& mode);

}  // namespace sp::experiment
