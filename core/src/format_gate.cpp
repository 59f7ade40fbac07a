// The gate's decisions: deriving rules from measurements and admitting formats (core/GATE.md).
// Reading and writing the policy file is in format_gate_json.cpp.
#include "sp/format_gate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

namespace sp {
namespace {

// Rounds a speed-up down to 3 decimals for the file, but never below the threshold it passed, so
// the file never claims more than was measured and always passes its own consistency check. The
// relative nudge of 1e-12 keeps a ratio such as 1.2 computed as 1.19999999999 from becoming 1.199.
double for_file(double speedup, double threshold) {
    return std::max(threshold, std::floor(speedup * 1000.0 * (1.0 + 1e-12)) / 1000.0);
}

using RuleKey = std::tuple<LayerKind, std::uint64_t, Precision>;  // kind, cols, format

// The speed-up of each measured row count of one (kind, cols, format); a size measured several
// times counts as its slowest measurement (NaN, if any of them was broken).
using SpeedupByRows = std::map<std::uint64_t, double>;

void add_sample(SpeedupByRows& by_rows, std::uint64_t rows, double speedup) {
    const auto [it, inserted] = by_rows.emplace(rows, speedup);
    if (inserted) return;
    if (std::isnan(it->second) || std::isnan(speedup))
        it->second = std::nan("");
    else
        it->second = std::min(it->second, speedup);
}

// Walks from the largest size down while every size is fast enough: the last size reached is the
// smallest one from which the format stays faster. Returns false when the largest size is slow.
bool rule_from(const SpeedupByRows& by_rows, double threshold, GateRule& rule) {
    bool found = false;
    double lowest = 0.0;
    for (auto it = by_rows.rbegin(); it != by_rows.rend(); ++it) {
        if (!(it->second >= threshold)) break;  // NaN stops the walk too
        lowest = found ? std::min(lowest, it->second) : it->second;
        rule.min_rows = it->first;
        rule.measured_speedup = it->second;
        found = true;
    }
    if (!found) return false;
    rule.measured_speedup = for_file(rule.measured_speedup, threshold);
    rule.min_speedup = for_file(lowest, threshold);
    rule.max_rows = by_rows.rbegin()->first;
    return true;
}

}  // namespace

std::string_view to_string(LayerKind k) {
    return k == LayerKind::vector ? "vector" : "matrix";
}

bool parse_layer_kind(std::string_view text, LayerKind& out) {
    for (LayerKind k : {LayerKind::matrix, LayerKind::vector}) {
        if (to_string(k) == text) {
            out = k;
            return true;
        }
    }
    return false;
}

LayerKind kind_of(const TensorShape& shape) {
    return shape.rows <= 1 ? LayerKind::vector : LayerKind::matrix;
}

double speedup_of(const GateMeasurement& m) {
    const auto usable = [](double s) { return std::isfinite(s) && s > 0.0; };
    if (!usable(m.format_seconds) || !usable(m.bf16_seconds)) return std::nan("");
    return m.bf16_seconds / m.format_seconds;
}

bool GateRule::operator==(const GateRule& o) const {
    return kind == o.kind && cols == o.cols && format == o.format && min_rows == o.min_rows &&
           measured_speedup == o.measured_speedup && min_speedup == o.min_speedup && max_rows == o.max_rows;
}

bool FormatGatePolicy::operator==(const FormatGatePolicy& o) const {
    return version == o.version && producer == o.producer && device == o.device && link == o.link &&
           speedup_threshold == o.speedup_threshold && int4_group == o.int4_group && rules == o.rules;
}

const GateRule* FormatGatePolicy::find(LayerKind kind, std::uint64_t cols, Precision format) const {
    for (const GateRule& r : rules) {
        if (r.kind == kind && r.cols == cols && r.format == format) return &r;
    }
    return nullptr;
}

bool FormatGatePolicy::admits(Precision format, LayerKind kind, std::uint64_t rows,
                              std::uint64_t cols) const {
    if (format == Precision::bf16) return true;
    const GateRule* rule = find(kind, cols, format);
    return rule != nullptr && rows >= rule->min_rows;
}

FormatGatePolicy derive_gate_policy(const std::vector<GateMeasurement>& measurements,
                                    double speedup_threshold) {
    if (!(std::isfinite(speedup_threshold) && speedup_threshold > 0.0))
        throw std::invalid_argument("derive_gate_policy: the speed-up threshold must be a finite number > 0");
    std::map<RuleKey, SpeedupByRows> groups;  // ordered, so the rules come out sorted
    for (const GateMeasurement& m : measurements) {
        if (m.format == Precision::bf16) continue;
        add_sample(groups[{m.kind, m.cols, m.format}], m.rows, speedup_of(m));
    }
    FormatGatePolicy policy;
    policy.speedup_threshold = speedup_threshold;
    for (const auto& [key, by_rows] : groups) {
        GateRule rule;
        std::tie(rule.kind, rule.cols, rule.format) = key;
        if (rule_from(by_rows, speedup_threshold, rule)) policy.rules.push_back(rule);
    }
    return policy;
}

bool admits_block(const FormatGatePolicy& p, Precision format, const std::vector<TensorShape>& shapes) {
    if (format == Precision::bf16) return true;
    bool any_matrix = false;
    for (const TensorShape& s : shapes) {
        if (kind_of(s) != LayerKind::matrix) continue;  // vectors follow the block
        any_matrix = true;
        if (!p.admits(format, LayerKind::matrix, s.rows, s.cols)) return false;
    }
    return any_matrix;
}

}  // namespace sp
