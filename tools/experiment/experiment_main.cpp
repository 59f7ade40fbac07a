// sp-experiment: pretrains once, fine-tunes once per mode, precision scheme and seed, takes the
// paired measures, then writes the report.
// Usage: sp-experiment --out DIR [--seeds 1,...] [--pretrain-steps N] [--finetune-steps M] ...
// (README.md next to this file; --help lists every flag).
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QGuiApplication>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "experiment.h"

namespace sp::experiment {
namespace {

constexpr const char* kUsage =
    "Usage: sp-experiment --out DIR [options]\n"
    "Pretrains sp-trainer's model in BF16 on the first part of the bundled text, then fine-tunes it on\n"
    "the rest under every uniform format (BF16, INT8, FP8 E4M3, FP8 E5M2, INT4) and under Selective\n"
    "Precision (seed defaults, SNR tiers, budget mode), in both fine-tuning modes (full, adapters), with\n"
    "outlier features planted in one block; measures the schemes' maps against BF16 on the same weights\n"
    "and batches (paired) with an oracle's frontier; writes DIR/results.md, results.csv, paired.csv and\n"
    "the plots. Runs are cached in DIR/runs by their settings: a rerun recomputes only what changed.\n\n"
    "  --out DIR             output folder (created); per-run files go to DIR/runs\n"
    "  --seeds A,B,...       fine-tune seeds: batch order and sampling (default 6,7,8,9,10)\n"
    "  --pretrain-steps N    BF16 pretraining steps (default 5000)\n"
    "  --finetune-steps M    fine-tuning steps per scheme and seed (default 100)\n"
    "  --modes M,...         full, adapters or both (default full,adapters)\n"
    "  --adapter-rank R      the adapters' rank (default 8)\n"
    "  --finetune-lr X       the fine-tunes' peak learning rate (default 0.001)\n"
    "  --probe-points K      paired measures at K evenly spaced fine-tune steps (default 5)\n"
    "  --probe-batches N     held-out batches per paired measure (default 4)\n"
    "  --blocks N            transformer blocks (default 8)\n"
    "  --d-model N           model width (default 128)\n"
    "  --outlier-block B     the block with planted outlier features (default 3; 'none': no plant)\n"
    "  --outlier-scale S     their factor (default 64)\n"
    "  --schemes K,...       only these schemes (keys as in results.csv; default all; bf16 is always run)\n"
    "  --jobs N              runs in parallel, one thread each (default 2)\n"
    "  --rerun               ignore cached runs\n"
    "  --trainer PATH        sp-trainer to run (default: the one built with this tool)\n";

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

double to_positive(const QString& flag, const QString& text) {
    bool ok = false;
    const double v = text.toDouble(&ok);
    if (!ok || !(v > 0) || !std::isfinite(v))
        usage_error(flag + ": expected a finite number > 0, got '" + text + "'");
    return v;
}

Settings parse_settings(const QStringList& args) {
    Settings s;
    s.trainer = QStringLiteral(SP_TRAINER_PATH);
    for (int i = 1; i < args.size(); ++i) {
        const QString& flag = args[i];
        if (flag == "--help" || flag == "-h") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (flag == "--rerun") {
            s.rerun = true;
            continue;
        }
        if (i + 1 >= args.size()) usage_error(flag + " needs a value (or is unknown)");
        const QString& v = args[++i];
        if (flag == "--out") {
            s.out_dir = v;
        } else if (flag == "--seeds") {
            s.seeds.clear();
            for (const QString& part : v.split(',', Qt::SkipEmptyParts))
                s.seeds.push_back(std::uint64_t(to_integer(flag, part, 0, 1LL << 62)));
            if (s.seeds.empty()) usage_error("--seeds: at least one seed");
        } else if (flag == "--pretrain-steps") {
            s.pretrain_steps = to_integer(flag, v, 1, 10000000);
        } else if (flag == "--finetune-steps") {
            s.finetune_steps = to_integer(flag, v, 1, 1000000);
        } else if (flag == "--modes") {
            s.modes = v.split(',', Qt::SkipEmptyParts);
            for (const QString& m : s.modes)
                if (m != "full" && m != "adapters")
                    usage_error("--modes: expected full and/or adapters, got '" + m + "'");
            if (s.modes.isEmpty()) usage_error("--modes: at least one mode");
        } else if (flag == "--adapter-rank") {
            s.adapter_rank = int(to_integer(flag, v, 1, 4096));
        } else if (flag == "--finetune-lr") {
            s.finetune_lr = to_positive(flag, v);
        } else if (flag == "--probe-points") {
            s.probe_points = int(to_integer(flag, v, 1, 1000));
        } else if (flag == "--probe-batches") {
            s.probe_batches = int(to_integer(flag, v, 1, 1000));
        } else if (flag == "--blocks") {
            s.blocks = int(to_integer(flag, v, 2, 1024));
        } else if (flag == "--d-model") {
            s.d_model = int(to_integer(flag, v, 4, 65536));
        } else if (flag == "--outlier-block") {
            s.outlier_block =
                v == "none" ? std::nullopt : std::optional<int>(int(to_integer(flag, v, 0, 1023)));
        } else if (flag == "--outlier-scale") {
            s.outlier_scale = to_positive(flag, v);
        } else if (flag == "--schemes") {
            s.schemes = v.split(',', Qt::SkipEmptyParts);
        } else if (flag == "--jobs") {
            s.jobs = int(to_integer(flag, v, 1, 64));
        } else if (flag == "--trainer") {
            s.trainer = v;
        } else {
            usage_error("unknown flag '" + flag + "'");
        }
    }
    if (s.out_dir.isEmpty()) usage_error("--out DIR is required");
    if (s.outlier_block && *s.outlier_block >= s.blocks)
        usage_error("--outlier-block must name one of the --blocks");
    if (s.d_model % 4 != 0) usage_error("--d-model must be divisible by 4 (the heads)");
    if (s.probe_points > s.finetune_steps) usage_error("--probe-points must not exceed --finetune-steps");
    return s;
}

// The schemes to run: all, or --schemes (unknown keys are an error) with all-BF16 added, which
// every comparison needs.
std::vector<Variant> chosen_variants(const Settings& s) {
    std::vector<Variant> all = make_variants(s), chosen;
    QStringList known;
    for (const Variant& v : all) known << v.key;
    for (const QString& key : s.schemes)
        if (!known.contains(key))
            usage_error("--schemes: unknown scheme '" + key + "' (known: " + known.join(", ") + ")");
    for (const Variant& v : all)
        if (s.schemes.isEmpty() || s.schemes.contains(v.key) || v.key == "bf16") chosen.push_back(v);
    return chosen;
}

// Runs the tasks on `jobs` threads, in order of their index.
void run_parallel(int jobs, const std::vector<std::function<void()>>& tasks) {
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
        for (std::size_t i = next++; i < tasks.size(); i = next++) tasks[i]();
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < std::min<int>(jobs, int(tasks.size())); ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
}

// Every fine-tune: each mode, scheme and seed. Returns false when a run failed.
bool run_finetunes(const Settings& settings, const Pretrain& pretrain, const std::vector<Variant>& variants,
                   std::vector<ModeResult>& modes) {
    std::vector<std::function<void()>> tasks;
    std::mutex print;
    std::size_t done = 0, total = 0;
    bool all_ok = true;
    for (ModeResult& m : modes)
        for (std::size_t v = 0; v < variants.size(); ++v) {
            m.schemes.push_back({variants[v], std::vector<RunResult>(settings.seeds.size())});
            for (std::size_t k = 0; k < settings.seeds.size(); ++k, ++total)
                tasks.push_back([&, v, k, mode = &m] {
                    Settings s = settings;
                    s.mode = mode->mode;
                    RunResult r = run_finetune(s, pretrain, variants[v], settings.seeds[k]);
                    std::lock_guard<std::mutex> lock(print);
                    ++done;
                    all_ok = all_ok && r.ok;
                    if (r.ok)
                        std::printf(
                            "[%zu/%zu] %-8s %-22s seed %llu: eval %.4f -> %.4f, saved %.1f%%, %.0f s%s\n",
                            done, total, qPrintable(s.mode), qPrintable(variants[v].label),
                            static_cast<unsigned long long>(r.seed), r.initial_eval, r.final_eval,
                            r.saving_pct, r.wall_s, r.cached ? " (cached)" : "");
                    else
                        std::printf("[%zu/%zu] FAILED %s\n", done, total, qPrintable(r.error));
                    std::fflush(stdout);
                    mode->schemes[v].runs[k] = std::move(r);
                });
        }
    run_parallel(settings.jobs, tasks);
    return all_ok;
}

// The paired measures of every mode, on the first seed's BF16 fine-tune.
bool run_all_paired(const Settings& settings, const Pretrain& pretrain, std::vector<ModeResult>& modes) {
    std::vector<std::function<void()>> tasks;
    tasks.reserve(modes.size());
    for (ModeResult& m : modes)
        tasks.push_back([&, mode = &m] {
            Settings s = settings;
            s.mode = mode->mode;
            mode->paired = run_paired(s, pretrain, mode->schemes, settings.seeds.front());
            std::printf("paired measures, %s: %s\n", qPrintable(s.mode),
                        mode->paired.ok ? qPrintable(QString::number(mode->paired.probes.size()) + " maps")
                                        : qPrintable("FAILED " + mode->paired.error));
            std::fflush(stdout);
        });
    run_parallel(settings.jobs, tasks);
    bool ok = true;
    for (const ModeResult& m : modes) ok = ok && m.paired.ok;
    return ok;
}

}  // namespace
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

