// Serialisation of telemetry records, and the DOM-based parsing of the rare header/event lines.
// Update records are written by hand with std::to_chars: they are the bulk of every file and the
// writer runs once per policy update, so they avoid building an nlohmann DOM.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "sp/json_input.h"
#include "sp/jsonl.h"
#include "sp/reason_text.h"

namespace sp {

namespace {

constexpr std::array<std::string_view, 10> kReasonNames = {
    "warmup", "mode", "initial", "policy", "hold", "cooldown", "nonfinite", "config", "pin", "rollback"};

using ojson = nlohmann::ordered_json;

void put_double(std::string& s, double v) {
    if (!std::isfinite(v)) {
        s += "null";
        return;
    }
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact round trip
    s.append(buf, res.ptr);
    // Keep a float recognisable as a float (as Python's json writes 2.0), for loose consumers.
    for (const char* c = buf; c != res.ptr; ++c) {
        if (*c == '.' || *c == 'e') return;
    }
    s += ".0";
}

void put_int(std::string& s, std::int64_t v) {
    char buf[24];
    const auto res = std::to_chars(buf, buf + sizeof buf, v);
    s.append(buf, res.ptr);
}

// Keys and enum spellings we write never need escaping.
void put_str(std::string& s, std::string_view v) {
    s += '"';
    s += v;
    s += '"';
}

std::string_view forced_json(ForcedBy f) {
    switch (f) {
        case ForcedBy::config:
            return "\"config\"";
        case ForcedBy::pin:
            return "\"pin\"";
        case ForcedBy::none:
            break;
    }
    return "null";
}

ojson double_or_null(double v) {
    return std::isfinite(v) ? ojson(v) : ojson(nullptr);
}

std::string dump(const ojson& j) {
    // Replace invalid UTF-8 instead of throwing: a bad run id must not lose the record.
    return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// Same wording as the update-record parser: "expected an integer, got string".
const char* json_type_name(const ojson& j) {
    if (j.is_number()) return "number";
    if (j.is_string()) return "string";
    if (j.is_boolean()) return "boolean";
    if (j.is_null()) return "null";
    if (j.is_array()) return "array";
    return "object";
}

// Field access with messages naming the field, matching the update-record parser's wording.
struct FieldError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[noreturn]] void wrong_type(const std::string& name, const char* expected, const ojson& v) {
    throw FieldError("field '" + name + "': expected " + expected + ", got " + json_type_name(v));
}

const ojson& require(const ojson& obj, const char* key) {
    const auto it = obj.find(key);
    if (it == obj.end()) throw FieldError(std::string("missing field '") + key + "'");
    return *it;
}

std::int64_t as_int(const ojson& v, const std::string& name) {
    if (!v.is_number_integer()) wrong_type(name, "an integer", v);
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
        throw FieldError("field '" + name + "': integer out of range");
    }
    return v.get<std::int64_t>();
}

double as_double(const ojson& v, const std::string& name) {
    if (v.is_null()) return kNoValue;
    if (!v.is_number()) wrong_type(name, "a number", v);
    return v.get<double>();
}

std::string as_string(const ojson& v, const std::string& name) {
    if (!v.is_string()) wrong_type(name, "a string", v);
    return v.get<std::string>();
}

RunHeader header_from_json(const ojson& j) {
    RunHeader h;
    h.schema_version = int(as_int(require(j, "schema_version"), "schema_version"));
    if (j.contains("run_id")) h.run_id = as_string(j["run_id"], "run_id");
    if (j.contains("producer")) h.producer = as_string(j["producer"], "producer");
    if (j.contains("blocks")) {
        const ojson& blocks = j["blocks"];
        if (!blocks.is_array()) wrong_type("blocks", "an array", blocks);
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            const ojson& b = blocks[i];
            const std::string prefix = "blocks[" + std::to_string(i) + "]";
            if (!b.is_object()) wrong_type(prefix, "an object", b);
            BlockInfo info;
            info.id = int(as_int(require(b, "id"), prefix + ".id"));
            if (b.contains("name")) info.name = as_string(b["name"], prefix + ".name");
            if (b.contains("bytes_bf16")) {
                const std::int64_t bytes = as_int(b["bytes_bf16"], prefix + ".bytes_bf16");
                if (bytes < 0) throw FieldError("field '" + prefix + ".bytes_bf16': negative");
                info.bytes_bf16 = std::uint64_t(bytes);
            }
            h.blocks.push_back(std::move(info));
        }
    }
    if (j.contains("config")) {
        if (!j["config"].is_object()) wrong_type("config", "an object", j["config"]);
        h.config_json = dump(j["config"]);
    }
    if (j.contains("calibration")) {
        const ojson& cal = j["calibration"];
        if (!cal.is_object()) wrong_type("calibration", "an object", cal);
        if (cal.contains("errors")) {
            const ojson& errors = cal["errors"];
            if (!errors.is_object()) wrong_type("calibration.errors", "an object", errors);
            for (const auto& [key, value] : errors.items()) {
                int id = -1;
                const auto res = std::from_chars(key.data(), key.data() + key.size(), id);
                if (key.empty() || res.ec != std::errc() || res.ptr != key.data() + key.size() || id < 0 ||
                    id > 1'000'000) {
                    throw FieldError("calibration.errors: key '" + key + "' is not a non-negative integer");
                }
                if (std::size_t(id) >= h.calibration_errors.size()) {
                    h.calibration_errors.resize(std::size_t(id) + 1, kNoValue);
                }
                h.calibration_errors[std::size_t(id)] = as_double(value, "calibration.errors." + key);
            }
        }
    }
    if (const auto it = j.find("admitted_formats"); it != j.end()) {
        if (!it->is_array()) wrong_type("admitted_formats", "an array", *it);
        for (std::size_t i = 0; i < it->size(); ++i) {
            const ojson& formats = (*it)[i];
            const std::string name = "admitted_formats[" + std::to_string(i) + "]";
            if (!formats.is_array()) wrong_type(name, "an array of format names", formats);
            FormatMask m = 0;
            for (const ojson& f : formats) {
                const auto p = parse_precision(as_string(f, name));
                if (!p) throw FieldError("field '" + name + "': unknown format " + f.dump());
                m |= format_bit(*p);
            }
            h.admitted_formats.push_back(m);
        }
    }
    return h;
}

