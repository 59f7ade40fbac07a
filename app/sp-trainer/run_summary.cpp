#include "run_summary.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace sp::trainer {

namespace {

// The BF16 bytes of the largest block: what one slot of weights holds in the weights scope.
std::uint64_t largest_block_bf16_bytes(const agent::ReferencePrecisionRuntime& runtime) {
    std::uint64_t largest = 0;
    for (std::size_t b = 0; b < runtime.precisions().size(); ++b)
        largest = std::max(largest, runtime.block_bytes(b, Precision::bf16).bf16);
    return largest;
}

}  // namespace

// printf-style formatting into a std::string (progress lines are fixed-width tables).
std::string format(const char* fmt, ...) {
    va_list args, again;
    va_start(args, fmt);
    va_copy(again, args);
    const int size = std::vsnprintf(nullptr, 0, fmt, args);
    va_end(args);
    std::string out(size > 0 ? std::size_t(size) : 0, '\0');
    if (size > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, again);  // C++17: data() is writable
    va_end(again);
    return out;
}

namespace {

// The agent's profiling time on the training thread (Agent::Overhead::distribution_s: its
// observe_layer_input / observe_layer_output_grad calls and the profiling in compute_hints, waits for
// its worker or device included) as a share of the training steps' time; 0 before any step.
double profiling_share(const agent::Agent& agent, const RunTotals& t) {
    return t.train_step_s > 0 ? agent.overhead().distribution_s / t.train_step_s : 0.0;
}

}  // namespace

void print_summary(const TrainerOptions& o, const agent::Agent& agent,
                   const agent::ReferencePrecisionRuntime& runtime, const RunTotals& t, double loop_s) {
    const auto& overhead = agent.overhead();
    std::string per_format;
    for (Precision p : kAllPrecisions)
        if (t.block_steps[std::size_t(p)] > 0 || p == Precision::bf16)
            per_format += format("%s%lld %s", per_format.empty() ? "" : ", ",
                                 static_cast<long long>(t.block_steps[std::size_t(p)]),
                                 std::string(to_string(p)).c_str());
    std::cout
        << "summary\n"
        << format(
               "  steps            %lld in %.1f s (%.2f steps/s; training steps %.1f s, evaluation %.1f s)\n",
               static_cast<long long>(t.steps_done), loop_s, double(t.steps_done) / loop_s, t.train_step_s,
               t.eval_s)
        << format("  eval loss        %.4f -> %.4f (initial -> final)\n", t.initial_eval, t.final_eval)
        << format("  precision        block-steps: %s (%.1f%% below BF16)\n", per_format.c_str(),
                  100.0 * t.low_share())
        << format("  switches         %lld block precision changes (%llu loss-feedback rollbacks)\n",
                  static_cast<long long>(t.switches), static_cast<unsigned long long>(agent.rollbacks()))
        << format(
               "  measured saving  %.2f%% average per step (%.2f%% of all bytes copied vs all-BF16; bytes "
               "the runtime copied, scales included: the records' estimated saving counts element "
               "widths only)\n",
               t.saving_pct_sum / double(std::max<std::int64_t>(t.steps_done, 1)),
               runtime.total_bytes().saving_pct())
        << format("  weights          %.1f MB on the device at most%s\n",
                  double(runtime.weights_peak_bytes()) / 1e6,
                  o.block_swap
                      ? format(" (block-swap: %d slots, the largest block %.1f MB in BF16; uploads %.3f s, "
                               "expansions %.3f s in training steps)",
                               o.swap_slots, double(largest_block_bf16_bytes(runtime)) / 1e6, t.upload_s,
                               t.expand_s)
                            .c_str()
                      : "")
        << format(
               "  agent overhead   %.3f s = %.2f%% of training-step time (collect %.3f s, hints %.3f s, "
               "bookkeeping %.3f s, distribution statistics %.3f s)\n",
               overhead.total_s(), t.train_step_s > 0 ? 100.0 * overhead.total_s() / t.train_step_s : 0.0,
               overhead.collect_s, overhead.hints_s, overhead.step_bookkeeping_s, overhead.distribution_s)
        << format(
               "  profiling        %.3f s on the training thread = %.2f%% of training-step time "
               "(profiling_share %.4f)\n",
               overhead.distribution_s, 100.0 * profiling_share(agent, t), profiling_share(agent, t));
    if (o.world_size > 1)
        std::cout << format(
            "  collectives      %.3f s of the agent's overhead (commands, statistics, map, loss)\n",
            overhead.collectives_s);
    std::cout << "  calibration      " << t.calibration << '\n';
    if (o.config.telemetry_enabled) {
        const agent::Agent::TelemetryLoss loss = agent.telemetry_loss();
        std::string lost = format("%llu of %llu records lost", static_cast<unsigned long long>(loss.lost),
                                  static_cast<unsigned long long>(loss.offered));
        if (loss.lost_to_errors > 0)
            lost += format(", %llu to write errors: %s", static_cast<unsigned long long>(loss.lost_to_errors),
                           loss.error.c_str());
        std::cout << format("  telemetry        %s (%s)\n", o.config.telemetry_file.c_str(), lost.c_str());
    } else
        std::cout << "  telemetry        off\n";
    std::cout.flush();
}

