#pragma once
// The measurements behind `sp-ctl gate` (core/GATE.md "What is measured"): which sizes, and how each
// format's trip is timed against BF16's in the same process.
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "sp/format_gate.h"

namespace sp::ctl {

struct GateSweep {
    std::uint64_t min_rows = 16, max_rows = 65536;
    int repeats = 7;
    std::uint64_t int4_group = 64;
    std::vector<sp::Precision> formats;  // not BF16: it is the baseline every format is timed against
};

// The row counts to measure per (kind, cols): for matrices the powers of two in [min_rows, max_rows]
// plus the model's own row counts; a vector is measured at its own size only (one row).
using SizePlan = std::map<std::pair<sp::LayerKind, std::uint64_t>, std::set<std::uint64_t>>;
SizePlan plan_sizes(const std::vector<sp::TensorShape>& shapes, const GateSweep& sweep);

// Deterministic weights in [-1, 1) with a spread of magnitudes, so the FP8 paths see normal and
// subnormal values and the INT8/INT4 scales are not trivial. The same for every link.
std::vector<float> master_weights(std::size_t n);

// Times every format and BF16 at one size: `repeats` rounds, each running every path once in an
// order that rotates from round to round, so slow and fast moments of the machine fall on all of
// them alike; each path's time is the median over the rounds. One measurement per format.
std::vector<sp::GateMeasurement> measure_size(sp::LayerKind kind, std::uint64_t rows, std::uint64_t cols,
                                              const GateSweep& sweep);

// One measurement per format of a size, from the paths' samples (samples[0]: BF16's; samples[i]:
// sweep.formats[i - 1]'s): each path's time is the median of its samples (the mean of the middle two
// for an even count). Here and for `--link cuda` (gate_cuda_link.h).
std::vector<sp::GateMeasurement> medians_against_bf16(sp::LayerKind kind, std::uint64_t rows,
                                                      std::uint64_t cols, const GateSweep& sweep,
                                                      std::vector<std::vector<double>> samples);

}  // namespace sp::ctl
