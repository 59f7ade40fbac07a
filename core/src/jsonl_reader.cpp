// Parsing of telemetry lines and the streaming JSONL reader.
// Update records are nearly every line of a file, so they go through a small hand-written parser
// for their known shape that fills the struct directly (std::from_chars for numbers, no DOM, no
// allocation once the record's block_details vector has grown). nlohmann's DOM parse runs at about
// half the required throughput; see tests/bench/bench_jsonl_read.cpp. Header, event and unknown
// lines, and update lines that fail, are handed to nlohmann (rare, and its messages are good).
#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "sp/jsonl.h"

namespace sp {

namespace {

constexpr std::array<std::string_view, 14> kTopKeys = {
    "step_id",         "timestamp",         "blocks_bf16",
    "blocks_int8",     "mean_sensitivity",  "max_sensitivity",
    "min_sensitivity", "precision_changes", "estimated_bandwidth_saving_pct",
    "block_details",   "blocks_fp8",        "mode",
    "measured_bandwidth_saving_pct", "type"};
constexpr std::uint32_t kTopRequired = (1u << 10) - 1;  // the seed's ten fields

constexpr std::array<std::string_view, 15> kDetailKeys = {
    "precision", "sensitivity", "grad_score", "error_score", "relative_magnitude",
    "l2_norm",   "max_abs",     "variance",   "forced",      "changed",
    "mean",      "reason",      "window",     "last_change_step", "switches"};
constexpr std::uint32_t kDetailRequired = (1u << 10) - 1;  // all but the additive last five

// Keys come in the writer's order, so trying the one after the previous match first makes the
// lookup a single comparison almost always.
template <std::size_t N>
std::size_t find_key(const std::array<std::string_view, N>& keys, std::string_view key, std::size_t hint) {
    if (hint < N && keys[hint] == key) return hint;
    for (std::size_t i = 0; i < N; ++i) {
        if (keys[i] == key) return i;
    }
    return N;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

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
    bool wrong_type(std::string_view name, const char* expected) {
        static constexpr const char* kNumber = "number";
        const char* got = kNumber;
        switch (*p_) {
            case '"': got = "string"; break;
            case '{': got = "object"; break;
            case '[': got = "array"; break;
            case 't':
            case 'f': got = "boolean"; break;
            case 'n': got = "null"; break;
            default:
                if (*p_ != '-' && !is_digit(*p_)) return syntax("unexpected character");
        }
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
    bool consume(char c, const char* what) {
        if (!more() || *p_ != c) return syntax(what);
        ++p_;
        return true;
    }
    bool literal(std::string_view word) {
        if (std::size_t(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) {
            return syntax("invalid literal");
        }
        p_ += word.size();
        return true;
    }

    bool string(std::string_view& out);
    bool escaped_string(const char* start, std::string_view& out);
    bool hex4(unsigned& cp);
    bool number(const char*& start, bool& is_int);
    bool skip_value(int depth);

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
        if (!more()) return false;
        if (*p_ != '"') return wrong_type(name, "a string");
        return string(v);
    }
    bool details(std::vector<BlockDetail>& out);
    bool detail(BlockDetail& d);

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
        ++p_;
    }
    return syntax("");
}

bool UpdateParser::hex4(unsigned& cp) {
    if (end_ - p_ < 4) return syntax("");
    cp = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
        const char c = *p_;
        const unsigned digit = is_digit(c)               ? unsigned(c - '0')
                               : (c >= 'a' && c <= 'f') ? unsigned(c - 'a' + 10)
                               : (c >= 'A' && c <= 'F') ? unsigned(c - 'A' + 10)
                                                        : 16u;
        if (digit == 16u) return syntax("invalid \\u escape");
        cp = cp * 16 + digit;
    }
    return true;
}

bool UpdateParser::escaped_string(const char* start, std::string_view& out) {
    scratch_.assign(start, p_);
    while (p_ < end_) {
        const char c = *p_++;
        if (c == '"') {
            out = scratch_;
            return true;
        }
        if (static_cast<unsigned char>(c) < 0x20) return --p_, syntax("control character in string");
        if (c != '\\') {
            scratch_ += c;
            continue;
        }
        if (p_ == end_) return syntax("");
        switch (*p_++) {
            case '"': scratch_ += '"'; break;
            case '\\': scratch_ += '\\'; break;
            case '/': scratch_ += '/'; break;
            case 'b': scratch_ += '\b'; break;
            case 'f': scratch_ += '\f'; break;
            case 'n': scratch_ += '\n'; break;
            case 'r': scratch_ += '\r'; break;
            case 't': scratch_ += '\t'; break;
            case 'u': {
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
                if (cp < 0x80) {
                    scratch_ += char(cp);
                } else if (cp < 0x800) {
                    scratch_ += char(0xC0 | (cp >> 6));
                    scratch_ += char(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    scratch_ += char(0xE0 | (cp >> 12));
                    scratch_ += char(0x80 | ((cp >> 6) & 0x3F));
                    scratch_ += char(0x80 | (cp & 0x3F));
                } else {
                    scratch_ += char(0xF0 | (cp >> 18));
                    scratch_ += char(0x80 | ((cp >> 12) & 0x3F));
                    scratch_ += char(0x80 | ((cp >> 6) & 0x3F));
                    scratch_ += char(0x80 | (cp & 0x3F));
                }
                break;
            }
            default: return --p_, syntax("invalid escape");
        }
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

bool UpdateParser::skip_value(int depth) {
    if (!more()) return false;
    if (depth > 256) return syntax("nesting too deep");
    std::string_view ignored;
    switch (*p_) {
        case '"': return string(ignored);
        case 't': return literal("true");
        case 'f': return literal("false");
        case 'n': return literal("null");
        case '{':
        case '[': {
            const bool object = *p_++ == '{';
            const char close = object ? '}' : ']';
            if (!more()) return false;
            if (*p_ == close) return ++p_, true;
            for (;;) {
                if (object) {
                    if (!more() || *p_ != '"') return syntax("expected a key");
                    if (!string(ignored) || !consume(':', "expected ':'")) return false;
                }
                if (!skip_value(depth + 1) || !more()) return false;
                if (*p_ == close) return ++p_, true;
                if (*p_++ != ',') return --p_, syntax(object ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
        default: {
            const char* start = nullptr;
            bool is_int = false;
            return number(start, is_int);
        }
    }
}

bool UpdateParser::read_int64(std::int64_t& v, std::string_view name) {
    if (!more()) return false;
    if (*p_ != '-' && !is_digit(*p_)) return wrong_type(name, "an integer");
    const char* start = nullptr;
    bool is_int = false;
    if (!number(start, is_int)) return false;
    if (!is_int) return fail(field(name) + ": expected an integer, got number");
    if (std::from_chars(start, p_, v).ec != std::errc()) return fail(field(name) + ": integer out of range");
    return true;
}

bool UpdateParser::read_double(double& v, std::string_view name) {
    if (!more()) return false;
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

bool UpdateParser::detail(BlockDetail& d) {
    if (!consume('{', "expected an object")) return false;
    std::uint32_t seen = 0;
    std::size_t hint = 0;
    if (!more()) return false;
    if (*p_ == '}') {
        ++p_;
    } else {
        for (;;) {
            std::string_view key;
            if (!more() || *p_ != '"') return syntax("expected a key");
            if (!string(key) || !consume(':', "expected ':'")) return false;
            const std::size_t k = find_key(kDetailKeys, key, hint);
            hint = k + 1;
            const std::string_view name = k < kDetailKeys.size() ? kDetailKeys[k] : key;
            bool ok = true;
            std::string_view text;
            switch (k) {
                case 0:
                    if ((ok = read_string(text, "precision"))) {
                        const auto p = parse_precision(text);
                        if (!p) return fail(field("precision") + ": unknown precision '" + std::string(text) + "'");
                        d.precision = *p;
                    }
                    break;
                case 1: ok = read_double(d.sensitivity, name); break;
                case 2: ok = read_double(d.grad_score, name); break;
                case 3: ok = read_double(d.error_score, name); break;
                case 4: ok = read_double(d.relative_magnitude, name); break;
                case 5: ok = read_double(d.l2_norm, name); break;
                case 6: ok = read_double(d.max_abs, name); break;
                case 7: ok = read_double(d.variance, name); break;
                case 8:
                    if (!more()) return false;
                    if (*p_ == 'n') {
                        d.forced = ForcedBy::none;
                        ok = literal("null");
                    } else if ((ok = read_string(text, "forced"))) {
                        if (text == "config") {
                            d.forced = ForcedBy::config;
                        } else if (text == "pin") {
                            d.forced = ForcedBy::pin;
                        } else {
                            return fail(field("forced") + ": expected null, \"config\" or \"pin\", got '" +
                                        std::string(text) + "'");
                        }
                    }
                    break;
                case 9:
                    if (!more()) return false;
                    if (*p_ == 't') {
                        d.changed = true;
                        ok = literal("true");
                    } else if (*p_ == 'f') {
                        d.changed = false;
                        ok = literal("false");
                    } else {
                        return wrong_type("changed", "a boolean");
                    }
                    break;
                case 10: ok = read_double(d.mean, name); break;
                case 11:
                    if ((ok = read_string(text, "reason"))) {
                        const auto r = parse_reason(text);
                        if (!r) return fail(field("reason") + ": unknown reason '" + std::string(text) + "'");
                        d.reason = *r;
                    }
                    break;
                case 12: ok = read_int(d.window, name); break;
                case 13: ok = read_int(d.last_change_step, name); break;
                case 14: ok = read_int(d.switches, name); break;
                default: ok = skip_value(0); break;  // a newer producer's field
            }
            if (!ok) return false;
            if (k < kDetailKeys.size()) seen |= 1u << k;
            if (!more()) return false;
            if (*p_ == '}') {
                ++p_;
                break;
            }
            if (*p_ != ',') return syntax("expected ',' or '}'");
            ++p_;
        }
    }
    if ((seen & kDetailRequired) != kDetailRequired) {
        for (std::size_t i = 0; i < kDetailKeys.size(); ++i) {
            if ((kDetailRequired & (1u << i)) && !(seen & (1u << i))) {
                return fail("block_details." + std::to_string(block_) + ": missing field '" +
                            std::string(kDetailKeys[i]) + "'");
            }
        }
    }
    return true;
}

bool UpdateParser::details(std::vector<BlockDetail>& out) {
    if (!more()) return false;
    if (*p_ != '{') return wrong_type("block_details", "an object");
    ++p_;
    if (!more()) return false;
    if (*p_ == '}') return ++p_, true;
    for (;;) {
        std::string_view key;
        if (!more() || *p_ != '"') return syntax("expected a key");
        if (!string(key)) return false;
        int id = -1;
        const auto res = std::from_chars(key.data(), key.data() + key.size(), id);
        if (key.empty() || !is_digit(key[0]) || res.ec != std::errc() || res.ptr != key.data() + key.size()) {
            return fail("block_details: key '" + std::string(key) + "' is not a non-negative integer");
        }
        if (!consume(':', "expected ':'")) return false;
        BlockDetail& d = out.emplace_back();
        d.id = id;
        block_ = id;
        if (!detail(d)) return false;
        block_ = -1;
        if (!more()) return false;
        if (*p_ == '}') return ++p_, true;
        if (*p_ != ',') return syntax("expected ',' or '}'");
        ++p_;
    }
}

bool UpdateParser::parse(UpdateRecord& r) {
    // Reset, keeping block_details' capacity for the next record.
    std::vector<BlockDetail> keep = std::move(r.block_details);
    keep.clear();
    r = UpdateRecord{};
    r.block_details = std::move(keep);

    if (!more() || *p_ != '{') return syntax("expected a JSON object");
    ++p_;
    std::uint32_t seen = 0;
    std::size_t hint = 0;
    if (!more()) return false;
    if (*p_ == '}') {
        ++p_;
    } else {
        for (;;) {
            std::string_view key;
            if (!more() || *p_ != '"') return syntax("expected a key");
            if (!string(key) || !consume(':', "expected ':'")) return false;
            const std::size_t k = find_key(kTopKeys, key, hint);
            hint = k + 1;
            const std::string_view name = k < kTopKeys.size() ? kTopKeys[k] : key;
            bool ok = true;
            std::string_view text;
            double pct = 0.0;
            switch (k) {
                case 0: ok = read_int64(r.step_id, name); break;
                case 1: ok = read_double(r.timestamp, name); break;
                case 2: ok = read_int(r.blocks_bf16, name); break;
                case 3: ok = read_int(r.blocks_int8, name); break;
                case 4: ok = read_double(r.mean_sensitivity, name); break;
                case 5: ok = read_double(r.max_sensitivity, name); break;
                case 6: ok = read_double(r.min_sensitivity, name); break;
                case 7: ok = read_int(r.precision_changes, name); break;
                case 8: ok = read_double(r.estimated_bandwidth_saving_pct, name); break;
                case 9:
                    r.block_details.clear();  // a repeated key replaces, as in a DOM
                    ok = details(r.block_details);
                    break;
                case 10: ok = read_int(r.blocks_fp8, name); break;
                case 11:
                    if (!more()) return false;
                    if (*p_ == 'n') {
                        r.mode.reset();
                        ok = literal("null");
                    } else if ((ok = read_string(text, name))) {
                        Mode m{};
                        if (!parse_mode(text, m)) return fail(field(name) + ": unknown mode '" + std::string(text) + "'");
                        r.mode = m;
                    }
                    break;
                case 12:
                    if (!more()) return false;
                    if (*p_ == 'n') {
                        r.measured_bandwidth_saving_pct.reset();
                        ok = literal("null");
                    } else if ((ok = read_double(pct, name))) {
                        r.measured_bandwidth_saving_pct = pct;
                    }
                    break;
                case 13:
                    if ((ok = read_string(text, name)) && text != "update") {
                        other_type_ = true;
                        return fail("not an update record");
                    }
                    break;
                default: ok = skip_value(0); break;
            }
            if (!ok) return false;
            if (k < kTopKeys.size()) seen |= 1u << k;
            if (!more()) return false;
            if (*p_ == '}') {
                ++p_;
                break;
            }
            if (*p_ != ',') return syntax("expected ',' or '}'");
            ++p_;
        }
    }
    ws();
    if (p_ != end_) return syntax("unexpected characters after the record");
    if ((seen & kTopRequired) != kTopRequired) {
        for (std::size_t i = 0; i < 10; ++i) {
            if (!(seen & (1u << i))) return fail("missing field '" + std::string(kTopKeys[i]) + "'");
        }
    }
    auto& d = r.block_details;
    const auto by_id = [](const BlockDetail& a, const BlockDetail& b) { return a.id < b.id; };
    if (!std::is_sorted(d.begin(), d.end(), by_id)) std::sort(d.begin(), d.end(), by_id);
    const auto dup = std::adjacent_find(d.begin(), d.end(),
                                        [](const BlockDetail& a, const BlockDetail& b) { return a.id == b.id; });
    if (dup != d.end()) return fail("block_details: duplicate block id " + std::to_string(dup->id));
    return true;
}

bool is_blank(std::string_view line) {
    for (const char c : line) {
        if (c != ' ' && c != '\t' && c != '\r') return false;
    }
    return true;
}

constexpr std::size_t kReadBlock = std::size_t(1) << 20;

}  // namespace

ParseStatus parse_record(std::string_view line, TelemetryRecord& out, std::string& error) {
    if (!std::holds_alternative<UpdateRecord>(out)) out.emplace<UpdateRecord>();
    UpdateParser parser(line, error);
    if (parser.parse(std::get<UpdateRecord>(out))) return ParseStatus::ok;
    if (parser.syntax_error() && !parser.other_type()) return ParseStatus::corrupt;
    // Another record type, or a field error in what may be a typed record whose "type" comes later.
    std::string dom_error;
    const std::optional<ParseStatus> typed = detail::parse_typed_record_dom(line, out, dom_error);
    if (!typed) return ParseStatus::corrupt;  // an update record after all: keep the precise error
    error = std::move(dom_error);
    return *typed;
}

JsonlReader::JsonlReader(std::istream& in) : in_(&in), buf_(kReadBlock) {}

JsonlReader::JsonlReader(const std::string& path)
    : owned_(std::make_unique<std::ifstream>(path, std::ios::binary)), in_(owned_.get()) {
    if (!*owned_) {
        throw std::runtime_error("cannot open telemetry file '" + path + "': " + std::strerror(errno));
    }
    buf_.resize(kReadBlock);
}

JsonlReader::~JsonlReader() = default;

bool JsonlReader::next_line(std::string_view& line, bool& had_newline) {
    for (;;) {
        const char* start = buf_.data() + pos_;
        if (const void* nl = std::memchr(start, '\n', len_ - pos_)) {
            const auto* end = static_cast<const char*>(nl);
            line = std::string_view(start, std::size_t(end - start));
            pos_ = std::size_t(end - buf_.data()) + 1;
            had_newline = true;
            return true;
        }
        if (eof_) {
            if (pos_ == len_) return false;
            line = std::string_view(start, len_ - pos_);
            pos_ = len_;
            had_newline = false;
            return true;
        }
        // Keep the partial line, grow if one line outgrows the buffer, then refill.
        if (pos_ > 0) {
            std::memmove(buf_.data(), start, len_ - pos_);
            len_ -= pos_;
            pos_ = 0;
        }
        if (len_ == buf_.size()) buf_.resize(buf_.size() * 2);
        in_->read(buf_.data() + len_, std::streamsize(buf_.size() - len_));
        len_ += std::size_t(in_->gcount());
        if (!*in_) {
            if (in_->bad()) add_problem("read error after line " + std::to_string(lines_));
            eof_ = true;
        }
    }
}

void JsonlReader::add_problem(std::string reason) {
    ++problem_count_;
    if (problems_.size() < kMaxStoredProblems) problems_.push_back({lines_, std::move(reason)});
}

bool JsonlReader::next(TelemetryRecord& out) {
    std::string_view line;
    bool had_newline = false;
    while (next_line(line, had_newline)) {
        ++lines_;
        bytes_ += line.size() + (had_newline ? 1 : 0);
        if (is_blank(line)) continue;
        switch (parse_record(line, out, error_)) {
            case ParseStatus::ok: ++records_; return true;
            case ParseStatus::unknown_type: ++unknown_types_; break;
            case ParseStatus::corrupt:
                // A writer killed mid-line leaves a torn last line: expected, not an abort.
                add_problem(had_newline ? error_ : "truncated last line: " + error_);
                break;
        }
    }
    return false;
}

}  // namespace sp
