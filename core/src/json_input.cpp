// The safe JSON entry point (sp/json_input.h). nlohmann's DOM builder runs behind a SAX adapter
// that adds what the DOM parser lacks for hostile input: a depth limit enforced while parsing,
// the key path of the value being read (for messages), and the top-level "id" (for replies).
#include "sp/json_input.h"

#include <algorithm>
#include <vector>

namespace sp {
namespace {

// Where the parser is: one frame per open object/array.
struct Frame {
    bool array = false;
    std::string key;          // objects: the last key read
    std::size_t started = 0;  // arrays: elements started so far
};

template <class Json>
class LimitedDomSax {
  public:
    using Dom = nlohmann::detail::json_sax_dom_parser<Json>;
    using string_t = typename Json::string_t;
    using binary_t = typename Json::binary_t;

    LimitedDomSax(Json& out, int max_depth) : dom_(out, /*allow_exceptions=*/false), max_depth_(max_depth) {}

    bool null() { return scalar() && dom_.null(); }
    bool boolean(bool v) { return scalar() && dom_.boolean(v); }
    bool number_integer(typename Json::number_integer_t v) { return scalar() && dom_.number_integer(v); }
    bool number_unsigned(typename Json::number_unsigned_t v) { return scalar() && dom_.number_unsigned(v); }
    bool number_float(typename Json::number_float_t v, const string_t& s) {
        return scalar() && dom_.number_float(v, s);
    }
    bool string(string_t& v) {
        if (frames_.size() == 1 && !frames_[0].array && frames_[0].key == "id") id_ = v;
        return scalar() && dom_.string(v);
    }
    bool binary(binary_t& v) { return scalar() && dom_.binary(v); }
    bool start_object(std::size_t n) { return open(false) && dom_.start_object(n); }
    bool start_array(std::size_t n) { return open(true) && dom_.start_array(n); }
    bool key(string_t& k) {
        frames_.back().key = k;
        return dom_.key(k);
    }
    bool end_object() {
        close();
        return dom_.end_object();
    }
    bool end_array() {
        close();
        return dom_.end_array();
    }
    bool parse_error(std::size_t position, const std::string& last_token,
                     const nlohmann::detail::exception& ex) {
        // nlohmann counts the characters read, the failing one included; an out-of-range number
        // is reported after its last digit, so point at its first.
        const std::size_t back = ex.id == 406 ? last_token.size() : 1;
        position_ = position >= back ? position - back : 0;
        what_ = describe(ex);
        return false;
    }

    bool too_deep() const { return too_deep_; }
    std::size_t position() const { return position_; }
    const std::string& what() const { return what_; }
    const std::optional<std::string>& id() const { return id_; }

    // "blocks[2].l2_norm": the value being read when parsing stopped. Keys and the path are cut
    // to a readable length (a hostile document may hold a 10 MB key).
    std::string path() const {
        constexpr std::size_t kMaxKey = 64, kMaxPath = 256;
        std::string p;
        for (std::size_t i = 0; i < frames_.size(); ++i) {
            const Frame& f = frames_[i];
            if (f.array) {
                // An inner frame's element has begun; the last frame's has not, unless it is the
                // array or object that was one level too deep.
                const bool begun = i + 1 < frames_.size() || too_deep_;
                p += "[" + std::to_string(begun ? f.started - 1 : f.started) + "]";
            } else if (!f.key.empty() || i + 1 < frames_.size()) {
                if (!p.empty()) p += '.';
                p += f.key.size() > kMaxKey ? f.key.substr(0, kMaxKey - 3) + "..." : f.key;
            }
        }
        if (p.size() > kMaxPath) p = "..." + p.substr(p.size() - (kMaxPath - 3));
        return p;
    }

