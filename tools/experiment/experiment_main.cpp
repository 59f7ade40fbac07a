// sp-experiment: runs sp-trainer once per precision scheme and seed, then writes the report.
// Usage: sp-experiment --out DIR [--seeds 1,2,3] [--steps N] [--schemes K,...] [--jobs N] ...
// (README.md next to this file; --help lists every flag).
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QGuiApplication>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "experiment.h"

namespace sp::experiment {
namespace {

constexpr const char* kUsage =
    "Usage: sp-experiment --out DIR [options]\n"
    "Trains sp-trainer's model under every uniform format (BF16, INT8, FP8 E4M3, FP8 E5M2, INT4) and\n"
    "under Selective Precision (seed defaults, SNR tiers, budget mode; with and without rollback) on the\n"
    "same data and seeds, with outlier features planted in one block, and writes DIR/results.md,\n"
    "results.csv, frontier.png and eval_loss.png. Runs are cached in DIR/runs by their settings: a rerun\n"
    "recomputes only what changed.\n\n"
    "  --out DIR            output folder (created); per-run files go to DIR/runs\n"
    "  --seeds A,B,...      seeds (default 1,2,3)\n"
    "  --steps N            training steps per run (default 350)\n"
    "  --blocks N           transformer blocks (default 8)\n"
    "  --d-model N          model width (default 128)\n"
    "  --outlier-block B    the block with planted outlier features (default 3; 'none': no plant)\n"
    "  --outlier-scale S    their factor (default 64)\n"
    "  --eval-every N       held-out loss every N steps (default 50)\n"
    "  --schemes K,...      only these schemes (keys as in results.csv; default all; bf16 is always run)\n"
    "  --jobs N             runs in parallel, one thread each (default 2)\n"
    "  --rerun              ignore cached runs\n"
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
        } else if (flag == "--steps") {
            s.steps = to_integer(flag, v, 10, 1000000);
        } else if (flag == "--blocks") {
            s.blocks = int(to_integer(flag, v, 2, 1024));
        } else if (flag == "--d-model") {
            s.d_model = int(to_integer(flag, v, 4, 65536));
        } else if (flag == "--outlier-block") {
            s.outlier_block =
                v == "none" ? std::nullopt : std::optional<int>(int(to_integer(flag, v, 0, 1023)));
        } else if (flag == "--outlier-scale") {
            s.outlier_scale = to_positive(flag, v);
        } else if (flag == "--eval-every") {
            s.eval_every = to_integer(flag, v, 1, 1000000);
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

    const std::vector<Variant> variants = chosen_variants(settings);
    std::vector<VariantResult> results;
    std::vector<std::pair<std::size_t, std::size_t>> jobs;  // (variant, seed index)
    try {
        for (std::size_t v = 0; v < variants.size(); ++v) {
            write_config(settings, variants[v]);
            results.push_back({variants[v], std::vector<RunResult>(settings.seeds.size())});
            for (std::size_t k = 0; k < settings.seeds.size(); ++k) jobs.emplace_back(v, k);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sp-experiment: %s\n", e.what());
        return 1;
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
                std::printf("[%zu/%zu] %-30s seed %llu: eval %.4f, saved %.1f%%, %lld rollbacks, %.0f s%s\n",
                            done, jobs.size(), qPrintable(variants[v].label),
                            static_cast<unsigned long long>(r.seed), r.final_eval, r.saving_pct,
                            static_cast<long long>(r.rollbacks), r.wall_s, r.cached ? " (cached)" : "");
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
    std::printf("\n%s\nwrote %s/results.md, results.csv, frontier.png, eval_loss.png in %.0f s\n",
                qPrintable(table), qPrintable(settings.out_dir), double(total.elapsed()) / 1000.0);
    return 0;
}
