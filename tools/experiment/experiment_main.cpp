// sp-experiment: pretrains once, fine-tunes once per setting, precision scheme and seed, takes the
// paired measures, then writes the report.
// Usage: sp-experiment --out DIR [--seeds 1,...] [--pretrain-steps N] [--finetune-steps M] ...
// (README.md next to this file; --help lists every flag).
#include <CLI/CLI.hpp>

#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QGuiApplication>

#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "experiment.h"

namespace sp::experiment {
namespace {

// The flags, each declared once with its check and its help line: --help is generated from them.
// A failed check reads "FLAG: <what the check returned>".

std::vector<std::string> list_items(const std::string& text) {
    std::vector<std::string> items;
    for (const QString& item : QString::fromStdString(text).split(',', Qt::SkipEmptyParts))
        items.push_back(item.toStdString());
    return items;
}

std::string integer_problem(const std::string& text, long long lo, long long hi) {
    bool ok = false;
    const long long v = QString::fromStdString(text).toLongLong(&ok);
    if (ok && v >= lo && v <= hi) return {};
    return "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + text +
           "'";
}

// An integer in [lo, hi], handed on in canonical decimal (CLI11 itself reads "010" as octal).
CLI::Validator integer_in(long long lo, long long hi) {
    return CLI::Validator(
        [lo, hi](std::string& text) {
            std::string problem = integer_problem(text, lo, hi);
            if (problem.empty()) text = std::to_string(QString::fromStdString(text).toLongLong());
            return problem;
        },
        "");
}

// A finite number > 0, handed on in hexadecimal: CLI11 converts through long double, which can
// round a decimal twice.
CLI::Validator finite_positive() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            bool ok = false;
            const double v = QString::fromStdString(text).toDouble(&ok);
            if (!ok || !(v > 0) || !std::isfinite(v))
                return "expected a finite number > 0, got '" + text + "'";
            char hex[64];
            text =
                "0x" + std::string(hex, std::to_chars(hex, hex + sizeof hex, v, std::chars_format::hex).ptr);
            return {};
        },
        "");
}

// A comma-separated list, at least one item, each passing `item_problem`.
CLI::Validator list_of(const std::string& what,
                       const std::function<std::string(const std::string&)>& item_problem) {
    return CLI::Validator(
        [what, item_problem](std::string& text) {
            const std::vector<std::string> items = list_items(text);
            if (items.empty()) return "at least one " + what;
            for (const std::string& item : items)
                if (std::string problem = item_problem(item); !problem.empty()) return problem;
            return std::string();
        },
        "");
}

void declare_run_flags(CLI::App& app, Settings& s) {
    app.add_option_function<std::string>(
           "--out", [&s](const std::string& v) { s.out_dir = QString::fromStdString(v); },
           "output folder (required; created); per-run files go to DIR/runs")
        ->type_name("DIR");
    app.add_option_function<std::string>(
           "--seeds",
           [&s](const std::string& v) {
               s.seeds.clear();
               for (const std::string& seed : list_items(v))
                   s.seeds.push_back(QString::fromStdString(seed).toULongLong());
           },
           "fine-tune seeds: batch order and sampling")
        ->type_name("A,B,...")
        ->check(list_of("seed", [](const std::string& seed) { return integer_problem(seed, 0, 1LL << 62); }))
        ->default_str("6,7,8,9,10");
    app.add_option("--pretrain-steps", s.pretrain_steps, "BF16 pretraining steps")
        ->type_name("N")
        ->transform(integer_in(1, 10000000))
        ->capture_default_str();
    app.add_option("--finetune-steps", s.finetune_steps, "fine-tuning steps per scheme and seed")
        ->type_name("M")
        ->transform(integer_in(1, 1000000))
        ->capture_default_str();
    app.add_option_function<std::string>(
           "--modes",
           [&s](const std::string& v) {
               s.modes.clear();
               for (const std::string& mode : list_items(v)) s.modes << QString::fromStdString(mode);
           },
           "full, adapters or both")
        ->type_name("M,...")
        ->check(list_of("mode",
                        [](const std::string& mode) {
                            return mode == "full" || mode == "adapters"
                                       ? std::string()
                                       : "expected full and/or adapters, got '" + mode + "'";
                        }))
        ->default_str("adapters,full");
    app.add_option_function<std::string>(
           "--scopes",
           [&s](const std::string& v) {
               s.scopes.clear();
               for (const std::string& scope : list_items(v)) s.scopes << QString::fromStdString(scope);
           },
           "precision scopes, paired with --modes in order (one pairs with each)")
        ->type_name("S,...")
        ->check(list_of("scope",
                        [](const std::string& scope) {
                            return scope == "weights" || scope == "compute"
                                       ? std::string()
                                       : "expected weights and/or compute, got '" + scope + "'";
                        }))
        ->default_str("weights,compute");
    app.add_option("--adapter-rank", s.adapter_rank, "the adapters' rank")
        ->type_name("R")
        ->transform(integer_in(1, 4096))
        ->capture_default_str();
    app.add_option("--finetune-lr", s.finetune_lr, "the fine-tunes' peak learning rate")
        ->type_name("X")
        ->transform(finite_positive())
        ->capture_default_str();
}

