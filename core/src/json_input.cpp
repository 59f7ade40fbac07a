// The safe JSON entry point (sp/json_input.h). nlohmann's DOM builder runs behind a SAX adapter
// that adds what the DOM parser lacks for hostile input: a depth limit enforced while parsing,
// the key path of the value being read (for messages), the top-level "id" (for replies) and, when
// asked, the refusal of a key given twice in one object.
#include "sp/json_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

namespace sp {
namespace {

// Where the parser is: one frame per open object/array.
struct Frame {
    bool array = false;
    std::string key;             // objects: the last key read
    std::size_t started = 0;     // arrays: elements started so far
    std::set<std::string> keys;  // objects, when duplicates are refused: every key read so far
};

template <class Json>
class LimitedDomSax {
  public:
    using Dom = nlohmann::detail::json_sax_dom_parser<Json>;
    using string_t = typename Json::string_t;
    using binary_t = typename Json::binary_t;

    LimitedDomSax(Json& out, const JsonLimits& limits)
        : dom_(out, /*allow_exceptions=*/false),
          max_depth_(limits.max_depth),
          reject_duplicates_(limits.reject_duplicate_keys) {}

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
        ++keys_read_;
        Frame& f = frames_.back();
        f.key = k;
        if (reject_duplicates_ && !f.keys.insert(k).second) {
            duplicate_ = keys_read_;
            return false;
        }
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
    // The ordinal (1-based, in document order) of the key that repeated one of its object; 0: none.
    std::size_t duplicate() const { return duplicate_; }
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
        frames_.push_back(Frame{array, {}, 0, {}});
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
    bool reject_duplicates_;
    std::vector<Frame> frames_;
    bool too_deep_ = false;
    std::size_t keys_read_ = 0;
    std::size_t duplicate_ = 0;
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

// The offset of the opening quote of the `n`-th object key (1-based). The parser accepted the text up
// to that key, so a string followed by ':' is a key and every other string a value.
std::size_t nth_key_offset(std::string_view text, std::size_t n) {
    std::size_t keys = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '"') continue;
        const std::size_t start = i;
        for (++i; i < text.size() && text[i] != '"'; ++i)
            if (text[i] == '\\') ++i;
        std::size_t next = i + 1;
        while (next < text.size() &&
               (text[next] == ' ' || text[next] == '\t' || text[next] == '\n' || text[next] == '\r'))
            ++next;
        if (next < text.size() && text[next] == ':' && ++keys == n) return start;
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
    // nlohmann's lexer takes a NUL byte for the end of the input, so `{"mode":"off"}\0{"mode":"budget"}`
    // would read as its first object alone and a leading NUL as "unexpected end of input". JSON text
    // never holds a raw NUL (a string must escape it), so only the text before the first one is
    // parsed, and unless that part fails on its own, the NUL is the error, at its offset.
    const std::size_t nul = text.find('\0');
    const std::string_view parsed = text.substr(0, nul);
    Json value;
    LimitedDomSax<Json> sax(value, limits);
    const bool ok = Json::sax_parse(parsed.begin(), parsed.end(), &sax);
    if (ok && nul == std::string_view::npos) {
        out = std::move(value);
        return true;
    }
    error.path = sax.path();
    error.id = sax.id();
    if (sax.too_deep()) {
        error.kind = JsonError::Kind::too_deep;
        error.byte = too_deep_offset(parsed, limits.max_depth);
        error.what = "nested deeper than " + std::to_string(limits.max_depth) + " levels of arrays/objects";
    } else if (sax.duplicate() > 0) {
        error.kind = JsonError::Kind::duplicate_key;
        error.byte = nth_key_offset(parsed, sax.duplicate());
        error.what = "the key appears more than once in the same object";
    } else if (!ok && (nul == std::string_view::npos || sax.position() < parsed.size())) {
        error.byte = std::min(sax.position(), parsed.size());
        error.what = sax.what();
    } else {  // parsed whole, or it ran out of input where the NUL stopped it
        error.byte = nul;
        error.what = "a NUL byte at byte offset " + std::to_string(nul) + " (JSON text never holds one)";
    }
    locate(text, error);
    return false;
}

// What a file is, for the refusal of anything but a regular one.
std::string file_kind(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "of an unknown kind";
}

std::string byte_count(std::size_t bytes) {
    constexpr std::size_t kMiB = std::size_t(1) << 20;
    return bytes % kMiB == 0 ? std::to_string(bytes / kMiB) + " MiB" : std::to_string(bytes) + " bytes";
}

// Reads from `fd` until end of file or until more than `limit` bytes were read.
bool read_at_most(int fd, std::size_t limit, std::string& text, std::string& problem) {
    char buf[65536];
    while (text.size() <= limit) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            problem = std::strerror(errno);
            return false;
        }
        if (n == 0) return true;
        text.append(buf, std::size_t(n));
    }
    return true;
}

}  // namespace

std::string JsonError::location() const {
    return (multi_line ? "line " + std::to_string(line) + ", column " : "column ") + std::to_string(column);
}

std::string JsonError::message() const {
    if (kind == Kind::too_large) return what;
    std::string m = location();
    if (!path.empty()) m += ", key '" + path + "'";
    return m + ": " + what;
}

bool read_json_file(const std::string& path, std::string& text, std::string& problem,
                    const JsonLimits& limits) {
    text.clear();
    problem.clear();
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; reading a regular
    // file never blocks anyway.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        problem = std::strerror(errno);
        return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        problem = std::strerror(errno);
    } else if (S_ISDIR(st.st_mode)) {
        problem = "a directory";
    } else if (!S_ISREG(st.st_mode)) {
        problem = "not a regular file: " + file_kind(st.st_mode);
    } else if (std::uintmax_t(st.st_size) > limits.max_bytes ||
               (read_at_most(fd, limits.max_bytes, text, problem) && text.size() > limits.max_bytes)) {
        // Too large as stat says, or grown past the limit while being read.
        problem = "larger than " + byte_count(limits.max_bytes) + " (the limit for a JSON document)";
    }
    ::close(fd);
    if (problem.empty()) return true;
    text.clear();
    return false;
}

bool parse_json(std::string_view text, nlohmann::json& out, JsonError& error, const JsonLimits& limits) {
    return parse_limited(text, out, error, limits);
}

bool parse_json(std::string_view text, nlohmann::ordered_json& out, JsonError& error,
                const JsonLimits& limits) {
    return parse_limited(text, out, error, limits);
}

}  // namespace sp
