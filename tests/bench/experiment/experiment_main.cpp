// sp-experiment: runs sp-trainer once per precision scheme and seed, then writes the report.
// Usage: sp-experiment --out DIR [--seeds 1,2] [--steps N] [--jobs N] [--trainer PATH] ...
// (README.md next to this file; --help lists every flag).
#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QGuiApplication>
#include <QProcess>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "experiment.h"
#include "sp/jsonl.h"

namespace sp::experiment {
namespace {

constexpr const char* kUsage =
    "Usage: sp-experiment --out DIR [options]\n"
    "Trains sp-trainer's model under all-BF16, all-INT8, Selective Precision (with and without\n"
    "calibration, with and without loss-feedback rollback) on the same data and seeds, with one\n"
    "block's INT8 made harsh on purpose, and writes DIR/results.md, results.csv, eval_loss.png.\n\n"
    "  --out DIR            output folder (created); per-run files go to DIR/runs\n"
    "  --seeds A,B,...      seeds (default 1,2; at least one)\n"
    "  --steps N            training steps per run (default 200)\n"
    "  --blocks N           transformer blocks (default 4)\n"
    "  --d-model N          model width (default 64)\n"
    "  --harsh-block B      the block whose INT8 is a planted fault (default 2)\n"
    "  --harsh-step K       its INT8: stochastic ternary, step K x row absmax (default 16)\n"
    "  --planted-warmup N   warmup_steps of the calibration-off rows (default 50)\n"
    "  --eval-every N       held-out loss every N steps (default 20)\n"
    "  --jobs N             runs in parallel, one thread each (default 2)\n"
    "  --trainer PATH       sp-trainer to run (default: the one built with this tool)\n";

[[noreturn]] void usage_error(const QString& what) {
    std::fprintf(stderr, "sp-experiment: %s\n%s", qPrintable(what), kUsage);
    std::exit(2);
}

long long to_integer(const QString& flag, const QString& text, long long lo, long long hi) {
    bool ok = false;
    const long long v = text.toLongLong(&ok);
    if (!ok || v < lo || v > hi)
        usage_error(flag + ": expected an integer in " + QString::number(lo) + ".." + QString::number(hi) +
                    ", got '" + text + "'");
    return v;
}

Settings parse_settings(const QStringList& args) {
    Settings s;
    s.trainer = QStringLiteral(SP_TRAINER_PATH);
    for (int i = 1; i < args.size(); ++i) {
        const QString flag = args[i];
        if (flag == "--help" || flag == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (i + 1 >= args.size()) usage_error(flag + " needs a value (or is unknown)");
        const QString v = args[++i];
        if (flag == "--out") {
            s.out_dir = v;
        } else if (flag == "--seeds") {
            s.seeds.clear();
            for (const QString& part : v.split(',', Qt::SkipEmptyParts))
                s.seeds.push_back(std::uint64_t(to_integer(flag, part, 0, 1LL << 62)));
            if (s.seeds.empty()) usage_error("--seeds: at least one seed");
        } else if (flag == "--steps") {
            s.steps = to_integer(flag, v, 10, 1000000);
        } else if (flag == "--blocks") {
            s.blocks = int(to_integer(flag, v, 2, 1024));
        } else if (flag == "--d-model") {
            s.d_model = int(to_integer(flag, v, 4, 65536));
        } else if (flag == "--harsh-block") {
            s.harsh_block = int(to_integer(flag, v, 0, 1023));
        } else if (flag == "--harsh-step") {
            bool ok = false;
            s.harsh_step = v.toDouble(&ok);
            if (!ok || !(s.harsh_step > 0) || !std::isfinite(s.harsh_step))
                usage_error("--harsh-step: expected a finite number > 0, got '" + v + "'");
        } else if (flag == "--planted-warmup") {
            s.planted_warmup = to_integer(flag, v, 0, 1000000);
        } else if (flag == "--eval-every") {
            s.eval_every = to_integer(flag, v, 1, 1000000);
        } else if (flag == "--jobs") {
            s.jobs = int(to_integer(flag, v, 1, 64));
        } else if (flag == "--trainer") {
            s.trainer = v;
        } else {
            usage_error("unknown flag '" + flag + "'");
        }
    }
    if (s.out_dir.isEmpty()) usage_error("--out DIR is required");
    if (s.harsh_block >= s.blocks) usage_error("--harsh-block must name one of the --blocks");
    if (s.d_model % 4 != 0) usage_error("--d-model must be divisible by 4 (the heads)");
    return s;
}

QString run_name(const Variant& v, std::uint64_t seed) {
    return v.key + "-seed" + QString::number(seed);
}

// The telemetry says when the loss feedback rolled back; the summary cannot contradict it.
void read_rollbacks(const QString& telemetry, RunResult& r) {
    JsonlReader reader(telemetry.toStdString());
    TelemetryRecord rec;
    while (reader.next(rec)) {
        if (const auto* e = std::get_if<EventRecord>(&rec); e && e->kind == "rollback")
            r.rollback_steps.push_back(e->step);
    }
    r.rollbacks = std::int64_t(r.rollback_steps.size());
}

RunResult run_one(const Settings& s, const Variant& v, std::uint64_t seed) {
    RunResult r;
    r.seed = seed;
    const QDir runs(QDir(s.out_dir).filePath("runs"));
    const QString name = run_name(v, seed);
    const QString summary = runs.filePath(name + ".json"), telemetry = runs.filePath(name + ".jsonl");
    QStringList args = {"--steps",        QString::number(s.steps),
                        "--blocks",       QString::number(s.blocks),
                        "--d-model",      QString::number(s.d_model),
                        "--seed",         QString::number(seed),
                        "--harsh-block",  QString::number(s.harsh_block),
                        "--harsh-step",   QString::number(s.harsh_step, 'g', 17),
                        "--eval-every",   QString::number(s.eval_every),
                        "--threads",      "1",
                        "--no-network",   "--quiet",
                        "--telemetry",    telemetry,
                        "--summary-json", summary};
    if (!v.config_json.isEmpty()) {
        const QString config = runs.filePath(v.key + ".config.json");
        args << "--config" << config;
    }
    args << v.trainer_args;
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
    QFile f(summary);
    if (!f.open(QIODevice::ReadOnly)) {
        r.error = name + ": no summary file " + summary;
        return r;
    }
    try {
        const auto j = nlohmann::json::parse(f.readAll().toStdString());
        r.final_eval = j.at("final_eval_loss").get<double>();
        r.saving_pct = j.at("saving_pct").get<double>();
        r.int8_share = j.at("low_block_step_share").get<double>();
        r.switches = j.at("switches").get<std::int64_t>();
        r.eval_curve = j.at("eval_curve").get<std::vector<std::pair<std::int64_t, double>>>();
        r.train_loss = j.at("train_loss").get<std::vector<double>>();
        read_rollbacks(telemetry, r);
        if (r.rollbacks != j.at("rollbacks").get<std::int64_t>())
            throw std::runtime_error("the summary's rollback count disagrees with the telemetry");
    } catch (const std::exception& e) {
        r.error = name + ": " + e.what();
        return r;
    }
    r.ok = true;
    return r;
}

void write_configs(const Settings& s, const std::vector<Variant>& variants) {
    const QDir runs(QDir(s.out_dir).filePath("runs"));
    for (const Variant& v : variants) {
        if (v.config_json.isEmpty() || !v.unavailable_why.isEmpty()) continue;
        QFile f(runs.filePath(v.key + ".config.json"));
        if (!f.open(QIODevice::WriteOnly))
            throw std::runtime_error("cannot write " + f.fileName().toStdString());
        f.write(v.config_json.toUtf8());
    }
}

}  // namespace

std::vector<Variant> make_variants(const Settings& s) {
    // Every policy run caches its calibration in the output folder, never in the user's cache.
    const QString cache = QDir(QDir(s.out_dir).filePath("runs")).absoluteFilePath("calibration-cache");
    const QString warmup = ", \"warmup_steps\": " + QString::number(s.planted_warmup);
    auto config = [&](const QString& extra) {
        return "{\"selective_precision\": {\"log_decisions\": false, \"calibration_cache_dir\": \"" + cache +
               "\"" + extra + "}}";
    };
    return {
        // The uniform baselines need no calibration (nothing is routed); skipping it saves their setup.
        {"bf16", "All BF16", {"--precision", "bf16"}, config(", \"run_calibration\": false"), ""},
        {"int8", "All INT8", {"--precision", "int8"}, config(", \"run_calibration\": false"), ""},
        {"fp8", "All FP8", {}, "", "not available (the reference runtime materializes BF16 and INT8 only)"},
        {"sp", "Selective Precision (seed defaults)", {"--precision", "policy"}, config(""), ""},
        {"sp_rollback",
         "SP + rollback",
         {"--precision", "policy"},
         config(", \"rollback_enabled\": true"),
         ""},
        // The planted-sensitivity check: without calibration the policy cannot see the harsh block's
        // error; routing starts once the loss has left its steep descent (README.md).
        {"sp_nocal",
         "SP, calibration off",
         {"--precision", "policy"},
         config(", \"run_calibration\": false" + warmup),
         ""},
        {"sp_nocal_rollback",
         "SP, calibration off, + rollback",
         {"--precision", "policy"},
         config(", \"run_calibration\": false, \"rollback_enabled\": true" + warmup),
         ""},
        {"sp_fp8_rollback",
         "SP with FP8 tier + rollback",
         {},
         "",
         "not available (no FP8 tier in the policy yet)"},
        {"budget30", "Budget mode, 30% target", {}, "", "not available (no budget mode in the policy yet)"},
    };
}

}  // namespace sp::experiment

int main(int argc, char** argv) {
    using namespace sp::experiment;
    // QImage and QPainter need a QGuiApplication for fonts; no display is needed for that.
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QGuiApplication app(argc, argv);
    const Settings settings = parse_settings(app.arguments());
    if (!QFileInfo(settings.trainer).isExecutable())
        usage_error("--trainer: '" + settings.trainer + "' is not an executable");
    if (!QDir().mkpath(QDir(settings.out_dir).filePath("runs")))
        usage_error("--out: cannot create '" + settings.out_dir + "'");

    const std::vector<Variant> variants = make_variants(settings);
    write_configs(settings, variants);
    std::vector<VariantResult> results;
    std::vector<std::pair<std::size_t, std::size_t>> jobs;  // (variant, seed index)
    for (std::size_t v = 0; v < variants.size(); ++v) {
        results.push_back({variants[v], std::vector<RunResult>(settings.seeds.size())});
        if (!variants[v].unavailable_why.isEmpty()) {
            results.back().runs.clear();
            continue;
        }
        for (std::size_t k = 0; k < settings.seeds.size(); ++k) jobs.emplace_back(v, k);
    }

    QElapsedTimer total;
    total.start();
    std::atomic<std::size_t> next{0};
    std::mutex print;
    std::size_t done = 0;
    auto worker = [&] {
        for (std::size_t i = next++; i < jobs.size(); i = next++) {
            const auto [v, k] = jobs[i];
            RunResult r = run_one(settings, variants[v], settings.seeds[k]);
            std::lock_guard<std::mutex> lock(print);
            ++done;
            if (r.ok)
                std::printf("[%zu/%zu] %-34s seed %llu: eval %.4f, saved %.1f%%, %lld rollbacks, %.0f s\n",
                            done, jobs.size(), qPrintable(variants[v].label),
                            static_cast<unsigned long long>(r.seed), r.final_eval, r.saving_pct,
                            static_cast<long long>(r.rollbacks), r.wall_s);
            else
                std::printf("[%zu/%zu] FAILED %s\n", done, jobs.size(), qPrintable(r.error));
            std::fflush(stdout);
            results[v].runs[k] = std::move(r);
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < std::min<int>(settings.jobs, int(jobs.size())); ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();

    bool all_ok = true;
    for (const auto& vr : results)
        for (const auto& r : vr.runs) all_ok = all_ok && r.ok;
    if (!all_ok) {
        std::fprintf(stderr, "sp-experiment: some runs failed; no report written\n");
        return 1;
    }
    const QString table = write_report(settings, results, double(total.elapsed()) / 1000.0);
    std::printf("\n%s\nwrote %s/results.md, results.csv, eval_loss.png in %.0f s\n", qPrintable(table),
                qPrintable(settings.out_dir), double(total.elapsed()) / 1000.0);
    return 0;
}
