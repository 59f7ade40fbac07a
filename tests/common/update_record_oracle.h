#pragma once
// The test oracle for update records: core/TELEMETRY.md's rules written plainly over nlohmann's DOM,
// sharing no code with sp_core's parser (simdjson On-Demand, core/src/update_record_parser.cpp),
// which the fuzzer (tests/fuzz/fuzz_jsonl.cpp) and test_telemetry_jsonl_reading check against it.
// Tests only: sp_core has one parser for update records.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "sp/telemetry.h"

namespace sp::test {
namespace oracle {

using ojson = nlohmann::ordered_json;

struct Bad : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline const char* kind_of(const ojson& v) {
    if (v.is_number()) return "number";
    if (v.is_string()) return "string";
    if (v.is_boolean()) return "boolean";
    if (v.is_null()) return "null";
    if (v.is_array()) return "array";
    return "object";
}

[[noreturn]] inline void wrong_type(const std::string& name, const char* expected, const ojson& v) {
    throw Bad("field '" + name + "': expected " + expected + ", got " + kind_of(v));
}

inline std::int64_t to_int64(const ojson& v, const std::string& name) {
    if (!v.is_number_integer()) wrong_type(name, "an integer", v);
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
        throw Bad("field '" + name + "': integer out of range");
    }
    return v.get<std::int64_t>();
}

inline int to_int(const ojson& v, const std::string& name) {
    const std::int64_t wide = to_int64(v, name);
    if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
        throw Bad("field '" + name + "': integer out of range");
    }
    return int(wide);
}

inline double to_double(const ojson& v, const std::string& name) {  // null: no value
    if (v.is_null()) return kNoValue;
    if (!v.is_number()) wrong_type(name, "a number", v);
    return v.get<double>();
}

inline std::optional<double> to_optional(const ojson& v, const std::string& name) {  // null: absent
    if (v.is_null()) return std::nullopt;
    return to_double(v, name);
}

inline const std::string& text_of(const ojson& v, const std::string& name) {
    if (!v.is_string()) wrong_type(name, "a string", v);
    return v.get_ref<const std::string&>();
}

inline PerFormat snr_from(const ojson& v) {
    if (!v.is_object()) wrong_type("snr_db", "an object", v);
    PerFormat out = kNoSnr;
    for (const auto& [key, value] : v.items()) {
        const auto p = parse_precision(key);
        if (!p) throw Bad("snr_db: unknown format '" + key + "'");
        out[std::size_t(*p)] = to_double(value, "snr_db." + key);
    }
    return out;
}

// Only digits, and the id fits an int ("007" is block 7, as the parser reads it).
inline int block_id(const std::string& key) {
    int id = -1;
    const char* end = key.data() + key.size();
    const auto res = std::from_chars(key.data(), end, id);
    if (key.empty() || key[0] < '0' || key[0] > '9' || res.ec != std::errc() || res.ptr != end) {
        throw Bad("block_details: key '" + key + "' is not a non-negative integer");
    }
    return id;
}

inline BlockDetail detail_from(const std::string& key, const ojson& v) {
    BlockDetail d;
    d.id = block_id(key);
    const std::string prefix = "block_details." + std::to_string(d.id) + ".";
    if (!v.is_object()) wrong_type("block_details." + key, "an object", v);
    static const char* const kRequired[] = {
        "precision", "sensitivity", "grad_score", "error_score", "relative_magnitude",
        "l2_norm",   "max_abs",     "variance",   "forced",      "changed"};
    for (const char* name : kRequired) {
        if (!v.contains(name)) {
            throw Bad("block_details." + std::to_string(d.id) + ": missing field '" + name + "'");
        }
    }
    for (const auto& [name, x] : v.items()) {
        const std::string field = prefix + name;
        if (name == "precision") {
            const std::string& text = text_of(x, field);
            const auto p = parse_precision(text);
            if (!p) throw Bad("field '" + field + "': unknown precision '" + text + "'");
            d.precision = *p;
        } else if (name == "sensitivity") {
            d.sensitivity = to_double(x, field);
        } else if (name == "grad_score") {
            d.grad_score = to_double(x, field);
        } else if (name == "error_score") {
            d.error_score = to_double(x, field);
        } else if (name == "relative_magnitude") {
            d.relative_magnitude = to_double(x, field);
        } else if (name == "l2_norm") {
            d.l2_norm = to_double(x, field);
        } else if (name == "max_abs") {
            d.max_abs = to_double(x, field);
        } else if (name == "variance") {
            d.variance = to_double(x, field);
        } else if (name == "mean") {
            d.mean = to_double(x, field);
        } else if (name == "forced") {
            if (x.is_null()) {
                d.forced = ForcedBy::none;
                continue;
            }
            const std::string& text = text_of(x, field);
            if (text != "config" && text != "pin") {
                throw Bad("field '" + field + "': expected null, \"config\" or \"pin\", got '" + text + "'");
            }
            d.forced = text == "pin" ? ForcedBy::pin : ForcedBy::config;
        } else if (name == "changed") {
            if (!x.is_boolean()) wrong_type(field, "a boolean", x);
            d.changed = x.get<bool>();
        } else if (name == "reason") {
            const std::string& text = text_of(x, field);
            const auto r = parse_reason(text);
            if (!r) throw Bad("field '" + field + "': unknown reason '" + text + "'");
            d.reason = *r;
        } else if (name == "window") {
            d.window = to_int(x, field);
        } else if (name == "last_change_step") {
            d.last_change_step = to_int64(x, field);
        } else if (name == "switches") {
            d.switches = to_int(x, field);
        } else if (name == "snr_db") {
            d.snr_db = snr_from(x);
        } else if (name == "loss_delta_pct") {
            d.loss_delta_pct = snr_from(x);
        } else if (name == "reason_text") {
            d.reason_text = text_of(x, field);
        }  // anything else: a newer producer's field
    }
    return d;
}

