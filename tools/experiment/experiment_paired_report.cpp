// results.md's paired measures (goal 3), its transfer-time table and paired.csv.
#include <QFile>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "experiment.h"
#include "experiment_report.h"

namespace sp::experiment {
namespace {

// The oracle's measured frontier at one step: (saving, gap) from all-BF16 (0, 0) along its path.
std::vector<std::pair<double, double>> oracle_points(const Paired& paired, std::int64_t step) {
    std::vector<std::pair<double, double>> points = {{0.0, 0.0}};
    for (const Probe* p : probes_at(paired.probes, step, "oracle:"))
        points.emplace_back(p->saving_pct, p->gap_pct);
    std::sort(points.begin(), points.end());
    return points;
}

// The oracle's gap at `saving`, linear between its two neighbouring points (its last point beyond).
double oracle_gap_at(const std::vector<std::pair<double, double>>& points, double saving) {
    for (std::size_t i = 1; i < points.size(); ++i) {
        const auto [x0, y0] = points[i - 1];
        const auto [x1, y1] = points[i];
        if (saving <= x1 + 1e-9) return x1 - x0 < 1e-9 ? y1 : y0 + (y1 - y0) * (saving - x0) / (x1 - x0);
    }
    return points.back().second;
}

// Within 20% of the oracle's gap at equal bytes (a map at or below the oracle always is).
bool near_oracle(double gap, double oracle) {
    return gap <= oracle + 0.2 * std::fabs(oracle);
}

bool is_selective(const ModeResult& m, const QString& name) {
    const VariantResult* v = find(m.schemes, name);
    return v && v->variant.family == Family::selective;
}

QString label_of(const ModeResult& m, const QString& name) {
    const VariantResult* v = find(m.schemes, name);
    return v ? v->variant.label : name;
}

void paired_table(QTextStream& o, const Settings& s, const ModeResult& m) {
    const std::vector<std::int64_t> steps = probe_steps(s);
    o << "| Map |";
    for (std::int64_t step : steps) o << " step " << step << ": gap (saved) |";
    o << " gradient rel. error, cosine (step " << steps.back() << ") | oracle's gap at equal bytes |\n|---|";
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
        o << " " << num(last->grad_rel_error, 4) << ", " << num(last->grad_cosine, 5) << " | "
          << num(oracle_gap_at(last_oracle, last->saving_pct), 3) << "% |\n";
    }
    o << "| Oracle (greedy, step " << steps.back() << ") |";
    for (std::size_t i = 0; i < steps.size(); ++i) o << " |";
    o << " | ";
    QStringList points;
    for (const auto& [saving, gap] : last_oracle)
        if (saving > 0) points << num(gap, 3) + "% at " + num(saving, 1) + "%";
    o << points.join("; ") << " |\n";
}

// Goal 3 for one mode: every uniform map above the Selective Precision frontier (some scheme's map
// saves at least as much with a lower gap), and every scheme map within 20% of the oracle's gap.
bool paired_verdict(QTextStream& o, const Settings& s, const ModeResult& m) {
    int uniform_above = 0, uniform_all = 0, near = 0, sp_all = 0;
    QStringList misses;
    for (std::int64_t step : probe_steps(s)) {
        std::vector<const Probe*> sp_maps, uniform;
        for (const Probe* p : probes_at(m.paired.probes, step, ""))
            (is_selective(m, p->name) ? sp_maps : uniform).push_back(p);
        const auto oracle = oracle_points(m.paired, step);
        for (const Probe* u : uniform) {
            if (u->name.contains(':')) continue;
            ++uniform_all;
            const bool above = std::any_of(sp_maps.begin(), sp_maps.end(), [&](const Probe* p) {
                return p->saving_pct >= u->saving_pct - 1e-9 && p->gap_pct < u->gap_pct;
            });
            uniform_above += above ? 1 : 0;
            if (!above)
                misses << QString("step %1: %2 (gap %3%) is not above it")
                              .arg(step)
                              .arg(label_of(m, u->name), num(u->gap_pct, 3));
        }
        for (const Probe* p : sp_maps) {
            if (p->saving_pct <= 1e-9) continue;  // all-BF16: nothing to compare
            ++sp_all;
            const double at = oracle_gap_at(oracle, p->saving_pct);
            if (near_oracle(p->gap_pct, at)) {
                ++near;
            } else {
                misses << QString("step %1: %2 at %3% saved has gap %4%, the oracle %5%")
                              .arg(step)
                              .arg(label_of(m, p->name), num(p->saving_pct, 1), num(p->gap_pct, 3),
                                   num(at, 3));
            }
        }
    }
    o << "- " << m.mode << ": uniform maps above the Selective Precision frontier: " << uniform_above
      << " of " << uniform_all << "; scheme maps within 20% of the oracle's gap at equal bytes: " << near
      << " of " << sp_all << ".\n";
    for (const QString& miss : misses) o << "  - " << miss << "\n";
    return uniform_above == uniform_all && near == sp_all;
}

}  // namespace

void write_paired_section(QTextStream& o, const Settings& s, const std::vector<ModeResult>& modes) {
    QStringList steps;
    for (std::int64_t step : probe_steps(s)) steps << QString::number(step);
    o << "## Paired measures: the same weights, the same batches\n\n"
      << "On seed " << (modes.empty() ? 0 : modes.front().paired.seed)
      << "'s all-BF16 fine-tune, after steps " << steps.join(", ")
      << ", sp-trainer `--probe-maps` runs the forward and backward passes on " << s.probe_batches
      << " held-out batches under all-BF16 and under each map, on the same weights (training continues "
         "unchanged). **Gap** is the eval loss under the map against BF16's, in percent; the gradient's "
         "relative error and cosine are over every trainable parameter (all of them in a full fine-tune, the "
         "adapters with adapters). The maps: every uniform format, each scheme's map at that step (what its "
         "own "
         "fine-tune on that seed computed with), every block alone in every low format, and the **oracle**: "
         "from all-BF16, a greedy that repeatedly moves the block to the format with the least measured "
         "single-block gap per byte saved, each map on its path measured whole. Every measure is in "
         "`paired.csv`.\n\n";
    for (const ModeResult& m : modes) {
        o << "### " << m.mode << "\n\n";
        paired_table(o, s, m);
        o << "\n![paired, " << m.mode << "](paired_" << m.mode << ".png)\n\n";
    }
    o << "**3. On the paired measures, every uniform format's point lies above the Selective Precision "
         "frontier, "
         "and the schemes' maps are within 20% of the oracle's gap at equal bytes (every probe step).**\n\n";
    bool all = true;
    for (const ModeResult& m : modes) all = paired_verdict(o, s, m) && all;
    o << "\n" << (all ? "**Met.**" : "**Not met.**") << "\n\n";
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
    o << "mode,seed,step,map_name,map,saving_pct,gap_pct,grad_rel_error,grad_cosine\n";
    for (const ModeResult& m : modes)
        for (const Probe& p : m.paired.probes) {
            QStringList formats;
            for (Precision format : p.map) formats << QString::fromStdString(std::string(to_string(format)));
            o << m.mode << ',' << m.paired.seed << ',' << p.step << ',' << p.name << ',' << formats.join(' ')
              << ',' << num(p.saving_pct, 4) << ',' << num(p.gap_pct, 5) << ',' << num(p.grad_rel_error, 6)
              << ',' << num(p.grad_cosine, 7) << '\n';
        }
}

}  // namespace sp::experiment
