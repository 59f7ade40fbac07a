#include "cli_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

namespace sp::ctl {

bool write_stdout(const char* command, const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return true;
    const std::string what = std::string("sp-ctl ") + command + ": writing stdout";
    std::perror(what.c_str());
    return false;
}

bool check_not_special(const char* command, const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        std::fprintf(stderr, "sp-ctl %s: cannot read '%s': it is a directory\n", command, path.c_str());
        return false;
    }
    // A device or socket never ends (/dev/zero, a terminal): refused, where a FIFO is read to its end
    // (a process substitution, `<(zcat run.jsonl.gz)`, is one).
    const std::filesystem::file_status st = std::filesystem::status(path, ec);
    const char* kind = std::filesystem::is_character_file(st) ? "a character device"
                       : std::filesystem::is_block_file(st)   ? "a block device"
                       : std::filesystem::is_socket(st)       ? "a socket"
                                                              : nullptr;
    if (kind != nullptr) {
        std::fprintf(stderr, "sp-ctl %s: cannot read '%s': it is %s, not a telemetry file\n", command,
                     path.c_str(), kind);
        return false;
    }
    return true;
}

bool read_once(const std::string& path) {
    std::error_code ec;
    return std::filesystem::is_fifo(std::filesystem::status(path, ec));
}

bool check_readable(const char* command, const std::string& path) {
    if (!check_not_special(command, path)) return false;
    // A FIFO is not opened to probe it: the probe's close could leave its writer without a reader (its
    // next write fails, and the rest of the data is lost); the reader's own open reports a failure.
    if (read_once(path)) return true;
    std::ifstream probe(path, std::ios::binary);
    if (!probe) {
        std::fprintf(stderr, "sp-ctl %s: cannot read '%s': %s\n", command, path.c_str(),
                     std::strerror(errno));
        return false;
    }
    return true;
}

std::unique_ptr<sp::JsonlReader> open_telemetry_file(const char* command, const std::string& path) {
    if (!check_readable(command, path)) return nullptr;
    try {
        auto reader = std::make_unique<sp::JsonlReader>(path);
        // validate and summarize read whole files: parse on a second core where there is one (the same
        // records, counts and problems, call for call; core/TELEMETRY.md "Performance").
        if (std::thread::hardware_concurrency() > 1) reader->parse_on_two_threads();
        return reader;
    } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "sp-ctl %s: %s\n", command, e.what());
        return nullptr;
    }
}

}  // namespace sp::ctl
