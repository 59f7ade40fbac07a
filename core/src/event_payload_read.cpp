// The event reader: each known kind's typed payload from the parsed object, with a named problem
// (never an exception) for a field a reader could not trust.
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "sp/event_payload.h"
#include "sp/json_input.h"

namespace sp {
namespace {

constexpr std::string_view kTriggerNames[] = {"spike", "nonfinite", "expired"};

struct Problem : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// How a value reads in a problem: short, and never the whole of a large value.
template <class J>
std::string shown(const J& value) {
    std::string text = value.dump(-1, ' ', false, J::error_handler_t::replace);
    constexpr std::size_t kMax = 40;
    if (text.size() > kMax) text = text.substr(0, kMax) + "...";
    return text;
}

template <class J>
[[noreturn]] void wrong(std::string_view key, std::string_view expected, const J& value) {
    throw Problem("'" + std::string(key) + "' must be " + std::string(expected) + ", got " + shown(value));
}

template <class J>
const J* find(const J& object, std::string_view key) {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

template <class J>
const J& require(const J& object, std::string_view key) {
    const J* v = find(object, key);
    if (!v) throw Problem("'" + std::string(key) + "' is missing");
    return *v;
}

template <class J>
int block_id(const J& v, std::string_view key) {
    constexpr auto kMax = std::uint64_t(std::numeric_limits<int>::max());
    const bool ok = v.is_number_unsigned() ? v.template get<std::uint64_t>() <= kMax
                                           : v.is_number_integer() && v.template get<std::int64_t>() >= 0 &&
                                                 std::uint64_t(v.template get<std::int64_t>()) <= kMax;
    if (!ok) wrong(key, "a non-negative integer", v);
    return int(v.template get<std::int64_t>());
}

template <class J>
std::int64_t integer(const J& v, std::string_view key) {
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.template get<std::uint64_t>() > std::uint64_t(INT64_MAX)))
        wrong(key, "an integer", v);
    return v.template get<std::int64_t>();
}

template <class J>
std::uint64_t count(const J& v, std::string_view key) {
    if (!v.is_number_unsigned()) wrong(key, "a non-negative integer", v);
    return v.template get<std::uint64_t>();
}

template <class J>
std::string text(const J& v, std::string_view key) {
    if (!v.is_string()) wrong(key, "a string", v);
    return v.template get<std::string>();
}

template <class J>
Precision precision(const J& v, std::string_view key) {
    std::optional<Precision> p;
    if (v.is_string()) p = parse_precision(v.template get_ref<const std::string&>());
    if (!p) wrong(key, "a precision name", v);
    return *p;
}

template <class J, class F>
auto optional(const J& object, std::string_view key, F read) -> std::optional<decltype(read(object, key))> {
    if (const J* v = find(object, key)) return read(*v, key);
    return std::nullopt;
}

template <class J>
std::optional<double> number_or_null(const J& object, std::string_view key) {
    const J* v = find(object, key);
    if (!v) return std::nullopt;
    if (v->is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!v->is_number()) wrong(key, "a number or null", *v);
    return v->template get<double>();
}

// `[a, b, ...]`, each read by `item` and named `key[i]` in a problem.
template <class J, class F>
auto list(const J& v, std::string_view key, F item) {
    if (!v.is_array()) wrong(key, "an array", v);
    std::vector<decltype(item(v, key))> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i)
        out.push_back(item(v[i], std::string(key) + "[" + std::to_string(i) + "]"));
    return out;
}

template <class J>
std::optional<EventTrigger> trigger(const J& object, bool expired_allowed) {
    const J* v = find(object, "trigger");
    if (!v) return std::nullopt;
    for (std::size_t i = 0; i < std::size(kTriggerNames); ++i) {
        const auto t = EventTrigger(i);
        if (v->is_string() && v->template get_ref<const std::string&>() == kTriggerNames[i] &&
            (expired_allowed || t != EventTrigger::expired))
            return t;
    }
    wrong("trigger", expired_allowed ? R"("expired", "spike" or "nonfinite")" : R"("spike" or "nonfinite")",
          *v);
}

