// Parsing of telemetry lines and the streaming JSONL reader. Update records take the fast path
// (update_record_parser.h); header, event and unknown-type lines, and update lines that fail, go
// to nlohmann (rare; good messages).
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "sp/jsonl.h"
#include "update_record_parser.h"

namespace sp {
namespace {

bool is_blank(std::string_view line) {
    for (const char c : line) {
        if (c != ' ' && c != '\t' && c != '\r') return false;
    }
    return true;
}

constexpr std::size_t kReadBlock = std::size_t(1) << 20;

// No record nests anywhere near this deep (the fast path stops unknown values at the same depth).
// nlohmann parses
// iteratively, but copies (ordered_map growth while parsing an object) and dumps recursively, so a
// crafted line thousands of levels deep overflowed the stack. A twin guards requests in protocol.cpp.
constexpr int kMaxDepth = 256;

// Runs on unparsed bytes: strings are skipped, escapes honoured.
bool nests_deeper_than(std::string_view text, int limit) {
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
            if (++depth > limit) return true;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return false;
}

}  // namespace

ParseStatus parse_record(std::string_view line, TelemetryRecord& out, std::string& error) {
    if (!std::holds_alternative<UpdateRecord>(out)) out.emplace<UpdateRecord>();
    const detail::FastParse fast = detail::parse_update_record(line, std::get<UpdateRecord>(out), error);
    if (fast.ok) return ParseStatus::ok;
    if (fast.syntax_error && !fast.other_type) return ParseStatus::corrupt;
    // Another record type, or a field error in what may be a typed record whose "type" comes later.
    if (nests_deeper_than(line, kMaxDepth)) {
        error = "nesting too deep: more than " + std::to_string(kMaxDepth) + " levels of arrays/objects";
        return ParseStatus::corrupt;
    }
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
            case ParseStatus::ok:
                ++records_;
                return true;
            case ParseStatus::unknown_type:
                ++unknown_types_;
                break;
            case ParseStatus::corrupt:
                // A writer killed mid-line leaves a torn last line: expected, not an abort.
                add_problem(had_newline ? error_ : "truncated last line: " + error_);
                break;
        }
    }
    return false;
}

}  // namespace sp
