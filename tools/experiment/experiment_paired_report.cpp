// results.md's paired measures beside the exact oracle, its transfer-time table and paired.csv.
#include <QFile>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "experiment.h"
#include "experiment_oracle.h"
#include "experiment_report.h"

namespace sp::experiment {
namespace {

// The exact oracle's measured frontier at one step: (saving, gap) of its budget maps, from all-BF16.
std::vector<std::pair<double, double>> oracle_points(const Paired& paired, std::int64_t step) {
    std::vector<std::pair<double, double>> points = {{0.0, 0.0}};
    for (const Probe* p : probes_at(paired.probes, step, kOracleBudgetPrefix))
        points.emplace_back(p->saving_pct, p->gap_pct);
    std::sort(points.begin(), points.end());
    return points;
}

QString label_of(const ModeResult& m, const QString& name) {
    const VariantResult* v = find(m.schemes, name);
    return v ? v->variant.label : name;
}

void paired_table(QTextStream& o, const Settings& s, const ModeResult& m) {
    const std::vector<std::int64_t> steps = probe_steps(s);
    o << "| Map |";
    for (std::int64_t step : steps) o << " step " << step << ": gap (saved) |";
    o << " gradient rel. error, cosine (step " << steps.back()
      << ") | exact oracle's gap at equal bytes (step " << steps.back() << ") |\n|---|";
    for (std::size_t i = 0; i <= steps.size() + 1; ++i) o << "---|";
    o << "\n";
    const auto last_oracle = oracle_points(m.paired, steps.back());
    for (const Probe* last : probes_at(m.paired.probes, steps.back(), "")) {
        if (last->name.contains(':')) continue;  // single-block and oracle maps: paired.csv
        o << "| " << label_of(m, last->name) << " |";
        for (std::int64_t step : steps)
            for (const Probe* p : probes_at(m.paired.probes, step, last->name))
                if (p->name == last->name)
                    o << " " << num(p->gap_pct, 3) << "% (" << num(p->saving_pct, 1) << "%) |";
        o << " " << num(last->grad_rel_error, 4) << ", " << num(last->grad_cosine, 5) << " | ";
        const auto oracle =
            probes_at(m.paired.probes, steps.back(), oracle_budget_name(element_saving_pct(last->map)));
        o << (oracle.empty() ? QString("—") : num(oracle.front()->gap_pct, 3) + "%") << " |\n";
    }
    o << "| Exact oracle (step " << steps.back() << ") |";
    for (std::size_t i = 0; i < steps.size(); ++i) o << " |";
    o << " | ";
    QStringList points;
    for (const auto& [saving, gap] : last_oracle)
        if (saving > 0) points << num(gap, 3) + "% at " + num(saving, 1) + "%";
    o << points.join("; ") << " |\n";
}

}  // namespace

void write_paired_section(QTextStream& o, const Settings& s, const std::vector<ModeResult>& modes) {
    QStringList steps;
    for (std::int64_t step : probe_steps(s)) steps << QString::number(step);
    o << "## Paired measures: the same weights, the same batches\n\n"
      << "On seed " << (modes.empty() ? 0 : modes.front().paired.seed)
      << "'s all-BF16 fine-tune (the agent profiling at the probe steps, routing nothing), after steps "
      << steps.join(", ") << ", sp-trainer `--probe-maps` runs the forward and backward passes on "
      << s.probe_batches
      << " held-out batches under all-BF16 and under each map, on the same weights (training continues "
         "unchanged). **Gap** is the eval loss under the map against BF16's, in percent; the gradient's "
         "relative error and cosine are over every trainable parameter (all of them in a full fine-tune, the "
         "adapters with adapters). The maps: every uniform format, each scheme's map at that step (what its "
         "own fine-tune on that seed computed with), every block alone in every low format (step 0 too), and "
         "the **exact oracle**: the product's own exact planner (POLICY.md rule 23) given the measured "
         "single-block gaps as its costs (gaps below zero count as zero), planned for savings of 25, 50, 55, "
         "60, 65 and 70% and for each scheme's map's saving (by element widths: the oracle at equal bytes), "
         "and for tolerances of 0.25%, 0.5% and each tolerance scheme's measured gap; each oracle map is "
         "then measured whole. It is the frontier a perfect single-block cost model reaches. Every measure "
         "is in `paired.csv`.\n\n";
    for (const ModeResult& m : modes) {
        Settings ms = s;
        ms.mode = m.mode;
        ms.scope = m.scope;
        o << "### " << m.mode << " + " << m.scope << "\n\n";
        paired_table(o, s, m);
        o << "\n![paired, " << setting_name(ms) << "](paired_" << setting_name(ms) << ".png)\n\n";
    }
}

void write_transfer_section(QTextStream& o, const std::vector<ModeResult>& modes) {
    const ModeResult* m = nullptr;
    for (const ModeResult& mode : modes)
        if (!m || mode.mode == "adapters") m = &mode;
    if (!m) return;
    // Nominal per-direction rates: 16 and 32 GT/s per lane, 16 lanes, 128b/130b encoding.
    constexpr double kPcie4 = 31.5e9, kPcie5 = 63.0e9;
    constexpr double kLoadsPerStep =
        2.0;  // each block streamed in for the forward and again for the backward
    const std::pair<const char*, double> models[] = {{"7B", 7e9}, {"13B", 13e9}};
    o << "## What the saved bytes buy\n\n"
      << "Block-swapped fine-tuning keeps a model's blocks in host memory and streams each one to the GPU "
         "when "
         "it is needed: by assumption twice per step (forward, then backward), BF16 weights at 2 bytes per "
         "parameter, every parameter in a streamed block (7B and 13B parameters; embeddings included, a few "
         "percent). Transfer time per step = parameters × 2 bytes × (1 − saving) × 2 loads / link rate, with "
         "the "
         "links' **nominal** rates (no link was measured: no GPU was lent to the session that ran this): "
         "PCIe "
         "4.0 x16 31.5 GB/s and 5.0 x16 63.0 GB/s per direction. Real links reach roughly 80–90% of that, "
         "which "
         "scales every time up alike. The saving is each scheme's mean over the seeds of the "
      << m->mode
      << " fine-tune; a step whose compute is shorter than its transfers runs at the transfer time, so the "
         "saved seconds are saved step time there.\n\n"
      << "| Scheme | Bytes saved | 7B, PCIe 4.0 | 7B, PCIe 5.0 | 13B, PCIe 4.0 | 13B, PCIe 5.0 |\n"
      << "|---|---|---|---|---|---|\n";
    for (const VariantResult& v : m->schemes) {
        const double saving = spread(v.runs, [](auto& r) { return r.saving_pct; }).mean;
        o << "| " << v.variant.label << " | " << num(saving, 1) << "% |";
        for (const auto& [name, params] : models)
            for (double rate : {kPcie4, kPcie5})
                o << " " << num(params * 2.0 * (1.0 - saving / 100.0) * kLoadsPerStep / rate, 2) << " s |";
        o << "\n";
    }
    o << "\n";
}

void write_paired_csv(const QString& path, const std::vector<ModeResult>& modes) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write " + path.toStdString());
    QTextStream o(&f);
    o << "mode,seed,step,map_name,map,saving_pct,gap_pct,grad_rel_error,grad_cosine,scope\n";
    for (const ModeResult& m : modes)
        for (const Probe& p : m.paired.probes) {
            QStringList formats;
            for (Precision format : p.map) formats << QString::fromStdString(std::string(to_string(format)));
            o << m.mode << ',' << m.paired.seed << ',' << p.step << ',' << p.name << ',' << formats.join(' ')
              << ',' << num(p.saving_pct, 4) << ',' << num(p.gap_pct, 5) << ',' << num(p.grad_rel_error, 6)
              << ',' << num(p.grad_cosine, 7) << ',' << m.scope << '\n';
        }
}

}  // namespace sp::experiment
