// The event writer: each kind's fields appended to the line directly, no DOM. The order of the keys
// and the spelling of the numbers are what the agent wrote when it built each payload as an
// nlohmann::json object (whose keys sort by name) and dumped it, so files and the wire stay
// byte-identical to theirs (core/TELEMETRY.md, "Event record").
#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "sp/event_payload.h"

namespace sp {
namespace {

// Appends `,"key":value` pairs after the identifying fields.
class Fields {
  public:
    explicit Fields(std::string& s) : s_(s) {}

    void key(std::string_view k) {
        s_ += ",\"";
        s_ += k;
        s_ += "\":";
    }
    void put_raw(std::string_view v) { s_ += v; }
    void number(std::string_view k, double v) {
        key(k);
        put_number(s_, v);
    }
    void number(std::string_view k, const std::optional<double>& v) {
        if (v) number(k, *v);
    }
    void integer(std::string_view k, std::int64_t v) {
        key(k);
        put_integer(s_, v);
    }
    void integer(std::string_view k, const std::optional<std::int64_t>& v) {
        if (v) integer(k, *v);
    }
    void count(std::string_view k, std::uint64_t v) {
        key(k);
        char buf[24];
        s_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    }
    void count(std::string_view k, const std::optional<std::uint64_t>& v) {
        if (v) count(k, *v);
    }
    void text(std::string_view k, std::string_view v) {
        key(k);
        put_string(s_, v);
    }
    void text_if(std::string_view k, const std::optional<std::string>& v) {
        if (v) text(k, std::string_view(*v));
    }
    void integers(std::string_view k, const std::vector<int>& v) {
        key(k);
        s_ += '[';
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (i > 0) s_ += ',';
            put_integer(s_, v[i]);
        }
        s_ += ']';
    }
    template <class T>
    void texts(std::string_view k, const std::vector<T>& v) {
        key(k);
        s_ += '[';
        for (std::size_t i = 0; i < v.size(); ++i) {
            if (i > 0) s_ += ',';
            put_string(s_, to_text(v[i]));
        }
        s_ += ']';
    }

    // nlohmann's spelling of a double (as its dump writes one: "6.0", "100000.0", "1e+16"), which
    // is not std::to_chars' ("1e+05"); null when not finite.
    static void put_number(std::string& s, double v) {
        if (!std::isfinite(v)) {
            s += "null";
            return;
        }
        char buf[64];
        s.append(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, v));
    }
    static void put_integer(std::string& s, std::int64_t v) {
        char buf[24];
        s.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    }
    // Plain ASCII as is; anything to escape, or beyond ASCII (invalid UTF-8 becomes U+FFFD, so a
    // bad block name never loses the record), as nlohmann's dump writes it.
    static void put_string(std::string& s, std::string_view v) {
        const bool plain = std::all_of(v.begin(), v.end(),
                                       [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
        if (plain) {
            s += '"';
            s += v;
            s += '"';
            return;
        }
        s += nlohmann::json(std::string(v)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }

  private:
    static std::string_view to_text(const std::string& v) { return v; }
    static std::string_view to_text(Precision p) { return to_string(p); }
    static std::string_view to_text(Reason r) { return to_string(r); }

    std::string& s_;
};

// The evidence's keys sort among the payload's own: those before "names", then those after.
void evidence_to_names(Fields& f, const LossEvidence& e) {
    f.number("ema", e.ema);
    f.integer("history", e.history);
    f.number("loss", e.loss);
}

void evidence_after_names(Fields& f, const LossEvidence& e, const std::optional<EventTrigger>& trigger) {
    f.number("stddev", e.stddev);
    f.number("threshold", e.threshold);
    if (trigger) f.text("trigger", to_string(*trigger));
    f.integer("window_steps", e.window_steps);
    f.number("z", e.z);
}

struct Writer {
    Fields& f;

    void operator()(const UntypedEvent& u) const { (void)u; }  // spliced by append_json
    void operator()(const PrecisionChangePayload& p) const {
        f.integer("block", p.block);
        f.text("from", to_string(p.from));
        f.text_if("name", p.name);
        f.text_if("reason", p.reason);
        f.text("to", to_string(p.to));
    }
    void operator()(const CommandEventPayload& p) const {
        f.count("changes", p.changes);
        if (p.command) {
            // The one serializer of a command (sp/command.h); an event carries few.
            f.key("command");
            f.put_raw(to_json(*p.command).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        }
        f.text_if("error", p.error);
        f.text_if("id", p.id);
        if (p.ok) {
            f.key("ok");
            f.put_raw(*p.ok ? "true" : "false");
        }
    }
    void operator()(const PinReleasePayload& p) const {
        f.integers("blocks", p.blocks);
        f.integer("cooldown_until", p.cooldown_until);
        evidence_to_names(f, p.evidence);
        f.texts("names", p.names);
        evidence_after_names(f, p.evidence, p.trigger);
    }
    void operator()(const LossSpikePayload& p) const {
        evidence_to_names(f, p.evidence);
        evidence_after_names(f, p.evidence, p.trigger);
    }
    void operator()(const RollbackPayload& p) const {
        f.integers("blocks", p.blocks);
        f.integer("cooldown_until", p.cooldown_until);
        evidence_to_names(f, p.evidence);
        f.texts("names", p.names);
        evidence_after_names(f, p.evidence, p.trigger);
    }
    void operator()(const MapAdoptedPayload& p) const {
        f.integers("blocks", p.blocks);
        f.text_if("difference", p.difference);
        if (p.from_rank) f.integer("from_rank", *p.from_rank);
        if (p.reasons) f.texts("reasons", *p.reasons);
        if (p.to) f.texts("to", *p.to);
    }
    void operator()(const DroppedPayload& p) const {
        // The sink's order, not sorted: it built this payload as an ordered object.
        f.count("count", p.count);
        f.count("total", p.total);
        f.count("write_errors", p.write_errors);
        f.text_if("error", p.error);
    }
    void operator()(const WarningPayload& p) const { f.text_if("message", p.message); }
    void operator()(const TelemetryLossPayload& p) const {
        f.text_if("error", p.error);
        f.text("file", std::string_view(p.file));
        f.count("lost", p.lost);
        f.count("lost_to_errors", p.lost_to_errors);
        f.count("offered", p.offered);
        f.text("state", std::string_view(p.failing ? "failing" : "recovered"));
    }
    void operator()(const RunEndPayload& p) const { f.text_if("reason", p.reason); }
};

}  // namespace

void append_json(std::string& s, const EventRecord& e) {
    if (e.kind.empty()) throw std::invalid_argument("EventRecord has no kind");
    const std::string_view typed = kind_name(e.payload);
    if (!typed.empty() && typed != e.kind)
        throw std::invalid_argument("EventRecord of kind '" + e.kind + "' holds a " + std::string(typed) +
                                    " payload");
    s += "{\"type\":\"event\",\"kind\":";
    Fields::put_string(s, e.kind);
    s += ",\"step\":";
    Fields::put_integer(s, e.step);
    s += ",\"timestamp\":";
    Fields::put_number(s, e.timestamp);
    if (const auto* u = std::get_if<UntypedEvent>(&e.payload)) {
        const std::string& j = u->fields_json;
        if (j.size() < 2 || j.front() != '{' || j.back() != '}')
            throw std::invalid_argument("UntypedEvent.fields_json is not a JSON object's text");
        if (j.size() > 2) {
            s += ',';
            s.append(j, 1, j.size() - 2);
        }
    } else {
        Fields f(s);
        std::visit(Writer{f}, e.payload);
    }
    s += '}';
}

}  // namespace sp
