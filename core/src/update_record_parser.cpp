// The update-record parser (update_record_parser.h): simdjson On-Demand over one line. simdjson's
// first stage checks the whole line's UTF-8, its strings' control characters and where its
// strings and brackets are; the rest is checked here while the values are read. Every value of the
// line is visited (known fields as their type, unknown ones down to their leaves), so that a line
// this parser accepts is one sp::parse_json accepts too: no number beyond a double's range, no
// nesting beyond 64 levels, valid escapes, no trailing characters (tests/fuzz/fuzz_jsonl.cpp).
#include "update_record_parser.h"
#include "json_number.h"
#include "update_record_fields.h"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <vector>

namespace sp {

namespace {

namespace od = simdjson::ondemand;
using namespace detail;  // NOLINT(google-build-using-namespace): the field tables (update_record_fields.h)
using simdjson::error_code;
using simdjson::SUCCESS;

static_assert(detail::kLinePadding >= simdjson::SIMDJSON_PADDING);

// sp::parse_json's limit (sp/json_input.h): no record nests beyond 4 levels.
constexpr int kMaxDepth = 64;
// A parser keeps about six bytes per byte of the longest line it read; after a line longer than
// this it gives that memory back.
constexpr std::size_t kKeptCapacity = std::size_t(1) << 20;

// The row of `key` in `fields`, N when it is unknown.
template <typename Field, std::size_t N>
std::size_t find_key(const std::array<Field, N>& fields, std::string_view key) {
    for (std::size_t i = 0; i < N; ++i) {
        if (fields[i].key == key) return i;
    }
    return N;
}

const char* kind_name(od::json_type t) {
    switch (t) {
        case od::json_type::array:
            return "array";
        case od::json_type::object:
            return "object";
        case od::json_type::number:
            return "number";
        case od::json_type::string:
            return "string";
        case od::json_type::boolean:
            return "boolean";
        case od::json_type::null:
            return "null";
    }
    return "value";
}

// What a field expects, for the message naming a value of the wrong kind.
enum class Want : std::uint8_t { integer, number, string, boolean, object };

const char* wanted(Want w) {
    static constexpr std::array<const char*, 5> kText = {"an integer", "a number", "a string", "a boolean",
                                                         "an object"};
    return kText[std::size_t(w)];
}

// The value's text up to the next structural character, without trailing whitespace.
std::string_view token_of(od::value& v) {
    std::string_view t = v.raw_json_token();
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r' || t.back() == '\n'))
        t.remove_suffix(1);
    return t;
}

// A double, correctly rounded. simdjson 3.0.1's On-Demand get_double misreads a number written
// "0.<digits>" with more than 19 significant digits: its overflow check counts the leading zeros
// instead of the digits after them, so "0.30000000000000004441" reads as 0.1155... No writer of
// this format writes one (the shortest form that round-trips has at most 17 digits), but doubles
// are exact, so such a token is read again by std::from_chars.
// The common case is read from the token first, leaving `v` unread: the array or object that
// holds it skips it.
error_code exact_double(od::value& v, double& out) {
    const std::string_view raw = v.raw_json_token();  // up to the next token: whitespace included
    if (read_short_double(raw, out)) return SUCCESS;
    if (const error_code e = v.get_double().get(out)) return e;
    if (raw.size() <= 21 || (raw[0] != '0' && (raw[0] != '-' || raw[1] != '0'))) return SUCCESS;
    std::size_t i = raw[0] == '-' ? 2 : 1;  // after the integer part "0"
    if (raw[i] == '.') {
        for (++i; i < raw.size() && raw[i] == '0';) ++i;
    }
    std::size_t digits = 0;
    for (; i < raw.size() && is_digit(raw[i]); ++i) ++digits;
    if (digits <= 19) return SUCCESS;
    const std::string_view t = token_of(v);
    const auto res = std::from_chars(t.data(), t.data() + t.size(), out);
    if (res.ec == std::errc()) return SUCCESS;
    // Out of range: an underflow reads as 0, as sp::parse_json reads it; an overflow is an error.
    if (!below_one(t)) return simdjson::NUMBER_ERROR;
    out = t[0] == '-' ? -0.0 : 0.0;
    return SUCCESS;
}

class UpdateParser {
  public:
    UpdateParser(std::string_view line, std::string& error)
        : begin_(line.data()), end_(line.data() + line.size()), error_(error) {}

