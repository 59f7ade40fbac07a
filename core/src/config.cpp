// Config keys and validation. Every key lives in one descriptor table (kKeys below): the reader,
// to_json and the "did you mean" suggestions all walk that table, so adding a key means adding one
// row there plus its range rule in check() and a line in core/CONFIG.md. Where the keys sit in a
// document, and reading the text and the file, is in config_file.cpp.
#include "sp/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "config_section.h"
#include "edit_distance.h"
#include "id_list.h"

namespace sp {
namespace {

using json = nlohmann::json;

constexpr std::string_view kModeNames = R"("off", "static", "dynamic", "budget", "tolerance")";
constexpr std::string_view kAmbiguousNames = R"("bf16", "int8", "fp8_e4m3", "fp8_e5m2", "int4")";
constexpr std::string_view kEstimatorNames = R"("zeroing", "sample", "zeroing_tensor_absmax")";

// Upper bounds (core/CONFIG.md, "Limits").
constexpr std::int64_t kMaxSteps = std::int64_t(1) << 40;  // far beyond any run; sums never overflow
constexpr std::int64_t kMaxHistoryWindow = 100000;
constexpr std::int64_t kMaxCalibrationSamples = 10000;
constexpr std::size_t kMaxStringBytes = 4096;  // a path
constexpr std::size_t kMaxKeyBytes = 256;

// A value as it appears in a message. Doubles go through json so they print in the shortest form
// that round-trips (0.6, not 0.59999999999999998); NaN/inf, which JSON cannot spell, get names.
std::string show(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    // Integral values print as the user most likely wrote them ("2", not json's "2.0").
    if (v == std::trunc(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<std::int64_t>(v));
    return json(v).dump();
}

// Bad values can be whole objects; keep messages to one readable line.
std::string show(const json& v) {
    if (v.is_number_float()) return show(v.get<double>());
    std::string text = v.dump();
    constexpr std::size_t kMax = 80;
    if (text.size() > kMax) text = text.substr(0, kMax) + "...";
    return text;
}

std::string got(const json& v) {
    return ", got " + show(v);
}

// Reads an integer of type T. Integral floats (4.0, 1e3) are accepted because JSON writers such as
// Python's emit them for integer-valued numbers; fractions and values outside T are rejected.
template <typename T>
bool read_integer(const json& v, T& out) {
    constexpr auto lo = std::numeric_limits<T>::min();
    constexpr auto hi = std::numeric_limits<T>::max();
    if (v.is_number_unsigned()) {
        const auto u = v.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(hi)) return false;
        out = static_cast<T>(u);
        return true;
    }
    if (v.is_number_integer()) {
        const auto i = v.get<std::int64_t>();
        if (i < static_cast<std::int64_t>(lo) || i > static_cast<std::int64_t>(hi)) return false;
        out = static_cast<T>(i);
        return true;
    }
    if (v.is_number_float()) {
        const double d = v.get<double>();
        // -lo == hi + 1 is a power of two, so both bounds are exact doubles.
        if (!std::isfinite(d) || d != std::trunc(d)) return false;
        if (d < static_cast<double>(lo) || d >= -static_cast<double>(lo)) return false;
        out = static_cast<T>(d);
        return true;
    }
    return false;
}

// One configuration key: its name, how to read it from JSON into a Config (returning the reason on
// a type problem, empty on success) and how to write it back. Ranges are not checked here but in
// check(), which also serves validate() on structs built in code.
struct Key {
    std::string_view name;
    std::function<std::string(const json&, Config&)> read;
    std::function<json(const Config&)> write;
};

Key flag(std::string_view name, bool Config::*m) {
    return {name,
            [m](const json& v, Config& c) -> std::string {
                if (!v.is_boolean()) return "must be a boolean (true or false)" + got(v);
                c.*m = v.get<bool>();
                return {};
            },
            [m](const Config& c) { return json(c.*m); }};
}

Key real(std::string_view name, double Config::*m) {
    return {name,
            [m](const json& v, Config& c) -> std::string {
                if (!v.is_number()) return "must be a number" + got(v);  // booleans are not numbers
                c.*m = v.get<double>();
                return {};
            },
            [m](const Config& c) { return json(c.*m); }};
}

template <typename T>
Key whole(std::string_view name, T Config::*m) {
    return {name,
            [m](const json& v, Config& c) -> std::string {
                if (!read_integer(v, c.*m)) return "must be an integer" + got(v);
                return {};
            },
            [m](const Config& c) { return json(c.*m); }};
}

Key text(std::string_view name, std::string Config::*m) {
    return {name,
            [m](const json& v, Config& c) -> std::string {
                if (!v.is_string()) return "must be a string" + got(v);
                c.*m = v.get<std::string>();
                return {};
            },
            [m](const Config& c) { return json(c.*m); }};
}

// Block id lists come out sorted and without duplicates: a repeated id means the same thing twice.
Key block_list(std::string_view name, std::vector<int> Config::*m) {
    return {name,
            [m](const json& v, Config& c) -> std::string {
                if (!v.is_array()) return "must be an array of block ids" + got(v);
                std::vector<int> ids;
                for (std::size_t i = 0; i < v.size(); ++i) {
                    int id = 0;
                    if (!read_integer(v[i], id))
                        return "element [" + std::to_string(i) + "] must be an integer block id" + got(v[i]);
                    ids.push_back(id);
                }
                std::sort(ids.begin(), ids.end());
                ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
                c.*m = std::move(ids);
                return {};
            },
            [m](const Config& c) { return json(c.*m); }};
}

Key mode_key() {
    return {"mode",
            [](const json& v, Config& c) -> std::string {
                Mode mode{};
                if (!v.is_string() || !parse_mode(v.get<std::string>(), mode))
                    return "must be one of " + std::string(kModeNames) + got(v);
                c.mode = mode;
                return {};
            },
            [](const Config& c) { return json(std::string(to_string(c.mode))); }};
}

// The ambiguous band's precision: any routed format.
Key ambiguous_key() {
    return {"ambiguous_default",
            [](const json& v, Config& c) -> std::string {
                const auto p = v.is_string() ? parse_precision(v.get<std::string>()) : std::nullopt;
                if (!p) return "must be one of " + std::string(kAmbiguousNames) + got(v);
                c.ambiguous_default = *p;
                return {};
            },
            [](const Config& c) { return json(std::string(to_string(c.ambiguous_default))); }};
}

// {"int8": 30, "int4": 24, ...}: one threshold in dB per low format; formats left out keep theirs.
Key snr_thresholds_key() {
    return {"snr_threshold_db",
            [](const json& v, Config& c) -> std::string {
                if (!v.is_object()) return "must be an object of dB thresholds by low format" + got(v);
                auto out = c.snr_threshold_db;
                for (const auto& [name, value] : v.items()) {
                    const auto p = parse_precision(name);
                    if (!p || *p == Precision::bf16)
                        return "unknown low format " + json(name).dump() +
                               R"( (valid: "int8", "fp8_e4m3", "fp8_e5m2", "int4"))" + got(v);
                    if (!value.is_number())
                        return "the threshold of " + json(name).dump() + " must be a number" + got(v);
                    out[std::size_t(*p)] = value.get<double>();
                }
                c.snr_threshold_db = out;
                return {};
            },
            [](const Config& c) {
                json j = json::object();
                for (Precision p : kLowFormatsCheapestFirst)
                    j[std::string(to_string(p))] = c.snr_threshold_db[std::size_t(p)];
                return j;
            }};
}

const std::vector<Key>& keys() {
    static const std::vector<Key> kKeys = {
        flag("enabled", &Config::enabled),
        mode_key(),
        real("bf16_threshold", &Config::bf16_threshold),
        real("int8_threshold", &Config::int8_threshold),
        ambiguous_key(),
        real("hysteresis_margin", &Config::hysteresis_margin),
        real("grad_weight", &Config::grad_weight),
        real("error_weight", &Config::error_weight),
        real("grad_sensitivity_threshold", &Config::grad_sensitivity_threshold),
        flag("run_calibration", &Config::run_calibration),
        whole("calibration_samples", &Config::calibration_samples),
        real("quant_error_threshold", &Config::quant_error_threshold),
        whole("warmup_steps", &Config::warmup_steps),
        whole("history_window", &Config::history_window),
        whole("update_interval_steps", &Config::update_interval_steps),
        whole("min_steps_between_switches", &Config::min_steps_between_switches),
        block_list("force_bf16_blocks", &Config::force_bf16_blocks),
        block_list("force_int8_blocks", &Config::force_int8_blocks),
        block_list("force_int4_blocks", &Config::force_int4_blocks),
        block_list("force_fp8_e4m3_blocks", &Config::force_fp8_e4m3_blocks),
        block_list("force_fp8_e5m2_blocks", &Config::force_fp8_e5m2_blocks),
        flag("log_decisions", &Config::log_decisions),
        flag("telemetry_enabled", &Config::telemetry_enabled),
        text("telemetry_file", &Config::telemetry_file),
        flag("telemetry_every_step", &Config::telemetry_every_step),
        text("calibration_cache_dir", &Config::calibration_cache_dir),
        flag("rollback_enabled", &Config::rollback_enabled),
        real("loss_ema_alpha", &Config::loss_ema_alpha),
        real("loss_spike_zscore", &Config::loss_spike_zscore),
        whole("loss_min_history", &Config::loss_min_history),
        whole("rollback_window_steps", &Config::rollback_window_steps),
        whole("rollback_cooldown_steps", &Config::rollback_cooldown_steps),
        whole("int4_group_size", &Config::int4_group_size),
        whole("distribution_interval_steps", &Config::distribution_interval_steps),
        whole("snr_samples", &Config::snr_samples),
        real("snr_sample_rate", &Config::snr_sample_rate),
        whole("snr_seed", &Config::snr_seed),
        text("snr_estimator", &Config::snr_estimator),
        flag("snr_tiers", &Config::snr_tiers),
        snr_thresholds_key(),
        real("snr_hysteresis_db", &Config::snr_hysteresis_db),
        real("budget_target_pct", &Config::budget_target_pct),
        text("precision_scope", &Config::precision_scope),
        text("cost_estimator", &Config::cost_estimator),
        real("loss_tolerance_pct", &Config::loss_tolerance_pct),
        text("format_gate_file", &Config::format_gate_file),
        real("control_requests_per_second", &Config::control_requests_per_second),
        text("distributed_stats_mode", &Config::distributed_stats_mode),
        real("process_group_timeout_s", &Config::process_group_timeout_s),
    };
    return kKeys;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return out;
}

// The closest known key when it is close enough to be a typo: at most 3 edits and at most a third
// of the key's length (at least 1), compared case-insensitively. Ties go to the table order.
std::string_view suggestion(std::string_view unknown) {
    const std::string u = lower(unknown);
    std::string_view best;
    std::size_t best_distance = std::numeric_limits<std::size_t>::max();
    for (const Key& k : keys()) {
        const std::size_t limit = std::min<std::size_t>(3, std::max<std::size_t>(1, k.name.size() / 3));
        const std::size_t dist = detail::edit_distance(u, k.name);
        if (dist <= limit && dist < best_distance) {
            best = k.name;
            best_distance = dist;
        }
    }
    return best;
}

// A range or cross-key problem, with the keys it involves: when a key already failed its type
// check (and so still holds its default), rules involving it are not reported a second time.
struct Issue {
    std::vector<std::string_view> keys;
    std::string message;
};

std::string quoted(const std::string& prefix, std::string_view key) {
    return "'" + prefix + std::string(key) + "'";
}
std::string about(const std::string& prefix, std::string_view key) {
    return "key " + quoted(prefix, key) + ": ";
}

// The ranges of the format, SNR, budget and gate keys.
template <typename Add>
void check_formats(const Config& c, const std::string& prefix, Add&& add) {
    // Bounded so that a group, a sample or an interval is something the program can honour.
    if (c.int4_group_size < 1 || c.int4_group_size > (1 << 20))
        add({"int4_group_size"}, about(prefix, "int4_group_size") +
                                     "must be an integer in [1, 1048576], got " +
                                     std::to_string(c.int4_group_size));
    if (c.distribution_interval_steps < 0 || c.distribution_interval_steps > kMaxSteps)
        add({"distribution_interval_steps"}, about(prefix, "distribution_interval_steps") +
                                                 "must be an integer in [0, " + std::to_string(kMaxSteps) +
                                                 "] (0: never), got " +
                                                 std::to_string(c.distribution_interval_steps));
    if (c.snr_samples < 1 || c.snr_samples > 64)
        add({"snr_samples"}, about(prefix, "snr_samples") + "must be an integer in [1, 64], got " +
                                 std::to_string(c.snr_samples));
    if (!(c.snr_sample_rate > 0.0 && c.snr_sample_rate <= 1.0))
        add({"snr_sample_rate"},
            about(prefix, "snr_sample_rate") + "must be a number in (0, 1], got " + show(c.snr_sample_rate));
    if (c.snr_seed < 0)  // any 64-bit seed >= 0 is honoured
        add({"snr_seed"},
            about(prefix, "snr_seed") + "must be an integer >= 0, got " + std::to_string(c.snr_seed));
    if (c.snr_estimator != "zeroing" && c.snr_estimator != "sample" &&
        c.snr_estimator != "zeroing_tensor_absmax")
        add({"snr_estimator"}, about(prefix, "snr_estimator") + "must be one of " +
                                   std::string(kEstimatorNames) + ", got " + json(c.snr_estimator).dump());
    for (Precision p : kLowFormatsCheapestFirst) {
        const double t = c.snr_threshold_db[std::size_t(p)];
        if (!std::isfinite(t))
            add({"snr_threshold_db"}, about(prefix, "snr_threshold_db") + "the threshold of \"" +
                                          std::string(to_string(p)) + "\" must be a finite number, got " +
                                          show(t));
    }
    if (!(std::isfinite(c.snr_hysteresis_db) && c.snr_hysteresis_db >= 0.0))
        add({"snr_hysteresis_db"}, about(prefix, "snr_hysteresis_db") + "must be a finite number >= 0, got " +
                                       show(c.snr_hysteresis_db));
    if (!(c.control_requests_per_second > 0.0 && c.control_requests_per_second <= 1e6))
        add({"control_requests_per_second"}, about(prefix, "control_requests_per_second") +
                                                 "must be a number in (0, 1000000], got " +
                                                 show(c.control_requests_per_second));
    if (c.distributed_stats_mode != "replicated" && c.distributed_stats_mode != "sharded")
        add({"distributed_stats_mode"}, about(prefix, "distributed_stats_mode") +
                                            "must be one of \"replicated\", \"sharded\", got " +
                                            json(c.distributed_stats_mode).dump());
    if (!(c.process_group_timeout_s >= 1.0 && c.process_group_timeout_s <= 86400.0))
        add({"process_group_timeout_s"}, about(prefix, "process_group_timeout_s") +
                                             "must be a number of seconds in [1, 86400], got " +
                                             show(c.process_group_timeout_s));
    if (!(c.budget_target_pct >= 0.0 && c.budget_target_pct <= 100.0))
        add({"budget_target_pct"}, about(prefix, "budget_target_pct") + "must be a number in [0, 100], got " +
                                       show(c.budget_target_pct));
    if (!(c.loss_tolerance_pct >= 0.0 && c.loss_tolerance_pct <= 100.0))
        add({"loss_tolerance_pct"}, about(prefix, "loss_tolerance_pct") +
                                        "must be a number in [0, 100], got " + show(c.loss_tolerance_pct));
    if (c.precision_scope != "compute" && c.precision_scope != "weights")
        add({"precision_scope"}, about(prefix, "precision_scope") +
                                     R"(must be one of "compute", "weights", got )" +
                                     json(c.precision_scope).dump());
    if (c.cost_estimator != "sensitivity" && c.cost_estimator != "loss")
        add({"cost_estimator"}, about(prefix, "cost_estimator") +
                                    R"(must be one of "sensitivity", "loss", got )" +
                                    json(c.cost_estimator).dump());
}

// "force_<format>_blocks" by Precision value.
const std::array<std::string, kPrecisionCount>& force_key_names() {
    static const std::array<std::string, kPrecisionCount> kNames = [] {
        std::array<std::string, kPrecisionCount> names;
        for (Precision p : kAllPrecisions)
            names[std::size_t(p)] = "force_" + std::string(to_string(p)) + "_blocks";
        return names;
    }();
    return kNames;
}

// Every range and cross-key rule, in one place. `prefix` is the path of the section the keys came
// from ("" for a bare object or a struct), so messages name the key as the user wrote it.
std::vector<Issue> check(const Config& c, const std::string& prefix) {
    std::vector<Issue> out;
    auto add = [&](std::vector<std::string_view> ks, std::string message) {
        out.push_back({std::move(ks), std::move(message)});
    };
    auto in_unit = [](double v) { return v >= 0.0 && v <= 1.0; };  // false for NaN

    if (to_string(c.mode) == "unknown")
        add({"mode"}, about(prefix, "mode") + "must be one of " + std::string(kModeNames) + ", got " +
                          std::to_string(static_cast<int>(c.mode)));
    if (std::size_t(c.ambiguous_default) >= kPrecisionCount)
        add({"ambiguous_default"}, about(prefix, "ambiguous_default") + "must be one of " +
                                       std::string(kAmbiguousNames) + ", got " +
                                       std::to_string(static_cast<int>(c.ambiguous_default)));

    const std::pair<std::string_view, double> unit_keys[] = {{"bf16_threshold", c.bf16_threshold},
                                                             {"int8_threshold", c.int8_threshold},
                                                             {"hysteresis_margin", c.hysteresis_margin},
                                                             {"grad_weight", c.grad_weight},
                                                             {"error_weight", c.error_weight}};
    for (const auto& [name, v] : unit_keys)
        if (!in_unit(v)) add({name}, about(prefix, name) + "must be a number in [0, 1], got " + show(v));
    // Only meaningful once both thresholds are themselves valid.
    if (in_unit(c.bf16_threshold) && in_unit(c.int8_threshold) && c.int8_threshold > c.bf16_threshold)
        add({"int8_threshold", "bf16_threshold"},
            about(prefix, "int8_threshold") + "must be <= " + quoted(prefix, "bf16_threshold") + " (" +
                show(c.bf16_threshold) + "), got " + show(c.int8_threshold));
    if (!(c.quant_error_threshold > 0.0 && c.quant_error_threshold <= 1.0))
        add({"quant_error_threshold"}, about(prefix, "quant_error_threshold") +
                                           "must be a number in (0, 1], got " +
                                           show(c.quant_error_threshold));
    if (!(std::isfinite(c.grad_sensitivity_threshold) && c.grad_sensitivity_threshold > 0.0))
        add({"grad_sensitivity_threshold"}, about(prefix, "grad_sensitivity_threshold") +
                                                "must be a finite number > 0, got " +
                                                show(c.grad_sensitivity_threshold));

    if (!(c.loss_ema_alpha > 0.0 && c.loss_ema_alpha <= 1.0))
        add({"loss_ema_alpha"},
            about(prefix, "loss_ema_alpha") + "must be a number in (0, 1], got " + show(c.loss_ema_alpha));
    if (!(std::isfinite(c.loss_spike_zscore) && c.loss_spike_zscore > 0.0))
        add({"loss_spike_zscore"}, about(prefix, "loss_spike_zscore") + "must be a finite number > 0, got " +
                                       show(c.loss_spike_zscore));

    check_formats(c, prefix, add);

    // Every integer is bounded by what the program can honour: a window or a sample count is
    // allocated per block, and a step count is added to a step (no overflow up to 2^62).
    struct Bounded {
        std::string_view name;
        std::int64_t value, lo, hi;
    };
    const Bounded integers[] = {{"calibration_samples", c.calibration_samples, 1, kMaxCalibrationSamples},
                                {"history_window", c.history_window, 1, kMaxHistoryWindow},
                                {"loss_min_history", c.loss_min_history, 1, kMaxHistoryWindow},
                                {"update_interval_steps", c.update_interval_steps, 1, kMaxSteps},
                                {"rollback_window_steps", c.rollback_window_steps, 1, kMaxSteps},
                                {"warmup_steps", c.warmup_steps, 0, kMaxSteps},
                                {"min_steps_between_switches", c.min_steps_between_switches, 0, kMaxSteps},
                                {"rollback_cooldown_steps", c.rollback_cooldown_steps, 0, kMaxSteps}};
    for (const Bounded& b : integers)
        if (b.value < b.lo || b.value > b.hi)
            add({b.name}, about(prefix, b.name) + "must be an integer in [" + std::to_string(b.lo) + ", " +
                              std::to_string(b.hi) + "], got " + std::to_string(b.value));
    const std::pair<std::string_view, const std::string*> strings[] = {
        {"telemetry_file", &c.telemetry_file},
        {"calibration_cache_dir", &c.calibration_cache_dir},
        {"format_gate_file", &c.format_gate_file}};
    for (const auto& [name, s] : strings)
        if (s->size() > kMaxStringBytes)
            add({name}, about(prefix, name) + "too long: " + std::to_string(s->size()) +
                            " bytes (the limit is " + std::to_string(kMaxStringBytes) + ")");

    // One problem per key (or pair of keys), however many ids are wrong: detail::id_list.
    std::map<int, std::string_view> forced;  // block -> the first list naming it
    for (Precision p : kAllPrecisions) {
        const std::vector<int>& ids = c.force_list(p);
        const auto& name = force_key_names()[std::size_t(p)];
        std::vector<int> negative;
        std::map<std::string_view, std::vector<int>> in_both;  // the earlier key -> shared ids
        for (int id : std::set<int>(ids.begin(), ids.end())) {
            if (id < 0) {
                negative.push_back(id);
                continue;
            }
            const auto [it, fresh] = forced.emplace(id, name);
            if (!fresh) in_both[it->second].push_back(id);
        }
        if (!negative.empty())
            add({name}, about(prefix, name) + "block ids must be >= 0, got " + detail::id_list(negative));
        for (const auto& [earlier, shared] : in_both)
            add({earlier, name}, "keys " + quoted(prefix, earlier) + " and " + quoted(prefix, name) + ": " +
                                     (shared.size() == 1 ? "block " : "blocks ") + detail::id_list(shared) +
                                     (shared.size() == 1 ? " is" : " are") +
                                     " in both; a block can be forced to one precision only");
    }

    if (c.telemetry_enabled && c.telemetry_file.empty())
        add({"telemetry_file", "telemetry_enabled"},
            about(prefix, "telemetry_file") + "must be a non-empty string when " +
                quoted(prefix, "telemetry_enabled") + " is true, got " + json(c.telemetry_file).dump());
    return out;
}

}  // namespace

namespace detail {

Config read_config_section(const json& obj, const std::string& prefix) {
    Config c;
    std::vector<std::string> problems;
    std::set<std::string_view> bad;  // keys whose type was wrong
    for (const auto& [name, value] : obj.items()) {
        const auto& table = keys();
        const auto key = std::find_if(table.begin(), table.end(),
                                      [&, n = std::string_view(name)](const Key& k) { return k.name == n; });
        if (key == table.end()) {
            if (name.size() > kMaxKeyBytes) {  // no edit distance on megabytes, no megabyte message
                problems.push_back("key '" + prefix + name.substr(0, 64) + "...': unknown key, " +
                                   std::to_string(name.size()) + " bytes long (keys are at most " +
                                   std::to_string(kMaxKeyBytes) + ")");
                continue;
            }
            std::string msg = about(prefix, name) + "unknown key";
            if (const auto near = suggestion(name); !near.empty())
                msg += " (did you mean '" + std::string(near) + "'?)";
            problems.push_back(std::move(msg));
            continue;
        }
        if (std::string why = key->read(value, c); !why.empty()) {
            problems.push_back(about(prefix, name) + why);
            bad.insert(key->name);
        }
    }
    for (Issue& issue : check(c, prefix)) {
        const bool involves_bad = std::any_of(issue.keys.begin(), issue.keys.end(),
                                              [&](std::string_view k) { return bad.count(k); });
        if (!involves_bad) problems.push_back(std::move(issue.message));
    }
    if (!problems.empty()) throw ConfigError(std::move(problems));
    return c;
}

std::string got_value(const json& v) {
    return got(v);
}

}  // namespace detail

namespace {

std::string describe(const std::vector<std::string>& problems) {
    std::string text = "invalid Selective Precision config:";
    for (const std::string& p : problems) text += "\n  " + p;
    return text;
}

}  // namespace

std::vector<int>& Config::force_list(Precision p) {
    switch (p) {
        case Precision::bf16:
            return force_bf16_blocks;
        case Precision::int8:
            return force_int8_blocks;
        case Precision::fp8_e4m3:
            return force_fp8_e4m3_blocks;
        case Precision::fp8_e5m2:
            return force_fp8_e5m2_blocks;
        case Precision::int4:
            return force_int4_blocks;
    }
    return force_bf16_blocks;
}

const std::vector<int>& Config::force_list(Precision p) const {
    return const_cast<Config*>(this)->force_list(p);
}

std::string Config::force_key(Precision p) {
    return force_key_names()[std::size_t(p)];
}

ConfigError::ConfigError(std::vector<std::string> problems)
    : std::runtime_error(describe(problems)), problems_(std::move(problems)) {}

std::vector<std::string> validate(const Config& c) {
    std::vector<std::string> problems;
    for (Issue& issue : check(c, "")) problems.push_back(std::move(issue.message));
    return problems;
}

json to_json(const Config& c) {
    json j = json::object();
    for (const Key& k : keys()) j[std::string(k.name)] = k.write(c);
    return j;
}

}  // namespace sp
