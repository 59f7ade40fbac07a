#include "map_probe.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <cmath>

#include "gpt_model.h"
#include "sp/agent/precision_runtime.h"
#include "sp/json_input.h"
#include "text_data.h"

namespace sp::trainer {
namespace {

// The value of `key`, which must be there with the type `is` checks (named `type` in the message).
const nlohmann::json& field(const nlohmann::json& j, const char* key,
                            bool (nlohmann::json::*is)() const noexcept, const char* type) {
    const auto it = j.find(key);
    if (it == j.end() || !((*it).*is)())
        throw std::invalid_argument(std::string("\"") + key + "\" must be " + type);
    return *it;
}

ProbeMap parse_map(const nlohmann::json& j, int blocks) {
    ProbeMap m;
    m.name = field(j, "name", &nlohmann::json::is_string, "a string").get<std::string>();
    const auto& formats = field(j, "map", &nlohmann::json::is_array, "an array of formats");
    if (formats.size() != std::size_t(blocks))
        throw std::invalid_argument("\"map\" must list " + std::to_string(blocks) +
                                    " formats, one per block");
    for (const auto& f : formats) {
        const auto p = f.is_string() ? parse_precision(f.get<std::string>()) : std::nullopt;
        if (!p) throw std::invalid_argument("unknown format " + f.dump());
        m.formats.push_back(*p);
    }
    return m;
}

// One forward and backward pass per batch under the model's current formats: the mean loss and
// every trainable parameter's gradient, flattened into one float64 vector. Leaves the gradients
// zero.
struct Measured {
    double loss = 0;
    at::Tensor gradient;
};
Measured measure(GptModel& model, const std::vector<Batch>& batches) {
    const std::vector<at::Tensor> params = model.parameters();
    auto zero_grads = [&] {
        for (const at::Tensor& p : params)
            if (p.grad().defined()) p.grad().detach().zero_();
    };
    zero_grads();
    Measured m;
    for (const Batch& b : batches) {
        at::Tensor loss = model.loss(b.tokens, b.targets) / double(batches.size());
        loss.backward();
        m.loss += loss.item<double>();
    }
    std::vector<at::Tensor> flat;
    flat.reserve(params.size());
    for (const at::Tensor& p : params)
        flat.push_back(p.grad().defined() ? p.grad().detach().reshape(-1).to(at::kDouble)
                                          : at::zeros({p.numel()}, p.options().dtype(at::kDouble)));
    m.gradient = at::cat(flat);
    zero_grads();
    return m;
}

void apply(const std::vector<Precision>& formats, GptModel& model, agent::ReferencePrecisionRuntime& runtime,
           std::size_t int4_group) {
    agent::PrecisionHints hints;
    hints.precision = formats;
    runtime.on_hints(hints);  // between steps: the changed blocks are materialized at once
    model.set_compute_formats(formats, int4_group);
}

}  // namespace

MapProbe::MapProbe(const std::string& maps_path, const std::string& out_path, int blocks, std::int64_t steps)
    : out_path_(out_path) {
    std::ifstream in(maps_path);
    if (!in) throw ProbeMapsError("--probe-maps: cannot read '" + maps_path + "'");
    std::string line;
    for (std::size_t number = 1; std::getline(in, line); ++number) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        try {
            // The project's one JSON entry point: bounded nesting, no number turned into infinity.
            nlohmann::json j;
            JsonError bad;
            if (!parse_json(line, j, bad)) throw std::invalid_argument("not valid JSON: " + bad.message());
            if (!j.is_object()) throw std::invalid_argument("expected a JSON object");
            const auto& step = field(j, "step", &nlohmann::json::is_number_integer, "an integer");
            // Compared as written: a value beyond int64 must not wrap into range.
            if (step.is_number_unsigned() ? step.get<std::uint64_t>() > std::uint64_t(steps)
                                          : step.get<std::int64_t>() < 0 || step.get<std::int64_t>() > steps)
                throw std::invalid_argument("\"step\" " + step.dump() + " is outside 0.." +
                                            std::to_string(steps) + " (--steps)");
            due_[step.get<std::int64_t>()].push_back(parse_map(j, blocks));
        } catch (const std::exception& e) {
            throw ProbeMapsError("--probe-maps: " + maps_path + ":" + std::to_string(number) + ": " +
                                 e.what());
        }
    }
    out_.open(out_path, std::ios::trunc);
    if (!out_) throw std::runtime_error("--probe-out: cannot write '" + out_path + "'");
}

void MapProbe::run_due(std::int64_t step, GptModel& model, agent::ReferencePrecisionRuntime& runtime,
                       const std::vector<Batch>& batches, std::size_t int4_group) {
    const auto due = due_.find(step);
    if (due == due_.end()) return;
    const std::vector<Precision> training_map = runtime.precisions();
    apply(std::vector<Precision>(training_map.size(), Precision::bf16), model, runtime, int4_group);
    const Measured bf16 = measure(model, batches);
    const double bf16_norm = bf16.gradient.norm().item<double>();
    for (const ProbeMap& m : due->second) {
        apply(m.formats, model, runtime, int4_group);
        const Measured r = measure(model, batches);
        const double norm = r.gradient.norm().item<double>();
        agent::TransferBytes bytes;
        for (std::size_t b = 0; b < m.formats.size(); ++b) {
            const agent::TransferBytes block = runtime.block_bytes(b, m.formats[b]);
            bytes.copied += block.copied;
            bytes.bf16 += block.bf16;
        }
        nlohmann::json j = {
            {"step", step},
            {"name", m.name},
            {"eval_loss", r.loss},
            {"bf16_eval_loss", bf16.loss},
            {"gap_pct", 100.0 * (r.loss / bf16.loss - 1.0)},
            {"grad_rel_error", (r.gradient - bf16.gradient).norm().item<double>() / bf16_norm},
            {"grad_cosine", r.gradient.dot(bf16.gradient).item<double>() / (norm * bf16_norm)},
            {"bytes", bytes.copied},
            {"bytes_bf16", bytes.bf16},
            {"saving_pct", bytes.saving_pct()}};
        j["map"] = nlohmann::json::array();
        for (Precision p : m.formats) j["map"].push_back(std::string(to_string(p)));
        out_ << j.dump() << '\n';
        ++written_;
    }
    out_.flush();
    if (!out_) throw std::runtime_error("--probe-out: cannot write '" + out_path_ + "'");
    apply(training_map, model, runtime, int4_group);
}

}  // namespace sp::trainer