    QElapsedTimer total;
    total.start();
    try {
        const std::vector<Variant> variants = chosen_variants(settings);
        for (const Variant& v : variants) write_config(settings, v);
        const Pretrain pretrain = run_pretrain(settings);
        if (!pretrain.run.ok) throw std::runtime_error(pretrain.run.error.toStdString());
        std::printf("pretrain: %lld steps, eval %.4f -> %.4f, %.0f s%s\n",
                    static_cast<long long>(settings.pretrain_steps), pretrain.run.initial_eval,
                    pretrain.run.final_eval, pretrain.run.wall_s, pretrain.run.cached ? " (cached)" : "");
        std::fflush(stdout);
        std::vector<ModeResult> modes;
        for (const QString& m : settings.modes) modes.push_back({m, {}, {}});
        if (!run_finetunes(settings, pretrain, variants, modes))
            throw std::runtime_error("some runs failed; no report written");
        if (!run_all_paired(settings, pretrain, modes))
            throw std::runtime_error("the paired measures failed; no report written");
        const QString tables = write_report(settings, pretrain, modes, double(total.elapsed()) / 1000.0);
        std::printf("\n%s\nwrote %s/results.md, results.csv, paired.csv and the plots in %.0f s\n",
                    qPrintable(tables), qPrintable(settings.out_dir), double(total.elapsed()) / 1000.0);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sp-experiment: %s\n", e.what());
        return 1;
    }
    return 0;
}
