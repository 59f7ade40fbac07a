// The gate's policy file (core/GATE.md "The file"): reading with every problem reported at once,
// each naming its key, and writing in a fixed order so files diff cleanly.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <set>
#include <system_error>
#include <tuple>

#include <nlohmann/json.hpp>

#include "sp/format_gate.h"
#include "sp/json_input.h"

namespace sp {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kFormatNames = R"("int8", "fp8_e4m3", "fp8_e5m2", "int4")";

std::string show(const json& v) {
    std::string text = v.dump();
    constexpr std::size_t kMax = 80;
    if (text.size() > kMax) text = text.substr(0, kMax) + "...";
    return text;
}

// A count: a non-negative integer (integral floats such as 512.0 too, as some JSON writers emit them).
bool read_count(const json& v, std::uint64_t& out) {
    if (v.is_number_unsigned()) {
        out = v.get<std::uint64_t>();
        return true;
    }
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (!(d >= 0.0 && d < 18446744073709551616.0) || d != std::trunc(d)) return false;
        out = static_cast<std::uint64_t>(d);
        return true;
    }
    return false;  // negative integers, booleans, strings...
}

// A decimal column count used as an object key: digits only, no sign, no leading zero, >= 1.
bool read_cols_key(const std::string& text, std::uint64_t& out) {
    if (text.empty() || text[0] == '0') return false;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return ec == std::errc() && ptr == end;
}

// Collects problems while walking the document; each names the key path as the user wrote it.
class Reader {
  public:
    std::vector<std::string> problems;

    void add(const std::string& key, const std::string& what) {
        problems.push_back("key '" + key + "': " + what);
    }
    void add_got(const std::string& key, const std::string& what, const json& v) {
        add(key, what + ", got " + show(v));
    }

    // Every member of `obj` must be one of `known`.
    void reject_unknown(const json& obj, const std::string& prefix,
                        std::initializer_list<std::string_view> known) {
        for (const auto& [name, value] : obj.items()) {
            if (std::find(known.begin(), known.end(), name) == known.end())
                add(prefix + name, "unknown key (known: " + join(known) + ")");
        }
    }

    bool positive_count(const json& v, const std::string& key, std::uint64_t& out) {
        if (read_count(v, out) && out >= 1) return true;
        add_got(key, "must be an integer >= 1", v);
        return false;
    }

    bool text(const json& obj, const char* name, std::string& out) {
        const auto it = obj.find(name);
        if (it == obj.end()) return true;
        if (!it->is_string()) {
            add_got(name, "must be a string", *it);
            return false;
        }
        out = it->get<std::string>();
        return true;
    }

    bool speedup(const json& v, const std::string& key, double threshold, double& out) {
        if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0.0) {
            add_got(key, "must be a finite number > 0", v);
            return false;
        }
        out = v.get<double>();
        if (std::isfinite(threshold) && out < threshold) {
            add_got(key,
                    "must be >= speedup_threshold (" + json(threshold).dump() +
                        "): a rule admits only a format measured faster",
                    v);
            return false;
        }
        return true;
    }

  private:
    static std::string join(std::initializer_list<std::string_view> names) {
        std::string out;
        for (std::string_view n : names) out += (out.empty() ? "" : ", ") + std::string(n);
        return out;
    }
};

Precision read_format(Reader& r, const json& rule, const std::string& key, bool& ok) {
    const auto it = rule.find("format");
    if (it == rule.end()) {
        r.add(key + ".format", "missing (one of " + std::string(kFormatNames) + ")");
        ok = false;
        return Precision::bf16;
    }
    const auto p = it->is_string() ? parse_precision(it->get<std::string>()) : std::nullopt;
    if (!p || *p == Precision::bf16) {
        const char* why = p ? " (BF16 is always admitted and needs no rule)" : "";
        r.add_got(key + ".format", "must be one of " + std::string(kFormatNames) + why, *it);
        ok = false;
        return Precision::bf16;
    }
    return *p;
}