// {"int8": 41.7, ...} -> PerFormat (absent formats unknown).
PerFormat snr_from_json(const ojson& v, const std::string& name) {
    PerFormat out = kNoSnr;
    if (!v.is_object()) wrong_type(name, "an object", v);
    for (const auto& [key, value] : v.items()) {
        const auto p = parse_precision(key);
        if (!p) throw FieldError("field '" + name + "': unknown format '" + key + "'");
        out[std::size_t(*p)] = as_double(value, name + "." + key);
    }
    return out;
}

// A step line's per-block estimates ("snr": [{"id":..,"snr_db":{..}}], "loss_estimates": [{"id":..,
// "loss_delta":{..}}]) into `out`; nothing when the line has none.
template <typename Estimate>
void per_block_formats(const ojson& j, const char* list, const char* values, std::vector<Estimate>& out) {
    const auto it = j.find(list);
    if (it == j.end()) return;
    if (!it->is_array()) wrong_type(list, "an array", *it);
    for (std::size_t i = 0; i < it->size(); ++i) {
        const ojson& b = (*it)[i];
        const std::string prefix = std::string(list) + "[" + std::to_string(i) + "]";
        if (!b.is_object()) wrong_type(prefix, "an object", b);
        Estimate e;
        const std::int64_t id = as_int(require(b, "id"), prefix + ".id");
        if (id < 0 || id > std::numeric_limits<int>::max())
            throw FieldError("field '" + prefix + ".id': out of range");
        e.block_id = int(id);
        if (const auto v = b.find(values); v != b.end()) {
            if constexpr (std::is_same_v<Estimate, BlockSnr>)
                e.snr_db = snr_from_json(*v, prefix + "." + values);
            else
                e.loss_delta = snr_from_json(*v, prefix + "." + values);
        }
        out.push_back(e);
    }
}

double statistic_from_json(const ojson& b, const char* key, const std::string& prefix) {
    const auto it = b.find(key);
    if (it == b.end() || it->is_null()) return std::numeric_limits<double>::quiet_NaN();
    return as_double(*it, prefix + "." + key);
}