template <class J>
LossEvidence evidence(const J& o) {
    LossEvidence e;
    e.loss = number_or_null(o, "loss");
    e.ema = number_or_null(o, "ema");
    e.stddev = number_or_null(o, "stddev");
    e.z = number_or_null(o, "z");
    e.history = optional(o, "history", integer<J>);
    e.threshold = number_or_null(o, "threshold");
    e.window_steps = optional(o, "window_steps", integer<J>);
    return e;
}

template <class J>
std::vector<int> blocks(const J& o) {
    return list(require(o, "blocks"), "blocks", block_id<J>);
}

template <class J>
std::vector<std::string> names(const J& o) {
    const J* v = find(o, "names");
    return v ? list(*v, "names", text<J>) : std::vector<std::string>{};
}

template <class J>
EventPayload precision_change(const J& o) {
    PrecisionChangePayload p;
    p.block = block_id(require(o, "block"), "block");
    p.from = precision(require(o, "from"), "from");
    p.to = precision(require(o, "to"), "to");
    p.name = optional(o, "name", text<J>);
    p.reason = optional(o, "reason", text<J>);
    return p;
}

template <class J>
EventPayload command(const J& o) {
    CommandEventPayload p;
    if (const J* c = find(o, "command")) {
        Command parsed;
        std::string error;
        if (!parse_command(nlohmann::json(*c), parsed, error)) throw Problem("'command': " + error);
        p.command = std::move(parsed);
    }
    if (const J* ok = find(o, "ok")) {
        if (!ok->is_boolean()) wrong("ok", "a boolean", *ok);
        p.ok = ok->template get<bool>();
    }
    p.id = optional(o, "id", text<J>);
    p.changes = optional(o, "changes", count<J>);
    p.error = optional(o, "error", text<J>);
    return p;
}

template <class J>
EventPayload pin_release(const J& o) {
    PinReleasePayload p;
    const auto t = trigger(o, true);
    if (!t) throw Problem("'trigger' is missing");
    p.trigger = *t;
    p.evidence = evidence(o);
    p.cooldown_until = optional(o, "cooldown_until", integer<J>);
    p.blocks = blocks(o);
    p.names = names(o);
    return p;
}

template <class J>
EventPayload rollback(const J& o) {
    RollbackPayload p;
    p.trigger = trigger(o, false);
    p.evidence = evidence(o);
    p.blocks = blocks(o);
    p.names = names(o);
    p.cooldown_until = optional(o, "cooldown_until", integer<J>);
    return p;
}

template <class J>
EventPayload map_adopted(const J& o) {
    MapAdoptedPayload p;
    p.from_rank = optional(o, "from_rank", block_id<J>);
    p.blocks = blocks(o);
    if (const J* to = find(o, "to")) p.to = list(*to, "to", precision<J>);
    if (const J* r = find(o, "reasons")) {
        p.reasons = list(*r, "reasons", [](const J& v, std::string_view key) {
            std::optional<Reason> reason;
            if (v.is_string()) reason = parse_reason(v.template get_ref<const std::string&>());
            if (!reason) wrong(key, "a reason name", v);
            return *reason;
        });
    }
    if ((p.to && p.to->size() != p.blocks.size()) || (p.reasons && p.reasons->size() != p.blocks.size()))
        throw Problem("'to' and 'reasons' must be as long as 'blocks'");
    p.difference = optional(o, "difference", text<J>);
    return p;
}

template <class J>
EventPayload dropped(const J& o) {
    DroppedPayload p;
    p.count = count(require(o, "count"), "count");
    p.total = optional(o, "total", count<J>);
    p.write_errors = optional(o, "write_errors", count<J>);
    p.error = optional(o, "error", text<J>);
    return p;
}

template <class J>
EventPayload telemetry_loss(const J& o) {
    TelemetryLossPayload p;
    p.file = text(require(o, "file"), "file");
    const std::string state = text(require(o, "state"), "state");
    if (state != "failing" && state != "recovered")
        wrong("state", R"("failing" or "recovered")", require(o, "state"));
    p.failing = state == "failing";
    p.lost = count(require(o, "lost"), "lost");
    p.lost_to_errors = count(require(o, "lost_to_errors"), "lost_to_errors");
    p.offered = count(require(o, "offered"), "offered");
    p.error = optional(o, "error", text<J>);
    return p;
}

