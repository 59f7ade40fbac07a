// The experiment's report: per fine-tuning mode a Markdown table, the verdicts against the goals,
// computed from the numbers, and a per-run CSV. The paired measures' part is
// experiment_paired_report.cpp, the plots experiment_plots.cpp.
#include <QDir>
#include <QFile>
#include <QTextStream>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "experiment.h"
#include "experiment_report.h"

namespace sp::experiment {

const VariantResult* find(const std::vector<VariantResult>& results, const QString& key) {
    for (const auto& r : results)
        if (r.variant.key == key) return &r;
    return nullptr;
}

double delta_pct(const RunResult& r, const VariantResult& bf16) {
    for (const RunResult& b : bf16.runs)
        if (b.seed == r.seed) return 100.0 * (r.final_eval - b.final_eval) / b.final_eval;
    return std::numeric_limits<double>::quiet_NaN();
}

QString mode_label(const QString& mode) {
    return mode == "adapters" ? "adapters (frozen base in each block's format, low-rank adapters train)"
                              : "full (every parameter trains, re-quantized from fp32 masters every step)";
}

QString num(double v, int decimals) {
    // A value that rounds to zero prints as 0, not as "-0.00".
    if (std::fabs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0.0;
    return QString::number(v, 'f', decimals);
}

// "2.2345 (2.2301 .. 2.2389)": the mean over the seeds and the range; just the value for one seed.
QString with_range(const Spread& s, int decimals, const QString& unit) {
    if (num(s.lo, decimals) == num(s.hi, decimals)) return num(s.mean, decimals) + unit;
    return num(s.mean, decimals) + unit + " (" + num(s.lo, decimals) + " .. " + num(s.hi, decimals) + ")";
}

const char* const kFormatLabel[kPrecisionCount] = {"BF16", "INT8", "E4M3", "E5M2", "INT4"};

// "INT8 62%, BF16 38%": the share of block-steps per format, summed over the seeds, largest first.
QString format_shares(const std::vector<RunResult>& runs, BlockSteps RunResult::*which) {
    BlockSteps sum{};
    std::int64_t all = 0;
    for (const RunResult& r : runs)
        for (std::size_t p = 0; p < kPrecisionCount; ++p) {
            sum[p] += (r.*which)[p];
            all += (r.*which)[p];
        }
    if (all == 0) return "—";
    QStringList parts;
    std::vector<std::size_t> order = {0, 1, 2, 3, 4};
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return sum[a] > sum[b]; });
    for (std::size_t p : order)
        if (sum[p] > 0)
            parts << QString("%1 %2%").arg(kFormatLabel[p], num(100.0 * double(sum[p]) / double(all), 0));
    return parts.join(", ");
}

Spread saved(const VariantResult& v) {
    return spread(v.runs, [](auto& r) { return r.saving_pct; });
}

QString per_seed(const VariantResult& v, const VariantResult& bf16) {
    QStringList parts;
    for (const RunResult& r : v.runs) parts << num(delta_pct(r, bf16), 2);
    return parts.join(", ");
}

