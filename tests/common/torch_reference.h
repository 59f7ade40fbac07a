#pragma once
// The agent suites' expected values for LibTorch tensors, computed straight from the core reference
// (sp/quantize.h), never through the agent's own helpers; a block over a module's parameters; and a
// map delivered to a hint sink as the agent delivers it.
// Include <torch/torch.h> before Qt, as the suites do: Qt's `slots` macro breaks LibTorch's headers.
#include <torch/torch.h>

#include <cstddef>
#include <string>
#include <vector>

#include "sp/agent/block.h"
#include "sp/agent/hints.h"
#include "sp/quantize.h"

namespace sp::test {

// INT8 with one scale per row: rows = size(0) for dim >= 2, one row otherwise.
inline torch::Tensor ref_int8(const torch::Tensor& t) {
    const torch::Tensor c = t.detach().to(torch::kFloat).contiguous();
    const auto rows = static_cast<std::size_t>(c.dim() >= 2 ? c.size(0) : 1);
    const auto cols = static_cast<std::size_t>(c.numel()) / rows;
    std::vector<float> v = sp::int8_roundtrip_rows(c.data_ptr<float>(), rows, cols);
    return torch::from_blob(v.data(), c.sizes(), torch::kFloat).clone();
}

inline torch::Tensor ref_bf16(const torch::Tensor& t) {
    return t.detach().to(torch::kBFloat16).to(torch::kFloat);
}

// Block `id` holding every parameter of `m`, under the names the module gives them.
inline sp::agent::AgentBlock block_of(int id, const std::string& name, const torch::nn::Module& m) {
    sp::agent::AgentBlock b;
    b.id = id;
    b.name = name;
    for (const auto& item : m.named_parameters()) {
        b.param_names.push_back(item.key());
        b.params.push_back(item.value());
    }
    return b;
}

// `map` (one format per block) delivered to `sink` as the policy's hints.
inline void route(sp::agent::HintSink& sink, const std::vector<sp::Precision>& map) {
    sp::agent::PrecisionHints h;
    h.updated = true;
    h.precision = map;
    h.reason.assign(map.size(), sp::Reason::policy);
    sink.on_hints(h);
}

}  // namespace sp::test