template <class J>
EventPayload typed(std::string_view kind, const J& o) {
    if (kind == "precision_change") return precision_change(o);
    if (kind == "command") return command(o);
    if (kind == "pin_release") return pin_release(o);
    if (kind == "rollback") return rollback(o);
    if (kind == "loss_spike") return LossSpikePayload{trigger(o, false), evidence(o)};
    if (kind == "map_adopted") return map_adopted(o);
    if (kind == "dropped") return dropped(o);
    if (kind == "warning") return WarningPayload{optional(o, "message", text<J>)};
    if (kind == "telemetry_loss") return telemetry_loss(o);
    if (kind == "run_end") return RunEndPayload{optional(o, "reason", text<J>)};
    return UntypedEvent{};
}

bool identifying(std::string_view key) {
    return key == "type" || key == "kind" || key == "step" || key == "timestamp";
}

template <class J>
UntypedEvent untyped(const J& o, std::string problem) {
    UntypedEvent u;
    u.problem = std::move(problem);
    if (!o.is_object()) return u;
    J fields = J::object();
    for (auto it = o.begin(); it != o.end(); ++it)
        if (!identifying(it.key())) fields[it.key()] = it.value();
    u.fields_json = fields.dump(-1, ' ', false, J::error_handler_t::replace);
    if (const J* m = find(o, "message"); m && m->is_string()) u.message = m->template get<std::string>();
    if (const J* id = find(o, "id"); id && id->is_string()) u.id = id->template get<std::string>();
    return u;
}

}  // namespace

std::string_view to_string(EventTrigger t) {
    return kTriggerNames[std::size_t(t)];
}

std::string_view kind_name(const EventPayload& payload) {
    constexpr std::string_view kNames[] = {"",           "precision_change", "command",     "pin_release",
                                           "loss_spike", "rollback",         "map_adopted", "dropped",
                                           "warning",    "telemetry_loss",   "run_end"};
    static_assert(std::size(kNames) == std::variant_size_v<EventPayload>);
    return kNames[payload.index()];
}

EventRecord make_event(std::int64_t step, double timestamp, EventPayload payload) {
    EventRecord e;
    e.step = step;
    e.timestamp = timestamp;
    e.kind = std::string(kind_name(payload));
    e.payload = std::move(payload);
    return e;
}

template <class Json>
EventPayload read_event_payload(std::string_view kind, const Json& object) {
    if (!object.is_object()) return untyped(object, "the payload is not a JSON object");
    try {
        EventPayload p = typed(kind, object);
        if (std::holds_alternative<UntypedEvent>(p)) return untyped(object, "");
        return p;
    } catch (const Problem& problem) {
        return untyped(object, problem.what());
    } catch (const std::exception& ex) {  // an nlohmann surprise: still a value, never a crash
        return untyped(object, ex.what());
    }
}

template EventPayload read_event_payload(std::string_view, const nlohmann::json&);
template EventPayload read_event_payload(std::string_view, const nlohmann::ordered_json&);

EventRecord event_from_json_text(std::string kind, std::int64_t step, double timestamp,
                                 std::string_view fields_json) {
    EventRecord e;
    e.step = step;
    e.timestamp = timestamp;
    e.kind = std::move(kind);
    nlohmann::ordered_json j;
    JsonError bad;
    if (fields_json.empty())
        j = nlohmann::ordered_json::object();
    else if (!parse_json(fields_json, j, bad))
        j = nullptr;
    e.payload = read_event_payload(e.kind, j);
    return e;
}

std::vector<int> event_blocks(const EventRecord& e) {
    if (const auto* p = std::get_if<PrecisionChangePayload>(&e.payload)) return {p->block};
    if (const auto* p = std::get_if<PinReleasePayload>(&e.payload)) return p->blocks;
    if (const auto* p = std::get_if<RollbackPayload>(&e.payload)) return p->blocks;
    if (const auto* p = std::get_if<MapAdoptedPayload>(&e.payload)) return p->blocks;
    if (const auto* p = std::get_if<CommandEventPayload>(&e.payload); p && p->command && p->ok.value_or(true))
        return p->command->blocks;
    return {};
}

const std::string& event_problem(const EventRecord& e) {
    static const std::string kNone;
    const auto* u = std::get_if<UntypedEvent>(&e.payload);
    return u ? u->problem : kNone;
}

}  // namespace sp
