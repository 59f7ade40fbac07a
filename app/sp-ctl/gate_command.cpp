// sp-ctl gate --shapes 384x128,128x512,128 --out POLICY.json [options]
// Measures each format's trip (quantize, move, dequantize) against BF16's on this machine and writes
// the "never slower than BF16" policy file (core/GATE.md).
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "gate_measure.h"
#include "sp/format_gate.h"

namespace sp::ctl {
namespace {

constexpr const char* kUsage =
    "usage: sp-ctl gate --shapes SHAPES --out POLICY.json [--formats LIST] [--min-rows N] [--max-rows N]\n"
    "                   [--repeats N] [--threshold X] [--int4-group N]\n"
    "\n"
    "Measures, on this machine, what moving the model's weights costs in each low-precision format —\n"
    "quantize the fp32 master (core's reference), copy exactly the stored bytes (the CPU link),\n"
    "dequantize into the fp32 compute copy — against BF16 moving the same weights, and writes the\n"
    "policy file that admits a format only from the size where it is faster and stays faster.\n"
    "\n"
    "  --shapes SHAPES   the model's parameter shapes, comma-separated: ROWSxCOLS for a matrix,\n"
    "                    N (or 1xN) for a vector, e.g. 384x128,128x128,512x128,128x512,128\n"
    "  --out PATH        the policy file to write\n"
    "  --formats LIST    formats to measure (default int8,int4,fp8_e4m3,fp8_e5m2)\n"
    "  --min-rows N      smallest row count of the sweep (default 16)\n"
    "  --max-rows N      largest row count of the sweep (default 65536); rows go over the powers of\n"
    "                    two in between, plus each matrix's own row count; vectors are measured as is\n"
    "  --repeats N       rounds per size; each time is the median over them (default 7)\n"
    "  --threshold X     the speed-up a format needs (default 1.0: at least as fast as BF16)\n"
    "  --int4-group N    INT4 group size (default 64)\n"
    "\n"
    "Prints one line per size and format (microseconds per trip, speed-up = bf16 / format), then\n"
    "the rules. The file format and the decision logic are in core/GATE.md.\n"
    "Exit codes: 0 ok, 1 the file could not be written, 2 bad usage.\n";

// The most elements one measured tensor may have: the master, the compute copy and the payloads
// together stay around 3 GiB at this size.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 28;

int usage_error(const std::string& message) {
    std::fprintf(stderr, "sp-ctl gate: %s\n", message.c_str());
    return 2;
}

std::vector<std::string> split(const std::string& text, char sep) {
    std::vector<std::string> parts;
    std::stringstream in(text);
    for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
    if (!text.empty() && text.back() == sep) parts.emplace_back();
    return parts;
}

// "384x128" -> {384, 128}; "128" -> {1, 128}. Empty when the text is not a shape.
std::optional<sp::TensorShape> parse_shape(const std::string& text) {
    const auto x = text.find('x');
    const auto rows =
        x == std::string::npos ? std::optional<std::uint64_t>(1) : parse_count(text.substr(0, x));
    const auto cols = parse_count(x == std::string::npos ? text : text.substr(x + 1));
    if (!rows || !cols || *rows == 0 || *cols == 0) return std::nullopt;
    return sp::TensorShape{*rows, *cols};
}

bool parse_shapes(const std::string& text, std::vector<sp::TensorShape>& out, std::string& error) {
    for (const std::string& part : split(text, ',')) {
        const auto shape = parse_shape(part);
        if (!shape) {
            error = "--shapes: '" + part + "' is not a shape (ROWSxCOLS or N, whole numbers >= 1)";
            return false;
        }
        out.push_back(*shape);
    }
    if (out.empty()) error = "--shapes: no shape given";
    return !out.empty();
}

bool parse_formats(const std::string& text, std::vector<sp::Precision>& out, std::string& error) {
    for (const std::string& part : split(text, ',')) {
        const auto p = sp::parse_precision(part);
        if (!p || *p == sp::Precision::bf16) {
            error = "--formats: '" + part + "' is not one of int8, int4, fp8_e4m3, fp8_e5m2" +
                    (p ? " (BF16 is the baseline, always measured)" : "");
            return false;
        }
        if (std::find(out.begin(), out.end(), *p) == out.end()) out.push_back(*p);
    }
    if (out.empty()) error = "--formats: no format given";
    return !out.empty();
}

bool parse_threshold(const std::string& text, double& out) {
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return !text.empty() && ec == std::errc() && ptr == end && std::isfinite(out) && out > 0.0;
}

// Reads a count flag that must be >= `least`; false (after the message) otherwise.
bool count_flag(const ParsedArgs& parsed, const char* name, std::uint64_t least, std::uint64_t& out) {
    if (!parsed.has(name)) return true;
    const auto v = parse_count(parsed.value(name));
    if (v && *v >= least) {
        out = *v;
        return true;
    }
    usage_error(std::string(name) + " must be a whole number >= " + std::to_string(least) + ", got '" +
                parsed.value(name) + "'");
    return false;
}

struct Request {
    std::vector<sp::TensorShape> shapes;
    std::string out_path;
    GateSweep sweep;
    double threshold = 1.0;
};

// Every flag checked; returns the exit code on a usage error.
std::optional<int> read_request(const ParsedArgs& parsed, Request& req) {
    std::string error;
    if (!parsed.has("--shapes")) return usage_error(std::string("--shapes is required\n\n") + kUsage);
    if (!parse_shapes(parsed.value("--shapes"), req.shapes, error)) return usage_error(error);
    req.out_path = parsed.value("--out");
    if (req.out_path.empty()) return usage_error(std::string("--out is required\n\n") + kUsage);
    if (!parse_formats(parsed.value("--formats", "int8,int4,fp8_e4m3,fp8_e5m2"), req.sweep.formats, error))
        return usage_error(error);
    std::uint64_t repeats = 7;
    if (!count_flag(parsed, "--min-rows", 1, req.sweep.min_rows) ||
        !count_flag(parsed, "--max-rows", 1, req.sweep.max_rows) ||
        !count_flag(parsed, "--repeats", 1, repeats) ||
        !count_flag(parsed, "--int4-group", 1, req.sweep.int4_group))
        return 2;
    if (repeats > 1000) return usage_error("--repeats must be at most 1000, got " + std::to_string(repeats));
    req.sweep.repeats = static_cast<int>(repeats);
    if (req.sweep.max_rows < req.sweep.min_rows)
        return usage_error("--max-rows (" + std::to_string(req.sweep.max_rows) + ") must be >= --min-rows (" +
                           std::to_string(req.sweep.min_rows) + ")");
    if (parsed.has("--threshold") && !parse_threshold(parsed.value("--threshold"), req.threshold))
        return usage_error("--threshold must be a finite number > 0, got '" + parsed.value("--threshold") +
                           "'");
    for (const sp::TensorShape& s : req.shapes) {
        const std::uint64_t rows = std::max(s.rows, req.sweep.max_rows);
        if (rows > kMaxElements / s.cols)
            return usage_error("--max-rows/--shapes: " + std::to_string(rows) + " x " +
                               std::to_string(s.cols) + " is more than " + std::to_string(kMaxElements) +
                               " elements");
    }
    return std::nullopt;
}

// "cpu (model name)" from /proc/cpuinfo when it says, else "cpu".
std::string cpu_description() {
    std::ifstream info("/proc/cpuinfo");
    for (std::string line; std::getline(info, line);) {
        if (line.rfind("model name", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon != std::string::npos && colon + 2 <= line.size())
            return "cpu (" + line.substr(colon + 2) + ")";
    }
    return "cpu";
}

std::string table_line(const sp::GateMeasurement& m) {
    char line[160];
    std::snprintf(line, sizeof line, "%-6s %8llu %8llu  %-8s %12.4f %12.4f %9.4f\n",
                  std::string(sp::to_string(m.kind)).c_str(), static_cast<unsigned long long>(m.cols),
                  static_cast<unsigned long long>(m.rows), std::string(sp::to_string(m.format)).c_str(),
                  m.format_seconds * 1e6, m.bf16_seconds * 1e6, sp::speedup_of(m));
    return line;
}

// The rules section: one line per measured (kind, cols, format), "bf16 only" where no rule holds.
std::string rules_text(const sp::FormatGatePolicy& policy, const SizePlan& plan, const GateSweep& sweep) {
    char line[160];
    std::snprintf(line, sizeof line, "\nrules (speed-up >= %g):\n", policy.speedup_threshold);
    std::string out = line;
    for (const auto& [key, rows] : plan) {
        for (sp::Precision f : sweep.formats) {
            const sp::GateRule* r = policy.find(key.first, key.second, f);
            if (r)
                std::snprintf(
                    line, sizeof line, "  %-6s %8llu  %-8s from %llu rows (x%.3f, at least x%.3f)\n",
                    std::string(sp::to_string(key.first)).c_str(),
                    static_cast<unsigned long long>(key.second), std::string(sp::to_string(f)).c_str(),
                    static_cast<unsigned long long>(r->min_rows), r->measured_speedup, r->min_speedup);
            else
                std::snprintf(line, sizeof line, "  %-6s %8llu  %-8s bf16 only\n",
                              std::string(sp::to_string(key.first)).c_str(),
                              static_cast<unsigned long long>(key.second),
                              std::string(sp::to_string(f)).c_str());
            out += line;
        }
    }
    return out;
}

}  // namespace

int run_gate(const Args& args) {
    ParsedArgs parsed;
    const std::vector<OptionSpec> spec = {{"--shapes", true},    {"--out", true},       {"--formats", true},
                                          {"--min-rows", true},  {"--max-rows", true},  {"--repeats", true},
                                          {"--threshold", true}, {"--int4-group", true}};
    if (const auto exit = parse_args("gate", args, spec, kUsage, 0, parsed)) return *exit;
    Request req;
    if (const auto exit = read_request(parsed, req)) return *exit;

    // Checked before measuring, which can take minutes; opened to append so nothing is lost yet.
    if (!std::ofstream(req.out_path, std::ios::binary | std::ios::app)) {
        std::fprintf(stderr, "sp-ctl gate: cannot write '%s': %s\n", req.out_path.c_str(),
                     std::strerror(errno));
        return 1;
    }
    const SizePlan plan = plan_sizes(req.shapes, req.sweep);
    if (!write_stdout("gate", "kind       cols     rows  format       format us      bf16 us  speed-up\n"))
        return 1;
    std::vector<sp::GateMeasurement> all;
    for (const auto& [key, rows_set] : plan) {
        for (std::uint64_t rows : rows_set) {
            for (const sp::GateMeasurement& m : measure_size(key.first, rows, key.second, req.sweep)) {
                if (!write_stdout("gate", table_line(m))) return 1;
                all.push_back(m);
            }
        }
    }

    sp::FormatGatePolicy policy = sp::derive_gate_policy(all, req.threshold);
    policy.producer = std::string("sp-ctl gate ") + SP_VERSION;
    policy.device = cpu_description();
    policy.link = "memcpy";
    policy.int4_group = req.sweep.int4_group;
    if (!write_stdout("gate", rules_text(policy, plan, req.sweep))) return 1;

    std::ofstream file(req.out_path, std::ios::binary | std::ios::trunc);
    file << sp::to_json_text(policy);
    file.close();
    if (!file) {
        std::fprintf(stderr, "sp-ctl gate: cannot write '%s': %s\n", req.out_path.c_str(),
                     std::strerror(errno));
        return 1;
    }
    std::fprintf(stderr, "sp-ctl gate: %zu measurements, %zu rules, policy written to %s\n", all.size(),
                 policy.rules.size(), req.out_path.c_str());
    return 0;
}

}  // namespace sp::ctl