void declare_measure_flags(CLI::App& app, Settings& s) {
    app.add_option("--probe-points", s.probe_points, "paired measures at K evenly spaced fine-tune steps")
        ->type_name("K")
        ->transform(integer_in(1, 1000))
        ->capture_default_str();
    app.add_option("--probe-batches", s.probe_batches, "held-out batches per paired measure")
        ->type_name("N")
        ->transform(integer_in(1, 1000))
        ->capture_default_str();
    app.add_option("--blocks", s.blocks, "transformer blocks")
        ->type_name("N")
        ->transform(integer_in(2, 1024))
        ->capture_default_str();
    app.add_option("--d-model", s.d_model, "model width")
        ->type_name("N")
        ->transform(integer_in(4, 65536))
        ->capture_default_str();
    app.add_option_function<std::string>(
           "--outlier-block",
           [&s](const std::string& v) {
               s.outlier_block = v == "none" ? std::nullopt : std::optional(std::stoi(v));
           },
           "the block with planted outlier features ('none': no plant)")
        ->type_name("B")
        ->transform(CLI::Validator(
            [](std::string& text) { return text == "none" ? std::string() : integer_in(0, 1023)(text); }, ""))
        ->default_str(std::to_string(*Settings().outlier_block));
    app.add_option("--outlier-scale", s.outlier_scale, "their factor")
        ->type_name("S")
        ->transform(finite_positive())
        ->capture_default_str();
    app.add_option_function<std::string>(
           "--schemes",
           [&s](const std::string& v) {
               s.schemes.clear();
               for (const std::string& key : list_items(v)) s.schemes << QString::fromStdString(key);
           },
           "only these schemes (keys as in results.csv; default all; bf16 is always run)")
        ->type_name("K,...");
    app.add_option("--jobs", s.jobs, "runs in parallel, one thread each")
        ->type_name("N")
        ->transform(integer_in(1, 64))
        ->capture_default_str();
    app.add_flag("--rerun", s.rerun, "ignore cached runs");
    app.add_option_function<std::string>(
           "--trainer", [&s](const std::string& v) { s.trainer = QString::fromStdString(v); },
           "sp-trainer to run (default: the one built with this tool)")
        ->type_name("PATH");
}

void declare_flags(CLI::App& app, Settings& s) {
    // A flag given twice takes its last value; a switch takes no value.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->disable_flag_override();
    app.allow_extras();  // refused afterwards, in sp-experiment's words
    declare_run_flags(app, s);
    declare_measure_flags(app, s);
    app.set_help_flag("-h,--help", "this text");
    app.get_formatter()->column_width(32);  // "--modes M,...=full,adapters" and a space
    app.footer("Exit status: 0 report written, 1 a run or the report failed, 2 a bad flag or value.");
}

std::string usage_text() {
    Settings defaults;
    CLI::App app(
        "Pretrains sp-trainer's model in BF16 on the first part of the bundled text, then fine-tunes\n"
        "it on the rest under every uniform format (BF16, INT8, FP8 E4M3, FP8 E5M2, INT4) and under\n"
        "Selective Precision (defaults, SNR tiers, budget, loss budget, tolerance), in two settings\n"
        "(adapters with weights-scope block-swap, full with compute scope), with outlier features\n"
        "planted in one block; measures the schemes' maps against BF16 on the same weights and batches\n"
        "(paired) beside the exact oracle and the agent's estimates; writes DIR/results.md,\n"
        "results.csv, paired.csv and the plots. Runs are cached in DIR/runs by their settings: a rerun\n"
        "recomputes only what changed.\n",
        "sp-experiment");
    declare_flags(app, defaults);
    return app.help();
}

[[noreturn]] void usage_error(const QString& what) {
    std::fprintf(stderr, "sp-experiment: %s\n%s", qPrintable(what), usage_text().c_str());
    std::exit(2);
}

