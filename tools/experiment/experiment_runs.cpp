// The schemes, and one sp-trainer run per scheme and seed, cached by its settings.
#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>

#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "experiment.h"
#include "sp/jsonl.h"

namespace sp::experiment {
namespace {

QString runs_dir(const Settings& s) {
    return QDir(s.out_dir).filePath("runs");
}

QString config_path(const Settings& s, const Variant& v) {
    return QDir(runs_dir(s)).filePath(v.key + ".config.json");
}

// The trainer's bytes: a rebuilt sp-trainer that computes anything differently invalidates every
// cached run, an identical rebuild none.
QString trainer_digest(const QString& path) {
    static std::map<QString, QString> known;
    if (auto it = known.find(path); it != known.end()) return it->second;
    QFile f(path);
    QCryptographicHash hash(QCryptographicHash::Sha256);
    if (!f.open(QIODevice::ReadOnly) || !hash.addData(&f))
        throw std::runtime_error("cannot read " + path.toStdString());
    return known[path] = QString::fromLatin1(hash.result().toHex());
}

QStringList trainer_args(const Settings& s, const Variant& v, std::uint64_t seed) {
    QStringList args = {"--steps",      QString::number(s.steps),
                        "--blocks",     QString::number(s.blocks),
                        "--d-model",    QString::number(s.d_model),
                        "--seed",       QString::number(seed),
                        "--threads",    "1",
                        "--eval-every", QString::number(s.eval_every),
                        "--config",     config_path(s, v),
                        "--no-network", "--quiet"};
    if (s.outlier_block)
        args << "--outlier-block" << QString::number(*s.outlier_block) << "--outlier-scale"
             << QString::number(s.outlier_scale, 'g', 17);
    return args + v.trainer_args;
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

// Fills r from the trainer's --summary-json and telemetry; throws on anything missing.
void read_results(const Settings& s, const QString& summary, const QString& telemetry, RunResult& r) {
    QFile f(summary);
    if (!f.open(QIODevice::ReadOnly)) throw std::runtime_error("no summary file " + summary.toStdString());
    const auto j = nlohmann::json::parse(f.readAll().toStdString());
    r.final_eval = j.at("final_eval_loss").get<double>();
    r.saving_pct = j.at("saving_pct").get<double>();
    r.switches = j.at("switches").get<std::int64_t>();
    r.eval_curve = j.at("eval_curve").get<std::vector<std::pair<std::int64_t, double>>>();
    r.block_steps = block_steps_from(j.at("block_steps"));
    if (s.outlier_block)
        r.outlier_steps = block_steps_from(j.at("block_steps_per_block").at(std::size_t(*s.outlier_block)));
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
    // calibration), and only the SNR tiers read the distribution statistics (profiled otherwise).
    const QString no_profile = ", \"distribution_interval_steps\": 0";
    auto uniform = [&](const char* key, const char* label, const char* precision) {
        return Variant{key,
                       label,
                       Family::uniform,
                       {"--precision", precision},
                       config(", \"run_calibration\": false" + no_profile)};
    };
    auto selective = [&](const char* key, const char* label, const QString& extra) {
        return Variant{key,
                       label,
                       Family::selective,
                       {"--precision", "policy"},
                       config(extra.contains("snr_tiers") ? extra : extra + no_profile)};
    };
    const QString tiers = ", \"snr_tiers\": true";
    const QString rollback = ", \"rollback_enabled\": true";
    auto budget = [&](int pct) {
        return ", \"mode\": \"budget\", \"budget_target_pct\": " + QString::number(pct) + tiers;
    };
    return {
        uniform("bf16", "All BF16", "bf16"),
        uniform("int8", "All INT8", "int8"),
        uniform("fp8_e4m3", "All FP8 E4M3", "fp8_e4m3"),
        uniform("fp8_e5m2", "All FP8 E5M2", "fp8_e5m2"),
        uniform("int4", "All INT4", "int4"),
        selective("sp", "SP, seed defaults", ""),
        selective("sp_tiers", "SP, SNR tiers", tiers),
        selective("sp_tiers_rollback", "SP, SNR tiers + rollback", tiers + rollback),
        selective("budget30", "SP budget 30%", budget(30)),
        selective("budget50", "SP budget 50%", budget(50)),
        selective("budget65", "SP budget 65%", budget(65)),
    };
}

void write_config(const Settings& s, const Variant& v) {
    QFile f(config_path(s, v));
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write " + f.fileName().toStdString());
    f.write(v.config_json.toUtf8());
}

RunResult run_one(const Settings& s, const Variant& v, std::uint64_t seed) {
    RunResult r;
    r.seed = seed;
    const QDir runs(runs_dir(s));
    const QString name = v.key + "-seed" + QString::number(seed);
    const QString summary = runs.filePath(name + ".json"), telemetry = runs.filePath(name + ".jsonl");
    const QString settings_path = runs.filePath(name + ".settings");
    const QStringList args =
        trainer_args(s, v, seed) + QStringList{"--telemetry", telemetry, "--summary-json", summary};
    // What the run depends on, as text: equal text, equal run (the trainer is deterministic for a
    // fixed seed and thread count).
    const QByteArray settings = ("trainer sha256 " + trainer_digest(s.trainer) + "\nargs " + args.join(' ') +
                                 "\nconfig " + v.config_json + "\n")
                                    .toUtf8();
    try {
        if (QFile cached(settings_path);
            !s.rerun && cached.open(QIODevice::ReadOnly) && cached.readAll() == settings) {
            QFile wall(runs.filePath(name + ".wall"));
            if (wall.open(QIODevice::ReadOnly)) r.wall_s = wall.readAll().toDouble();
            read_results(s, summary, telemetry, r);
            r.cached = r.ok = true;
            return r;
        }
    } catch (const std::exception&) {
        r = RunResult{};  // an unreadable cached run is run again
        r.seed = seed;
    }
    QFile::remove(settings_path);
    QFile::remove(summary);
    QFile::remove(telemetry);

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
    QFile log(runs.filePath(name + ".log"));
    if (log.open(QIODevice::WriteOnly)) log.write(p.readAll());
    if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
        r.error = name + ": sp-trainer exited with status " + QString::number(p.exitCode()) + " (see " +
                  log.fileName() + ")";
        return r;
    }
    try {
        read_results(s, summary, telemetry, r);
    } catch (const std::exception& e) {
        r.error = name + ": " + e.what();
        return r;
    }
    QFile wall(runs.filePath(name + ".wall"));
    QFile done(settings_path);
    if (wall.open(QIODevice::WriteOnly)) wall.write(QByteArray::number(r.wall_s));
    if (done.open(QIODevice::WriteOnly)) done.write(settings);  // last: it marks the run complete
    r.ok = true;
    return r;
}

}  // namespace sp::experiment
