#pragma once
// What sp-trainer says at the end of a run: the totals it keeps while training, the text summary and
// the machine-readable one (--summary-json, read by sp-experiment).
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sp/agent/agent.h"
#include "sp/agent/precision_runtime.h"
#include "trainer_options.h"

namespace sp::trainer {

// printf-style formatting into a std::string (progress lines are fixed-width tables).
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

struct RunTotals {
    std::int64_t steps_done = 0;  // fewer than --steps when a signal stopped the run
    std::string end_reason;       // what the run_end record says
    double train_step_s = 0;      // begin_step .. end_step, summed (what the overhead is relative to)
    std::vector<double> step_s;   // the same, per step: the first step's set-up and profiling show apart
    double eval_s = 0;
    std::array<std::int64_t, kPrecisionCount> block_steps{};                       // per format
    std::vector<std::array<std::int64_t, kPrecisionCount>> block_steps_per_block;  // [block][format]
    std::int64_t switches = 0;
    double saving_pct_sum = 0;
    std::uint64_t bytes_copied_in_steps = 0, bytes_bf16_in_steps = 0;  // the steps' own (no initial load)
    // Time in the runtime's weight movement in training steps: after_optimizer_step (packing, and in
    // streamed/resident the materialization) and block-swap's uploads and expansions (upload_s,
    // expand_s: SwapStats, host time on the CPU, device time on CUDA) in the training steps.
    double weights_s = 0;
    double upload_s = 0, expand_s = 0;
    double initial_eval = NAN, final_eval = NAN;
    std::string calibration;                                  // where the INT8 errors came from
    std::string threads;                                      // who runs the matrix products
    std::vector<std::pair<std::int64_t, double>> eval_curve;  // (step, held-out loss)
    std::vector<double> train_losses;                         // per step
    // The map each step computed with, where it changed: (step, format per block); the last entry
    // at --steps is the map the final weights are in.
    std::vector<std::pair<std::int64_t, std::vector<Precision>>> maps;

    // The share of block-steps spent below BF16.
    double low_share() const {
        std::int64_t all = 0;
        for (std::int64_t n : block_steps) all += n;
        return all > 0 ? 1.0 - double(block_steps[std::size_t(Precision::bf16)]) / double(all) : 0.0;
    }
};

void print_summary(const TrainerOptions& o, const agent::Agent& agent,
                   const agent::ReferencePrecisionRuntime& runtime, const RunTotals& t, double loop_s);
// The machine-readable summary (--summary-json) the experiment driver reads; throws
// std::runtime_error naming the file when it cannot be written. Strings that are not UTF-8 (a
// --telemetry path in the config) have each invalid byte replaced by U+FFFD, as in the header.
void write_summary_json(const TrainerOptions& o, const agent::Agent& agent,
                        const agent::ReferencePrecisionRuntime& runtime, const RunTotals& t, double loop_s,
                        double wall_s);

}  // namespace sp::trainer
