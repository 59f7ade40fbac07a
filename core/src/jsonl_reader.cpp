// Parsing of telemetry lines and the streaming JSONL reader. Update records take simdjson
// (update_record_parser.h); header, event, step-stats and unknown-type lines, and update lines
// that fail, go to sp::parse_json and nlohmann's DOM (rare; good messages).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "jsonl_reader_parallel.h"
#include "sp/jsonl.h"
#include "update_record_parser.h"

namespace sp {

bool detail::is_blank_line(std::string_view line) {
    for (const char c : line) {
        if (c != ' ' && c != '\t' && c != '\r') return false;
    }
    return true;
}

namespace {

constexpr std::size_t kReadBlock = std::size_t(1) << 20;

// buf_ holds the data, then detail::kLinePadding bytes that no read fills: every line in it can be
// parsed in place (detail::parse_record_padded).
std::size_t capacity(const std::vector<char>& buf) {
    return buf.size() - detail::kLinePadding;
}

ParseStatus parse_line(std::string_view line, TelemetryRecord& out, std::string& error, bool padded) {
    if (!std::holds_alternative<UpdateRecord>(out)) out.emplace<UpdateRecord>();
    auto& update = std::get<UpdateRecord>(out);
    if (padded ? detail::parse_update_record_padded(line, update, error)
               : detail::parse_update_record(line, update, error)) {
        return ParseStatus::ok;
    }
    // Another record type, or a bad line: sp::parse_json names a syntax error by column and key.
    std::string dom_error;
    const std::optional<ParseStatus> typed = detail::parse_typed_record_dom(line, out, dom_error);
    if (!typed) return ParseStatus::corrupt;  // an update record after all: keep the precise error
    error = std::move(dom_error);
    return *typed;
}

}  // namespace

ParseStatus parse_record(std::string_view line, TelemetryRecord& out, std::string& error) {
    return parse_line(line, out, error, false);
}

ParseStatus detail::parse_record_padded(std::string_view line, TelemetryRecord& out, std::string& error) {
    return parse_line(line, out, error, true);
}

JsonlReader::JsonlReader(std::istream& in) : in_(&in), buf_(kReadBlock + detail::kLinePadding) {}

JsonlReader::JsonlReader(const std::string& path)
    : owned_(std::make_unique<std::ifstream>(path, std::ios::binary)), in_(owned_.get()) {
    if (!*owned_) {
        throw std::runtime_error("cannot open telemetry file '" + path + "': " + std::strerror(errno));
    }
    buf_.resize(kReadBlock + detail::kLinePadding);
}

JsonlReader::~JsonlReader() = default;

bool JsonlReader::next_line(std::string_view& line, bool& had_newline) {
    for (;;) {
        if (skipping_) {
            skip_rest_of_long_line();
            continue;
        }
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
        if (len_ > kMaxLineBytes) {  // never buffer a line beyond the limit: skip the rest of it
            skipping_ = true;
            skipped_bytes_ = len_;
            len_ = 0;
            continue;
        }
        if (len_ == capacity(buf_)) {
            buf_.resize(std::min(capacity(buf_) * 2, kMaxLineBytes + 1) + detail::kLinePadding);
        }
        in_->read(buf_.data() + len_, std::streamsize(capacity(buf_) - len_));
        len_ += std::size_t(in_->gcount());
        if (!*in_) {
            if (in_->bad()) add_problem("read error after line " + std::to_string(lines_));
            eof_ = true;
        }
    }
}

// Discards bytes up to and including the next newline (or the end of input), then reports the
// line as one problem. The line counts towards lines_read() and bytes_read() like any other.
void JsonlReader::skip_rest_of_long_line() {
    for (;;) {
        if (pos_ < len_) {
            const char* start = buf_.data() + pos_;
            if (const void* nl = std::memchr(start, '\n', len_ - pos_)) {
                const std::size_t n = std::size_t(static_cast<const char*>(nl) - start);
                skipped_bytes_ += n;
                pos_ += n + 1;
                end_long_line(true);
                return;
            }
            skipped_bytes_ += len_ - pos_;
        }
        pos_ = len_ = 0;
        if (eof_) {
            end_long_line(false);
            return;
        }
        in_->read(buf_.data(), std::streamsize(capacity(buf_)));
        len_ = std::size_t(in_->gcount());
        if (!*in_) {
            if (in_->bad()) add_problem("read error after line " + std::to_string(lines_));
            eof_ = true;
        }
    }
}

void JsonlReader::end_long_line(bool had_newline) {
    skipping_ = false;
    ++lines_;
    bytes_ += skipped_bytes_ + (had_newline ? 1 : 0);
    add_problem("line too long: " + std::to_string(skipped_bytes_) + " bytes (the limit is " +
                std::to_string(kMaxLineBytes) + "); skipped");
}

void JsonlReader::add_problem(std::string reason) {
    if (defer_problem(reason)) return;  // split ahead on two threads: reported when next() gets there
    ++problem_count_;
    if (problems_.size() < kMaxStoredProblems) problems_.push_back({lines_, std::move(reason)});
}

bool JsonlReader::count_parsed(ParseStatus status, bool had_newline, const std::string& error) {
    switch (status) {
        case ParseStatus::ok:
            ++records_;
            return true;
        case ParseStatus::unknown_type:
            ++unknown_types_;
            return false;
        case ParseStatus::corrupt:
            // A writer killed mid-line leaves a torn last line: expected, not an abort.
            add_problem(had_newline ? error : "truncated last line: " + error);
            return false;
    }
    return false;
}

bool JsonlReader::next(TelemetryRecord& out) {
    if (parallel_) return next_parallel(out);
    std::string_view line;
    bool had_newline = false;
    while (next_line(line, had_newline)) {
        ++lines_;
        bytes_ += line.size() + (had_newline ? 1 : 0);
        if (detail::is_blank_line(line)) continue;
        if (count_parsed(detail::parse_record_padded(line, out, error_), had_newline, error_)) return true;
    }
    return false;
}

}  // namespace sp
