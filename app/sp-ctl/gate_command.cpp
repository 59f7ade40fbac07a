// sp-ctl gate --shapes 384x128,128x512,128 --out POLICY.json [--link host|cuda] [options]
// Measures each format's trip against BF16's on this machine and writes the "never slower than BF16"
// policy file (core/GATE.md): over the host link (quantize, copy, dequantize on the CPU), or over the
// CUDA link (pinned host-to-device copy of the packed payload, dequantize kernel; gate_cuda_link.h).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_util.h"
#include "commands.h"
#include "exit_codes.h"
#include "gate_measure.h"
#include "option_checks.h"
#include "sp/format_gate.h"
#if SP_CTL_HAVE_CUDA_LINK
#include "gate_cuda_link.h"
#endif

namespace sp::ctl {
namespace {

constexpr const char* kDescription =
    "measure each format against BF16 here; write the format gate policy\n"
    "\n"
    "Measures, on this machine, what moving the model's weights costs in each low-precision format —\n"
    "quantize the fp32 master (core's reference), copy exactly the stored bytes (the CPU link),\n"
    "dequantize into the fp32 compute copy — against BF16 moving the same weights, and writes the\n"
    "policy file that admits a format only from the size where it is faster and stays faster.\n"
    "Prints one line per size and format (microseconds per trip, speed-up = bf16 / format), then\n"
    "the rules. With --link cuda the trip is the packed payload copied from pinned host memory to the\n"
    "GPU and expanded to BF16 there, against BF16's payload copied the same way (GPU time). The file\n"
    "format and the decision logic are in core/GATE.md.";

// The most elements one measured tensor may have: the master, the compute copy and the payloads
// together stay around 3 GiB at this size.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 28;

int usage_error(const std::string& message) {
    std::fprintf(stderr, "sp-ctl gate: %s\n", message.c_str());
    return 2;
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

// --shapes: the shapes, and "" or what is wrong with the list (checked by the parse, used by the run).
std::string parse_shapes(const std::string& text, std::vector<sp::TensorShape>& out) {
    if (text.empty()) return "no shape given";
    for (const std::string& part : split_list(text)) {
        const auto shape = parse_shape(part);
        if (!shape) return "'" + part + "' is not a shape (ROWSxCOLS or N, whole numbers >= 1)";
        out.push_back(*shape);
    }
    return {};
}

// --formats: as --shapes; a format named twice is measured once.
std::string parse_formats(const std::string& text, std::vector<sp::Precision>& out) {
    if (text.empty()) return "no format given";
    for (const std::string& part : split_list(text)) {
        const auto p = sp::parse_precision(part);
        if (!p || *p == sp::Precision::bf16) {
            return "'" + part + "' is not one of int8, int4, fp8_e4m3, fp8_e5m2" +
                   (p ? " (BF16 is the baseline, always measured)" : "");
        }
        if (std::find(out.begin(), out.end(), *p) == out.end()) out.push_back(*p);
    }
    return {};
}

// What `parse` finds wrong with `text` ("" when nothing), for the flag's check; the values are dropped.
template <typename T>
std::string problem_of(std::string (*parse)(const std::string&, std::vector<T>&), const std::string& text) {
    std::vector<T> unused;
    return parse(text, unused);
}

// The command line's values; the lists as given, read by parse_shapes and parse_formats.
struct GateArgs {
    std::string shapes, out_path;
    std::string formats = "int8,int4,fp8_e4m3,fp8_e5m2";
    std::string link = "host";
    GateSweep sweep;  // its defaults are the flags' defaults
    double threshold = 1.0;
};

struct Request {
    std::vector<sp::TensorShape> shapes;
    std::string out_path;
    GateSweep sweep;
    double threshold = 1.0;
    bool cuda_link = false;
};

// The values each flag was checked for alone, and the checks across flags; returns the exit code on a
// usage error.
std::optional<int> read_request(const GateArgs& args, Request& req) {
    req.out_path = args.out_path;
    req.sweep = args.sweep;
    req.threshold = args.threshold;
    req.cuda_link = args.link == "cuda";
    (void)parse_shapes(args.shapes, req.shapes);  // checked when parsed
    (void)parse_formats(args.formats, req.sweep.formats);
    if (req.sweep.max_rows < req.sweep.min_rows)
        return usage_error("--max-rows (" + std::to_string(req.sweep.max_rows) + ") must be >= --min-rows (" +
                           std::to_string(req.sweep.min_rows) + ")");
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

// "" when the request's link can be measured here, else why not. Without CUDA in this build, or
// without a device, --link cuda cannot run (and writes nothing).
std::string link_unavailable(const Request& req) {
    if (!req.cuda_link) return {};
#if SP_CTL_HAVE_CUDA_LINK
    return cuda_link_unavailable();
#else
    return "this sp-ctl was built without CUDA (no nvcc when it was configured)";
#endif
}

std::vector<sp::GateMeasurement> measure_on_link(const Request& req, sp::LayerKind kind, std::uint64_t rows,
                                                 std::uint64_t cols) {
#if SP_CTL_HAVE_CUDA_LINK
    if (req.cuda_link) return measure_size_cuda(kind, rows, cols, req.sweep);
#endif
    return measure_size(kind, rows, cols, req.sweep);
}

// Measures every planned size on the request's link, printing a line per measurement into `all`;
// false when stdout fails.
bool measure_plan(const Request& req, const SizePlan& plan, std::vector<sp::GateMeasurement>& all) {
    if (!write_stdout("gate", "kind       cols     rows  format       format us      bf16 us  speed-up\n"))
        return false;
    for (const auto& [key, rows_set] : plan) {
        for (std::uint64_t rows : rows_set) {
            for (const sp::GateMeasurement& m : measure_on_link(req, key.first, rows, key.second)) {
                if (!write_stdout("gate", table_line(m))) return false;
                all.push_back(m);
            }
        }
    }
    return true;
}

int run_gate(const GateArgs& args) {
    Request req;
    if (const auto exit = read_request(args, req)) return *exit;
    if (const std::string why = link_unavailable(req); !why.empty()) {
        std::fprintf(stderr, "sp-ctl gate: --link cuda: %s; nothing written\n", why.c_str());
        return kExitFailed;
    }

    // Checked before measuring, which can take minutes; opened to append so nothing is lost yet. A
    // file the check created is removed again if the measuring fails: a failed gate writes nothing.
    std::error_code ec;
    const bool existed = std::filesystem::exists(req.out_path, ec);
    if (!std::ofstream(req.out_path, std::ios::binary | std::ios::app)) {
        std::fprintf(stderr, "sp-ctl gate: cannot write '%s': %s\n", req.out_path.c_str(),
                     std::strerror(errno));
        return 1;
    }
    auto failed = [&](int exit) {
        if (!existed) std::filesystem::remove(req.out_path, ec);
        return exit;
    };
    const SizePlan plan = plan_sizes(req.shapes, req.sweep);
    std::vector<sp::GateMeasurement> all;
    try {
        if (!measure_plan(req, plan, all)) return failed(1);
    } catch (const std::runtime_error& e) {  // a CUDA error, or wrong values, on the CUDA link
        std::fprintf(stderr, "sp-ctl gate: %s; nothing written\n", e.what());
        return failed(kExitFailed);
    }

    sp::FormatGatePolicy policy = sp::derive_gate_policy(all, req.threshold);
    policy.producer = std::string("sp-ctl gate ") + SP_VERSION;
    policy.device = cpu_description();
    policy.link = "memcpy";
#if SP_CTL_HAVE_CUDA_LINK
    if (req.cuda_link) {
        policy.device = cuda_device_description();
        policy.link = "cuda";
    }
#endif
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

}  // namespace

Command add_gate(CLI::App& root) {
    auto args = std::make_shared<GateArgs>();
    CLI::App* command = root.add_subcommand("gate", kDescription);
    command
        ->add_option(
            "--shapes", args->shapes,
            "the model's parameter shapes, comma-separated: ROWSxCOLS for a matrix, N (or 1xN) for a "
            "vector, e.g. 384x128,128x128,512x128,128x512,128")
        ->required()
        ->type_name("SHAPES")
        ->check(checked_by([](const std::string& text) { return problem_of(parse_shapes, text); }));
    command->add_option("--out", args->out_path, "the policy file to write")
        ->required()
        ->type_name("PATH")
        ->check(not_empty());
    command->add_option("--formats", args->formats, "formats to measure")
        ->type_name("LIST")
        ->check(checked_by([](const std::string& text) { return problem_of(parse_formats, text); }))
        ->capture_default_str();
    command->add_option("--min-rows", args->sweep.min_rows, "smallest row count of the sweep")
        ->type_name("N")
        ->transform(whole_number(1))
        ->capture_default_str();
    command
        ->add_option("--max-rows", args->sweep.max_rows,
                     "largest row count of the sweep; rows go over the powers of two in between, plus each "
                     "matrix's own row count; vectors are measured as is")
        ->type_name("N")
        ->transform(whole_number(1))
        ->capture_default_str();
    command
        ->add_option("--repeats", args->sweep.repeats, "rounds per size; each time is the median over them")
        ->type_name("N")
        ->transform(whole_number(1, 1000))
        ->capture_default_str();
    command
        ->add_option("--threshold", args->threshold,
                     "the speed-up over BF16 a format needs; 1: at least as fast")
        ->type_name("X")
        ->check(positive_number())
        ->capture_default_str();
    command->add_option("--int4-group", args->sweep.int4_group, "INT4 group size")
        ->type_name("N")
        ->transform(whole_number(1))
        ->capture_default_str();
    command
        ->add_option("--link", args->link,
                     "host: quantize, copy and dequantize on the CPU; cuda: pinned host-to-device copy of "
                     "the packed payload plus the device dequantize, timed on the GPU (needs a CUDA build "
                     "and a device)")
        ->type_name("host|cuda")
        ->check(checked_by([](const std::string& text) {
            return text == "host" || text == "cuda" ? std::string()
                                                    : "must be host or cuda, got '" + text + "'";
        }))
        ->capture_default_str();
    command->footer(
        "Exit codes: 0 ok, 1 the file could not be written, or --link cuda cannot run here (no CUDA "
        "in this build, no device: nothing is written), 2 bad usage.");
    return {command, [args] { return run_gate(*args); }};
}

}  // namespace sp::ctl
