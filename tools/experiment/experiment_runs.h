#pragma once
// One sp-trainer run with its cache (experiment_runs.cpp), for the drivers of the runs: the
// pretraining, the fine-tunes and the probe runs (experiment_paired.cpp).
#include <QString>
#include <QStringList>

#include "experiment.h"

namespace sp::experiment {

struct TrainerRun {
    QString name;      // OUT/runs/NAME.{json,jsonl,log,wall,settings}
    QStringList args;  // besides --summary-json and the telemetry flags
    bool telemetry = false;
    QString depends;      // what else the run depends on besides the trainer and its arguments
    QStringList outputs;  // files the run writes besides its own (removed before it runs again)
};

// Runs sp-trainer, or reads the run back when OUT/runs holds one with exactly these settings and
// --rerun is off. The result's seed is left for the caller.
RunResult run_trainer(const Settings& s, const TrainerRun& run);
QString runs_dir(const Settings& s);
// The fine-tune's command line for mode s.mode, a scheme's config and a seed (no --precision).
QStringList finetune_args(const Settings& s, const Pretrain& pretrain, const QString& config_key,
                          std::uint64_t seed);
QString checkpoint_key(const Pretrain& pretrain);

}  // namespace sp::experiment
