// The paired measures (results.md, "Paired measures"): on one seed's BF16 fine-tune, at every probe
// step, sp-trainer --probe-maps measures maps against all-BF16 on the same weights and held-out
// batches. Two probe runs per setting: the first measures the uniform formats, every block alone in
// every low format (at step 0 too, for the estimates) and the schemes' maps, while the agent
// profiles; the second the exact oracle's maps (experiment_oracle.cpp).
#include <QDir>
#include <QFile>

#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "experiment.h"
#include "experiment_oracle.h"
#include "experiment_runs.h"

namespace sp::experiment {
namespace {

constexpr Precision kLowFormats[] = {Precision::int8, Precision::fp8_e4m3, Precision::fp8_e5m2,
                                     Precision::int4};

QString single_name(int block, Precision p) {
    return "single:" + QString::number(block) + ":" + format_key(p);
}

// Every block alone in every low format.
void append_single_maps(const Settings& s, std::vector<NamedMap>& maps) {
    for (int b = 0; b < s.blocks; ++b)
        for (Precision p : kLowFormats) {
            PrecisionMap map(std::size_t(s.blocks), Precision::bf16);
            map[std::size_t(b)] = p;
            maps.emplace_back(single_name(b, p), map);
        }
}

// The first run's maps at one step: every uniform low format (named by its scheme key), every
// block alone in every low format, and each selective scheme's map at that step on `seed`.
std::vector<NamedMap> first_maps(const Settings& s, const std::vector<VariantResult>& schemes,
                                 std::size_t seed_index, std::size_t probe_index) {
    std::vector<NamedMap> maps;
    for (Precision p : kLowFormats) maps.emplace_back(format_key(p), PrecisionMap(std::size_t(s.blocks), p));
    append_single_maps(s, maps);
    for (const VariantResult& v : schemes)
        if (v.variant.family == Family::selective)
            maps.emplace_back(v.variant.key, v.runs.at(seed_index).maps_at_probes.at(probe_index));
    return maps;
}

// Runs the BF16 fine-tune of `seed` with the maps as probes and reads the results back. Both passes
// run with the same config (the agent profiling at the probe steps), so they train alike.
std::vector<Probe> probe_run(const Settings& s, const Pretrain& pretrain, std::uint64_t seed,
                             const QString& pass,
                             const std::vector<std::pair<std::int64_t, NamedMap>>& maps) {
    const QDir runs(runs_dir(s));
    const QString name = setting_name(s) + "-paired-" + pass + "-seed" + QString::number(seed);
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
    run.args = finetune_args(s, pretrain, "probe-" + setting_name(s), seed) +
               QStringList{"--precision",  "bf16",    "--eval-batches", QString::number(s.probe_batches),
                           "--probe-maps", maps_path, "--probe-out",    out_path};
    run.depends =
        checkpoint_key(pretrain) + "\nconfig " + probe_config_json(s) + "\nmaps " + QString::fromUtf8(text);
    run.telemetry = pass == "a";  // the estimates are read from the first pass
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
        write_config(s,
                     Variant{"probe-" + setting_name(s), {}, Family::uniform, {}, probe_config_json(s), {}});
        const std::vector<std::int64_t> steps = probe_steps(s);
        std::vector<std::pair<std::int64_t, NamedMap>> first;
        // The single-block maps at step 0 too: the agent's first estimate, before any fine-tuning.
        std::vector<NamedMap> at_start;
        append_single_maps(s, at_start);
        for (NamedMap& m : at_start) first.emplace_back(0, std::move(m));
        for (std::size_t i = 0; i < steps.size(); ++i)
            for (NamedMap& m : first_maps(s, schemes, seed_index, i))
                first.emplace_back(steps[i], std::move(m));
        paired.probes = probe_run(s, pretrain, seed, "a", first);
        paired.estimates = read_estimates(
            s, QDir(runs_dir(s))
                   .filePath(setting_name(s) + "-paired-a-seed" + QString::number(seed) + ".jsonl"));

        std::vector<std::pair<std::int64_t, NamedMap>> oracle;
        for (std::int64_t step : steps) {
            // The tolerance oracle at the operator's tolerances and at each tolerance scheme's
            // measured gap (its saving at that gap, the tolerance goal).
            std::vector<double> tolerances = {0.25, 0.5};
            for (const Probe* p : probes_at(paired.probes, step, "tolerance"))
                if (!p->name.contains(':')) tolerances.push_back(p->gap_pct);
            for (NamedMap& m : oracle_maps(s, paired.probes, step, tolerances))
                oracle.emplace_back(step, std::move(m));
        }
        for (Probe& p : probe_run(s, pretrain, seed, "b", oracle)) paired.probes.push_back(std::move(p));
        paired.ok = true;
    } catch (const std::exception& e) {
        paired.error = QString::fromStdString(e.what());
    }
    return paired;
}

}  // namespace sp::experiment
