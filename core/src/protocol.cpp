// The wire protocol's message layer (agent/PROTOCOL.md), the agent's half: requests read, replies and
// telemetry bodies written (the client's half is protocol_client.cpp). Requests arrive from the network, so
// their parser is defensive: size is checked on the raw bytes, nesting while parsing (through
// sp::parse_json), and every failure becomes a message that names the field. Replies and rare telemetry
// messages are built with nlohmann's ordered DOM (readable key order); the per-record path
// (with_seq, seq_of) splices text instead, because it runs for every published message.
#include "sp/protocol.h"
#include "sp/record_line.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "protocol_json.h"
#include "sp/json_input.h"
#include "sp/jsonl.h"

namespace sp::protocol {
namespace {

using detail::dump;
using detail::json;
using detail::ojson;

constexpr std::string_view kRequestNames =
    "pin, release, release_all, set_mode, set_budget, set_tolerance, snapshot, ping";

// A client-supplied string inside an error message: quoted and cut to a readable length.
std::string single_quoted(std::string_view text) {
    constexpr std::size_t kMax = 64;
    std::string out = "'";
    out += text.substr(0, kMax);
    if (text.size() > kMax) out += "...";
    return out + "'";
}

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

std::string model_blocks(int n) {
    if (n == 0) return "the model has no blocks";
    if (n == 1) return "the model has 1 block: 0";
    return "the model has " + std::to_string(n) + " blocks: 0.." + std::to_string(n - 1);
}

// "field 'blocks': unknown block 12 (the model has 4 blocks: 0..3)"; empty when all are known.
std::string check_block_range(const std::vector<int>& blocks, int block_count) {
    std::vector<int> unknown;
    for (int id : blocks) {
        if (id >= block_count) unknown.push_back(id);
    }
    if (unknown.empty()) return {};
    constexpr std::size_t kListed = 10;
    std::string list;
    for (std::size_t i = 0; i < unknown.size() && i < kListed; ++i) {
        list += (i ? ", " : "") + std::to_string(unknown[i]);
    }
    if (unknown.size() > kListed) list += ", ...";
    return std::string("field 'blocks': unknown block") + (unknown.size() > 1 ? "s " : " ") + list + " (" +
           model_blocks(block_count) + ")";
}

std::variant<Request, RequestError> parse_request_unchecked(std::string_view frame, int block_count) {
    if (frame.size() > kMaxRequestBytes) {
        return RequestError{std::nullopt, "request too large: " + std::to_string(frame.size()) +
                                              " bytes (limit " + std::to_string(kMaxRequestBytes) + ")"};
    }
    if (trim(frame).empty()) return RequestError{std::nullopt, "not valid JSON: empty frame"};
    json j;
    JsonError bad;
    if (!parse_json(frame, j, bad, JsonLimits{kMaxRequestBytes, kMaxRequestDepth})) {
        // The id is echoed when it was read before the error (e.g. {"id":"a","blocks":[1e309]}).
        std::optional<std::string> id = bad.id;
        if (id && (id->empty() || id->size() > kMaxIdBytes)) id.reset();
        if (bad.kind == JsonError::Kind::too_deep) {
            return RequestError{id, "request nests too deep: more than " + std::to_string(kMaxRequestDepth) +
                                        " levels of arrays/objects"};
        }
        return RequestError{id, "not valid JSON: " + bad.message()};
    }
    if (!j.is_object()) {
        return RequestError{std::nullopt, std::string("request must be a JSON object, got ") + j.type_name()};
    }

    const auto id_it = j.find("id");
    if (id_it == j.end()) {
        return RequestError{std::nullopt, "field 'id': missing (every request needs a non-empty string id)"};
    }
    if (!id_it->is_string() || id_it->get_ref<const std::string&>().empty()) {
        return RequestError{std::nullopt, std::string("field 'id': must be a non-empty string, got ") +
                                              (id_it->is_string() ? "\"\"" : id_it->type_name())};
    }
    const std::string& id = id_it->get_ref<const std::string&>();
    if (id.size() > kMaxIdBytes) {
        return RequestError{std::nullopt, "field 'id': too long: " + std::to_string(id.size()) +
                                              " bytes (limit " + std::to_string(kMaxIdBytes) + ")"};
    }

    const auto cmd_it = j.find("cmd");
    if (cmd_it == j.end()) {
        return RequestError{id, "field 'cmd': missing (expected one of " + std::string(kRequestNames) + ")"};
    }
    if (!cmd_it->is_string()) {
        return RequestError{id, "field 'cmd': must be a string (one of " + std::string(kRequestNames) +
                                    "), got " + cmd_it->type_name()};
    }
    const std::string& cmd = cmd_it->get_ref<const std::string&>();
    Request r;
    r.id = id;
    if (cmd == "snapshot" || cmd == "ping") {
        r.kind = cmd == "ping" ? Request::Kind::ping : Request::Kind::snapshot;
        return r;
    }
    if (cmd != "pin" && cmd != "release" && cmd != "release_all" && cmd != "set_mode" &&
        cmd != "set_budget" && cmd != "set_tolerance") {
        return RequestError{id, "field 'cmd': unknown command " + single_quoted(cmd) + " (expected one of " +
                                    std::string(kRequestNames) + ")"};
    }
    // Routing commands: core's parser names the field at fault; the model's size is ours to check.
    r.kind = Request::Kind::command;
    std::string error;
    if (!parse_command(j, r.command, error)) return RequestError{id, error};
    if (block_count != kUnknownBlockCount) {
        error = check_block_range(r.command.blocks, std::max(block_count, 0));
        if (!error.empty()) return RequestError{id, error};
    }
    return r;
}

ojson layout_json(const BlockLayout& layout) {
    ojson blocks = ojson::array();
    for (const BlockInfo& b : layout) {
        blocks.push_back({{"id", b.id}, {"name", b.name}, {"bytes_bf16", b.bytes_bf16}});
    }
    return blocks;
}

ojson config_object(const std::string& config_json, const char* who) {
    if (config_json.empty()) return ojson::object();
    ojson config;
    JsonError bad;
    if (!parse_json(config_json, config, bad) || !config.is_object())
        throw std::invalid_argument(std::string(who) + ": config_json is not a JSON object");
    return config;
}

ojson reply_head(const std::optional<std::string>& id, bool ok) {
    ojson j;
    j["id"] = id ? ojson(*id) : ojson(nullptr);
    j["ok"] = ok;
    return j;
}

}  // namespace

std::string_view to_string(Topic t) {
    switch (t) {
        case Topic::hello:
            return "hello";
        case Topic::update:
            return "update";
        case Topic::stats:
            return "stats";
        case Topic::event:
            return "event";
        case Topic::heartbeat:
            return "heartbeat";
    }
    return "unknown";
}

std::optional<Topic> parse_topic(std::string_view text) {
    for (Topic t : {Topic::hello, Topic::update, Topic::stats, Topic::event, Topic::heartbeat}) {
        if (to_string(t) == text) return t;
    }
    return std::nullopt;
}

std::string_view cmd_name(const Request& r) {
    switch (r.kind) {
        case Request::Kind::command:
            return to_string(r.command.kind);
        case Request::Kind::snapshot:
            return "snapshot";
        case Request::Kind::ping:
            return "ping";
    }
    return "unknown";
}

std::variant<Request, RequestError> parse_request(std::string_view frame, int block_count) {
    // The checks above cover the input; this only guards against allocation failure and our own bugs,
    // which must not take down the agent's I/O thread.
    try {
        return parse_request_unchecked(frame, block_count);
    } catch (const std::exception& e) {
        return RequestError{std::nullopt,
                            std::string("internal error while parsing the request: ") + e.what()};
    } catch (...) {
        return RequestError{std::nullopt, "internal error while parsing the request"};
    }
}

std::string ack(const Request& r, std::int64_t effective_step) {
    ojson j = reply_head(r.id, true);
    j["cmd"] = cmd_name(r);
    j["effective_step"] = effective_step;
    return dump(j);
}

std::string pong(const Request& r, std::int64_t step, double time) {
    ojson j = reply_head(r.id, true);
    j["pong"] = true;
    j["step"] = step;
    j["time"] = time;
    j["protocol"] = kVersion;
    return dump(j);
}

std::string reject(const std::optional<std::string>& id, const std::string& error) {
    ojson j = reply_head(id, false);
    j["error"] = error;
    return dump(j);
}

std::string snapshot_reply(const Request& r, const Snapshot& s, const RecordLine* last_update) {
    const std::size_t n = s.layout.size();
    const bool terms = !s.pin_until.empty() || !s.pin_release_on_spike.empty();
    if (s.precision.size() != n || s.pins.size() != n ||
        (terms && (s.pin_until.size() != n || s.pin_release_on_spike.size() != n))) {
        throw std::invalid_argument(
            "snapshot_reply: precision, pins and pin terms need one entry per block (" + std::to_string(n) +
            ")");
    }
    ojson snap;
    snap["protocol"] = kVersion;
    snap["seq"] = s.seq;
    snap["step"] = s.step;
    snap["run_id"] = s.run_id;
    snap["rank"] = s.rank;
    snap["mode"] = to_string(s.mode);
    if (s.budget_target_pct) snap["budget_target_pct"] = *s.budget_target_pct;     // additive
    if (s.loss_tolerance_pct) snap["loss_tolerance_pct"] = *s.loss_tolerance_pct;  // additive
    ojson blocks = layout_json(s.layout);
    for (std::size_t i = 0; i < n; ++i) {
        blocks[i]["precision"] = to_string(s.precision[i]);
        blocks[i]["pin"] = s.pins[i] ? ojson(to_string(*s.pins[i])) : ojson(nullptr);
        // A pin's terms, only when it has them (additive: older clients ignore them).
        if (terms && s.pins[i] && s.pin_until[i]) blocks[i]["pin_until"] = *s.pin_until[i];
        if (terms && s.pins[i] && s.pin_release_on_spike[i]) blocks[i]["pin_release_on_spike"] = true;
    }
    snap["blocks"] = std::move(blocks);
    snap["config"] = config_object(s.config_json, "snapshot_reply");
    // The last update goes in as the line the telemetry stream carried, spliced into the dumped
    // text: parsing it back into a DOM only to dump it again cost a full serialization per request.
    std::string reply = dump(reply_head(r.id, true));
    reply.pop_back();  // the head's closing brace
    reply += ",\"snapshot\":";
    reply += dump(snap);
    reply.pop_back();  // the snapshot's closing brace
    reply += ",\"last_update\":";
    if (last_update != nullptr)
        reply += last_update->line();
    else if (s.last_update)
        reply += to_json_line(*s.last_update);
    else
        reply += "null";
    reply += "}}";
    return reply;
}

std::string hello(std::uint64_t seq, const std::string& run_id, int rank, const BlockLayout& layout,
                  const std::string& config_json, double time,
                  const std::vector<double>& calibration_errors) {
    ojson j;
    j["seq"] = seq;
    j["protocol"] = kVersion;
    j["telemetry_schema"] = kTelemetrySchemaVersion;
#ifdef SP_VERSION
    j["version"] = SP_VERSION;
#endif
    j["run_id"] = run_id;
    j["rank"] = rank;
    j["time"] = time;
    j["blocks"] = layout_json(layout);
    j["config"] = config_object(config_json, "hello");
    if (!calibration_errors.empty()) {
        ojson errors = ojson::array();
        for (double e : calibration_errors) errors.push_back(std::isfinite(e) ? ojson(e) : ojson(nullptr));
        j["calibration_errors"] = std::move(errors);
    }
    return dump(j);
}

std::string heartbeat(std::uint64_t seq, std::int64_t step, double time) {
    ojson j;
    j["seq"] = seq;
    j["step"] = step;
    j["time"] = time;
    return dump(j);
}

std::string with_seq(std::string_view json_line, std::uint64_t seq) {
    const std::string_view line = trim(json_line);
    if (line.size() < 2 || line.front() != '{' || line.back() != '}') {
        throw std::invalid_argument("with_seq: not a JSON object line");
    }
    const std::string_view rest = line.substr(1);  // everything after '{', including the '}'
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, seq).ptr;
    std::string out;
    out.reserve(line.size() + 32);
    out += "{\"seq\":";
    out.append(digits, end);
    if (trim(rest) != "}") out += ',';
    out += rest;
    return out;
}

