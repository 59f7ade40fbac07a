// The wire protocol's message layer (agent/PROTOCOL.md), the client's half: requests written, and
// replies, snapshots, hello and heartbeat bodies read. What arrives here comes from the network
// (or from anything that can publish on the agent's port), so nothing here throws on it: every
// failure becomes a message that names the field. sp-ctl and the dashboard both read through it.
#include <limits>
#include <stdexcept>

#include "protocol_json.h"
#include "sp/json_input.h"
#include "sp/jsonl.h"
#include "sp/protocol.h"

namespace sp::protocol {
namespace {

using detail::dump;
using detail::json;
using detail::ojson;
using detail::strip_exception_prefix;

// Snapshot parsing: a FieldError carries the message parse_snapshot returns.
struct FieldError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// obj[key], which must pass `is`; `where` names obj in the message ("snapshot", "hello").
const json& field(const json& obj, const char* where, const char* key, bool (json::*is)() const noexcept,
                  const char* expected) {
    const auto it = obj.find(key);
    const std::string name = std::string("field '") + where + "." + key + "'";
    if (it == obj.end()) throw FieldError(name + ": missing");
    if (!((*it).*is)()) throw FieldError(name + ": expected " + expected + ", got " + it->type_name());
    return *it;
}

template <typename T>
T integer_of(const json& b, const char* key, const std::string& where) {
    const auto it = b.find(key);
    if (it == b.end()) throw FieldError("field '" + where + "." + key + "': missing");
    const json& v = *it;
    bool ok = false;
    if (v.is_number_unsigned()) {
        ok = v.get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<T>::max());
    } else if (v.is_number_integer()) {  // negative: the parser reads the others as unsigned
        ok = v.get<std::int64_t>() >= std::int64_t(std::numeric_limits<T>::min());
    }
    if (!ok)
        throw FieldError("field '" + where + "." + key + "': expected an integer in range, got " + v.dump());
    return v.get<T>();
}

Precision precision_of(const json& v, const std::string& where) {
    const auto p = v.is_string() ? parse_precision(v.get_ref<const std::string&>()) : std::nullopt;
    if (!p) throw FieldError("field '" + where + "': expected a precision name, got " + v.dump());
    return *p;
}

// An optional snapshot percentage (additive fields): absent, or a number in [0, 100].
std::optional<double> optional_percent(const json& snap, const char* key) {
    const auto it = snap.find(key);
    if (it == snap.end()) return std::nullopt;
    if (!it->is_number() || !(it->get<double>() >= 0.0 && it->get<double>() <= 100.0))
        throw FieldError(std::string("field 'snapshot.") + key + "': expected a number in [0, 100]");
    return it->get<double>();
}

// Reads a JSON object from the network; throws FieldError saying what `what` is not.
json object_of(std::string_view text, const char* what) {
    json j;
    JsonError bad;
    if (!parse_json(text, j, bad))
        throw FieldError(std::string(what) + " is not valid JSON: " + bad.message());
    if (!j.is_object()) throw FieldError(std::string(what) + " is not a JSON object");
    return j;
}

// One entry of a block layout ("snapshot.blocks[i]", "hello.blocks[i]").
BlockInfo block_info_of(const json& b, const std::string& where) {
    if (!b.is_object()) throw FieldError("field '" + where + "': expected an object");
    BlockInfo info;
    info.id = integer_of<int>(b, "id", where);
    const auto name = b.find("name");
    if (name == b.end() || !name->is_string())
        throw FieldError("field '" + where + ".name': expected a string");
    info.name = name->get<std::string>();
    info.bytes_bf16 = integer_of<std::uint64_t>(b, "bytes_bf16", where);
    return info;
}

// b[key] as a T. get<T>() would convert a float out of T's range (undefined behaviour) and wrap an
// integer out of range.

}  // namespace

std::string make_request(const std::string& id, const Command& c) {
    const json body = to_json(c);
    ojson j;
    j["id"] = id;
    j["cmd"] = body.at("cmd").get<std::string>();
    for (const auto& [key, value] : body.items()) {
        if (key != "cmd") j[key] = value;
    }
    return dump(j);
}

