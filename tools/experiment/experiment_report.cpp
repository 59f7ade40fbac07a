// The experiment's report: a Markdown table with the verdict against the goals, computed from the
// numbers, and a per-run CSV. The plots are experiment_plots.cpp.
#include <QDir>
#include <QFile>
#include <QTextStream>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "experiment.h"

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

namespace {

QString num(double v, int decimals) {
    // A value that rounds to zero prints as 0, not as "-0.00".
    if (std::fabs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0.0;
    return QString::number(v, 'f', decimals);
}

// "2.2345 (2.2301 .. 2.2389)": the mean over the seeds and the range; just the value for one seed.
QString with_range(const Spread& s, int decimals, const QString& unit = {}) {
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

QString rollbacks_per_seed(const std::vector<RunResult>& runs) {
    QStringList parts;
    for (const RunResult& r : runs) parts << QString::number(r.rollbacks);
    return parts.join(", ");
}

Spread saved(const VariantResult& v) {
    return spread(v.runs, [](auto& r) { return r.saving_pct; });
}
Spread delta(const VariantResult& v, const VariantResult& bf16) {
    return spread(v.runs, [&](auto& r) { return delta_pct(r, bf16); });
}

QString markdown_table(const Settings& s, const std::vector<VariantResult>& results,
                       const VariantResult& bf16) {
    QString t;
    QTextStream o(&t);
    o << "| Scheme | Final eval loss | Δ vs all-BF16 | Bytes saved | Block-steps by format | "
      << (s.outlier_block ? QString("Block %1 (outliers)").arg(*s.outlier_block) : QString("—"))
      << " | Switches | Rollbacks (per seed) | Wall / run |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
    for (const VariantResult& vr : results) {
        o << "| " << vr.variant.label << " | "
          << with_range(spread(vr.runs, [](auto& r) { return r.final_eval; }), 4) << " | "
          << with_range(delta(vr, bf16), 2, "%") << " | " << with_range(saved(vr), 1, "%") << " | "
          << format_shares(vr.runs, &RunResult::block_steps) << " | "
          << format_shares(vr.runs, &RunResult::outlier_steps) << " | "
          << with_range(spread(vr.runs, [](auto& r) { return double(r.switches); }), 1) << " | "
          << rollbacks_per_seed(vr.runs) << " | "
          << num(spread(vr.runs, [](auto& r) { return r.wall_s; }).mean, 0) << " s |\n";
    }
    return t;
}

// Goal 1: for every uniform low format, some Selective Precision scheme saves at least as many
// bytes (mean over the seeds) with an eval-loss change below the uniform one on every seed's range
// (its worst seed better than the uniform format's best).
void frontier_verdict(QTextStream& o, const std::vector<VariantResult>& results, const VariantResult& bf16) {
    o << "**1. The frontier: for every uniform low format, a Selective Precision scheme that saves at least "
         "as "
         "many bytes with a lower eval loss, beyond the range between seeds.**\n\n";
    for (const VariantResult& u : results) {
        if (u.variant.family != Family::uniform || u.variant.key == "bf16") continue;
        const Spread us = saved(u), ud = delta(u, bf16);
        const VariantResult* best = nullptr;     // the dominating scheme with the lowest loss
        const VariantResult* closest = nullptr;  // else: the saving one with the lowest worst-seed loss
        for (const VariantResult& v : results) {
            if (v.variant.family != Family::selective || saved(v).mean < us.mean - 1e-9) continue;
            const Spread vd = delta(v, bf16);
            if (vd.hi < ud.lo && (!best || vd.mean < delta(*best, bf16).mean)) best = &v;
            if (!closest || vd.hi < delta(*closest, bf16).hi) closest = &v;
        }
        o << "- " << u.variant.label << " (saves " << num(us.mean, 1) << "%, Δ " << num(ud.lo, 2) << " .. "
          << num(ud.hi, 2) << "%): ";
        if (best)
            o << "**dominated** by " << best->variant.label << " (saves " << num(saved(*best).mean, 1)
              << "%, Δ " << num(delta(*best, bf16).lo, 2) << " .. " << num(delta(*best, bf16).hi, 2)
              << "%).\n";
        else if (closest)
            o << "**not dominated**; of the schemes saving as much, " << closest->variant.label
              << " comes closest (Δ " << num(delta(*closest, bf16).lo, 2) << " .. "
              << num(delta(*closest, bf16).hi, 2) << "%, short by "
              << num(delta(*closest, bf16).hi - ud.lo, 2) << " points).\n";
        else
            o << "**not dominated**; no Selective Precision scheme saves as many bytes.\n";
    }
}

// Goal 2: some scheme saves >= 50% of the bytes with eval loss within +1% of all-BF16, every seed.
void half_the_bytes_verdict(QTextStream& o, const std::vector<VariantResult>& results,
                            const VariantResult& bf16) {
    o << "\n**2. A Selective Precision scheme saving at least 50% of the bytes within +1% of all-BF16's eval "
         "loss "
         "(every seed).**\n\n";
    bool any = false;
    for (const VariantResult& v : results) {
        if (v.variant.family != Family::selective) continue;
        const Spread sv = saved(v), dv = delta(v, bf16);
        const bool met = sv.lo >= 50.0 && dv.hi <= 1.0;
        any = any || met;
        o << "- " << v.variant.label << ": saves " << num(sv.lo, 1) << " .. " << num(sv.hi, 1) << "%, Δ "
          << num(dv.lo, 2) << " .. " << num(dv.hi, 2) << "%: " << (met ? "**met**" : "not met") << ".\n";
    }
    o << "\n" << (any ? "Met." : "**Missed** by every scheme.") << "\n";
}

// Goal 3: the SNR tiers never route the planted block to INT8 or INT4.
void outlier_verdict(QTextStream& o, const Settings& s, const std::vector<VariantResult>& results) {
    if (!s.outlier_block) return;
    o << "\n**3. The SNR tiers never route the planted block " << *s.outlier_block
      << " to INT8 or INT4.**\n\n";
    for (const VariantResult& v : results) {
        if (v.variant.family != Family::selective || !v.variant.config_json.contains("snr_tiers")) continue;
        std::int64_t integer_steps = 0;
        for (const RunResult& r : v.runs)
            integer_steps +=
                r.outlier_steps[std::size_t(Precision::int8)] + r.outlier_steps[std::size_t(Precision::int4)];
        o << "- " << v.variant.label << ": " << integer_steps
          << " block-steps in INT8 or INT4 over all seeds ("
          << format_shares(v.runs, &RunResult::outlier_steps)
          << "): " << (integer_steps == 0 ? "**met**" : "**missed**") << ".\n";
    }
}

void write_csv(const QString& path, const Settings& s, const std::vector<VariantResult>& results,
               const VariantResult& bf16) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write " + path.toStdString());
    QTextStream o(&f);
    o << "scheme,label,family,seed,final_eval_loss,delta_vs_bf16_pct,bytes_saved_pct";
    for (Precision p : kAllPrecisions)
        o << ",block_steps_" << QString::fromStdString(std::string(to_string(p)));
    for (Precision p : kAllPrecisions)
        o << ",outlier_block_steps_" << QString::fromStdString(std::string(to_string(p)));
    o << ",switches,rollbacks,rollback_steps,wall_s\n";
    for (const VariantResult& vr : results) {
        for (const RunResult& r : vr.runs) {
            QStringList steps;
            for (auto step : r.rollback_steps) steps << QString::number(step);
            o << vr.variant.key << ",\"" << vr.variant.label << "\","
              << (vr.variant.family == Family::uniform ? "uniform" : "selective") << ',' << r.seed << ','
              << num(r.final_eval, 6) << ',' << num(delta_pct(r, bf16), 4) << ',' << num(r.saving_pct, 4);
            for (auto n : r.block_steps) o << ',' << n;
            for (auto n : r.outlier_steps) o << ',' << (s.outlier_block ? QString::number(n) : QString());
            o << ',' << r.switches << ',' << r.rollbacks << ",\"" << steps.join(' ') << "\","
              << num(r.wall_s, 1) << '\n';
        }
    }
}

// How long the experiment took: this invocation, and the runs as they were measured (cached runs
// keep the wall time of the invocation that ran them).
QString timing(const Settings& s, const std::vector<VariantResult>& results, double total_wall_s) {
    std::size_t runs = 0, cached = 0;
    double run_wall = 0;
    for (const VariantResult& v : results)
        for (const RunResult& r : v.runs) {
            ++runs;
            cached += r.cached ? 1 : 0;
            run_wall += r.wall_s;
        }
    QString t = QString("the %1 runs took %2 min of wall time together, about %3 min with %4 in parallel")
                    .arg(runs)
                    .arg(num(run_wall / 60.0, 1), num(run_wall / 60.0 / s.jobs, 1))
                    .arg(s.jobs);
    if (cached == 0) return t + "; this invocation took " + num(total_wall_s / 60.0, 1) + " min.";
    return t + " (as measured when they ran); this invocation read " + QString::number(cached) +
           " of them from the cache and took " + num(total_wall_s / 60.0, 1) + " min.";
}

}  // namespace

QString write_report(const Settings& s, const std::vector<VariantResult>& results, double total_wall_s) {
    const VariantResult* bf16 = find(results, "bf16");
    if (!bf16 || bf16->runs.empty()) throw std::runtime_error("the report needs the all-BF16 runs");
    const QDir out(s.out_dir);
    QString table = markdown_table(s, results, *bf16);

    QStringList seeds;
    for (auto seed : s.seeds) seeds << QString::number(seed);
    QFile md(out.filePath("results.md"));
    if (!md.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write results.md");
    QTextStream o(&md);
    o << "# Selective Precision against every uniform format\n\n"
      << "sp-trainer's byte-level GPT, " << s.blocks << " blocks, d_model " << s.d_model << ", " << s.steps
      << " steps, seeds " << seeds.join(", ") << "; every scheme trains the same model on the same batches. ";
    if (s.outlier_block)
        o << "Outlier features are planted in block " << *s.outlier_block << " (`--outlier-block "
          << *s.outlier_block << " --outlier-scale " << s.outlier_scale
          << "`): the same function in BF16, but three of its four linear "
          << "layers take inputs with 4 features " << s.outlier_scale << "× larger than the rest.";
    o << "\n\nA block in a format computes in it: its weights, each linear layer's input and the gradient "
         "arriving at "
         "each linear layer's output are rounded to the format (NOTES.md). Values are the mean over the "
         "seeds with "
         "the range in parentheses; Δ is per seed against all-BF16 with the same seed. Bytes saved are the "
         "bytes "
         "the runtime materialized over the whole run (initial load included) against the same copies in "
         "BF16. "
         "Block-steps by format are summed over the seeds. Wall time is per run, "
      << s.jobs << " runs in parallel; " << timing(s, results, total_wall_s) << "\n\n"
      << table << "\n## Against the goals\n\n";
    frontier_verdict(o, results, *bf16);
    half_the_bytes_verdict(o, results, *bf16);
    outlier_verdict(o, s, results);
    o << "\n![frontier](frontier.png)\n\n![eval loss](eval_loss.png)\n";
    md.close();
    write_csv(out.filePath("results.csv"), s, results, *bf16);
    write_frontier_png(out.filePath("frontier.png"), s, results);
    write_eval_png(out.filePath("eval_loss.png"), s, results);
    return table;
}

}  // namespace sp::experiment
