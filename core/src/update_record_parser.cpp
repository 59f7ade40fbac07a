// The fast path for update-record lines: see update_record_parser.h for why it exists.
#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "update_record_parser.h"
#include "utf8.h"

namespace sp {

namespace {

// One row per known key, in the writer's order. A member pointer handles the plain numeric
// fields; the rest are handled by index in a switch.
struct TopField {
    std::string_view key;
    double UpdateRecord::*dbl;
    int UpdateRecord::*num;
    std::optional<double> UpdateRecord::*opt = nullptr;  // optional additive numbers (null allowed)
};
enum TopIndex : std::size_t {
    kStepId,
    kBlockDetails = 9,
    kMode = 11,
    kMeasured,
    kTrainLoss,
    kEvalLoss,
    kType,
    kBudgetTarget = 17,
    kEvalStep
};
constexpr std::array<TopField, 19> kTop = {{
    {"step_id", nullptr, nullptr},
    {"timestamp", &UpdateRecord::timestamp, nullptr},
    {"blocks_bf16", nullptr, &UpdateRecord::blocks_bf16},
    {"blocks_int8", nullptr, &UpdateRecord::blocks_int8},
    {"mean_sensitivity", &UpdateRecord::mean_sensitivity, nullptr},
    {"max_sensitivity", &UpdateRecord::max_sensitivity, nullptr},
    {"min_sensitivity", &UpdateRecord::min_sensitivity, nullptr},
    {"precision_changes", nullptr, &UpdateRecord::precision_changes},
    {"estimated_bandwidth_saving_pct", &UpdateRecord::estimated_bandwidth_saving_pct, nullptr},
    {"block_details", nullptr, nullptr},
    {"blocks_fp8", nullptr, &UpdateRecord::blocks_fp8},
    {"mode", nullptr, nullptr},
    {"measured_bandwidth_saving_pct", nullptr, nullptr, &UpdateRecord::measured_bandwidth_saving_pct},
    {"train_loss", nullptr, nullptr, &UpdateRecord::train_loss},
    {"eval_loss", nullptr, nullptr, &UpdateRecord::eval_loss},
    {"type", nullptr, nullptr},
    {"blocks_int4", nullptr, &UpdateRecord::blocks_int4},
    {"budget_target_pct", nullptr, nullptr, &UpdateRecord::budget_target_pct},
    {"eval_step", nullptr, nullptr},
}};
constexpr std::uint32_t kTopRequired = (1u << 10) - 1;  // the seed's ten fields

struct DetailField {
    std::string_view key;
    double BlockDetail::*dbl;
    int BlockDetail::*num;
};
enum DetailIndex : std::size_t {
    kPrecision,
    kForced = 8,
    kChanged,
    kReason = 11,
    kLastChangeStep = 13,
    kSnr = 15,
    kReasonText
};
constexpr std::array<DetailField, 17> kDetail = {{
    {"precision", nullptr, nullptr},
    {"sensitivity", &BlockDetail::sensitivity, nullptr},
    {"grad_score", &BlockDetail::grad_score, nullptr},
    {"error_score", &BlockDetail::error_score, nullptr},
    {"relative_magnitude", &BlockDetail::relative_magnitude, nullptr},
    {"l2_norm", &BlockDetail::l2_norm, nullptr},
    {"max_abs", &BlockDetail::max_abs, nullptr},
    {"variance", &BlockDetail::variance, nullptr},
    {"forced", nullptr, nullptr},
    {"changed", nullptr, nullptr},
    {"mean", &BlockDetail::mean, nullptr},  // additive from here on
    {"reason", nullptr, nullptr},
    {"window", nullptr, &BlockDetail::window},
    {"last_change_step", nullptr, nullptr},
    {"switches", nullptr, &BlockDetail::switches},
    {"snr_db", nullptr, nullptr},
    {"reason_text", nullptr, nullptr},
}};
constexpr std::uint32_t kDetailRequired = (1u << 10) - 1;  // all but the additive last five

// sp::parse_json's limit (sp/json_input.h): no record nests beyond 4 levels.
constexpr int kMaxDepth = 64;

// Keys come in the writer's order, so trying the one after the previous match first makes the
// lookup a single comparison almost always. Returns N when the key is unknown.
template <typename Field, std::size_t N>
std::size_t find_key(const std::array<Field, N>& fields, std::string_view key, std::size_t hint) {
    if (hint < N && fields[hint].key == key) return hint;
    for (std::size_t i = 0; i < N; ++i) {
        if (fields[i].key == key) return i;
    }
    return N;
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

const char* kind_of(char c) {
    if (c == '"') return "string";
    if (c == '{') return "object";
    if (c == '[') return "array";
    if (c == 't' || c == 'f') return "boolean";
    if (c == 'n') return "null";
    return "number";
}

class UpdateParser {
  public:
    UpdateParser(std::string_view line, std::string& error)
        : begin_(line.data()), p_(line.data()), end_(line.data() + line.size()), error_(error) {}

    bool parse(UpdateRecord& r);
    bool other_type() const { return other_type_; }
    bool syntax_error() const { return syntax_error_; }

  private:
    bool syntax(const char* what) {
        syntax_error_ = true;
        error_ = "invalid JSON at column " + std::to_string(p_ - begin_ + 1) + ": " +
                 (p_ >= end_ ? "unexpected end of line" : what);
        return false;
    }
    bool fail(std::string msg) {
        error_ = std::move(msg);
        return false;
    }
    std::string field(std::string_view name) const {
        std::string f = "field '";
        if (block_ >= 0) f += "block_details." + std::to_string(block_) + ".";
        return f.append(name) + "'";
    }
    // p_ is at a value of the wrong kind.
    bool wrong_type(std::string_view name, const char* expected) {
        const char* got = kind_of(*p_);
        if (got == kind_of('0') && *p_ != '-' && !is_digit(*p_)) return syntax("unexpected character");
        return fail(field(name) + ": expected " + expected + ", got " + got);
    }

    void ws() {
        while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r' || *p_ == '\n')) ++p_;
    }
    // Skips whitespace; false (with a syntax error) at the end of the line.
    bool more() {
        ws();
        return p_ < end_ || syntax("");
    }
    bool literal(std::string_view word) {
        if (std::size_t(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) {
            return syntax("invalid literal");
        }
        p_ += word.size();
        return true;
    }

    // p_ at '{'. Calls on_member(key) with p_ at each member's value, which it must consume.
    template <typename OnMember>
    bool object(OnMember&& on_member) {
        ++p_;
        if (!more()) return false;
        if (*p_ == '}') return ++p_, true;
        for (;;) {
            std::string_view key;
            if (*p_ != '"') return syntax("expected a key");
            if (!string(key) || !more()) return false;
            if (*p_ != ':') return syntax("expected ':'");
            ++p_;
            if (!more() || !on_member(key) || !more()) return false;
            if (*p_ == '}') return ++p_, true;
            if (*p_ != ',') return syntax("expected ',' or '}'");
            ++p_;
            if (!more()) return false;
        }
    }

    bool string(std::string_view& out);
    bool escaped_string(const char* start, std::string_view& out);
    bool hex4(unsigned& cp);
    bool number(const char*& start, bool& is_int);
    bool skip_value(int level);
    bool snr(PerFormat& out);

    bool read_int64(std::int64_t& v, std::string_view name);
    template <typename Int>
    bool read_int(Int& v, std::string_view name) {
        std::int64_t wide = 0;
        if (!read_int64(wide, name)) return false;
        if (wide < std::numeric_limits<Int>::min() || wide > std::numeric_limits<Int>::max()) {
            return fail(field(name) + ": integer out of range");
        }
        v = Int(wide);
        return true;
    }
    bool read_double(double& v, std::string_view name);
    bool read_string(std::string_view& v, std::string_view name) {
        if (*p_ != '"') return wrong_type(name, "a string");
        return string(v);
    }
    bool top_member(UpdateRecord& r, std::size_t k);
    bool details(std::vector<BlockDetail>& out);
    bool detail_member(BlockDetail& d, std::size_t k);

    const char* begin_;
    const char* p_;
    const char* end_;
    std::string& error_;
    std::string scratch_;  // decoded strings that contained escapes
    int block_ = -1;       // block whose detail is being parsed, for messages
    bool other_type_ = false;
    bool syntax_error_ = false;
};

bool UpdateParser::string(std::string_view& out) {
    const char* start = ++p_;  // after the opening quote
    while (p_ < end_) {
        const auto c = static_cast<unsigned char>(*p_);
        if (c == '"') {
            out = std::string_view(start, std::size_t(p_ - start));
            ++p_;
            return true;
        }
        if (c == '\\') return escaped_string(start, out);
        if (c < 0x20) return syntax("control character in string");
        if (c >= 0x80) {
            const std::size_t n = detail::utf8_length(p_, end_);
            if (n == 0) return syntax("invalid UTF-8 in string");
            p_ += n;
            continue;
        }
        ++p_;
    }
    return syntax("");
}

bool UpdateParser::hex4(unsigned& cp) {
    if (end_ - p_ < 4) return syntax("");
    cp = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
        const char c = *p_;
        const unsigned digit = is_digit(c)              ? unsigned(c - '0')
                               : (c >= 'a' && c <= 'f') ? unsigned(c - 'a' + 10)
                               : (c >= 'A' && c <= 'F') ? unsigned(c - 'A' + 10)
                                                        : 16u;
        if (digit == 16u) return syntax("invalid \\u escape");
        cp = cp * 16 + digit;
    }
    return true;
}

bool UpdateParser::escaped_string(const char* start, std::string_view& out) {
    static constexpr std::string_view kFrom = "\"\\/bfnrt";
    static constexpr std::string_view kTo = "\"\\/\b\f\n\r\t";
    scratch_.assign(start, p_);
    while (p_ < end_) {
        const char c = *p_;
        if (c == '"') {
            ++p_;
            out = scratch_;
            return true;
        }
        if (static_cast<unsigned char>(c) < 0x20) return syntax("control character in string");
        if (static_cast<unsigned char>(c) >= 0x80) {
            const std::size_t n = detail::utf8_length(p_, end_);
            if (n == 0) return syntax("invalid UTF-8 in string");
            scratch_.append(p_, n);
            p_ += n;
            continue;
        }
        ++p_;
        if (c != '\\') {
            scratch_ += c;
            continue;
        }
        if (p_ == end_) return syntax("");
        const std::size_t simple = kFrom.find(*p_);
        if (simple != std::string_view::npos) {
            scratch_ += kTo[simple];
            ++p_;
            continue;
        }
        if (*p_ != 'u') return syntax("invalid escape");
        ++p_;
        unsigned cp = 0;
        if (!hex4(cp)) return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return syntax("lone low surrogate");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned low = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return syntax("lone high surrogate");
            p_ += 2;
            if (!hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return syntax("invalid surrogate pair");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        detail::append_utf8(scratch_, cp);
    }
    return syntax("");
}

// JSON's number grammar, which is stricter than from_chars (no "inf", "nan", "01", "1.", ".5").
bool UpdateParser::number(const char*& start, bool& is_int) {
    start = p_;
    is_int = true;
    if (p_ < end_ && *p_ == '-') ++p_;
    if (p_ < end_ && *p_ == '0') {
        ++p_;
    } else if (p_ < end_ && is_digit(*p_)) {
        while (p_ < end_ && is_digit(*p_)) ++p_;
    } else {
        return syntax("invalid number");
    }
    if (p_ < end_ && *p_ == '.') {
        is_int = false;
        if (++p_ == end_ || !is_digit(*p_)) return syntax("invalid number");
        while (p_ < end_ && is_digit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
        is_int = false;
        if (++p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
        if (p_ == end_ || !is_digit(*p_)) return syntax("invalid number");
        while (p_ < end_ && is_digit(*p_)) ++p_;
    }
    return true;
}

// Validates and skips any value (a newer producer's field) by sp::parse_json's rules (TELEMETRY.md
// "Reading JSON"): at most kMaxDepth levels of arrays/objects, no number beyond a double's range.
// p_ is at the value; `level` is the nesting level it opens if it is an array or object.
bool UpdateParser::skip_value(int level) {
    if ((*p_ == '{' || *p_ == '[') && level > kMaxDepth) return syntax("nested deeper than 64 levels");
    std::string_view ignored;
    const char* start = nullptr;
    bool is_int = false;
    double value = 0.0;
    switch (*p_) {
        case '"':
            return string(ignored);
        case 't':
            return literal("true");
        case 'f':
            return literal("false");
        case 'n':
            return literal("null");
        case '{':
            return object([&](std::string_view) { return skip_value(level + 1); });
        case '[':
            ++p_;
            if (!more()) return false;
            if (*p_ == ']') return ++p_, true;
            for (;;) {
                if (!skip_value(level + 1) || !more()) return false;
                if (*p_ == ']') return ++p_, true;
                if (*p_ != ',') return syntax("expected ',' or ']'");
                ++p_;
                if (!more()) return false;
            }
        default:
            if (!number(start, is_int)) return false;
            // Not a syntax error: a typed line whose "type" comes later goes to the DOM, which
            // decides (it reads an underflow as 0, which read_double refuses like an overflow).
            if (std::from_chars(start, p_, value).ec != std::errc()) {
                return fail("number out of range at column " + std::to_string(start - begin_ + 1));
            }
            return true;
    }
}

bool UpdateParser::read_int64(std::int64_t& v, std::string_view name) {
    if (*p_ != '-' && !is_digit(*p_)) return wrong_type(name, "an integer");
    const char* start = nullptr;
    bool is_int = false;
    if (!number(start, is_int)) return false;
    if (!is_int) return fail(field(name) + ": expected an integer, got number");
    if (std::from_chars(start, p_, v).ec != std::errc()) return fail(field(name) + ": integer out of range");
    return true;
}

bool UpdateParser::read_double(double& v, std::string_view name) {
    if (*p_ == 'n') {  // null: no value (non-finite when written)
        v = kNoValue;
        return literal("null");
    }
    if (*p_ != '-' && !is_digit(*p_)) return wrong_type(name, "a number");
    const char* start = nullptr;
    bool is_int = false;
    if (!number(start, is_int)) return false;
    if (std::from_chars(start, p_, v).ec != std::errc()) return fail(field(name) + ": number out of range");
    return true;
}

bool UpdateParser::detail_member(BlockDetail& d, std::size_t k) {
    const DetailField& f = kDetail[k];
    if (f.dbl != nullptr) return read_double(d.*f.dbl, f.key);
    if (f.num != nullptr) return read_int(d.*f.num, f.key);
    std::string_view text;
    switch (k) {
        case kPrecision: {
            if (!read_string(text, f.key)) return false;
            const auto p = parse_precision(text);
            if (!p) return fail(field(f.key) + ": unknown precision '" + std::string(text) + "'");
            d.precision = *p;
            return true;
        }
        case kForced:
            if (*p_ == 'n') {
                d.forced = ForcedBy::none;
                return literal("null");
            }
            if (!read_string(text, f.key)) return false;
            if (text != "config" && text != "pin") {
                return fail(field(f.key) + ": expected null, \"config\" or \"pin\", got '" +
                            std::string(text) + "'");
            }
            d.forced = text == "pin" ? ForcedBy::pin : ForcedBy::config;
            return true;
        case kChanged:
            if (*p_ != 't' && *p_ != 'f') return wrong_type(f.key, "a boolean");
            d.changed = *p_ == 't';
            return literal(d.changed ? "true" : "false");
        case kReason: {
            if (!read_string(text, f.key)) return false;
            const auto r = parse_reason(text);
            if (!r) return fail(field(f.key) + ": unknown reason '" + std::string(text) + "'");
            d.reason = *r;
            return true;
        }
        case kLastChangeStep:
            return read_int64(d.last_change_step, f.key);
        case kSnr:
            return snr(d.snr_db);
        case kReasonText:
            if (!read_string(text, f.key)) return false;
            d.reason_text.assign(text);
            return true;
        default:
            return false;  // every other row has a member pointer
    }
}

// "snr_db": {"int8": 41.7, ...}; formats left out stay unknown.
bool UpdateParser::snr(PerFormat& out) {
    if (*p_ != '{') return wrong_type("snr_db", "an object");
    out = kNoSnr;
    return object([&](std::string_view key) {
        const auto p = parse_precision(key);
        if (!p) return fail("snr_db: unknown format '" + std::string(key) + "'");
        return read_double(out[std::size_t(*p)], "snr_db." + std::string(key));
    });
}

bool UpdateParser::details(std::vector<BlockDetail>& out) {
    if (*p_ != '{') return wrong_type("block_details", "an object");
    return object([&](std::string_view key) {
        int id = -1;
        const auto res = std::from_chars(key.data(), key.data() + key.size(), id);
        if (key.empty() || !is_digit(key[0]) || res.ec != std::errc() || res.ptr != key.data() + key.size()) {
            return fail("block_details: key '" + std::string(key) + "' is not a non-negative integer");
        }
        if (*p_ != '{') return wrong_type("block_details." + std::string(key), "an object");
        BlockDetail& d = out.emplace_back();
        d.id = id;
        block_ = id;
        std::uint32_t seen = 0;
        std::size_t hint = 0;
        const bool ok = object([&](std::string_view name) {
            const std::size_t k = find_key(kDetail, name, hint);
            hint = k + 1;
            if (k == kDetail.size()) return skip_value(4);  // a newer producer's field
            seen |= 1u << k;
            return detail_member(d, k);
        });
        if (!ok) return false;
        for (std::size_t i = 0; (seen & kDetailRequired) != kDetailRequired; ++i) {
            if (!(seen & (1u << i))) {
                return fail("block_details." + std::to_string(id) + ": missing field '" +
                            std::string(kDetail[i].key) + "'");
            }
        }
        block_ = -1;
        return true;
    });
}

bool UpdateParser::top_member(UpdateRecord& r, std::size_t k) {
    const TopField& f = kTop[k];
    if (f.dbl != nullptr) return read_double(r.*f.dbl, f.key);
    if (f.num != nullptr) return read_int(r.*f.num, f.key);
    std::string_view text;
    double pct = 0.0;
    switch (k) {
        case kStepId:
            return read_int64(r.step_id, f.key);
        case kBlockDetails:
            r.block_details.clear();
            return details(r.block_details);  // repeated key replaces
        case kMode: {
            r.mode.reset();
            if (*p_ == 'n') return literal("null");
            if (!read_string(text, f.key)) return false;
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
            (r.*f.opt).reset();
            if (*p_ == 'n') return literal("null");
            if (!read_double(pct, f.key)) return false;
            r.*f.opt = pct;
            return true;
        case kEvalStep: {
            r.eval_step.reset();  // null reads as absent, like the optional numbers
            if (*p_ == 'n') return literal("null");
            std::int64_t step = 0;
            if (!read_int64(step, f.key)) return false;
            r.eval_step = step;
            return true;
        }
        case kType:
            if (!read_string(text, f.key)) return false;
            if (text == "update") return true;
            other_type_ = true;
            return fail("not an update record");
        default:
            return false;  // every other row has a member pointer
    }
}

bool UpdateParser::parse(UpdateRecord& r) {
    // Reset, keeping block_details' capacity for the next record.
    std::vector<BlockDetail> keep = std::move(r.block_details);
    keep.clear();
    r = UpdateRecord{};
    r.block_details = std::move(keep);

    if (!more() || *p_ != '{') return syntax("expected a JSON object");
    std::uint32_t seen = 0;
    std::size_t hint = 0;
    const bool ok = object([&](std::string_view key) {
        const std::size_t k = find_key(kTop, key, hint);
        hint = k + 1;
        if (k == kTop.size()) return skip_value(2);  // a newer producer's field
        seen |= 1u << k;
        return top_member(r, k);
    });
    if (!ok) return false;
    ws();
    if (p_ != end_) return syntax("unexpected characters after the record");
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

}  // namespace

namespace detail {

FastParse parse_update_record(std::string_view line, UpdateRecord& out, std::string& error) {
    UpdateParser parser(line, error);
    FastParse result;
    result.ok = parser.parse(out);
    result.syntax_error = parser.syntax_error();
    result.other_type = parser.other_type();
    return result;
}

}  // namespace detail
}  // namespace sp