std::string make_request(const std::string& id, Request::Kind kind) {
    if (kind == Request::Kind::command) {
        throw std::invalid_argument("make_request: a routing command needs its Command");
    }
    ojson j;
    j["id"] = id;
    j["cmd"] = kind == Request::Kind::ping ? "ping" : "snapshot";
    return dump(j);
}

std::optional<Reply> parse_reply(std::string_view frame, std::string& error) {
    json j;
    JsonError bad;
    if (!parse_json(frame, j, bad)) {
        error = "reply is not valid JSON: " + bad.message();
        return std::nullopt;
    }
    if (!j.is_object()) {
        error = std::string("reply must be a JSON object, got ") + j.type_name();
        return std::nullopt;
    }
    Reply r;
    const auto id = j.find("id");
    if (id == j.end() || !(id->is_string() || id->is_null())) {
        error = id == j.end()
                    ? "reply: field 'id': missing"
                    : std::string("reply: field 'id': expected a string or null, got ") + id->type_name();
        return std::nullopt;
    }
    if (id->is_string()) r.id = id->get<std::string>();
    const auto ok = j.find("ok");
    if (ok == j.end() || !ok->is_boolean()) {
        error = "reply: field 'ok': missing or not a boolean";
        return std::nullopt;
    }
    r.ok = ok->get<bool>();
    if (!r.ok) {
        const auto e = j.find("error");
        if (e == j.end() || !e->is_string() || e->get_ref<const std::string&>().empty()) {
            error = "reply: ok is false but field 'error' is missing or not a non-empty string";
            return std::nullopt;
        }
        r.error = e->get<std::string>();
    }
    const auto step = j.find("effective_step");
    if (step != j.end()) {
        if (!step->is_number_integer()) {
            error =
                std::string("reply: field 'effective_step': expected an integer, got ") + step->type_name();
            return std::nullopt;
        }
        r.effective_step = step->get<std::int64_t>();
    }
    r.text = std::string(frame);
    error.clear();
    return r;
}

bool parse_snapshot(std::string_view reply_text, Snapshot& out, std::string& error) {
    try {
        const json j = object_of(reply_text, "reply");
        const auto ok = j.find("ok");
        if (ok == j.end() || !ok->is_boolean() || !ok->get<bool>()) throw FieldError("reply is not ok");
        const auto snap_it = j.find("snapshot");
        if (snap_it == j.end() || !snap_it->is_object())
            throw FieldError("field 'snapshot': missing or not an object");
        const json& snap = *snap_it;

        Snapshot s;
        s.seq = field(snap, "snapshot", "seq", &json::is_number_unsigned, "an unsigned integer")
                    .get<std::uint64_t>();
        s.step = field(snap, "snapshot", "step", &json::is_number_integer, "an integer").get<std::int64_t>();
        s.run_id = field(snap, "snapshot", "run_id", &json::is_string, "a string").get<std::string>();
        s.rank = field(snap, "snapshot", "rank", &json::is_number_integer, "an integer").get<int>();
        if (!parse_mode(field(snap, "snapshot", "mode", &json::is_string, "a string").get<std::string>(),
                        s.mode)) {
            throw FieldError("field 'snapshot.mode': unknown mode");
        }
        s.budget_target_pct = optional_percent(snap, "budget_target_pct");
        s.loss_tolerance_pct = optional_percent(snap, "loss_tolerance_pct");
        const json& blocks = field(snap, "snapshot", "blocks", &json::is_array, "an array");
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            const json& b = blocks[i];
            const std::string where = "snapshot.blocks[" + std::to_string(i) + "]";
            s.layout.push_back(block_info_of(b, where));
            s.precision.push_back(precision_of(b.at("precision"), where + ".precision"));
            const json& pin = b.at("pin");
            s.pins.push_back(pin.is_null() ? std::nullopt
                                           : std::optional<Precision>(precision_of(pin, where + ".pin")));
            const auto until = b.find("pin_until");
            s.pin_until.push_back(
                until == b.end() || until->is_null()
                    ? std::nullopt
                    : std::optional<std::int64_t>(integer_of<std::int64_t>(b, "pin_until", where)));
            const auto on_spike = b.find("pin_release_on_spike");
            if (on_spike != b.end() && !on_spike->is_boolean())
                throw FieldError("field '" + where + ".pin_release_on_spike': expected true or false");
            s.pin_release_on_spike.push_back(on_spike != b.end() && on_spike->get<bool>());
        }
        s.config_json = field(snap, "snapshot", "config", &json::is_object, "an object").dump();
        const auto last_it = snap.find("last_update");  // absent or null: no update yet
        if (last_it != snap.end() && !last_it->is_null()) {
            const json& last = *last_it;
            TelemetryRecord rec;
            std::string why;
            if (parse_record(last.dump(), rec, why) != ParseStatus::ok ||
                !std::holds_alternative<UpdateRecord>(rec)) {
                throw FieldError("field 'snapshot.last_update': " +
                                 (why.empty() ? "not an update record" : why));
            }
            s.last_update = std::get<UpdateRecord>(std::move(rec));
        }
        out = std::move(s);
        error.clear();
        return true;
    } catch (const FieldError& e) {
        error = e.what();
    } catch (const std::exception& e) {  // nlohmann's at()/get() on a wrong shape
        error = "snapshot: " + strip_exception_prefix(e.what());
    }
    return false;
}

