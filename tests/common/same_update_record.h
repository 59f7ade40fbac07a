#pragma once
// Field-by-field comparison of two UpdateRecords, for the differential checks of the update-record
// parser against the nlohmann oracle (tests/fuzz/fuzz_jsonl.cpp, test_telemetry_jsonl_reading). Doubles
// compare with
// ==, except that NaN equals NaN: JSON null reads as NaN, and nlohmann reads "-0" as the integer 0,
// so -0.0 and 0.0 must count as equal.
#include <cmath>
#include <optional>
#include <string>

#include "sp/reason_text.h"
#include "sp/telemetry.h"

namespace sp::test {

inline bool same_double(double a, double b) {
    return (std::isnan(a) && std::isnan(b)) || a == b;
}

inline bool same_double(const std::optional<double>& a, const std::optional<double>& b) {
    return a.has_value() == b.has_value() && (!a || same_double(*a, *b));
}

// The first field in which the records differ ("block_details[2].mean"), empty when none does.
inline std::string update_record_difference(const UpdateRecord& a, const UpdateRecord& b) {
#define SP_DIFF(cond, name) \
    if (!(cond)) return name
    SP_DIFF(a.step_id == b.step_id, "step_id");
    SP_DIFF(same_double(a.timestamp, b.timestamp), "timestamp");
    SP_DIFF(a.blocks_bf16 == b.blocks_bf16, "blocks_bf16");
    SP_DIFF(a.blocks_int8 == b.blocks_int8, "blocks_int8");
    SP_DIFF(a.blocks_fp8 == b.blocks_fp8, "blocks_fp8");
    SP_DIFF(a.blocks_int4 == b.blocks_int4, "blocks_int4");
    SP_DIFF(same_double(a.mean_sensitivity, b.mean_sensitivity), "mean_sensitivity");
    SP_DIFF(same_double(a.max_sensitivity, b.max_sensitivity), "max_sensitivity");
    SP_DIFF(same_double(a.min_sensitivity, b.min_sensitivity), "min_sensitivity");
    SP_DIFF(a.precision_changes == b.precision_changes, "precision_changes");
    SP_DIFF(same_double(a.estimated_bandwidth_saving_pct, b.estimated_bandwidth_saving_pct),
            "estimated_bandwidth_saving_pct");
    SP_DIFF(a.mode == b.mode, "mode");
    SP_DIFF(same_double(a.budget_target_pct, b.budget_target_pct), "budget_target_pct");
    SP_DIFF(same_double(a.loss_tolerance_pct, b.loss_tolerance_pct), "loss_tolerance_pct");
    SP_DIFF(same_double(a.estimated_loss_pct, b.estimated_loss_pct), "estimated_loss_pct");
    SP_DIFF(same_double(a.measured_bandwidth_saving_pct, b.measured_bandwidth_saving_pct),
            "measured_bandwidth_saving_pct");
    SP_DIFF(same_double(a.train_loss, b.train_loss), "train_loss");
    SP_DIFF(same_double(a.eval_loss, b.eval_loss), "eval_loss");
    SP_DIFF(a.eval_step == b.eval_step, "eval_step");
    SP_DIFF(a.block_details.size() == b.block_details.size(), "block_details (count)");
    for (std::size_t i = 0; i < a.block_details.size(); ++i) {
        const BlockDetail& x = a.block_details[i];
        const BlockDetail& y = b.block_details[i];
        const std::string at = "block_details[" + std::to_string(i) + "].";
        SP_DIFF(x.id == y.id, at + "id");
        SP_DIFF(x.precision == y.precision, at + "precision");
        SP_DIFF(same_double(x.sensitivity, y.sensitivity), at + "sensitivity");
        SP_DIFF(same_double(x.grad_score, y.grad_score), at + "grad_score");
        SP_DIFF(same_double(x.error_score, y.error_score), at + "error_score");
        SP_DIFF(same_double(x.relative_magnitude, y.relative_magnitude), at + "relative_magnitude");
        SP_DIFF(same_double(x.l2_norm, y.l2_norm), at + "l2_norm");
        SP_DIFF(same_double(x.max_abs, y.max_abs), at + "max_abs");
        SP_DIFF(same_double(x.variance, y.variance), at + "variance");
        SP_DIFF(same_double(x.mean, y.mean), at + "mean");
        SP_DIFF(x.forced == y.forced, at + "forced");
        SP_DIFF(x.changed == y.changed, at + "changed");
        SP_DIFF(x.reason == y.reason, at + "reason");
        SP_DIFF(x.window == y.window, at + "window");
        SP_DIFF(x.last_change_step == y.last_change_step, at + "last_change_step");
        SP_DIFF(x.switches == y.switches, at + "switches");
        for (std::size_t f = 0; f < x.snr_db.size(); ++f) {
            SP_DIFF(same_double(x.snr_db[f], y.snr_db[f]), at + "snr_db[" + std::to_string(f) + "]");
            SP_DIFF(same_double(x.loss_delta_pct[f], y.loss_delta_pct[f]),
                    at + "loss_delta_pct[" + std::to_string(f) + "]");
        }
        SP_DIFF(reason_text(x) == reason_text(y), at + "reason_text");  // words read, or rendered from facts
    }
#undef SP_DIFF
    return {};
}

inline bool same_update_record(const UpdateRecord& a, const UpdateRecord& b) {
    return update_record_difference(a, b).empty();
}

}  // namespace sp::test