    bool parse(od::document& doc, UpdateRecord& r);
    // simdjson refused the text (at `where`; nullptr: where the document stands). The column is
    // the byte at which simdjson stopped: the start of the token it could not take.
    bool syntax(const char* what, const char* where = nullptr);
    bool syntax(error_code e, const char* where = nullptr) {
        return syntax(simdjson::error_message(e), where);
    }

  private:
    bool fail(std::string msg) {
        error_ = std::move(msg);
        return false;
    }
    std::string field(std::string_view name) const {
        std::string f = "field '";
        if (block_ >= 0) f += "block_details." + std::to_string(block_) + ".";
        return f.append(name) + "'";
    }
    bool mistyped(od::value& v, std::string_view name, Want want);
    bool key_of(od::field& f, std::string_view& key);
    template <typename OnField>
    bool fields(od::object& obj, OnField&& on_field);
    template <typename OnMember>
    bool members(od::object& obj, OnMember&& on_member);
    template <typename Field, std::size_t N>
    bool row_of(od::field& f, const std::array<Field, N>& table, const std::array<KeyHead, N>& heads,
                std::size_t& hint, std::size_t& k);
    template <typename OnMember>
    bool object(od::value& v, std::string_view name, OnMember&& on_member) {
        auto obj = v.get_object();  // used in place, like every object and field (see fields())
        if (const error_code e = obj.error()) {
            return e == simdjson::INCORRECT_TYPE ? mistyped(v, name, Want::object) : syntax(e);
        }
        return members(obj.value_unsafe(), on_member);
    }
    bool validate(od::value& v, int level);
    static bool is_null(od::value& v) {
        bool null = false;
        return v.is_null().get(null) == SUCCESS && null;
    }

    bool read_int64(od::value& v, std::int64_t& out, std::string_view name) {
        return v.get_int64().get(out) == SUCCESS || mistyped(v, name, Want::integer);
    }
    template <typename Int>
    bool read_int(od::value& v, Int& out, std::string_view name) {
        std::int64_t wide = 0;
        if (!read_int64(v, wide, name)) return false;
        if (wide < std::numeric_limits<Int>::min() || wide > std::numeric_limits<Int>::max()) {
            return fail(field(name) + ": integer out of range");
        }
        out = Int(wide);
        return true;
    }
    // null: no value (non-finite when written).
    bool read_double(od::value& v, double& out, std::string_view name) {
        if (exact_double(v, out) == SUCCESS) return true;
        if (!is_null(v)) return mistyped(v, name, Want::number);
        out = kNoValue;
        return true;
    }
    bool read_string(od::value& v, std::string_view& out, std::string_view name) {
        const error_code e = v.get_string().get(out);
        if (e == SUCCESS) return true;
        return e == simdjson::INCORRECT_TYPE ? mistyped(v, name, Want::string) : syntax(e);
    }
    bool per_format(od::value& v, std::string_view key, PerFormat& out);
    bool details(od::value& v, std::vector<BlockDetail>& out);
    bool detail(std::string_view key, od::value& v, std::vector<BlockDetail>& out);
    bool detail_member(od::value& v, BlockDetail& d, std::size_t k);
    bool top_member(od::value& v, UpdateRecord& r, std::size_t k);