std::optional<Hello> parse_hello(std::string_view body, std::string& error) {
    try {
        const json j = object_of(body, "hello");
        Hello h;
        if (const auto proto = j.find("protocol"); proto != j.end())
            h.protocol = integer_of<int>(j, "protocol", "hello");
        if (j.contains("rank")) h.rank = integer_of<int>(j, "rank", "hello");
        h.header.producer = "hello";
        h.header.run_id = field(j, "hello", "run_id", &json::is_string, "a string").get<std::string>();
        if (j.contains("telemetry_schema"))
            h.header.schema_version = integer_of<int>(j, "telemetry_schema", "hello");
        const json& blocks = field(j, "hello", "blocks", &json::is_array, "an array");
        for (std::size_t i = 0; i < blocks.size(); ++i)
            h.header.blocks.push_back(block_info_of(blocks[i], "hello.blocks[" + std::to_string(i) + "]"));
        const auto config = j.find("config");
        h.header.config_json = config != j.end() && config->is_object() ? config->dump() : "{}";
        // Additive: present once the agent calibrated; null for a block without a finite error.
        // One per block at most: entries beyond the layout name no block.
        if (const auto errors = j.find("calibration_errors"); errors != j.end() && errors->is_array())
            for (std::size_t i = 0; i < errors->size() && i < h.header.blocks.size(); ++i) {
                const json& e = (*errors)[i];
                h.header.calibration_errors.push_back(
                    e.is_number() ? e.get<double>() : std::numeric_limits<double>::quiet_NaN());
            }
        error.clear();
        return h;
    } catch (const FieldError& e) {
        error = e.what();
    } catch (const std::exception& e) {  // nlohmann's at()/get() on a wrong shape
        error = "hello: " + strip_exception_prefix(e.what());
    }
    return std::nullopt;
}

std::optional<Heartbeat> parse_heartbeat(std::string_view body, std::string& error) {
    try {
        const json j = object_of(body, "heartbeat");
        Heartbeat h;
        h.step = integer_of<std::int64_t>(j, "step", "heartbeat");
        if (const auto time = j.find("time"); time != j.end() && time->is_number())
            h.time = time->get<double>();
        error.clear();
        return h;
    } catch (const FieldError& e) {
        error = e.what();
    } catch (const std::exception& e) {
        error = "heartbeat: " + strip_exception_prefix(e.what());
    }
    return std::nullopt;
}

}  // namespace sp::protocol
