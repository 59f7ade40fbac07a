// Appending JSONL writer. It is driven from one dedicated thread, so it takes no locks; stdio
// buffering batches lines unless the caller wants every line flushed (a live dashboard tail).
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "sp/jsonl.h"

namespace sp {

JsonlWriter::JsonlWriter(const std::string& path, OpenMode mode, bool flush_each_line)
    : path_(path), flush_each_line_(flush_each_line) {
    // "a+" rather than "a": we read the last byte to repair a torn final line (see the header).
    file_ = std::fopen(path.c_str(), mode == OpenMode::append ? "a+b" : "wb");
    if (file_ == nullptr) {
        throw std::runtime_error("cannot open telemetry file '" + path +
                                 "' for writing: " + std::strerror(errno));
    }
    if (mode == OpenMode::append && std::fseek(file_, -1, SEEK_END) == 0) {
        const int last = std::fgetc(file_);
        std::fseek(file_, 0, SEEK_END);  // C requires a seek between reading and writing
        if (last != EOF && last != '\n') put("");
    }
}

JsonlWriter::~JsonlWriter() {
    if (file_ != nullptr) std::fclose(file_);
}

void JsonlWriter::fail(const char* what) {
    throw std::runtime_error(std::string(what) + " telemetry file '" + path_ +
                             "' failed: " + std::strerror(errno));
}

void JsonlWriter::put(std::string_view line) {
    if (!line.empty() && std::fwrite(line.data(), 1, line.size(), file_) != line.size()) fail("writing");
    if (std::fputc('\n', file_) == EOF) fail("writing");
    if (flush_each_line_) flush();
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
    if (std::fflush(file_) != 0) fail("flushing");
}

}  // namespace sp
