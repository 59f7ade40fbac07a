#include "cli_util.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace sp::ctl {

std::optional<int> parse_args(const char* command, const Args& args, const std::vector<OptionSpec>& spec,
                              const char* usage, std::size_t max_positionals, ParsedArgs& out) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "--help" || a == "-h") {
            std::fputs(usage, stdout);
            return 0;
        }
        const OptionSpec* option = nullptr;
        for (const OptionSpec& s : spec) {
            if (a == s.name) option = &s;
        }
        if (!option) {
            const bool looks_like_option = a.size() > 1 && a[0] == '-';
            if (looks_like_option || max_positionals == 0) {
                std::fprintf(stderr, "sp-ctl %s: unknown option '%s'\n\n%s", command, a.c_str(), usage);
                return 2;
            }
            if (out.positionals.size() == max_positionals) {
                std::fprintf(stderr, "sp-ctl %s: unexpected argument '%s'\n\n%s", command, a.c_str(), usage);
                return 2;
            }
            out.positionals.push_back(a);
            continue;
        }
        if (!option->takes_value) {
            out.options[a];
            continue;
        }
        if (i + 1 >= args.size()) {
            std::fprintf(stderr, "sp-ctl %s: option '%s' needs a value\n", command, a.c_str());
            return 2;
        }
        out.options[a] = args[++i];
    }
    return std::nullopt;
}

std::optional<std::uint64_t> parse_count(const std::string& text) {
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return value;
}

bool write_stdout(const char* command, const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return true;
    const std::string what = std::string("sp-ctl ") + command + ": writing stdout";
    std::perror(what.c_str());
    return false;
}

bool check_readable(const char* command, const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        std::fprintf(stderr, "sp-ctl %s: cannot read '%s': it is a directory\n", command, path.c_str());
        return false;
    }
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
        return std::make_unique<sp::JsonlReader>(path);
    } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "sp-ctl %s: %s\n", command, e.what());
        return nullptr;
    }
}

}  // namespace sp::ctl