// One element of a rule list, e.g. rules.matrix.128[0].
bool read_rule(Reader& r, const json& v, const std::string& key, double threshold, GateRule& rule) {
    if (!v.is_object()) {
        r.add_got(key, "must be an object", v);
        return false;
    }
    r.reject_unknown(v, key + ".", {"format", "min_rows", "measured_speedup", "min_speedup", "max_rows"});
    bool ok = true;
    rule.format = read_format(r, v, key, ok);
    const auto required = [&](const char* name) -> const json* {
        const auto it = v.find(name);
        if (it != v.end()) return &*it;
        r.add(key + "." + name, "missing");
        ok = false;
        return nullptr;
    };
    if (const json* m = required("min_rows")) ok &= r.positive_count(*m, key + ".min_rows", rule.min_rows);
    if (const json* s = required("measured_speedup"))
        ok &= r.speedup(*s, key + ".measured_speedup", threshold, rule.measured_speedup);
    if (!ok) return false;
    rule.min_speedup = rule.measured_speedup;
    if (const auto it = v.find("min_speedup"); it != v.end()) {
        ok &= r.speedup(*it, key + ".min_speedup", threshold, rule.min_speedup);
        if (ok && rule.min_speedup > rule.measured_speedup) {
            r.add_got(key + ".min_speedup",
                      "must be <= measured_speedup (" + json(rule.measured_speedup).dump() + ")", *it);
            ok = false;
        }
    }
    rule.max_rows = rule.min_rows;
    if (const auto it = v.find("max_rows"); it != v.end()) {
        ok &= r.positive_count(*it, key + ".max_rows", rule.max_rows);
        if (ok && rule.max_rows < rule.min_rows) {
            r.add_got(key + ".max_rows", "must be >= min_rows (" + std::to_string(rule.min_rows) + ")", *it);
            ok = false;
        }
    }
    return ok;
}

// rules.<kind>: {"<cols>": [rule, ...], ...}
void read_kind(Reader& r, const json& v, LayerKind kind, double threshold, std::vector<GateRule>& out) {
    const std::string key = "rules." + std::string(to_string(kind));
    if (!v.is_object()) return r.add_got(key, "must be an object keyed by column count", v);
    for (const auto& [name, list] : v.items()) {
        const std::string list_key = key + "." + name;
        std::uint64_t cols = 0;
        if (!read_cols_key(name, cols)) {
            r.add(list_key, "the key must be a column count, a whole number >= 1 written in decimal");
            continue;
        }
        if (!list.is_array()) {
            r.add_got(list_key, "must be an array of rules", list);
            continue;
        }
        std::set<Precision> seen;
        for (std::size_t i = 0; i < list.size(); ++i) {
            const std::string rule_key = list_key + "[" + std::to_string(i) + "]";
            GateRule rule;
            rule.kind = kind;
            rule.cols = cols;
            if (!read_rule(r, list[i], rule_key, threshold, rule)) continue;
            if (!seen.insert(rule.format).second) {
                r.add(rule_key + ".format",
                      "a second rule for \"" + std::string(to_string(rule.format)) + "\" (one per format)");
                continue;
            }
            out.push_back(rule);
        }
    }
}

void read_rules(Reader& r, const json& root, double threshold, FormatGatePolicy& p) {
    const auto it = root.find("rules");
    if (it == root.end()) return r.add("rules", "missing (an object with \"matrix\" and/or \"vector\")");
    if (!it->is_object()) return r.add_got("rules", "must be an object", *it);
    r.reject_unknown(*it, "rules.", {"matrix", "vector"});
    for (LayerKind kind : {LayerKind::matrix, LayerKind::vector}) {
        const auto k = it->find(std::string(to_string(kind)));
        if (k != it->end()) read_kind(r, *k, kind, threshold, p.rules);
    }
    std::sort(p.rules.begin(), p.rules.end(), [](const GateRule& a, const GateRule& b) {
        return std::tie(a.kind, a.cols, a.format) < std::tie(b.kind, b.cols, b.format);
    });
}

