#pragma once
// Telemetry records: what the policy reports at each update, plus the run header and events.
// A per-update record has exactly the seed's fields plus additive ones; it carries no "type".
// Header and event records carry "type": "header" / "event". The JSONL form is documented in
// core/TELEMETRY.md.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sp/config.h"
#include "sp/layout.h"
#include "sp/precision.h"
#include "sp/reason_facts.h"
#include "sp/stats.h"

namespace sp {

inline constexpr int kTelemetrySchemaVersion = 1;

// Why a block has its precision at this update (additive field "reason").
enum class Reason : std::uint8_t {
    warmup,     // no update has assigned it yet (bf16)
    mode,       // mode off/static keeps it bf16
    initial,    // first dynamic assignment (no hysteresis)
    policy,     // hysteresis decision moved it
    hold,       // hysteresis band or no strong enough signal: kept its precision
    cooldown,   // the policy wanted a change but the cooldown forbids it
    nonfinite,  // non-finite gradients since the previous update: promoted/kept bf16
    config,     // force_bf16_blocks / force_int8_blocks
    pin,        // operator pin
    rollback,   // loss feedback moved it back to BF16 (only in precision_change events)
};
std::string_view to_string(Reason r);
std::optional<Reason> parse_reason(std::string_view text);

enum class ForcedBy : std::uint8_t { none, config, pin };  // JSON: null, "config", "pin"

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();  // JSON null

struct BlockDetail {
    int id = 0;
    Precision precision = Precision::bf16;
    double sensitivity = 0.0;
    double grad_score = 0.0;
    double error_score = 0.0;
    double relative_magnitude = 0.0;
    // Window averages the decision used; NaN (JSON null) when the block has no finite observation.
    double l2_norm = kNoValue;
    double max_abs = kNoValue;
    double variance = kNoValue;
    double mean = kNoValue;  // additive
    ForcedBy forced = ForcedBy::none;
    bool changed = false;  // precision differs from the previous record's
    // Additive fields; absent in files written by the original tool.
    Reason reason = Reason::hold;
    int window = 0;                      // finite observations in the window
    std::int64_t last_change_step = -1;  // -1: never changed
    int switches = 0;                    // precision changes so far in this run
    // The latest SNR estimate per format ("snr_db", low formats only; NaN/absent: none yet).
    PerFormat snr_db = kNoSnr;
    // The latest loss-change estimate per format in percent of the loss ("loss_delta_pct", low formats
    // only; NaN/absent: none yet). POLICY.md rule 23.
    PerFormat loss_delta_pct = kNoSnr;
    // The decision as data, filled by the policy (in no file: files carry its words).
    ReasonFacts facts;
    // The decision in words ("reason_text") as read from a file or a stream; empty in the records the
    // policy makes. Read either through sp::reason_text (sp/reason_text.h), which renders the facts
    // when there are no words.
    std::string reason_text;
};

struct UpdateRecord {
    // The seed's fields.
    std::int64_t step_id = 0;
    double timestamp = 0.0;  // wall-clock seconds
    int blocks_bf16 = 0;
    int blocks_int8 = 0;
    double mean_sensitivity = 0.0;
    double max_sensitivity = 0.0;
    double min_sensitivity = 0.0;
    int precision_changes = 0;
    double estimated_bandwidth_saving_pct = 0.0;
    std::vector<BlockDetail> block_details;  // sorted by id; JSON object keyed by the id as a string
    // Additive fields.
    int blocks_fp8 = 0;
    int blocks_int4 = 0;
    std::optional<double> budget_target_pct;   // mode "budget": the target the plan aimed at
    std::optional<double> loss_tolerance_pct;  // mode "tolerance": the tolerance it planned for
    // The plan's summed loss-change estimate, in percent (planned on the loss estimate: rule 23).
    std::optional<double> estimated_loss_pct;
    std::optional<Mode> mode;                             // absent in original-tool files
    std::optional<double> measured_bandwidth_saving_pct;  // set by a runtime that counts real bytes
    std::optional<double> train_loss;                     // the loss of the update's step, when known
    std::optional<double> eval_loss;                      // the latest held-out loss, when known
    // The step at which eval_loss was measured (an eval before training is step 0, earlier than the
    // record's step); absent in older files, meaning the record's own step.
    std::optional<std::int64_t> eval_step;
};

// Per-step block statistics (written when telemetry_every_step is on), in `sp-ctl simulate`'s input
// format: {"step":S,"timestamp":T,"blocks":[{"id":..,"l2_norm":..,...}]}.
struct StepStatsRecord {
    std::int64_t step = 0;
    double timestamp = 0.0;
    std::vector<BlockGradStats> blocks;
    // The step's training loss, when the producer knew it (NaN: a non-finite loss, JSON null). Loss
    // feedback decisions are replayed from it.
    std::optional<double> loss;
    // SNR estimates taken at this step (distribution statistics steps only), replayed by the simulator.
    std::vector<BlockSnr> snr;
    // Loss-change estimates taken at this step (rule 23), replayed by the simulator.
    std::vector<BlockLossEstimate> loss_estimates;
};

struct RunHeader {
    int schema_version = kTelemetrySchemaVersion;
    std::string run_id;
    std::string producer;  // e.g. "sp-ctl simulate 0.1.0"
    BlockLayout blocks;
    std::string config_json;                 // the effective config object, as JSON text
    std::vector<double> calibration_errors;  // per block id; empty when calibration did not run
    // Per block id, the formats the "never slower than BF16" gate admits; empty when no gate is set.
    std::vector<FormatMask> admitted_formats;
};

// EventRecord and its typed payloads: sp/event_payload.h.

}  // namespace sp