    const char* begin_;
    const char* end_;
    od::document* doc_ = nullptr;
    std::string& error_;
    int block_ = -1;                     // block whose detail is being parsed, for messages
    std::vector<std::string> bad_keys_;  // block_details keys that are no block id, in line order
};

bool UpdateParser::syntax(const char* what, const char* where) {
    const char* loc = nullptr;
    if (where == nullptr && doc_ != nullptr && doc_->current_location().get(loc) == SUCCESS) where = loc;
    if (where == nullptr || where < begin_ || where > end_) where = end_;
    error_ = "invalid JSON at column " + std::to_string(where - begin_ + 1) + ": " +
             (where == end_ ? "unexpected end of line" : what);
    return false;
}

// `v` is not what the field takes: a value of another kind, a number out of the field's range, a
// fraction for an integer; or malformed (a syntax error).
bool UpdateParser::mistyped(od::value& v, std::string_view name, Want want) {
    od::json_type t{};
    if (const error_code e = v.type().get(t)) return syntax(e);
    const std::string_view text = token_of(v);
    if (t == od::json_type::number) {
        const NumberText kind = number_text(text);
        if (kind == NumberText::invalid) return syntax("invalid number", text.data());
        if (want == Want::integer) {
            return fail(field(name) + (kind == NumberText::fraction ? ": expected an integer, got number"
                                                                    : ": integer out of range"));
        }
        if (want == Want::number) return fail(field(name) + ": number out of range");
    }
    if ((t == od::json_type::boolean || t == od::json_type::null) && text != "true" && text != "false" &&
        text != "null") {
        return syntax("invalid literal", text.data());
    }
    return fail(field(name) + ": expected " + wanted(want) + ", got " + kind_name(t));
}

bool UpdateParser::key_of(od::field& f, std::string_view& key) {
    const char* const start = f.key().raw();  // after the opening quote; the string is closed
    const char* p = start;
    while (*p != '"' && *p != '\\') ++p;
    if (*p == '"') {
        key = std::string_view(start, std::size_t(p - start));
        return true;
    }
    // An escaped key ("step_\u0069d" is step_id): simdjson decodes it, checking its escapes.
    if (const error_code e = f.unescaped_key().get(key)) return syntax(e, start);
    return true;
}

// Calls on_field(field) for each member of `obj`; it must consume the field's value.
template <typename OnField>
bool UpdateParser::fields(od::object& obj, OnField&& on_field) {
    for (auto member : obj) {
        if (const error_code e = member.error()) return syntax(e);
        // Used in place: copying a field out of its result (od::field f; get(f)) stalls on a
        // failed store forwarding and made the whole parser 1.4x slower.
        if (!on_field(member.value_unsafe())) return false;
    }
    return true;
}

// Calls on_member(key, value) for each member of `obj`; it must consume the value.
template <typename OnMember>
bool UpdateParser::members(od::object& obj, OnMember&& on_member) {
    return fields(obj, [&](od::field& f) {
        std::string_view key;
        return key_of(f, key) && on_member(key, f.value());
    });
}

// Whether the key at `raw` (after its opening quote) is `want`, compared in place: a key of the
// line is followed by at least its closing quote and the line's padding, which covers reading 16
// bytes, and comparing a longer `want`.
bool key_at(const char* raw, const KeyHead& head, std::string_view want) {
    std::array<std::uint64_t, 2> words{};
    std::memcpy(words.data(), raw, sizeof words);
    const std::uint64_t differ =
        ((words[0] & head.mask[0]) ^ head.word[0]) | ((words[1] & head.mask[1]) ^ head.word[1]);
    if (differ != 0) return false;
    return head.size <= 16 ||
           (std::memcmp(raw + 16, want.data() + 16, want.size() - 16) == 0 && raw[want.size()] == '"');
}

// The row of `f`'s key in `table` (N when unknown). Keys come in the writer's order: the rows are
// compared in place from the one after the previous match, so most keys are neither scanned nor
// decoded; a key no row matches in place (unknown, or escaped) is decoded and looked up.
template <typename Field, std::size_t N>
bool UpdateParser::row_of(od::field& f, const std::array<Field, N>& table,
                          const std::array<KeyHead, N>& heads, std::size_t& hint, std::size_t& k) {
    const char* raw = f.key().raw();
    for (std::size_t i = 0; i < N; ++i) {
        const std::size_t row = hint + i < N ? hint + i : hint + i - N;
        if (key_at(raw, heads[row], table[row].key)) {
            k = row;
            hint = row + 1;
            return true;
        }
    }
    std::string_view key;
    if (!key_of(f, key)) return false;
    k = find_key(table, key);
    return true;
}

// Checks any value (a newer producer's field) by sp::parse_json's rules (TELEMETRY.md "Reading
// JSON"): at most kMaxDepth levels of arrays/objects, no number beyond a double's range, valid
// strings and literals. `level` is the nesting level the value opens if it is an array or object.
bool UpdateParser::validate(od::value& v, int level) {
    od::json_type t{};
    if (const error_code e = v.type().get(t)) return syntax(e);
    if ((t == od::json_type::array || t == od::json_type::object) && level > kMaxDepth) {
        return syntax("nested deeper than 64 levels", token_of(v).data());
    }
    double number = 0.0;
    std::string_view text;
    bool flag = false;
    switch (t) {
        case od::json_type::array: {
            auto array = v.get_array();
            if (const error_code e = array.error()) return syntax(e);
            for (auto element : array.value_unsafe()) {
                if (const error_code e = element.error()) return syntax(e);
                if (!validate(element.value_unsafe(), level + 1)) return false;
            }
            return true;
        }
        case od::json_type::object: {
            auto obj = v.get_object();
            if (const error_code e = obj.error()) return syntax(e);
            return members(obj.value_unsafe(),
                           [&](std::string_view, od::value& x) { return validate(x, level + 1); });
        }
        case od::json_type::number:
            if (exact_double(v, number) == SUCCESS) return true;
            text = token_of(v);
            if (number_text(text) == NumberText::invalid) return syntax("invalid number", text.data());
            return fail("number out of range at column " + std::to_string(text.data() - begin_ + 1));
        case od::json_type::string:
            if (const error_code e = v.get_string().get(text)) return syntax(e);
            return true;
        case od::json_type::boolean:
            return v.get_bool().get(flag) == SUCCESS || syntax("invalid literal");
        case od::json_type::null:
            return is_null(v) || syntax("invalid literal");
    }
    return syntax("unexpected character");
}

bool UpdateParser::detail_member(od::value& v, BlockDetail& d, std::size_t k) {
    const DetailField& f = kDetail[k];
    if (f.dbl != nullptr) return read_double(v, d.*f.dbl, f.key);
    if (f.num != nullptr) return read_int(v, d.*f.num, f.key);
    std::string_view text;
    switch (k) {
        case kPrecision: {
            if (!read_string(v, text, f.key)) return false;
            const auto p = parse_precision(text);
            if (!p) return fail(field(f.key) + ": unknown precision '" + std::string(text) + "'");
            d.precision = *p;
            return true;
        }
        case kForced:
            if (is_null(v)) {
                d.forced = ForcedBy::none;
                return true;
            }
            if (!read_string(v, text, f.key)) return false;
            if (text != "config" && text != "pin") {
                return fail(field(f.key) + ": expected null, \"config\" or \"pin\", got '" +
                            std::string(text) + "'");
            }
            d.forced = text == "pin" ? ForcedBy::pin : ForcedBy::config;
            return true;
        case kChanged:
            return v.get_bool().get(d.changed) == SUCCESS || mistyped(v, f.key, Want::boolean);
        case kReason: {
            if (!read_string(v, text, f.key)) return false;
            const auto r = parse_reason(text);
            if (!r) return fail(field(f.key) + ": unknown reason '" + std::string(text) + "'");
            d.reason = *r;
            return true;
        }
        case kLastChangeStep:
            return read_int64(v, d.last_change_step, f.key);
        case kSnr:
            return per_format(v, "snr_db", d.snr_db);
        case kLossDelta:
            return per_format(v, "loss_delta_pct", d.loss_delta_pct);
        case kReasonText:
            if (!read_string(v, text, f.key)) return false;
            d.reason_text.assign(text);
            return true;
        default:
            return false;  // every other row has a member pointer
    }
}

// "snr_db" or "loss_delta_pct": {"int8": 41.7, ...}; formats left out stay unknown.
bool UpdateParser::per_format(od::value& v, std::string_view name, PerFormat& out) {
    out = kNoSnr;
    return object(v, name, [&](std::string_view key, od::value& x) {
        const auto p = parse_precision(key);
        if (!p) return fail(std::string(name) + ": unknown format '" + std::string(key) + "'");
        return read_double(x, out[std::size_t(*p)], std::string(name) + "." + std::string(key));
    });
}

bool UpdateParser::details(od::value& v, std::vector<BlockDetail>& out) {
    const bool ok =
        object(v, "block_details", [&](std::string_view key, od::value& x) { return detail(key, x, out); });
    if (bad_keys_.empty()) return ok;
    // Every key that is no block id, not only the first (sp-ctl validate reports the line's message):
    // the first kShown of them, each cut like a key path, then how many more.
    constexpr std::size_t kShown = 8, kMaxKey = 64;
    std::string keys;
    for (std::size_t i = 0; i < std::min(bad_keys_.size(), kShown); ++i) {
        const std::string& k = bad_keys_[i];
        keys += (i == 0 ? "'" : ", '") + (k.size() > kMaxKey ? k.substr(0, kMaxKey - 3) + "..." : k) + "'";
    }
    if (bad_keys_.size() > kShown) keys += " and " + std::to_string(bad_keys_.size() - kShown) + " more";
    std::string message =
        "block_details: " + (bad_keys_.size() == 1 ? "key " + keys + " is not a non-negative integer"
                                                   : "keys " + keys + " are not non-negative integers");
    if (!ok) message += "; " + error_;  // what stopped the reading after them
    return fail(std::move(message));
}

bool UpdateParser::detail(std::string_view key, od::value& v, std::vector<BlockDetail>& out) {
    int id = -1;
    const auto res = std::from_chars(key.data(), key.data() + key.size(), id);
    if (key.empty() || !is_digit(key[0]) || res.ec != std::errc() || res.ptr != key.data() + key.size()) {
        // Noted and read past (still judged as JSON), so that every such key is named.
        bad_keys_.emplace_back(key);
        return validate(v, 3);
    }
    auto obj = v.get_object();
    if (const error_code e = obj.error()) {
        return e == simdjson::INCORRECT_TYPE ? mistyped(v, "block_details." + std::string(key), Want::object)
                                             : syntax(e);
    }
    BlockDetail& d = out.emplace_back();
    d.id = id;
    block_ = id;
    std::uint32_t seen = 0;
    std::size_t hint = 0;
    const bool ok = fields(obj.value_unsafe(), [&](od::field& f) {
        std::size_t k = 0;
        if (!row_of(f, kDetail, kDetailHeads, hint, k)) return false;
        if (k == kDetail.size()) return validate(f.value(), 4);  // a newer producer's field
        seen |= 1u << k;
        return detail_member(f.value(), d, k);
    });
    if (!ok) return false;
    for (std::size_t i = 0; (seen & kDetailRequired) != kDetailRequired; ++i) {
        if ((kDetailRequired & ~seen) & (1u << i)) {
            return fail("block_details." + std::to_string(id) + ": missing field '" +
                        std::string(kDetail[i].key) + "'");
        }
    }
    block_ = -1;
    return true;
}

bool UpdateParser::top_member(od::value& v, UpdateRecord& r, std::size_t k) {
    const TopField& f = kTop[k];
    if (f.dbl != nullptr) return read_double(v, r.*f.dbl, f.key);
    if (f.num != nullptr) return read_int(v, r.*f.num, f.key);
    std::string_view text;
    double number = 0.0;
    std::int64_t step = 0;
    switch (k) {
        case kStepId:
            return read_int64(v, r.step_id, f.key);
        case kBlockDetails:
            r.block_details.clear();
            return details(v, r.block_details);  // repeated key replaces
        case kMode: {
            r.mode.reset();
            if (is_null(v)) return true;
            if (!read_string(v, text, f.key)) return false;
            Mode m{};
            if (!parse_mode(text, m))
                return fail(field(f.key) + ": unknown mode '" + std::string(text) + "'");
            r.mode = m;
            return true;
        }
        case kMeasured:
        case kTrainLoss:
        case kEvalLoss:
        case kBudgetTarget:
        case kLossTolerance:
        case kEstimatedLoss:
            (r.*f.opt).reset();
            if (is_null(v)) return true;
            if (!read_double(v, number, f.key)) return false;
            r.*f.opt = number;
            return true;
        case kEvalStep:
            r.eval_step.reset();  // null reads as absent, like the optional numbers
            if (is_null(v)) return true;
            if (!read_int64(v, step, f.key)) return false;
            r.eval_step = step;
            return true;
        case kType:
            if (!read_string(v, text, f.key)) return false;
            return text == "update" || fail("not an update record");
        default:
            return false;  // every other row has a member pointer
    }
}

bool UpdateParser::parse(od::document& doc, UpdateRecord& r) {
    doc_ = &doc;
    // Reset, keeping block_details' capacity for the next record.
    std::vector<BlockDetail> keep = std::move(r.block_details);
    keep.clear();
    r = UpdateRecord{};
    r.block_details = std::move(keep);

    auto obj = doc.get_object();
    if (const error_code e = obj.error()) {
        return e == simdjson::INCORRECT_TYPE ? fail("expected a JSON object") : syntax(e);
    }
    std::uint32_t seen = 0;
    std::size_t hint = 0;
    const bool ok = fields(obj.value_unsafe(), [&](od::field& f) {
        std::size_t k = 0;
        if (!row_of(f, kTop, kTopHeads, hint, k)) return false;
        if (k == kTop.size()) return validate(f.value(), 2);  // a newer producer's field
        seen |= 1u << k;
        return top_member(f.value(), r, k);
    });
    if (!ok) return false;
    const char* rest = nullptr;  // none: at the end of the document
    if (doc.current_location().get(rest) == SUCCESS)
        return syntax("unexpected characters after the record", rest);
    for (std::size_t i = 0; (seen & kTopRequired) != kTopRequired; ++i) {
        if (!(seen & (1u << i))) return fail("missing field '" + std::string(kTop[i].key) + "'");
    }
    auto& d = r.block_details;
    const auto by_id = [](const BlockDetail& a, const BlockDetail& b) { return a.id < b.id; };
    if (!std::is_sorted(d.begin(), d.end(), by_id)) std::sort(d.begin(), d.end(), by_id);
    const auto same_id = [](const BlockDetail& a, const BlockDetail& b) { return a.id == b.id; };
    const auto dup = std::adjacent_find(d.begin(), d.end(), same_id);
    if (dup != d.end()) return fail("block_details: duplicate block id " + std::to_string(dup->id));
    return true;
}

// One On-Demand parser per thread (the dashboard parses on a worker thread), reused from line to line.
od::parser& thread_parser() {
    thread_local od::parser parser;
    return parser;
}

}  // namespace

namespace detail {

bool parse_update_record_padded(std::string_view line, UpdateRecord& out, std::string& error) {
    if (line.size() > JsonlReader::kMaxLineBytes) {  // never the reader's lines: it skips those
        error = "line too long: " + std::to_string(line.size()) + " bytes (the limit is " +
                std::to_string(JsonlReader::kMaxLineBytes) + ")";
        return false;
    }
    od::parser& parser = thread_parser();
    bool ok = false;
    {
        UpdateParser reader(line, error);
        od::document doc;
        const error_code e = parser.iterate(line.data(), line.size(), line.size() + kLinePadding).get(doc);
        ok = e == SUCCESS ? reader.parse(doc, out) : reader.syntax(e, line.data());
    }
    if (parser.capacity() > kKeptCapacity) parser = od::parser{};
    return ok;
}

bool parse_update_record(std::string_view line, UpdateRecord& out, std::string& error) {
    thread_local std::vector<char> copy;  // the line followed by kLinePadding bytes
    if (copy.size() < line.size() + kLinePadding) copy.resize(line.size() + kLinePadding);
    if (!line.empty()) std::memcpy(copy.data(), line.data(), line.size());
    const bool ok = parse_update_record_padded(std::string_view(copy.data(), line.size()), out, error);
    if (copy.size() > kKeptCapacity) std::vector<char>().swap(copy);
    return ok;
}

}  // namespace detail
}  // namespace sp
