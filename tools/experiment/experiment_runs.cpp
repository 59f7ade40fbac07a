// The schemes, the pretraining run and one fine-tune per scheme, mode and seed, cached by their
// settings.
#include <QCryptographicHash>
#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcess>

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "experiment.h"
#include "experiment_runs.h"
#include "sp/jsonl.h"

namespace sp::experiment {
QString runs_dir(const Settings& s) {
    return QDir(s.out_dir).filePath("runs");
}

namespace {

QString config_path(const Settings& s, const QString& key) {
    return QDir(runs_dir(s)).filePath(key + ".config.json");
}

// A file's bytes (the trainer, the checkpoint): a rebuilt sp-trainer that computes anything
// differently, or another checkpoint, invalidates every run that used it; an identical one none.
QString file_digest(const QString& path) {
    static std::mutex lock;
    static std::map<QString, std::pair<QDateTime, QString>> known;
    const QDateTime modified = QFileInfo(path).lastModified();
    std::lock_guard<std::mutex> guard(lock);
    if (auto it = known.find(path); it != known.end() && it->second.first == modified)
        return it->second.second;
    QFile f(path);
    QCryptographicHash hash(QCryptographicHash::Sha256);
    if (!f.open(QIODevice::ReadOnly) || !hash.addData(&f))
        throw std::runtime_error("cannot read " + path.toStdString());
    QString digest = QString::fromLatin1(hash.result().toHex());
    known[path] = {modified, digest};
    return digest;
}

QStringList model_args(const Settings& s) {
    return {"--blocks", QString::number(s.blocks), "--d-model", QString::number(s.d_model), "--no-network",
            "--quiet"};
}

BlockSteps block_steps_from(const nlohmann::json& by_format) {
    BlockSteps steps{};
    for (Precision p : kAllPrecisions)
        steps[std::size_t(p)] = by_format.at(std::string(to_string(p))).get<std::int64_t>();
    return steps;
}

// The telemetry says when the loss feedback rolled back; the summary must not contradict it.
void read_rollbacks(const QString& telemetry, RunResult& r) {
    JsonlReader reader(telemetry.toStdString());
    TelemetryRecord rec;
    while (reader.next(rec)) {
        if (const auto* e = std::get_if<EventRecord>(&rec); e && e->kind == "rollback")
            r.rollback_steps.push_back(e->step);
    }
    r.rollbacks = std::int64_t(r.rollback_steps.size());
}

PrecisionMap map_from(const nlohmann::json& names) {
    PrecisionMap map;
    for (const auto& n : names) {
        const auto p = parse_precision(n.get<std::string>());
        if (!p) throw std::runtime_error("unknown format in the summary's maps");
        map.push_back(*p);
    }
    return map;
}

// The map each probe step's weights were computed with: the last change at or before the step.
std::vector<PrecisionMap> maps_at(const Settings& s, const nlohmann::json& maps) {
    std::vector<PrecisionMap> out;
    for (std::int64_t step : probe_steps(s)) {
        PrecisionMap map;
        for (const auto& m : maps)
            if (m.at("step").get<std::int64_t>() <= step) map = map_from(m.at("map"));
        if (map.empty()) throw std::runtime_error("the summary has no map at step " + std::to_string(step));
        out.push_back(std::move(map));
    }
    return out;
}

// Fills r from the trainer's --summary-json (and telemetry, when given); throws on anything missing.
void read_results(const Settings& s, const QString& summary, const QString& telemetry, RunResult& r) {
    QFile f(summary);
    if (!f.open(QIODevice::ReadOnly)) throw std::runtime_error("no summary file " + summary.toStdString());
    const auto j = nlohmann::json::parse(f.readAll().toStdString());
    r.initial_eval = j.at("initial_eval_loss").get<double>();
    r.final_eval = j.at("final_eval_loss").get<double>();
    r.saving_pct = j.at("saving_pct").get<double>();
    r.switches = j.at("switches").get<std::int64_t>();
    r.eval_curve = j.at("eval_curve").get<std::vector<std::pair<std::int64_t, double>>>();
    r.block_steps = block_steps_from(j.at("block_steps"));
    if (s.outlier_block && !telemetry.isEmpty())
        r.outlier_steps = block_steps_from(j.at("block_steps_per_block").at(std::size_t(*s.outlier_block)));
    if (telemetry.isEmpty()) return;
    r.maps_at_probes = maps_at(s, j.at("maps"));
    read_rollbacks(telemetry, r);
    if (r.rollbacks != j.at("rollbacks").get<std::int64_t>())
        throw std::runtime_error("the summary's rollback count disagrees with the telemetry");
}

}  // namespace

std::vector<Variant> make_variants(const Settings& s) {
    // Every policy run caches its calibration in the output folder, never in the user's cache.
    const QString cache = QDir(runs_dir(s)).absoluteFilePath("calibration-cache");
    auto config = [&](const QString& extra) {
        return "{\"selective_precision\": {\"log_decisions\": false, \"calibration_cache_dir\": \"" + cache +
               "\"" + extra + "}}";
    };
    // What a scheme does not use it does not measure: the uniform baselines route nothing (no
    // calibration), and only the SNR tiers and the loss estimate read the distribution statistics.
    const QString no_profile = ", \"distribution_interval_steps\": 0";
    auto uniform = [&](const char* key, const char* label, const char* precision) {
        return Variant{key,
                       label,
                       Family::uniform,
                       {"--precision", precision},
                       config(", \"run_calibration\": false" + no_profile),
                       {}};
    };
    // Every run fine-tunes a trained model: the policy routes from the first step (POLICY.md,
    // "Fine-tuning"), as the uniform formats do, instead of waiting out the from-scratch warm-up.
    const QString finetune = ", \"warmup_steps\": 0";
    auto selective = [&](const QString& key, const QString& label, const QString& extra,
                         const char* estimator = "sensitivity") {
        return Variant{key,
                       label,
                       Family::selective,
                       {"--precision", "policy"},
                       config(finetune + (extra.contains("snr_tiers") ? extra : extra + no_profile)),
                       estimator};
    };
    const QString tiers = ", \"snr_tiers\": true";
    auto budget = [&](int pct) {
        return ", \"mode\": \"budget\", \"budget_target_pct\": " + QString::number(pct) + tiers;
    };
    // The loss estimate's two plans (rule 23), with the SNR tiers' floors as every budget row has.
    auto loss_budget = [&](int pct) {
        return selective("loss_budget" + QString::number(pct), "SP loss budget " + QString::number(pct) + "%",
                         budget(pct) + ", \"cost_estimator\": \"loss\"", "loss");
    };
    auto tolerance = [&](const char* pct) {
        return selective(QString("tolerance") + pct, QString("SP tolerance ") + pct + "%",
                         QString(", \"mode\": \"tolerance\", \"loss_tolerance_pct\": ") + pct + tiers,
                         "loss");
    };
    return {
        uniform("bf16", "All BF16", "bf16"),
        uniform("int8", "All INT8", "int8"),
        uniform("fp8_e4m3", "All FP8 E4M3", "fp8_e4m3"),
        uniform("fp8_e5m2", "All FP8 E5M2", "fp8_e5m2"),
        uniform("int4", "All INT4", "int4"),
        selective("sp", "SP, defaults", ""),
        selective("sp_tiers", "SP, SNR tiers", tiers),
        selective("budget50", "SP budget 50%", budget(50)),
        selective("budget65", "SP budget 65%", budget(65)),
        // Near all-INT4's saving.
        selective("budget70", "SP budget 70%", budget(70)),
        loss_budget(50),
        loss_budget(60),
        loss_budget(65),
        loss_budget(70),
        tolerance("0.25"),
        tolerance("0.5"),
    };
}

void write_config(const Settings& s, const Variant& v) {
    QFile f(config_path(s, v.key));
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write " + f.fileName().toStdString());
    f.write(v.config_json.toUtf8());
}

RunResult run_trainer(const Settings& s, const TrainerRun& run) {
    RunResult r;
    const QDir runs(runs_dir(s));
    const QString summary = runs.filePath(run.name + ".json");
    const QString telemetry = run.telemetry ? runs.filePath(run.name + ".jsonl") : QString();
    const QString settings_path = runs.filePath(run.name + ".settings");
    QStringList args = run.args + QStringList{"--summary-json", summary};
    args += run.telemetry ? QStringList{"--telemetry", telemetry} : QStringList{"--no-telemetry"};
    // What the run depends on, as text: equal text, equal run (the trainer is deterministic for a
    // fixed seed and thread count).
    const QByteArray settings =
        ("trainer sha256 " + file_digest(s.trainer) + "\nargs " + args.join(' ') + "\n" + run.depends + "\n")
            .toUtf8();
    try {
        if (QFile cached(settings_path);
            !s.rerun && cached.open(QIODevice::ReadOnly) && cached.readAll() == settings) {
            QFile wall(runs.filePath(run.name + ".wall"));
            if (wall.open(QIODevice::ReadOnly)) r.wall_s = wall.readAll().toDouble();
            read_results(s, summary, telemetry, r);
            r.cached = r.ok = true;
            return r;
        }
    } catch (const std::exception&) {
        r = RunResult{};  // an unreadable cached run is run again
    }
    for (const QString& output : QStringList{settings_path, summary, telemetry} + run.outputs)
        if (!output.isEmpty()) QFile::remove(output);

    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    QElapsedTimer timer;
    timer.start();
    p.start(s.trainer, args);
    if (!p.waitForStarted(60000)) {
        r.error = "could not start " + s.trainer;
        return r;
    }
    p.waitForFinished(-1);
    r.wall_s = double(timer.elapsed()) / 1000.0;
    QFile log(runs.filePath(run.name + ".log"));
    if (log.open(QIODevice::WriteOnly)) log.write(p.readAll());
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
        r.error = run.name + ": sp-trainer exited with status " + QString::number(p.exitCode()) + " (see " +
                  log.fileName() + ")";
        return r;
    }
    try {
        read_results(s, summary, telemetry, r);
    } catch (const std::exception& e) {
        r.error = run.name + ": " + e.what();
        return r;
    }
    QFile wall(runs.filePath(run.name + ".wall"));
    QFile done(settings_path);
    if (wall.open(QIODevice::WriteOnly)) wall.write(QByteArray::number(r.wall_s));
    if (done.open(QIODevice::WriteOnly)) done.write(settings);  // last: it marks the run complete
    r.ok = true;
    return r;
}

