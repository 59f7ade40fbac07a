#include "run_summary.h"

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace sp::trainer {

void write_summary_json(const TrainerOptions& o, const agent::Agent& agent,
                        const agent::ReferencePrecisionRuntime& runtime, const RunTotals& t, double loop_s,
                        double wall_s) {
    auto by_format = [](const std::array<std::int64_t, kPrecisionCount>& steps) {
        nlohmann::json j = nlohmann::json::object();
        for (Precision p : kAllPrecisions) j[std::string(to_string(p))] = steps[std::size_t(p)];
        return j;
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
        {"calibration", t.calibration},
    };
    std::ofstream out(o.summary_json);
    // A --telemetry path need not be UTF-8 (a Linux file name is bytes): replaced, never a throw.
    out << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    if (!out) throw std::runtime_error("cannot write --summary-json file '" + o.summary_json + "'");
}

}  // namespace sp::trainer
