// Telemetry read throughput: generates a >= 100 MB JSONL file of realistic update records
// (48 blocks, every detail field, fixed seed), then measures in the same process, best of 3:
//   raw      - splitting the file into lines with std::getline, no parsing (the floor)
//   dom      - std::getline + nlohmann::json::parse of each line (the obvious implementation)
//   sax-noop - std::getline + nlohmann::json::sax_parse with a handler that does nothing (an
//              upper bound for any nlohmann SAX-based reader)
//   reader   - sp::JsonlReader producing UpdateRecords (1 thread)
//   reader-2t- the same reader with parse_on_two_threads() (2 threads: the caller and a worker)
// Usage: bench_jsonl_read [file.jsonl] [--keep] [--mb N] [--reader-only]
// --reader-only leaves out dom and sax-noop (seconds each), for comparing reader builds quickly.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "sp/jsonl.h"
#include "synthetic_records.h"

namespace {

using Clock = std::chrono::steady_clock;

sp::UpdateRecord make_record(std::mt19937_64& rng, std::int64_t step) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::uniform_int_distribution<int> pick(0, 99);
    sp::UpdateRecord r;
    r.step_id = step;
    r.timestamp = 1.7e9 + double(step) * 0.137 + unit(rng);
    r.mode = sp::Mode::dynamic;
    double sum = 0.0;
    r.mean_sensitivity = 0.0;
    r.min_sensitivity = 1.0;
    for (int b = 0; b < 48; ++b) {
        sp::BlockDetail d;
        d.id = b;
        const int roll = pick(rng);
        d.precision = roll < 40   ? sp::Precision::bf16
                      : roll < 95 ? sp::Precision::int8
                                  : sp::Precision::fp8_e4m3;
        sp::test::random_block_statistics(d, rng);
        d.mean = pick(rng) < 3 ? sp::kNoValue : (unit(rng) - 0.5) * 1e-3;
        d.forced = roll == 0 ? sp::ForcedBy::config : sp::ForcedBy::none;
        d.changed = pick(rng) < 5;
        d.reason = d.changed ? sp::Reason::policy : sp::Reason::hold;
        d.window = 5;
        d.last_change_step = d.changed ? step : -1;
        d.switches = pick(rng) % 7;
        r.blocks_bf16 += d.precision == sp::Precision::bf16;
        r.blocks_int8 += d.precision == sp::Precision::int8;
        r.blocks_fp8 += sp::is_fp8(d.precision);
        r.precision_changes += d.changed;
        sum += d.sensitivity;
        r.max_sensitivity = std::max(r.max_sensitivity, d.sensitivity);
        r.min_sensitivity = std::min(r.min_sensitivity, d.sensitivity);
        r.block_details.push_back(d);
    }
    r.mean_sensitivity = sum / 48.0;
    r.estimated_bandwidth_saving_pct = 100.0 * (r.blocks_int8 + r.blocks_fp8) / 48.0 / 2.0;
    r.measured_bandwidth_saving_pct = r.estimated_bandwidth_saving_pct - unit(rng);
    return r;
}

struct NoopSax : nlohmann::json_sax<nlohmann::json> {
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;
    }
};

// Best of three runs of `body`, which returns a checksum so nothing is optimised away.
double best_mbps(const char* name, std::uintmax_t bytes, const std::function<std::uint64_t()>& body) {
    double best = 0.0;
    for (int run = 0; run < 3; ++run) {
        const auto t0 = Clock::now();
        const std::uint64_t check = body();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        const double mbps = double(bytes) / 1e6 / s;
        std::printf("  %-9s run %d: %8.1f MB/s  (%.3f s, check %llu)\n", name, run + 1, mbps, s,
                    static_cast<unsigned long long>(check));
        best = std::max(best, mbps);
    }
    return best;
}

// Writes records until the file holds target_mb; prints its size and a rough figure for the
// writer. Returns the number of records.
std::int64_t generate(const std::filesystem::path& path, double target_mb) {
    std::mt19937_64 rng(20240601);
    std::int64_t records = 0;
    const auto t0 = Clock::now();
    {
        sp::JsonlWriter writer(path.string(), sp::JsonlWriter::OpenMode::truncate);
        std::uint64_t written = 0;
        std::string line;
        while (double(written) < target_mb * 1e6) {
            line.clear();
            sp::append_json(line, make_record(rng, records * 10));
            writer.write_line(line);
            written += line.size() + 1;
            ++records;
        }
    }
    const double gen_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::uintmax_t bytes = std::filesystem::file_size(path);
    std::printf("file %s: %.1f MB, %lld update records of %.0f bytes (generated in %.2f s, %.0f MB/s)\n",
                path.string().c_str(), double(bytes) / 1e6, static_cast<long long>(records),
                double(bytes) / double(records), gen_s, double(bytes) / 1e6 / gen_s);
    return records;
}