Pretrain run_pretrain(const Settings& s) {
    Pretrain pre;
    pre.checkpoint = QDir(runs_dir(s)).absoluteFilePath("pretrain.ckpt");
    const QString config =
        "{\"selective_precision\": {\"run_calibration\": false, "
        "\"distribution_interval_steps\": 0, \"log_decisions\": false}}";
    QFile f(config_path(s, "pretrain"));
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write " + f.fileName().toStdString());
    f.write(config.toUtf8());
    f.close();
    TrainerRun run;
    run.name = "pretrain";
    // One run alone: it may use every job's thread.
    run.args = model_args(s) + QStringList{"--steps",
                                           QString::number(s.pretrain_steps),
                                           "--seed",
                                           QString::number(s.pretrain_seed),
                                           "--threads",
                                           QString::number(s.jobs),
                                           "--eval-every",
                                           QString::number(std::max<std::int64_t>(1, s.pretrain_steps / 30)),
                                           "--text-part",
                                           "pretrain",
                                           "--precision",
                                           "bf16",
                                           "--config",
                                           config_path(s, "pretrain"),
                                           "--save-checkpoint",
                                           pre.checkpoint};
    run.depends = "config " + config;
    run.outputs = {pre.checkpoint};
    pre.run = run_trainer(s, run);
    pre.run.seed = s.pretrain_seed;
    if (pre.run.ok && !QFileInfo::exists(pre.checkpoint)) {
        pre.run.ok = false;
        pre.run.error = "the pretraining run wrote no checkpoint";
    }
    return pre;
}