std::optional<std::uint64_t> seq_of(std::string_view text) {
    // Fast path: the shape with_seq/hello/heartbeat write, {"seq":N,... (any whitespace).
    std::string_view s = trim(text);
    auto skip = [&s](std::string_view token) {
        while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
        if (s.substr(0, token.size()) != token) return false;
        s.remove_prefix(token.size());
        while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
        return true;
    };
    if (skip("{") && skip("\"seq\"") && skip(":")) {
        std::uint64_t value = 0;
        const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
        const std::size_t len = static_cast<std::size_t>(ptr - s.data());
        s.remove_prefix(len);
        const bool leading_zero = len > 1 && s.data()[-static_cast<std::ptrdiff_t>(len)] == '0';
        if (ec == std::errc() && !leading_zero && skip("") && !s.empty() &&
            (s.front() == ',' || s.front() == '}'))
            return value;
    }
    // Anything else (another producer's key order, exotic numbers): let the DOM decide.
    json j;
    JsonError bad;
    if (!parse_json(text, j, bad) || !j.is_object()) return std::nullopt;
    const auto it = j.find("seq");
    if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<std::uint64_t>();
}

std::string rank_endpoint(const std::string& base, int rank) {
    const std::size_t colon = base.rfind(':');
    const std::string digits = colon == std::string::npos ? std::string() : base.substr(colon + 1);
    const bool numeric =
        !digits.empty() && digits.size() <= 5 && digits.find_first_not_of("0123456789") == std::string::npos;
    if (!numeric)
        throw std::invalid_argument("endpoint '" + base + "' has no port to add the rank's offset to");
    const long port = std::stol(digits) + 2L * rank;
    if (rank < 0 || port > 65535)
        throw std::invalid_argument("endpoint '" + base + "': rank " + std::to_string(rank) +
                                    " would need port " + std::to_string(port));
    return base.substr(0, colon + 1) + std::to_string(port);
}

}  // namespace sp::protocol
