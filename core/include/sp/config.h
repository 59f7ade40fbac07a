#pragma once
// The policy's configuration: every key of the seed's table, with the seed's defaults.
// Loading validates everything at once; a Config that exists is a valid Config.
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sp/precision.h"

namespace sp {

enum class Mode : std::uint8_t { off, static_, dynamic, budget, tolerance };

std::string_view to_string(Mode m);  // "off", "static", "dynamic", "budget", "tolerance"
bool parse_mode(std::string_view text, Mode& out);

struct Config {
    bool enabled = true;  // false behaves exactly as mode "off"
    Mode mode = Mode::dynamic;
    double bf16_threshold = 0.6;
    double int8_threshold = 0.3;
    Precision ambiguous_default = Precision::bf16;
    double hysteresis_margin = 0.1;
    double grad_weight = 0.7;
    double error_weight = 0.3;
    double grad_sensitivity_threshold = 2.0;
    bool run_calibration = true;
    int calibration_samples = 4;
    double quant_error_threshold = 0.05;
    std::int64_t warmup_steps = 10;
    int history_window = 5;
    std::int64_t update_interval_steps = 10;
    std::int64_t min_steps_between_switches = 20;
    std::vector<int> force_bf16_blocks;
    std::vector<int> force_int8_blocks;
    // Beyond the seed: the same for the other formats.
    std::vector<int> force_int4_blocks;
    std::vector<int> force_fp8_e4m3_blocks;
    std::vector<int> force_fp8_e5m2_blocks;
    bool log_decisions = true;
    bool telemetry_enabled = true;
    std::string telemetry_file = "selective_precision_telemetry.jsonl";
    // Beyond the seed:
    bool telemetry_every_step = false;  // also write per-step block statistics (sp-ctl simulate's input)
    std::string calibration_cache_dir;  // "" -> $XDG_CACHE_HOME or ~/.cache, + /selective-precision
    // Loss feedback (POLICY.md "Loss feedback"): a training-loss spike soon after the policy moved
    // blocks to a lower precision moves them back to BF16. Off by default: the seed has no such rule.
    bool rollback_enabled = false;
    double loss_ema_alpha = 0.2;                 // weight of the newest loss in the EMAs
    double loss_spike_zscore = 6.0;              // (loss - EMA) / stddev above this is a spike
    int loss_min_history = 20;                   // finite losses seen before a spike can be called
    std::int64_t rollback_window_steps = 20;     // a switch this many steps back or fewer is suspect
    std::int64_t rollback_cooldown_steps = 100;  // a rolled-back block stays BF16 at least this long

    // Formats, distribution statistics, SNR tiers, budget and gate (POLICY.md "Formats and tiers").
    int int4_group_size = 64;                       // INT4: one scale per this many elements of a row
    std::int64_t distribution_interval_steps = 50;  // weights/inputs profiled every this many steps; 0 never
    int snr_samples = 5;                            // K independent samples per tensor
    double snr_sample_rate = 0.01;                  // gamma: each sample's share of the tensor
    std::int64_t snr_seed = 0;                      // sampling seed (runs with the same seed sample alike)
    std::string snr_estimator = "sample";  // "sample", "zeroing" or "zeroing_tensor_absmax" (core/SNR.md)
    bool snr_tiers = false;                // route below BF16 to the cheapest format whose SNR clears
    // dB an estimated SNR must reach for each low format (by Precision value; bf16's entry is unused).
    // Measured SNR >= 30 dB for INT8 and E4M3 with the sample estimator; INT4 (about 20 dB on a Gaussian
    // bulk, 12 dB with outliers) and E5M2 (26.5 dB) are held to what they reach on well-behaved blocks.
    PerFormat snr_threshold_db = {0.0, 31.0, 28.0, 24.0, 18.0};
    double snr_hysteresis_db =
        3.0;  // leave a format below threshold - this, enter one above threshold + this
    double budget_target_pct = 50.0;  // mode "budget": bytes to save against all-BF16, in percent
    // What a block "in a format" means (POLICY.md "Precision scopes"): "compute" rounds its weights,
    // the inputs of its linear layers and the gradients at their outputs to the format; "weights"
    // stores and streams its weights in the format and computes in BF16 (the block-swap setting).
    std::string precision_scope = "compute";
    // What the budget plan minimises (POLICY.md rule 23): "sensitivity", the score times the format's
    // relative noise power (rule 18's greedy), or "loss", the estimated loss change per block and
    // format (an exact plan). Mode "tolerance" always plans on the loss estimate.
    std::string cost_estimator = "sensitivity";
    double loss_tolerance_pct = 0.5;  // mode "tolerance": the estimated loss increase allowed, in percent
    std::string format_gate_file;     // a "never slower than BF16" policy file (GATE.md); "" none
    double control_requests_per_second = 10.0;  // per control client; beyond it: "rate_limited"
    // Data-parallel training (agent/PROTOCOL.md, "Data-parallel jobs"): how the ranks' gradient
    // statistics meet ("replicated": every rank holds the all-reduced gradients, no statistics traffic;
    // "sharded": each rank holds a slice, one all-gather per step), and how long a collective may
    // wait for a rank before the job stops with an error naming it.
    std::string distributed_stats_mode = "replicated";
    double process_group_timeout_s = 60.0;

    // The mode the policy actually runs in (`enabled: false` means off).
    Mode effective_mode() const { return enabled ? mode : Mode::off; }
    bool weights_scope() const { return precision_scope == "weights"; }
    bool loss_estimator() const { return cost_estimator == "loss"; }

    // The force list of a format ("force_<format>_blocks"), and its key name.
    std::vector<int>& force_list(Precision p);
    const std::vector<int>& force_list(Precision p) const;
    static std::string force_key(Precision p);
};

// Thrown when a configuration is rejected. what() lists every problem found, one per line,
// each naming the key and the offending value.
class ConfigError : public std::runtime_error {
  public:
    explicit ConfigError(std::vector<std::string> problems);
    const std::vector<std::string>& problems() const { return problems_; }

  private:
    std::vector<std::string> problems_;
};

// Accepts the bare object, {"selective_precision": {...}} or
// {"memory": {"stagehand": {"selective_precision": {...}}}}. Missing keys keep their defaults.
Config config_from_json(const nlohmann::json& j);
Config parse_config(std::string_view json_text);   // also reports JSON syntax errors as ConfigError
Config load_config_file(const std::string& path);  // adds the path to every message

// Checks the cross-key rules (ranges, threshold order, force lists) of an already-built Config.
// Returns the problems; empty means valid.
std::vector<std::string> validate(const Config& c);

// The effective configuration as a bare JSON object with every key (for run headers and snapshots).
nlohmann::json to_json(const Config& c);

}  // namespace sp