namespace {

QString markdown_table(const Settings& s, const std::vector<VariantResult>& results,
                       const VariantResult& bf16) {
    QString t;
    QTextStream o(&t);
    o << "| Scheme | Checkpoint eval loss | Fine-tuned eval loss | Δ vs all-BF16, per seed (%) | Bytes saved "
         "| "
         "Block-steps by format | "
      << (s.outlier_block ? QString("Block %1 (outliers)").arg(*s.outlier_block) : QString("—"))
      << " | Switches | Wall / run |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
    for (const VariantResult& vr : results) {
        o << "| " << vr.variant.label << " | "
          << with_range(spread(vr.runs, [](auto& r) { return r.initial_eval; }), 4) << " | "
          << with_range(spread(vr.runs, [](auto& r) { return r.final_eval; }), 4) << " | "
          << per_seed(vr, bf16) << " | " << with_range(saved(vr), 1, "%") << " | "
          << format_shares(vr.runs, &RunResult::block_steps) << " | "
          << format_shares(vr.runs, &RunResult::outlier_steps) << " | "
          << with_range(spread(vr.runs, [](auto& r) { return double(r.switches); }), 1) << " | "
          << num(spread(vr.runs, [](auto& r) { return r.wall_s; }).mean, 0) << " s |\n";
    }
    return t;
}

void write_csv(const QString& path, const Settings& s, const Pretrain& pretrain,
               const std::vector<ModeResult>& modes) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write " + path.toStdString());
    QTextStream o(&f);
    o << "phase,mode,scheme,label,family,seed,initial_eval_loss,final_eval_loss,delta_vs_bf16_pct,"
         "bytes_saved_pct";
    for (Precision p : kAllPrecisions)
        o << ",block_steps_" << QString::fromStdString(std::string(to_string(p)));
    for (Precision p : kAllPrecisions)
        o << ",outlier_block_steps_" << QString::fromStdString(std::string(to_string(p)));
    o << ",switches,rollbacks,rollback_steps,wall_s,gap_pct,scope,estimator\n";
    auto row = [&](const QString& phase, const ModeResult* m, const Variant& v, const RunResult& r,
                   const QString& delta, const QString& gap) {
        const QString mode = m ? m->mode : QString();
        QStringList steps;
        for (auto step : r.rollback_steps) steps << QString::number(step);
        o << phase << ',' << mode << ',' << v.key << ",\"" << v.label << "\","
          << (v.family == Family::uniform ? "uniform" : "selective") << ',' << r.seed << ','
          << num(r.initial_eval, 6) << ',' << num(r.final_eval, 6) << ',' << delta << ','
          << num(r.saving_pct, 4);
        for (auto n : r.block_steps) o << ',' << n;
        for (auto n : r.outlier_steps)
            o << ',' << (s.outlier_block && phase == "finetune" ? QString::number(n) : QString());
        o << ',' << r.switches << ',' << r.rollbacks << ",\"" << steps.join(' ') << "\"," << num(r.wall_s, 1)
          << ',' << gap << ',' << (m ? m->scope : QString()) << ',' << v.estimator << '\n';
    };
    row("pretrain", nullptr, Variant{"bf16", "All BF16", Family::uniform, {}, {}, {}}, pretrain.run, "", "");
    for (const ModeResult& m : modes) {
        const VariantResult& bf16 = *find(m.schemes, "bf16");
        const std::int64_t last = probe_steps(s).back();
        for (const VariantResult& vr : m.schemes)
            for (const RunResult& r : vr.runs) {
                // The paired gap of the scheme's final map, on the seed the measures were taken on.
                QString gap;
                if (r.seed == m.paired.seed && vr.variant.key == "bf16") gap = num(0.0, 4);
                for (const Probe* p : probes_at(m.paired.probes, last, vr.variant.key))
                    if (r.seed == m.paired.seed && p->name == vr.variant.key) gap = num(p->gap_pct, 4);
                row("finetune", &m, vr.variant, r, num(delta_pct(r, bf16), 4), gap);
            }
    }
}

// How long the experiment took: this invocation, and the runs as they were measured (cached runs
// keep the wall time of the invocation that ran them).
QString timing(const Settings& s, const Pretrain& pretrain, const std::vector<ModeResult>& modes,
               double total_wall_s) {
    std::size_t runs = 1, cached = pretrain.run.cached ? 1 : 0;
    double run_wall = 0;
    for (const ModeResult& m : modes)
        for (const VariantResult& v : m.schemes)
            for (const RunResult& r : v.runs) {
                ++runs;
                cached += r.cached ? 1 : 0;
                run_wall += r.wall_s;
            }
    QString t = QString(
                    "the pretraining took %1 min; the %2 fine-tunes took %3 min of wall time together, "
                    "about %4 min with %5 in parallel")
                    .arg(num(pretrain.run.wall_s / 60.0, 1))
                    .arg(runs - 1)
                    .arg(num(run_wall / 60.0, 1), num(run_wall / 60.0 / s.jobs, 1))
                    .arg(s.jobs);
    if (cached == 0) return t + "; this whole invocation took " + num(total_wall_s / 60.0, 1) + " min.";
    return t + " (as measured when they ran); this invocation read " + QString::number(cached) + " of the " +
           QString::number(runs) + " runs from the cache and took " + num(total_wall_s / 60.0, 1) + " min.";
}

QString seeds_text(const Settings& s) {
    QStringList seeds;
    for (auto seed : s.seeds) seeds << QString::number(seed);
    return seeds.join(", ");
}

