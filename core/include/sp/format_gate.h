#pragma once
// The "never slower than BF16" gate (core/GATE.md): a policy file of measured rules that says, per
// layer kind and shape, from which size a low-precision format moves a weight faster than BF16 does.
// With the file configured, a block is routed to a format only when the file shows it to be faster;
// a shape no rule covers stays BF16. Seed 003 (Selective FP8) is the model; its benchmark tool's
// pitfall — a rule starting at the first fast size even when a larger size is slow again — is fixed
// in derive_gate_policy.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sp/config.h"
#include "sp/precision.h"

namespace sp {

// "matrix": a 2-D weight, rows x cols, row-major (the GEMM operands seed 003 gates).
// "vector": a 1-D tensor (norms, biases).
enum class LayerKind : std::uint8_t { matrix, vector };

std::string_view to_string(LayerKind k);  // "matrix", "vector"
bool parse_layer_kind(std::string_view text, LayerKind& out);

// A parameter's shape. A 1-D tensor of n elements is rows = 1, cols = n.
struct TensorShape {
    std::uint64_t rows = 1, cols = 0;
};

// The kind follows from the row count alone: one row (or none) is a vector, two or more a matrix.
// A 1 x n weight is therefore gated as a vector: with one row it costs what a bias of n costs
// (one row scale, n elements), so the vector measurements are the right ones for it.
LayerKind kind_of(const TensorShape& shape);

// One size measured by `sp-ctl gate`: seconds per transfer (quantize, move, dequantize) for
// `format` and for BF16 moving the same weights.
struct GateMeasurement {
    LayerKind kind = LayerKind::matrix;
    std::uint64_t rows = 0, cols = 0;
    Precision format = Precision::int8;
    double format_seconds = 0.0, bf16_seconds = 0.0;
};

// bf16_seconds / format_seconds; NaN when either time is not a positive finite number (a NaN is
// never >= a threshold, so a broken measurement can only keep a block in BF16).
double speedup_of(const GateMeasurement& m);

// `format` is admitted for (kind, cols) from min_rows rows on.
struct GateRule {
    LayerKind kind = LayerKind::matrix;
    std::uint64_t cols = 0;
    Precision format = Precision::int8;
    std::uint64_t min_rows = 1;
    double measured_speedup = 1.0;  // at min_rows, rounded down to 3 decimals (never above the truth)
    double min_speedup = 1.0;       // the lowest over every measured size >= min_rows, rounded the same way
    std::uint64_t max_rows = 1;     // the largest size measured: beyond it the rule is extrapolated

    bool operator==(const GateRule& o) const;
    bool operator!=(const GateRule& o) const { return !(*this == o); }
};

struct FormatGatePolicy {
    int version = 1;
    std::string producer;            // e.g. "sp-ctl gate 0.1.0"
    std::string device, link;        // e.g. "cpu", "memcpy" / "cuda:0 NVIDIA H100", "pinned h2d"
    double speedup_threshold = 1.0;  // a format counts as faster at a size when speed-up >= this
    std::uint64_t int4_group = 64;   // the INT4 group size the INT4 rules were measured with
    std::vector<GateRule> rules;     // sorted by kind, cols, format; at most one per (kind, cols, format)

    // The rule for (kind, cols, format), or null.
    const GateRule* find(LayerKind kind, std::uint64_t cols, Precision format) const;
    // BF16 is always admitted. Otherwise true only when a rule for (kind, cols, format) exists and
    // rows >= min_rows.
    bool admits(Precision format, LayerKind kind, std::uint64_t rows, std::uint64_t cols) const;

    bool operator==(const FormatGatePolicy& o) const;
    bool operator!=(const FormatGatePolicy& o) const { return !(*this == o); }
};

// Rules from measurements: for each (kind, cols, format), min_rows = the smallest measured rows from
// which the speed-up is >= threshold at that size AND at every larger size measured; no such size ->
// no rule. Several measurements of one size count as their slowest. BF16 measurements are ignored
// (BF16 needs no rule). Throws std::invalid_argument unless the threshold is finite and > 0.
FormatGatePolicy derive_gate_policy(const std::vector<GateMeasurement>& measurements,
                                    double speedup_threshold);

// Thrown for a bad policy file: a ConfigError (callers that catch that keep working) whose what()
// names the file kind instead of the training config. problems() lists one problem per line, each
// naming the key (e.g. 'rules.matrix.128[0].min_rows') and what is wrong.
class GatePolicyError : public ConfigError {
  public:
    explicit GatePolicyError(const std::vector<std::string>& problems);
    const char* what() const noexcept override { return text_.c_str(); }

  private:
    std::string text_;
};

FormatGatePolicy parse_gate_policy(std::string_view json_text);  // throws GatePolicyError
FormatGatePolicy load_gate_policy(const std::string& path);      // adds the path to every message
// Pretty (two-space indent), keys in a fixed order, sizes in numeric order, ending in a newline;
// parse_gate_policy(to_json_text(p)) == p for every valid policy.
std::string to_json_text(const FormatGatePolicy& p);

// A block (its parameters' shapes) may be routed to `format` only when every MATRIX parameter is
// admitted. Vector parameters follow the block: norms and biases are a small share of its bytes and
// seed 003 gates only the GEMM modules. A block with no matrix parameter is admitted to BF16 only.
bool admits_block(const FormatGatePolicy& p, Precision format, const std::vector<TensorShape>& shapes);

}  // namespace sp