StepStatsRecord stats_from_json(const ojson& j) {
    StepStatsRecord r;
    r.step = as_int(require(j, "step"), "step");
    if (j.contains("timestamp")) r.timestamp = as_double(j["timestamp"], "timestamp");
    const ojson& blocks = require(j, "blocks");
    if (!blocks.is_array())
        throw FieldError(std::string("field 'blocks': expected an array, got ") + json_type_name(blocks));
    r.blocks.reserve(blocks.size());
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const ojson& b = blocks[i];
        const std::string prefix = "blocks[" + std::to_string(i) + "]";
        if (!b.is_object())
            throw FieldError("field '" + prefix + "': expected an object, got " + json_type_name(b));
        BlockGradStats s;
        const std::int64_t id = as_int(require(b, "id"), prefix + ".id");
        if (id < 0 || id > std::numeric_limits<int>::max())
            throw FieldError("field '" + prefix + ".id': out of range");
        s.block_id = int(id);
        s.l2_norm = statistic_from_json(b, "l2_norm", prefix);
        s.max_abs = statistic_from_json(b, "max_abs", prefix);
        s.variance = statistic_from_json(b, "variance", prefix);
        s.mean = statistic_from_json(b, "mean", prefix);
        if (b.contains("numel"))
            s.numel = std::uint64_t(std::max<std::int64_t>(0, as_int(b["numel"], prefix + ".numel")));
        if (b.contains("nonfinite_count"))
            s.nonfinite_count = std::uint64_t(
                std::max<std::int64_t>(0, as_int(b["nonfinite_count"], prefix + ".nonfinite_count")));
        r.blocks.push_back(s);
    }
    if (const auto loss = j.find("loss"); loss != j.end())
        r.loss = loss->is_null() ? std::numeric_limits<double>::quiet_NaN() : as_double(*loss, "loss");
    per_block_formats(j, "snr", "snr_db", r.snr);
    per_block_formats(j, "loss_estimates", "loss_delta", r.loss_estimates);
    return r;
}

EventRecord event_from_json(const ojson& j) {
    EventRecord e;
    e.kind = as_string(require(j, "kind"), "kind");
    e.step = as_int(require(j, "step"), "step");
    e.timestamp = as_double(require(j, "timestamp"), "timestamp");
    e.payload = read_event_payload(e.kind, j);
    return e;
}

}  // namespace

std::string_view to_string(Reason r) {
    const auto i = std::size_t(r);
    return i < kReasonNames.size() ? kReasonNames[i] : "hold";
}

std::optional<Reason> parse_reason(std::string_view text) {
    for (std::size_t i = 0; i < kReasonNames.size(); ++i) {
        if (kReasonNames[i] == text) return Reason(i);
    }
    return std::nullopt;
}

// ,"snr_db":{"int4":19.1,"int8":41.7,...} (or another per-format key): the low formats with a finite
// value; nothing when none.
void append_per_format(std::string& s, const char* key, const PerFormat& values) {
    bool any = false;
    for (Precision p : kLowFormatsCheapestFirst) {
        const double v = values[std::size_t(p)];
        if (!std::isfinite(v)) continue;
        if (!any) {
            s += ",\"";
            s += key;
            s += "\":{\"";
        } else {
            s += ",\"";
        }
        s += to_string(p);
        s += "\":";
        put_double(s, v);
        any = true;
    }
    if (any) s += '}';
}

