#pragma once
// Quantization-error calibration (the seed's "Quantization Error Calibration"; docs/ARCHITECTURE.md
// says what the seed is): for each block, run
// `samples` forward passes on real inputs with BF16 weights and with INT8 weights and average
// ||out_bf16 - out_int8|| / ||out_bf16||. Results are cached on disk by a fingerprint of the model
// identity, the quantization config and the block layout, so they run once per configuration.
#include <functional>
#include <string>
#include <vector>

#include "sp/agent/block.h"

namespace sp::agent {

struct CalibrationHooks {
    // The real activation entering `block` for calibration sample `sample` (0..samples-1).
    std::function<at::Tensor(int block, int sample)> input;
    // Runs `block` on `x` (no autograd needed) and returns its output.
    std::function<at::Tensor(int block, const at::Tensor& x)> forward;
    // Optional: called before each forward with the precision the block's weights are in for it
    // (bf16, then int8), for a trainer that rounds more than the weights to the block's format
    // (sp-trainer also rounds each linear layer's input). Unset: not called.
    std::function<void(int block, Precision weights)> compute_format;
};

struct CalibrationResult {
    std::vector<double> errors;  // per block id, finite and >= 0
    std::string fingerprint;     // 16 hex digits
    std::string cache_path;      // the file the result was read from or written to ("" if none)
    bool from_cache = false;     // true: no forward pass ran
};

// Identifies what the errors depend on: `model_identity` (the caller's name for model + weights,
// e.g. "sp-trainer gpt seed=1"), the quantization scheme and sample count, and every block's name,
// parameter names, shapes and dtypes. Any change gives another fingerprint.
std::string calibration_fingerprint(const std::string& model_identity, const std::vector<AgentBlock>& blocks,
                                    int samples);

// The default cache folder: $XDG_CACHE_HOME/selective-precision, else ~/.cache/selective-precision,
// else ./.selective-precision-cache.
std::string default_calibration_cache_dir();

// Relative output error of one sample: ||a - b|| / ||a|| in double. When ||a|| is 0 the sample's error
// is 0 if b is all zero too, else 1 (the error score's ceiling); a non-finite value in either gives 1.
// Never NaN or infinite.
double relative_output_error(const at::Tensor& out_bf16, const at::Tensor& out_int8);

// Runs (or loads) calibration. With an empty `cache_dir` nothing is read or written. The block's
// weights are restored exactly afterwards. Throws std::runtime_error naming the block on a failing hook.
CalibrationResult calibrate(const std::vector<AgentBlock>& blocks, const CalibrationHooks& hooks, int samples,
                            const std::string& model_identity, const std::string& cache_dir);

}  // namespace sp::agent
