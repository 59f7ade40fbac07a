// results.md's "The estimate against the measured gaps": at each probe step the agent profiled, the
// Spearman rank correlation between what it estimated for each (block, format) pair and the gap the
// paired measures found with that block alone in that format, for the loss estimate (POLICY.md rule
// 23) and, on the same pairs, the sensitivity product the greedy budget ranks by (rule 18).
#include <QTextStream>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "experiment.h"
#include "experiment_oracle.h"
#include "experiment_report.h"

namespace sp::experiment {
namespace {

// Ranks from 0, ties sharing their mean rank.
std::vector<double> ranks(const std::vector<double>& v) {
    std::vector<std::size_t> order(v.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i;
        while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
        for (std::size_t k = i; k <= j; ++k) r[order[k]] = 0.5 * double(i + j);
        i = j + 1;
    }
    return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() < 3) return std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> ra = ranks(a), rb = ranks(b);
    const double mean = 0.5 * double(a.size() - 1);
    double cov = 0, va = 0, vb = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        cov += (ra[i] - mean) * (rb[i] - mean);
        va += (ra[i] - mean) * (ra[i] - mean);
        vb += (rb[i] - mean) * (rb[i] - mean);
    }
    return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : std::numeric_limits<double>::quiet_NaN();
}

struct Pair {
    double loss, sensitivity, gap;
};

Correlation correlate(std::int64_t step, const std::vector<Pair>& pairs) {
    Correlation c;
    c.step = step;
    c.pairs = int(pairs.size());
    std::vector<double> loss, sens, gap, ratios;
    for (const Pair& p : pairs) {
        loss.push_back(p.loss);
        sens.push_back(p.sensitivity);
        gap.push_back(p.gap);
        c.noise = std::max(c.noise, -p.gap);
        if (p.loss > 0) ratios.push_back(p.gap / p.loss);
    }
    c.rho_loss = spearman(loss, gap);
    c.rho_sensitivity = spearman(sens, gap);
    std::vector<double> loss_above, sens_above, gap_above;
    for (const Pair& p : pairs)
        if (p.gap > c.noise) {
            loss_above.push_back(p.loss);
            sens_above.push_back(p.sensitivity);
            gap_above.push_back(p.gap);
        }
    c.above = int(gap_above.size());
    c.rho_loss_above = spearman(loss_above, gap_above);
    c.rho_sensitivity_above = spearman(sens_above, gap_above);
    std::sort(ratios.begin(), ratios.end());
    c.median_ratio = ratios.empty() ? std::numeric_limits<double>::quiet_NaN() : ratios[ratios.size() / 2];
    return c;
}

}  // namespace

std::vector<Correlation> correlations(const ModeResult& m) {
    // step -> "block:format" -> the estimate
    std::map<std::int64_t, std::map<QString, const Estimate*>> estimates;
    for (const Estimate& e : m.paired.estimates)
        estimates[e.step][QString::number(e.block) + ":" + format_key(e.format)] = &e;
    std::vector<Correlation> out;
    for (const auto& [step, by_pair] : estimates) {
        std::vector<Pair> pairs;
        for (const Probe* p : probes_at(m.paired.probes, step, "single:")) {
            const auto it = by_pair.find(p->name.mid(int(std::string_view("single:").size())));
            // A pair counts when both estimators have a value for it (the same pairs for both).
            if (it != by_pair.end() && std::isfinite(it->second->loss_pct) &&
                std::isfinite(it->second->sensitivity_cost))
                pairs.push_back({it->second->loss_pct, it->second->sensitivity_cost, p->gap_pct});
        }
        if (!pairs.empty()) out.push_back(correlate(step, pairs));
    }
    return out;
}

void write_estimate_section(QTextStream& o, const std::vector<ModeResult>& modes) {
    o << "## The estimate against the measured gaps\n\n"
      << "On the probed run, the agent profiles at every probe step (step 0 too; the last probe step ends "
         "the run, so it has no profile). Its estimates are replayed from the run's telemetry "
         "(`sp-ctl simulate`'s policy in mode static): per (block, format) pair the **loss estimate** "
         "(percent of the loss) and the **sensitivity product** s · 10^(−SNR/10) that the greedy budget "
         "ranks by, each against the gap measured with that block alone in that format. ρ is Spearman's "
         "rank correlation. Many gaps are smaller than the probe's noise (half are below zero in some "
         "settings), so ρ is also given over the pairs whose gap exceeds the noise, taken as the largest "
         "negative gap's size at that step. The ratio is the median of measured / estimated.\n\n";
    for (const ModeResult& m : modes) {
        o << "### " << m.mode << " + " << m.scope << "\n\n"
          << "| Step | Pairs | ρ, loss estimate | ρ, sensitivity | Noise | Pairs above it | ρ above, loss | "
             "ρ above, sensitivity | Measured / estimated |\n|---|---|---|---|---|---|---|---|---|\n";
        for (const Correlation& c : correlations(m))
            o << "| " << c.step << " | " << c.pairs << " | " << num(c.rho_loss, 2) << " | "
              << num(c.rho_sensitivity, 2) << " | " << num(c.noise, 4) << "% | " << c.above << " | "
              << num(c.rho_loss_above, 2) << " | " << num(c.rho_sensitivity_above, 2) << " | "
              << num(c.median_ratio, 2) << " |\n";
        o << "\n";
    }
}

}  // namespace sp::experiment