namespace {

// One block's entry in block_details: "ID":{...}.
void append_detail(std::string& s, const BlockDetail& d) {
    s += '"';
    put_int(s, d.id);
    s += "\":{\"precision\":";
    put_str(s, to_string(d.precision));
    s += ",\"sensitivity\":";
    put_double(s, d.sensitivity);
    s += ",\"grad_score\":";
    put_double(s, d.grad_score);
    s += ",\"error_score\":";
    put_double(s, d.error_score);
    s += ",\"relative_magnitude\":";
    put_double(s, d.relative_magnitude);
    s += ",\"l2_norm\":";
    put_double(s, d.l2_norm);
    s += ",\"max_abs\":";
    put_double(s, d.max_abs);
    s += ",\"variance\":";
    put_double(s, d.variance);
    s += ",\"mean\":";
    put_double(s, d.mean);
    s += ",\"forced\":";
    s += forced_json(d.forced);
    s += d.changed ? ",\"changed\":true" : ",\"changed\":false";
    s += ",\"reason\":";
    put_str(s, to_string(d.reason));
    s += ",\"window\":";
    put_int(s, d.window);
    s += ",\"last_change_step\":";
    put_int(s, d.last_change_step);
    s += ",\"switches\":";
    put_int(s, d.switches);
    append_per_format(s, "snr_db", d.snr_db);
    append_per_format(s, "loss_delta_pct", d.loss_delta_pct);
    if (!d.reason_text.empty()) {  // words read from a file or a stream: any text, escaped
        s += ",\"reason_text\":";
        s += ojson(d.reason_text).dump();
    } else if (has_reason_text(d)) {  // the policy's facts, rendered here: plain ASCII
        s += ",\"reason_text\":\"";
        append_reason_text(s, d);
        s += '"';
    }
    s += '}';
}

}  // namespace

void append_json(std::string& s, const UpdateRecord& r) {
    s += "{\"step_id\":";
    put_int(s, r.step_id);
    s += ",\"timestamp\":";
    put_double(s, r.timestamp);
    s += ",\"blocks_bf16\":";
    put_int(s, r.blocks_bf16);
    s += ",\"blocks_int8\":";
    put_int(s, r.blocks_int8);
    s += ",\"mean_sensitivity\":";
    put_double(s, r.mean_sensitivity);
    s += ",\"max_sensitivity\":";
    put_double(s, r.max_sensitivity);
    s += ",\"min_sensitivity\":";
    put_double(s, r.min_sensitivity);
    s += ",\"precision_changes\":";
    put_int(s, r.precision_changes);
    s += ",\"estimated_bandwidth_saving_pct\":";
    put_double(s, r.estimated_bandwidth_saving_pct);
    s += ",\"block_details\":{";
    bool first = true;
    for (const BlockDetail& d : r.block_details) {
        if (!first) s += ',';
        first = false;
        append_detail(s, d);
    }
    s += "},\"blocks_fp8\":";
    put_int(s, r.blocks_fp8);
    s += ",\"blocks_int4\":";
    put_int(s, r.blocks_int4);
    if (r.mode) {
        s += ",\"mode\":";
        put_str(s, to_string(*r.mode));
    }
    const std::pair<const char*, const std::optional<double>*> optional_numbers[] = {
        {",\"measured_bandwidth_saving_pct\":", &r.measured_bandwidth_saving_pct},
        {",\"train_loss\":", &r.train_loss},
        {",\"eval_loss\":", &r.eval_loss},
        {",\"budget_target_pct\":", &r.budget_target_pct},
        {",\"loss_tolerance_pct\":", &r.loss_tolerance_pct},
        {",\"estimated_loss_pct\":", &r.estimated_loss_pct},
    };
    for (const auto& [key, value] : optional_numbers) {
        if (!*value) continue;
        s += key;
        put_double(s, **value);
    }
    if (r.eval_step) {
        s += ",\"eval_step\":";
        put_int(s, *r.eval_step);
    }
    s += '}';
}

std::string to_json_line(const UpdateRecord& r) {
    std::string s;
    s.reserve(256 + r.block_details.size() * 360);
    append_json(s, r);
    return s;
}

std::string to_json_line(const RunHeader& h) {
    ojson j;
    j["type"] = "header";
    j["schema_version"] = h.schema_version;
    j["run_id"] = h.run_id;
    j["producer"] = h.producer;
    j["blocks"] = ojson::array();
    for (const BlockInfo& b : h.blocks) {
        j["blocks"].push_back({{"id", b.id}, {"name", b.name}, {"bytes_bf16", b.bytes_bf16}});
    }
    ojson config = ojson::object();
    if (!h.config_json.empty()) {
        JsonError bad;
        if (!parse_json(h.config_json, config, bad) || !config.is_object())
            throw std::invalid_argument("RunHeader.config_json is not a JSON object");
    }
    j["config"] = std::move(config);
    if (!h.calibration_errors.empty()) {
        ojson errors = ojson::object();
        for (std::size_t i = 0; i < h.calibration_errors.size(); ++i) {
            errors[std::to_string(i)] = double_or_null(h.calibration_errors[i]);
        }
        j["calibration"] = {{"errors", std::move(errors)}};
    }
    if (!h.admitted_formats.empty()) {
        ojson admitted = ojson::array();
        for (FormatMask m : h.admitted_formats) {
            ojson formats = ojson::array();
            for (Precision p : kAllPrecisions)
                if (has_format(m, p)) formats.push_back(std::string(to_string(p)));
            admitted.push_back(std::move(formats));
        }
        j["admitted_formats"] = std::move(admitted);
    }
    return dump(j);
}