void write_intro(QTextStream& o, const Settings& s, const Pretrain& pretrain,
                 const std::vector<ModeResult>& modes, double total_wall_s) {
    o << "# Selective Precision on a fine-tune: every scheme from the same pretrained model\n\n"
      << "sp-trainer's byte-level GPT, " << s.blocks << " blocks, d_model " << s.d_model
      << ". **Pretraining:** " << s.pretrain_steps << " steps in BF16 (seed " << s.pretrain_seed
      << ") on the bundled text's first 60% (`--text-part pretrain`: Genesis to Leviticus), eval loss "
      << num(pretrain.run.initial_eval, 4) << " → " << num(pretrain.run.final_eval, 4)
      << " on that part's held-out tail. **Fine-tuning:** " << s.finetune_steps
      << " steps from that checkpoint on the rest of the text (`--text-part finetune`: Numbers and "
         "Deuteronomy), peak learning rate "
      << s.finetune_lr
      << ", evaluated on the fine-tune part's held-out last 10%, which neither phase trains on; "
      << "seeds " << seeds_text(s) << " (a seed changes the batch order and the sampled evaluation batches, "
      << "never the checkpoint). ";
    if (s.outlier_block)
        o << "Outlier features are planted in block " << *s.outlier_block
          << " of the loaded model (`--outlier-block " << *s.outlier_block << " --outlier-scale "
          << s.outlier_scale
          << "`): the same function in BF16, but three of its four linear layers take inputs with 4 features "
          << s.outlier_scale << "× larger than the rest. ";
    QStringList settings;
    for (const ModeResult& m : modes) settings << m.mode + " + " + m.scope + " scope";
    o << "Settings: " << settings.join("; ") << ". Fine-tuning modes: " << mode_label("full") << "; "
      << mode_label("adapters") << ", rank " << s.adapter_rank
      << ", where a rounding error in the base is permanent. Precision scopes "
      << "(POLICY.md rule 22): **weights**, the block-swap setting, where a block's weights are stored in "
         "its format and computed with in BF16 (inputs and output gradients rounded to BF16 only); "
         "**compute**, where each linear layer's input and the gradient at its output are rounded to the "
         "block's format too. The Selective Precision schemes route from the first step (`warmup_steps: "
         "0`, POLICY.md rule 21), a choice made on seeds 1–5 (NOTES.md).\n\n"
      << "Values are the mean over the seeds with the range in parentheses; Δ is per seed against "
         "all-BF16 with the same seed, in seed order. Bytes saved are the weights' bytes the runtime "
         "materialized over the whole run against the same copies in BF16, in both scopes. Block-steps by "
         "format are summed over the seeds. Wall time is per run; "
      << timing(s, pretrain, modes, total_wall_s) << "\n\n![pretraining](pretrain.png)\n\n";
}

}  // namespace

QString write_report(const Settings& s, const Pretrain& pretrain, const std::vector<ModeResult>& modes,
                     double total_wall_s) {
    const QDir out(s.out_dir);
    QFile md(out.filePath("results.md"));
    if (!md.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write results.md");
    QTextStream o(&md);
    write_intro(o, s, pretrain, modes, total_wall_s);
    QString tables;
    for (const ModeResult& m : modes) {
        const VariantResult* bf16 = find(m.schemes, "bf16");
        if (!bf16 || bf16->runs.empty()) throw std::runtime_error("the report needs the all-BF16 runs");
        Settings ms = s;
        ms.mode = m.mode;
        ms.scope = m.scope;
        const QString name = setting_name(ms);
        const QString table = markdown_table(s, m.schemes, *bf16);
        tables += "Fine-tune, " + m.mode + " + " + m.scope + ":\n" + table + "\n";
        o << "## Fine-tune: " << m.mode << " + " << m.scope << " scope\n\n"
          << table << "\n![frontier, " << name << "](frontier_" << name << ".png)\n\n![eval loss, " << name
          << "](eval_loss_" << name << ".png)\n\n";
        write_frontier_png(out.filePath("frontier_" + name + ".png"), ms, m.schemes);
        write_eval_png(out.filePath("eval_loss_" + name + ".png"), ms, m.schemes);
    }
    write_paired_section(o, s, modes);
    write_estimate_section(o, modes);
    write_goals(o, s, modes);
    write_transfer_section(o, modes);
    md.close();
    write_csv(out.filePath("results.csv"), s, pretrain, modes);
    write_paired_csv(out.filePath("paired.csv"), modes);
    write_pretrain_png(out.filePath("pretrain.png"), s, pretrain);
    for (const ModeResult& m : modes) {
        Settings ms = s;
        ms.mode = m.mode;
        ms.scope = m.scope;
        write_paired_png(out.filePath("paired_" + setting_name(ms) + ".png"), ms, m);
    }
    return tables;
}

}  // namespace sp::experiment