inline void update_from(const ojson& j, UpdateRecord& r) {
    if (!j.is_object()) throw Bad("expected a JSON object");
    if (const auto t = j.find("type"); t != j.end() && text_of(*t, "type") != "update") {
        throw Bad("not an update record");
    }
    static const char* const kRequired[] = {
        "step_id",         "timestamp",         "blocks_bf16",
        "blocks_int8",     "mean_sensitivity",  "max_sensitivity",
        "min_sensitivity", "precision_changes", "estimated_bandwidth_saving_pct",
        "block_details"};
    for (const char* name : kRequired) {
        if (!j.contains(name)) throw Bad(std::string("missing field '") + name + "'");
    }
    for (const auto& [name, x] : j.items()) {
        if (name == "step_id") {
            r.step_id = to_int64(x, name);
        } else if (name == "timestamp") {
            r.timestamp = to_double(x, name);
        } else if (name == "blocks_bf16") {
            r.blocks_bf16 = to_int(x, name);
        } else if (name == "blocks_int8") {
            r.blocks_int8 = to_int(x, name);
        } else if (name == "blocks_fp8") {
            r.blocks_fp8 = to_int(x, name);
        } else if (name == "blocks_int4") {
            r.blocks_int4 = to_int(x, name);
        } else if (name == "mean_sensitivity") {
            r.mean_sensitivity = to_double(x, name);
        } else if (name == "max_sensitivity") {
            r.max_sensitivity = to_double(x, name);
        } else if (name == "min_sensitivity") {
            r.min_sensitivity = to_double(x, name);
        } else if (name == "precision_changes") {
            r.precision_changes = to_int(x, name);
        } else if (name == "estimated_bandwidth_saving_pct") {
            r.estimated_bandwidth_saving_pct = to_double(x, name);
        } else if (name == "block_details") {
            if (!x.is_object()) wrong_type(name, "an object", x);
            for (const auto& [key, value] : x.items()) r.block_details.push_back(detail_from(key, value));
        } else if (name == "mode") {
            if (x.is_null()) continue;
            const std::string& text = text_of(x, name);
            Mode m{};
            if (!parse_mode(text, m)) throw Bad("field 'mode': unknown mode '" + text + "'");
            r.mode = m;
        } else if (name == "measured_bandwidth_saving_pct") {
            r.measured_bandwidth_saving_pct = to_optional(x, name);
        } else if (name == "train_loss") {
            r.train_loss = to_optional(x, name);
        } else if (name == "eval_loss") {
            r.eval_loss = to_optional(x, name);
        } else if (name == "eval_step") {
            if (x.is_null()) {
                r.eval_step.reset();
            } else {
                r.eval_step = to_int64(x, name);
            }
        } else if (name == "budget_target_pct") {
            r.budget_target_pct = to_optional(x, name);
        } else if (name == "loss_tolerance_pct") {
            r.loss_tolerance_pct = to_optional(x, name);
        } else if (name == "estimated_loss_pct") {
            r.estimated_loss_pct = to_optional(x, name);
        }  // "type" was checked above; anything else: a newer producer's field
    }
    auto& d = r.block_details;
    std::sort(d.begin(), d.end(), [](const BlockDetail& a, const BlockDetail& b) { return a.id < b.id; });
    const auto dup = std::adjacent_find(
        d.begin(), d.end(), [](const BlockDetail& a, const BlockDetail& b) { return a.id == b.id; });
    if (dup != d.end()) throw Bad("block_details: duplicate block id " + std::to_string(dup->id));
}

}  // namespace oracle

// False with `error` set when `j` is not a valid update record (a "type" other than "update" included).
inline bool update_record_from_json(const nlohmann::ordered_json& j, UpdateRecord& out, std::string& error) {
    using namespace oracle;
    out = UpdateRecord{};
    try {
        update_from(j, out);
        return true;
    } catch (const Bad& e) {
        error = e.what();
        return false;
    }
}

}  // namespace sp::test
