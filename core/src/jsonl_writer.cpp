// Appending JSONL writer on a POSIX file descriptor with its own buffer. It is driven from one
// dedicated thread, so it takes no locks. Not stdio: after a failed write stdio keeps (and later
// re-sends) or drops its buffer as the C library sees fit, and a writer that must recover from a
// full disk needs to know exactly what reached the file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "sp/jsonl.h"

namespace sp {
namespace {

constexpr std::size_t kBufferBytes = std::size_t(64) << 10;  // when lines are not flushed one by one

}  // namespace

JsonlWriter::JsonlWriter(const std::string& path, OpenMode mode, bool flush_each_line)
    : path_(path), flush_each_line_(flush_each_line) {
    // O_NOFOLLOW: a symlink planted at the path would have us truncate (or create) whatever it
    // points to; it is refused instead, a dangling one too.
    const int flags =
        O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (mode == OpenMode::append ? O_APPEND : O_TRUNC);
    fd_ = ::open(path.c_str(), flags, 0644);
    if (fd_ < 0) {
        const int err = errno;
        struct stat st {};
        if (err == ELOOP && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            throw std::runtime_error("cannot open telemetry file '" + path +
                                     "' for writing: it is a symbolic link, and telemetry is never "
                                     "written through one (give the file itself)");
        throw std::runtime_error("cannot open telemetry file '" + path +
                                 "' for writing: " + std::strerror(err));
    }
    // Repair a torn final line left by a crashed writer (see the header).
    if (mode == OpenMode::append) {
        const int reader = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        char last = '\n';
        if (reader >= 0) {
            const off_t size = ::lseek(reader, 0, SEEK_END);
            if (size > 0 && ::pread(reader, &last, 1, size - 1) != 1) last = '\n';
            ::close(reader);
        }
        if (last != '\n') torn_ = true;
    }
}

JsonlWriter::~JsonlWriter() {
    try {
        flush();
    } catch (const std::exception&) {  // a destructor cannot report it; flush() first to know
    }
    if (fd_ >= 0) ::close(fd_);
}

void JsonlWriter::put(std::string_view line) {
    if (torn_) {
        if (pending_.empty()) pending_repair_ = true;
        pending_ += '\n';
        torn_ = false;
    }
    pending_.append(line.data(), line.size());
    pending_ += '\n';
    ++pending_lines_;
    if (flush_each_line_ || pending_.size() >= kBufferBytes) flush();
}

void JsonlWriter::write_line(std::string_view json_line) {
    put(json_line);
    ++lines_;
}

void JsonlWriter::write(const UpdateRecord& r) {
    line_.clear();
    append_json(line_, r);
    write_line(line_);
}

void JsonlWriter::write(const RunHeader& h) {
    write_line(to_json_line(h));
}

void JsonlWriter::write(const EventRecord& e) {
    write_line(to_json_line(e));
}

void JsonlWriter::write(const StepStatsRecord& r) {
    write_line(to_json_line(r));
}

void JsonlWriter::write(const TelemetryRecord& rec) {
    std::visit([this](const auto& r) { write(r); }, rec);
}

void JsonlWriter::flush() {
    std::size_t done = 0;
    while (done < pending_.size()) {
        const ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
        if (n > 0) {
            done += std::size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        const int err = n < 0 ? errno : ENOSPC;  // a write of 0 bytes: nothing more fits
        // Whatever did not reach the file is gone; a fragment of a line must not swallow the next.
        // (With nothing written, the file still ends as it did: torn if this flush was to repair it.)
        torn_ = done > 0 ? pending_[done - 1] != '\n' : pending_repair_;
        const auto ended =
            std::size_t(std::count(pending_.begin(), pending_.begin() + std::ptrdiff_t(done), '\n'));
        const std::size_t lost = pending_lines_ - (ended - (pending_repair_ && done > 0 ? 1 : 0));
        clear_pending();
        std::string what = "writing telemetry file '" + path_ + "' failed: " + std::strerror(err);
        if (lost > 1) what += " (" + std::to_string(lost) + " lines not written)";
        throw std::runtime_error(what);
    }
    clear_pending();
}

void JsonlWriter::clear_pending() {
    pending_.clear();
    pending_lines_ = 0;
    pending_repair_ = false;
}

}  // namespace sp