// The best MB/s of each method (0: left out by --reader-only) and its ratio to raw.
struct Figures {
    double raw, dom, sax, reader, reader2;
};

void print_table(const Figures& f) {
    std::printf("\n%-10s %10s %12s\n", "method", "MB/s", "vs raw");
    std::printf("%-10s %10.1f %11.2fx\n", "raw", f.raw, 1.0);
    if (f.dom > 0.0) std::printf("%-10s %10.1f %11.2fx\n", "dom", f.dom, f.dom / f.raw);
    if (f.sax > 0.0) std::printf("%-10s %10.1f %11.2fx\n", "sax-noop", f.sax, f.sax / f.raw);
    std::printf("%-10s %10.1f %11.2fx  (1 thread)\n", "reader", f.reader, f.reader / f.raw);
    std::printf("%-10s %10.1f %11.2fx  (2 threads, of %u hardware threads)\n", "reader-2t", f.reader2,
                f.reader2 / f.raw, std::thread::hardware_concurrency());
    if (f.dom > 0.0) std::printf("reader/dom = %.2fx; ", f.reader / f.dom);
    std::printf("reader/raw = %.2fx, reader-2t/raw = %.2fx\n", f.reader / f.raw, f.reader2 / f.raw);
}

}  // namespace

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    fs::path path;
    bool keep = false;
    bool reader_only = false;
    double target_mb = 110.0;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--keep") == 0) {
            keep = true;
        } else if (std::strcmp(argv[i], "--reader-only") == 0) {
            reader_only = true;
        } else if (std::strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
            target_mb = std::atof(argv[++i]);
        } else {
            path = argv[i];
        }
    }
    if (path.empty()) path = fs::temp_directory_path() / "sp_bench_jsonl_read.jsonl";

    const std::int64_t records = generate(path, target_mb);
    const std::uintmax_t bytes = fs::file_size(path);
    const double raw = best_mbps("raw", bytes, [&] {
        std::ifstream in(path, std::ios::binary);
        std::string line;
        std::uint64_t n = 0;
        while (std::getline(in, line)) n += line.size();
        return n;
    });
    const auto skipped = [&](const char*, std::uintmax_t, const std::function<std::uint64_t()>&) {
        return 0.0;
    };
    const auto measure =
        reader_only
            ? std::function<double(const char*, std::uintmax_t, const std::function<std::uint64_t()>&)>(
                  skipped)
            : best_mbps;
    const double dom = measure("dom", bytes, [&] {
        std::ifstream in(path, std::ios::binary);
        std::string line;
        std::uint64_t n = 0;
        while (std::getline(in, line)) n += nlohmann::json::parse(line)["block_details"].size();
        return n;
    });
    const double sax = measure("sax-noop", bytes, [&] {
        std::ifstream in(path, std::ios::binary);
        std::string line;
        std::uint64_t n = 0;
        NoopSax handler;
        while (std::getline(in, line)) n += nlohmann::json::sax_parse(line, &handler);
        return n;
    });
    std::uint64_t good = 0;
    std::uint64_t problems = 0;
    const auto read_all = [&](bool two_threads) {
        sp::JsonlReader in(path.string());
        if (two_threads) in.parse_on_two_threads();
        sp::TelemetryRecord rec;
        std::uint64_t n = 0;
        good = 0;
        while (in.next(rec)) {
            n += std::get<sp::UpdateRecord>(rec).block_details.size();
            ++good;
        }
        problems += in.problem_count();
        return n;
    };
    const double reader = best_mbps("reader", bytes, [&] { return read_all(false); });
    const std::uint64_t good_one_thread = good;
    const double reader2 = best_mbps("reader-2t", bytes, [&] { return read_all(true); });

    print_table({raw, dom, sax, reader, reader2});
    std::printf("kept %llu (1 thread) and %llu (2 threads) of %lld records, %llu problems\n",
                static_cast<unsigned long long>(good_one_thread), static_cast<unsigned long long>(good),
                static_cast<long long>(records), static_cast<unsigned long long>(problems));

    if (!keep) fs::remove(path);
    const bool all = good_one_thread == std::uint64_t(records) && good == std::uint64_t(records);
    return all && problems == 0 ? 0 : 1;
}