std::string to_json_line(const EventRecord& e) {
    std::string s;
    append_json(s, e);
    return s;
}

std::string to_json_line(const TelemetryRecord& rec) {
    return std::visit([](const auto& r) { return to_json_line(r); }, rec);
}

std::optional<ParseStatus> detail::parse_typed_record_dom(std::string_view line, TelemetryRecord& out,
                                                          std::string& error) {
    ojson j;
    JsonError bad;
    if (!parse_json(line, j, bad)) {  // syntax, or a number beyond double range: a bad line
        error = "invalid JSON: " + bad.message();
        return ParseStatus::corrupt;
    }
    if (!j.is_object()) {
        error = "expected a JSON object";
        return ParseStatus::corrupt;
    }
    const auto it = j.find("type");
    try {
        if (it == j.end() && j.contains("step") && j.contains("blocks") && !j.contains("step_id")) {
            out = stats_from_json(j);
            return ParseStatus::ok;
        }
        if (it == j.end() || (it->is_string() && *it == "update")) return std::nullopt;
        const std::string type = as_string(*it, "type");
        if (type == "header") {
            out = header_from_json(j);
        } else if (type == "event") {
            out = event_from_json(j);
        } else {
            error = "unknown record type '" + type + "'";
            return ParseStatus::unknown_type;
        }
    } catch (const FieldError& ex) {
        error = ex.what();
        return ParseStatus::corrupt;
    }
    return ParseStatus::ok;
}

}  // namespace sp

namespace sp {

namespace {
// ,"snr":[{"id":0,"snr_db":{..}},..] or ,"loss_estimates":[{"id":0,"loss_delta":{..}},..]; nothing when
// empty.
template <typename Estimate>
void append_estimates(std::string& s, const char* list, const char* values,
                      const std::vector<Estimate>& from) {
    if (from.empty()) return;
    s += ",\"";
    s += list;
    s += "\":[";
    for (std::size_t i = 0; i < from.size(); ++i) {
        s += i == 0 ? "{\"id\":" : ",{\"id\":";
        put_int(s, from[i].block_id);
        if constexpr (std::is_same_v<Estimate, BlockSnr>)
            append_per_format(s, values, from[i].snr_db);
        else
            append_per_format(s, values, from[i].loss_delta);
        s += '}';
    }
    s += ']';
}
}  // namespace

std::string to_json_line(const StepStatsRecord& r) {
    std::string s;
    s.reserve(64 + r.blocks.size() * 160);
    s += "{\"step\":";
    put_int(s, r.step);
    s += ",\"timestamp\":";
    put_double(s, r.timestamp);
    s += ",\"blocks\":[";
    for (std::size_t i = 0; i < r.blocks.size(); ++i) {
        const BlockGradStats& b = r.blocks[i];
        s += i == 0 ? "{\"id\":" : ",{\"id\":";
        put_int(s, b.block_id);
        s += ",\"l2_norm\":";
        put_double(s, b.l2_norm);
        s += ",\"max_abs\":";
        put_double(s, b.max_abs);
        s += ",\"variance\":";
        put_double(s, b.variance);
        s += ",\"mean\":";
        put_double(s, b.mean);
        s += ",\"numel\":";
        put_int(s, std::int64_t(b.numel));
        s += ",\"nonfinite_count\":";
        put_int(s, std::int64_t(b.nonfinite_count));
        s += '}';
    }
    s += ']';
    if (r.loss) {
        s += ",\"loss\":";
        put_double(s, *r.loss);
    }
    append_estimates(s, "snr", "snr_db", r.snr);
    append_estimates(s, "loss_estimates", "loss_delta", r.loss_estimates);
    s += '}';
    return s;
}

}  // namespace sp
