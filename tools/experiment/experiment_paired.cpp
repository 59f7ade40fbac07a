// The paired measures (results.md, "Paired measures"): on one seed's BF16 fine-tune, at every probe
// step, sp-trainer --probe-maps measures maps against all-BF16 on the same weights and held-out
// batches. Two probe runs per mode: the first measures the uniform formats, every block alone in
// every low format and the schemes' maps; the second the oracle's maps, a greedy over the first
// run's single-block gaps.
#include <QDir>
#include <QFile>

#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "experiment.h"
#include "experiment_runs.h"

namespace sp::experiment {
namespace {

constexpr Precision kLowFormats[] = {Precision::int8, Precision::fp8_e4m3, Precision::fp8_e5m2,
                                     Precision::int4};

using NamedMap = std::pair<QString, PrecisionMap>;

QString format_key(Precision p) {
    return QString::fromStdString(std::string(to_string(p)));
}

QString single_name(int block, Precision p) {
    return "single:" + QString::number(block) + ":" + format_key(p);
}

// The first run's maps at one step: every uniform low format (named by its scheme key), every
// block alone in every low format, and each selective scheme's map at that step on `seed`.
std::vector<NamedMap> first_maps(const Settings& s, const std::vector<VariantResult>& schemes,
                                 std::size_t seed_index, std::size_t probe_index) {
    std::vector<NamedMap> maps;
    for (Precision p : kLowFormats) maps.emplace_back(format_key(p), PrecisionMap(std::size_t(s.blocks), p));
    for (int b = 0; b < s.blocks; ++b)
        for (Precision p : kLowFormats) {
            PrecisionMap map(std::size_t(s.blocks), Precision::bf16);
            map[std::size_t(b)] = p;
            maps.emplace_back(single_name(b, p), map);
        }
    for (const VariantResult& v : schemes)
        if (v.variant.family == Family::selective)
            maps.emplace_back(v.variant.key, v.runs.at(seed_index).maps_at_probes.at(probe_index));
    return maps;
}

// The oracle: from all-BF16, repeatedly move the block to the format that adds the least measured
// gap per byte saved (its single-block gap), until every block is in INT4. Each map on the way is
// one oracle point; the second probe run measures them as whole maps.
std::vector<NamedMap> oracle_maps(const Settings& s, const std::vector<Probe>& first, std::int64_t step) {
    std::vector<std::vector<const Probe*>> single(std::size_t(s.blocks),
                                                  std::vector<const Probe*>(kPrecisionCount, nullptr));
    for (const Probe* p : probes_at(first, step, "single:")) {
        const QStringList parts = p->name.split(':');
        const auto f = parse_precision(parts.at(2).toStdString());
        single.at(std::size_t(parts.at(1).toInt())).at(std::size_t(*f)) = p;
    }
    PrecisionMap map(std::size_t(s.blocks), Precision::bf16);
    std::vector<double> gap(std::size_t(s.blocks), 0.0), saving(std::size_t(s.blocks), 0.0);
    std::vector<NamedMap> path;
    for (;;) {
        double best_ratio = std::numeric_limits<double>::infinity();
        std::size_t best_block = 0;
        const Probe* best = nullptr;
        for (std::size_t b = 0; b < map.size(); ++b)
            for (Precision f : kLowFormats) {
                const Probe* p = single[b][std::size_t(f)];
                if (!p || p->saving_pct <= saving[b] + 1e-9) continue;
                const double ratio = (p->gap_pct - gap[b]) / (p->saving_pct - saving[b]);
                if (ratio < best_ratio) {
                    best_ratio = ratio;
                    best_block = b;
                    best = p;
                }
            }
        if (!best) break;
        map[best_block] = best->map[best_block];
        gap[best_block] = best->gap_pct;
        saving[best_block] = best->saving_pct;
        path.emplace_back("oracle:" + QString::number(path.size() + 1), map);
    }
    return path;
}

// Runs the BF16 fine-tune of `seed` with the maps as probes and reads the results back.
std::vector<Probe> probe_run(const Settings& s, const Pretrain& pretrain, std::uint64_t seed,
                             const QString& pass,
                             const std::vector<std::pair<std::int64_t, NamedMap>>& maps) {
    const QDir runs(runs_dir(s));
    const QString name = s.mode + "-paired-" + pass + "-seed" + QString::number(seed);
    const QString maps_path = runs.filePath(name + ".maps.jsonl");
    const QString out_path = runs.filePath(name + ".probes.jsonl");
    QByteArray text;
    for (const auto& [step, named] : maps) {
        nlohmann::json j = {{"step", step}, {"name", named.first.toStdString()}};
        j["map"] = nlohmann::json::array();
        for (Precision p : named.second) j["map"].push_back(std::string(to_string(p)));
        text += QByteArray::fromStdString(j.dump()) + '\n';
    }
    QFile f(maps_path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(text) != text.size())
        throw std::runtime_error("cannot write " + maps_path.toStdString());
    f.close();

    TrainerRun run;
    run.name = name;
    run.args = finetune_args(s, pretrain, "bf16", seed) +
               QStringList{"--precision",  "bf16",    "--eval-batches", QString::number(s.probe_batches),
                           "--probe-maps", maps_path, "--probe-out",    out_path};
    run.depends = checkpoint_key(pretrain) + "\nmaps " + QString::fromUtf8(text);
    run.outputs = {out_path};
    const RunResult r = run_trainer(s, run);
    if (!r.ok) throw std::runtime_error(r.error.toStdString());

    QFile in(out_path);
    if (!in.open(QIODevice::ReadOnly)) throw std::runtime_error("no probe results " + out_path.toStdString());
    std::vector<Probe> probes;
    while (!in.atEnd()) {
        const QByteArray line = in.readLine().trimmed();
        if (line.isEmpty()) continue;
        const auto j = nlohmann::json::parse(line.toStdString());
        Probe p;
        p.step = j.at("step").get<std::int64_t>();
        p.name = QString::fromStdString(j.at("name").get<std::string>());
        for (const auto& n : j.at("map")) p.map.push_back(*parse_precision(n.get<std::string>()));
        p.gap_pct = j.at("gap_pct").get<double>();
        p.grad_rel_error = j.at("grad_rel_error").get<double>();
        p.grad_cosine = j.at("grad_cosine").get<double>();
        p.saving_pct = j.at("saving_pct").get<double>();
        probes.push_back(std::move(p));
    }
    if (probes.size() != maps.size())
        throw std::runtime_error(name.toStdString() + ": " + std::to_string(probes.size()) +
                                 " probe results for " + std::to_string(maps.size()) + " maps");
    return probes;
}

}  // namespace

std::vector<const Probe*> probes_at(const std::vector<Probe>& probes, std::int64_t step,
                                    const QString& prefix) {
    std::vector<const Probe*> out;
    for (const Probe& p : probes)
        if (p.step == step && p.name.startsWith(prefix)) out.push_back(&p);
    return out;
}

Paired run_paired(const Settings& s, const Pretrain& pretrain, const std::vector<VariantResult>& schemes,
                  std::uint64_t seed) {
    Paired paired;
    paired.seed = seed;
    try {
        std::size_t seed_index = 0;
        while (seed_index < s.seeds.size() && s.seeds[seed_index] != seed) ++seed_index;
        const std::vector<std::int64_t> steps = probe_steps(s);
        std::vector<std::pair<std::int64_t, NamedMap>> first;
        for (std::size_t i = 0; i < steps.size(); ++i)
            for (NamedMap& m : first_maps(s, schemes, seed_index, i))
                first.emplace_back(steps[i], std::move(m));
        paired.probes = probe_run(s, pretrain, seed, "a", first);

        std::vector<std::pair<std::int64_t, NamedMap>> oracle;
        for (std::int64_t step : steps)
            for (NamedMap& m : oracle_maps(s, paired.probes, step)) oracle.emplace_back(step, std::move(m));
        for (Probe& p : probe_run(s, pretrain, seed, "b", oracle)) paired.probes.push_back(std::move(p));
        paired.ok = true;
    } catch (const std::exception& e) {
        paired.error = QString::fromStdString(e.what());
    }
    return paired;
}

}  // namespace sp::experiment