  private:
    // Before a value: count it when it is an array element.
    void begin_value() {
        if (!frames_.empty() && frames_.back().array) ++frames_.back().started;
    }
    // After a value: an object's key is done with, so an error before the next key names none.
    void end_value() {
        if (!frames_.empty() && !frames_.back().array) frames_.back().key.clear();
    }
    bool scalar() {
        begin_value();
        end_value();
        return true;
    }
    void close() {
        frames_.pop_back();
        end_value();
    }
    bool open(bool array) {
        begin_value();
        if (int(frames_.size()) >= max_depth_) {
            too_deep_ = true;
            return false;
        }
        frames_.push_back(Frame{array, {}, 0});
        return true;
    }

    static std::string describe(const nlohmann::detail::exception& ex) {
        if (ex.id == 406) {  // "number overflow parsing '1e309'"
            std::string text = ex.what();
            const auto open = text.find('\'');
            const auto close = text.rfind('\'');
            const std::string number =
                open != std::string::npos && close > open ? text.substr(open + 1, close - open - 1) : "";
            return "number beyond the range of a double: " + number;
        }
        // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
        std::string_view w = ex.what();
        if (const auto end = w.find("] "); !w.empty() && w.front() == '[' && end != std::string_view::npos)
            w.remove_prefix(end + 2);
        if (w.rfind("parse error at line ", 0) == 0) {
            if (const auto colon = w.find(": "); colon != std::string_view::npos) w.remove_prefix(colon + 2);
        }
        return std::string(w);
    }

    Dom dom_;
    int max_depth_;
    std::vector<Frame> frames_;
    bool too_deep_ = false;
    std::size_t position_ = 0;
    std::string what_;
    std::optional<std::string> id_;
};

// The offset of the bracket that opens level `limit + 1` (strings skipped, escapes honoured).
std::size_t too_deep_offset(std::string_view text, int limit) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limit) return i;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return text.size();
}

void locate(std::string_view text, JsonError& error) {
    const std::string_view before = text.substr(0, error.byte);
    error.line = 1 + std::size_t(std::count(before.begin(), before.end(), '\n'));
    const auto nl = before.rfind('\n');
    error.column = error.byte - (nl == std::string_view::npos ? 0 : nl + 1) + 1;
    error.multi_line = text.find('\n') != std::string_view::npos;
}

template <class Json>
bool parse_limited(std::string_view text, Json& out, JsonError& error, const JsonLimits& limits) {
    error = JsonError{};
    out = Json(Json::value_t::discarded);
    if (text.size() > limits.max_bytes) {
        error.kind = JsonError::Kind::too_large;
        error.what = "too large: " + std::to_string(text.size()) + " bytes (the limit is " +
                     std::to_string(limits.max_bytes) + ")";
        return false;
    }
    Json value;
    LimitedDomSax<Json> sax(value, limits.max_depth);
    if (Json::sax_parse(text.begin(), text.end(), &sax)) {
        out = std::move(value);
        return true;
    }
    error.path = sax.path();
    error.id = sax.id();
    if (sax.too_deep()) {
        error.kind = JsonError::Kind::too_deep;
        error.byte = too_deep_offset(text, limits.max_depth);
        error.what = "nested deeper than " + std::to_string(limits.max_depth) + " levels of arrays/objects";
    } else {
        error.byte = std::min(sax.position(), text.size());
        error.what = sax.what();
    }
    locate(text, error);
    return false;
}

}  // namespace

std::string JsonError::message() const {
    if (kind == Kind::too_large) return what;
    std::string m = multi_line ? "line " + std::to_string(line) + ", column " : "column ";
    m += std::to_string(column);
    if (!path.empty()) m += ", key '" + path + "'";
    return m + ": " + what;
}

bool parse_json(std::string_view text, nlohmann::json& out, JsonError& error, const JsonLimits& limits) {
    return parse_limited(text, out, error, limits);
}

bool parse_json(std::string_view text, nlohmann::ordered_json& out, JsonError& error,
                const JsonLimits& limits) {
    return parse_limited(text, out, error, limits);
}

}  // namespace sp