void read_header(Reader& r, const json& root, FormatGatePolicy& p) {
    const auto version = root.find("version");
    std::uint64_t v = 0;
    if (version == root.end())
        r.add("version", "missing (this reader knows version 1)");
    else if (!read_count(*version, v) || v != 1)
        r.add_got("version", "must be 1 (the only version this reader knows)", *version);
    r.text(root, "producer", p.producer);
    r.text(root, "device", p.device);
    r.text(root, "link", p.link);
    if (const auto t = root.find("speedup_threshold"); t != root.end()) {
        if (t->is_number() && std::isfinite(t->get<double>()) && t->get<double>() > 0.0)
            p.speedup_threshold = t->get<double>();
        else {
            r.add_got("speedup_threshold", "must be a finite number > 0", *t);
            p.speedup_threshold = std::nan("");  // rules are still checked, but not against it
        }
    }
    if (const auto g = root.find("int4_group"); g != root.end())
        r.positive_count(*g, "int4_group", p.int4_group);
}

std::string describe(const std::vector<std::string>& problems) {
    std::string text = "invalid format gate policy:";
    for (const std::string& p : problems) text += "\n  " + p;
    return text;
}

ordered_json rule_json(const GateRule& rule) {
    ordered_json j;
    j["format"] = std::string(to_string(rule.format));
    j["min_rows"] = rule.min_rows;
    j["measured_speedup"] = rule.measured_speedup;
    j["min_speedup"] = rule.min_speedup;
    j["max_rows"] = rule.max_rows;
    return j;
}

}  // namespace

GatePolicyError::GatePolicyError(const std::vector<std::string>& problems)
    : ConfigError(problems), text_(describe(problems)) {}

FormatGatePolicy parse_gate_policy(std::string_view json_text) {
    json root;
    JsonError error;
    JsonLimits limits;
    limits.reject_duplicate_keys = true;  // a second "128" under rules.matrix would hide the first
    if (!parse_json(json_text, root, error, limits)) {
        if (error.kind == JsonError::Kind::duplicate_key)
            throw GatePolicyError({"key '" + error.path + "': given more than once in the same object (" +
                                   error.location() + "); give each key once"});
        throw GatePolicyError({"not valid JSON: " + error.message()});
    }
    if (!root.is_object()) throw GatePolicyError({"the policy must be a JSON object, got " + show(root)});
    Reader r;
    FormatGatePolicy p;
    r.reject_unknown(root, "",
                     {"version", "producer", "device", "link", "speedup_threshold", "int4_group", "rules"});
    read_header(r, root, p);
    read_rules(r, root, p.speedup_threshold, p);
    if (!r.problems.empty()) throw GatePolicyError(r.problems);
    return p;
}

FormatGatePolicy load_gate_policy(const std::string& path) {
    // Only a regular file of at most 16 MiB: /dev/zero would grow the reader without end, and a FIFO
    // or /dev/urandom would block it (sp/json_input.h).
    std::string text, problem;
    if (!read_json_file(path, text, problem))
        throw GatePolicyError({path + ": cannot read the file (" + problem + ")"});
    try {
        return parse_gate_policy(text);
    } catch (const GatePolicyError& e) {
        std::vector<std::string> problems;
        for (const std::string& p : e.problems()) problems.push_back(path + ": " + p);
        throw GatePolicyError(problems);
    }
}

std::string to_json_text(const FormatGatePolicy& p) {
    ordered_json root;
    root["version"] = p.version;
    root["producer"] = p.producer;
    root["device"] = p.device;
    root["link"] = p.link;
    root["speedup_threshold"] = p.speedup_threshold;
    root["int4_group"] = p.int4_group;
    ordered_json rules = ordered_json::object();
    for (LayerKind kind : {LayerKind::matrix, LayerKind::vector}) {
        ordered_json by_cols = ordered_json::object();
        std::vector<GateRule> sorted;
        std::copy_if(p.rules.begin(), p.rules.end(), std::back_inserter(sorted),
                     [&](const GateRule& r) { return r.kind == kind; });
        std::sort(sorted.begin(), sorted.end(), [](const GateRule& a, const GateRule& b) {
            return std::tie(a.cols, a.format) < std::tie(b.cols, b.format);
        });
        for (const GateRule& rule : sorted) by_cols[std::to_string(rule.cols)].push_back(rule_json(rule));
        rules[std::string(to_string(kind))] = by_cols;
    }
    root["rules"] = rules;
    return root.dump(2) + "\n";
}

}  // namespace sp