std::string flag_name(const std::string& arg) {
    return arg.substr(0, arg.find('='));
}

// How many values `name` takes: 0 for a switch, -1 for no flag of sp-experiment's.
int values_taken(const CLI::App& app, const std::string& name) {
    const CLI::Option* option = app.get_option_no_throw(name);
    return option == nullptr ? -1 : option->get_items_expected_max();
}

// CLI11 reads "--flag=" as "--flag" and takes the next argument for the value (--out= --rerun would
// write to a folder named "--rerun"): the empty value goes on as an argument of its own.
std::vector<std::string> with_empty_values_apart(const CLI::App& app, const QStringList& arguments) {
    std::vector<std::string> args;
    for (const QString& argument : arguments) {
        std::string arg = argument.toStdString();
        const bool empty_value = arg.rfind("--", 0) == 0 && arg.find('=') == arg.size() - 1 &&
                                 values_taken(app, flag_name(arg)) > 0;
        args.push_back(empty_value ? flag_name(arg) : arg);
        if (empty_value) args.emplace_back();
    }
    return args;
}

// CLI11's ArgumentMismatch: a switch given a value (--rerun=1; CLI11 allows "=true"), or a flag
// that ends the command line without its value.
QString argument_mismatch_message(const CLI::App& app, const std::vector<std::string>& args) {
    for (const std::string& arg : args)
        if (arg.rfind("--", 0) == 0 && values_taken(app, flag_name(arg)) == 0 &&
            arg.find('=') != std::string::npos && arg.substr(arg.find('=') + 1) != "true")
            return QString::fromStdString(flag_name(arg)) + " takes no value";
    return args.empty() ? QString("a flag needs a value")
                        : QString::fromStdString(args.back()) + " needs a value";
}

// The first of what CLI11 kept aside (allow_extras): an unknown flag or a stray word.
QString extra_argument_message(const std::string& extra) {
    if (!extra.empty() && extra.front() == '-')
        return "unknown flag '" + QString::fromStdString(flag_name(extra)) + "'";
    return "unexpected argument '" + QString::fromStdString(extra) + "' (sp-experiment takes flags only)";
}

Settings parse_settings(const QStringList& arguments) {
    Settings s;
    s.trainer = QStringLiteral(SP_TRAINER_PATH);
    CLI::App app("", "sp-experiment");
    declare_flags(app, s);
    const std::vector<std::string> args = with_empty_values_apart(app, arguments.mid(1));
    try {
        app.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes them last first
    } catch (const CLI::CallForHelp&) {
        std::fputs(usage_text().c_str(), stdout);
        std::exit(0);
    } catch (const CLI::ArgumentMismatch&) {
        usage_error(argument_mismatch_message(app, args));
    } catch (const CLI::ParseError& e) {
        usage_error(e.what());
    }
    if (!app.remaining().empty()) usage_error(extra_argument_message(app.remaining().front()));
    if (s.out_dir.isEmpty()) usage_error("--out DIR is required");
    if (s.outlier_block && *s.outlier_block >= s.blocks)
        usage_error("--outlier-block must name one of the --blocks");
    if (s.d_model % 4 != 0) usage_error("--d-model must be divisible by 4 (the heads)");
    if (s.probe_points > s.finetune_steps) usage_error("--probe-points must not exceed --finetune-steps");
    if (s.modes.size() != s.scopes.size() && s.modes.size() > 1 && s.scopes.size() > 1)
        usage_error("--modes and --scopes: as many of each, or one of either (got " +
                    QString::number(s.modes.size()) + " and " + QString::number(s.scopes.size()) + ")");
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
                    s.scope = mode->scope;
                    RunResult r = run_finetune(s, pretrain, variants[v], settings.seeds[k]);
                    std::lock_guard<std::mutex> lock(print);
                    ++done;
                    all_ok = all_ok && r.ok;
                    if (r.ok)
                        std::printf(
                            "[%zu/%zu] %-16s %-22s seed %llu: eval %.4f -> %.4f, saved %.1f%%, %.0f s%s\n",
                            done, total, qPrintable(setting_name(s)), qPrintable(variants[v].label),
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
            s.scope = mode->scope;
            mode->paired = run_paired(s, pretrain, mode->schemes, settings.seeds.front());
            std::printf("paired measures, %s: %s\n", qPrintable(setting_name(s)),
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
        for (const auto& [mode, scope] : settings_of(settings)) modes.push_back({mode, scope, {}, {}});
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