void write_summary_json(const TrainerOptions& o, const agent::Agent& agent,
                        const agent::ReferencePrecisionRuntime& runtime, const RunTotals& t, double loop_s,
                        double wall_s) {
    const agent::Agent::TelemetryLoss loss = agent.telemetry_loss();
    auto by_format = [](const std::array<std::int64_t, kPrecisionCount>& steps) {
        nlohmann::json j = nlohmann::json::object();
        for (Precision p : kAllPrecisions) j[std::string(to_string(p))] = steps[std::size_t(p)];
        return j;
    };
    auto maps_json = [](const RunTotals& totals) {
        nlohmann::json maps = nlohmann::json::array();
        for (const auto& [step, formats] : totals.maps) {
            nlohmann::json names = nlohmann::json::array();
            for (Precision p : formats) names.push_back(std::string(to_string(p)));
            maps.push_back({{"step", step}, {"map", names}});
        }
        return maps;
    };
    nlohmann::json per_block = nlohmann::json::array();
    for (const auto& steps : t.block_steps_per_block) per_block.push_back(by_format(steps));
    nlohmann::json j = {
        {"precision", std::string(to_string(o.precision))},
        {"seed", o.seed},
        {"steps", t.steps_done},
        {"end", t.end_reason},
        {"blocks", o.blocks},
        {"d_model", o.d_model},
        {"threads", t.threads},
        {"harsh_block", o.harsh_block ? nlohmann::json(*o.harsh_block) : nlohmann::json(nullptr)},
        {"harsh_step", o.harsh_step},
        {"outlier_block", o.outlier_block ? nlohmann::json(*o.outlier_block) : nlohmann::json(nullptr)},
        {"outlier_scale", o.outlier_scale},
        {"config", to_json(o.config)},
        {"initial_eval_loss", t.initial_eval},
        {"final_eval_loss", t.final_eval},
        {"eval_curve", t.eval_curve},
        {"maps", maps_json(t)},
        {"train_loss", t.train_losses},
        {"bytes_copied", runtime.total_bytes().copied},
        {"bytes_bf16", runtime.total_bytes().bf16},
        {"saving_pct", runtime.total_bytes().saving_pct()},
        {"block_steps", by_format(t.block_steps)},
        {"block_steps_per_block", per_block},
        {"low_block_step_share", t.low_share()},
        {"switches", t.switches},
        {"rollbacks", agent.rollbacks()},
        {"loop_s", loop_s},
        {"wall_s", wall_s},
        {"device", o.device},
        {"finetune_mode", o.adapters ? "adapters" : "full"},
        {"weight_residency", o.block_swap ? "block-swap"
                             : o.resident ? "resident"
                                          : "streamed"},
        {"train_step_s", t.train_step_s},
        {"step_s", t.step_s},
        {"agent_s", agent.overhead().total_s()},
        {"agent_collect_s", agent.overhead().collect_s},
        {"agent_hints_s", agent.overhead().hints_s},
        {"profiling_s", agent.overhead().distribution_s},
        {"profiling_share", profiling_share(agent, t)},
        {"weights_s", t.weights_s},
        {"swap_slots", o.block_swap ? nlohmann::json(o.swap_slots) : nlohmann::json(nullptr)},
        {"upload_s", t.upload_s},
        {"expand_s", t.expand_s},
        {"weights_peak_bytes", runtime.weights_peak_bytes()},
        {"largest_block_bf16_bytes", largest_block_bf16_bytes(runtime)},
        {"bytes_copied_per_step",
         t.steps_done > 0 ? double(t.bytes_copied_in_steps) / double(t.steps_done) : 0.0},
        {"bytes_bf16_per_step",
         t.steps_done > 0 ? double(t.bytes_bf16_in_steps) / double(t.steps_done) : 0.0},
        {"calibration", t.calibration},
        {"telemetry_records_offered", loss.offered},
        {"telemetry_records_lost", loss.lost},
        {"telemetry_records_lost_to_errors", loss.lost_to_errors},
    };
    std::ofstream out(o.summary_json);
    // A --telemetry path need not be UTF-8 (a Linux file name is bytes): replaced, never a throw.
    out << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    if (!out) throw std::runtime_error("cannot write --summary-json file '" + o.summary_json + "'");
}

}  // namespace sp::trainer