QStringList finetune_args(const Settings& s, const Pretrain& pretrain, const QString& config_key,
                          std::uint64_t seed) {
    QStringList args = model_args(s) + QStringList{"--steps",
                                                   QString::number(s.finetune_steps),
                                                   "--seed",
                                                   QString::number(seed),
                                                   "--threads",
                                                   "1",
                                                   "--lr",
                                                   QString::number(s.finetune_lr, 'g', 17),
                                                   "--eval-every",
                                                   QString::number(probe_steps(s).front()),
                                                   "--text-part",
                                                   "finetune",
                                                   "--init-checkpoint",
                                                   pretrain.checkpoint,
                                                   "--finetune-mode",
                                                   s.mode,
                                                   "--precision-scope",
                                                   s.scope,
                                                   "--config",
                                                   config_path(s, config_key)};
    if (s.mode == "adapters") args << "--adapter-rank" << QString::number(s.adapter_rank);
    if (s.outlier_block)
        args << "--outlier-block" << QString::number(*s.outlier_block) << "--outlier-scale"
             << QString::number(s.outlier_scale, 'g', 17);
    return args;
}

QString checkpoint_key(const Pretrain& pretrain) {
    return "checkpoint sha256 " + file_digest(pretrain.checkpoint);
}

RunResult run_finetune(const Settings& s, const Pretrain& pretrain, const Variant& v, std::uint64_t seed) {
    TrainerRun run;
    run.name = setting_name(s) + "-" + v.key + "-seed" + QString::number(seed);
    run.args = finetune_args(s, pretrain, v.key, seed) + v.trainer_args;
    run.telemetry = true;
    run.depends = checkpoint_key(pretrain) + "\nconfig " + v.config_json;
    RunResult r = run_trainer(s, run);
    r.seed = seed;
    return r;
}

QString setting_name(const Settings& s) {
    return s.mode + "-" + s.scope;
}

std::vector<std::pair<QString, QString>> settings_of(const Settings& s) {
    std::vector<std::pair<QString, QString>> out;
    if (s.modes.size() == s.scopes.size()) {
        for (qsizetype i = 0; i < s.modes.size(); ++i) out.emplace_back(s.modes[i], s.scopes[i]);
        return out;
    }
    for (const QString& mode : s.modes)
        for (const QString& scope : s.scopes) out.emplace_back(mode, scope);
    return out;
}

std::vector<std::int64_t> probe_steps(const Settings& s) {
    std::vector<std::int64_t> steps;
    for (int k = 1; k <= s.probe_points; ++k) steps.push_back(s.finetune_steps * k / s.probe_points);
    return steps;
}

}  // namespace sp::experiment
