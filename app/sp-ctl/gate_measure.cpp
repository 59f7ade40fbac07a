// Timing for `sp-ctl gate` (gate_measure.h).
#include "gate_measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>

#include "gate_paths.h"

namespace sp::ctl {
namespace {

// A sample shorter than this is dominated by the clock and the loop: small sizes repeat the trip
// inside one sample until it lasts at least this long, and report the time per trip.
constexpr double kMinSampleSeconds = 1e-3;
constexpr std::uint64_t kMaxTripsPerSample = 1u << 20;

using Clock = std::chrono::steady_clock;

double seconds_for(TransferPath& path, const float* master, float* compute, std::uint64_t trips) {
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < trips; ++i) path.run(master, compute);
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// A path with its trips per sample and the samples taken so far.
struct Timed {
    std::unique_ptr<TransferPath> path;
    std::uint64_t trips = 1;
    std::vector<double> samples;  // seconds per trip
};

// Two warm-up trips (the first faults the buffers in and sizes the link's buffer), then the number of
// trips that makes a sample last kMinSampleSeconds.
std::uint64_t calibrate(TransferPath& path, const float* master, float* compute) {
    path.run(master, compute);
    const double once = seconds_for(path, master, compute, 1);
    if (!(once > 0.0)) return kMaxTripsPerSample;
    return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::ceil(kMinSampleSeconds / once)), 1,
                                     kMaxTripsPerSample);
}

}  // namespace

std::vector<sp::GateMeasurement> medians_against_bf16(sp::LayerKind kind, std::uint64_t rows,
                                                      std::uint64_t cols, const GateSweep& sweep,
                                                      std::vector<std::vector<double>> samples) {
    for (std::vector<double>& v : samples) std::sort(v.begin(), v.end());
    const auto median = [](const std::vector<double>& v) {
        const std::size_t n = v.size();
        return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    };
    std::vector<sp::GateMeasurement> out;
    out.reserve(samples.size());
    for (std::size_t i = 1; i < samples.size(); ++i)
        out.push_back({kind, rows, cols, sweep.formats[i - 1], median(samples[i]), median(samples[0])});
    return out;
}

std::vector<float> master_weights(std::size_t n) {
    std::vector<float> w(n);
    std::uint64_t s = 0x9E3779B97F4A7C15ull;
    for (float& x : w) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float u = static_cast<float>(s >> 40) / static_cast<float>(1u << 24);  // [0, 1)
        x = (2.0f * u - 1.0f) * u * u;
    }
    return w;
}

SizePlan plan_sizes(const std::vector<sp::TensorShape>& shapes, const GateSweep& sweep) {
    SizePlan plan;
    for (const sp::TensorShape& s : shapes) {
        const sp::LayerKind kind = sp::kind_of(s);
        auto& rows = plan[{kind, s.cols}];
        if (kind == sp::LayerKind::vector) {
            rows.insert(1);
            continue;
        }
        rows.insert(s.rows);
        for (std::uint64_t r = 1; r <= sweep.max_rows; r *= 2) {
            if (r >= sweep.min_rows) rows.insert(r);
            if (r > sweep.max_rows / 2) break;  // no overflow for a huge --max-rows
        }
    }
    return plan;
}

std::vector<sp::GateMeasurement> measure_size(sp::LayerKind kind, std::uint64_t rows, std::uint64_t cols,
                                              const GateSweep& sweep) {
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    const std::vector<float> master = master_weights(n);
    std::vector<float> compute(n);

    // Index 0 is BF16; then the formats in the order given.
    std::vector<Timed> paths;
    paths.push_back({make_cpu_path(sp::Precision::bf16, rows, cols, sweep.int4_group), 1, {}});
    for (sp::Precision f : sweep.formats)
        paths.push_back({make_cpu_path(f, rows, cols, sweep.int4_group), 1, {}});
    for (Timed& t : paths) t.trips = calibrate(*t.path, master.data(), compute.data());

    for (int round = 0; round < sweep.repeats; ++round) {
        for (std::size_t k = 0; k < paths.size(); ++k) {
            Timed& t = paths[(k + static_cast<std::size_t>(round)) % paths.size()];
            const double s = seconds_for(*t.path, master.data(), compute.data(), t.trips);
            t.samples.push_back(s / static_cast<double>(t.trips));
        }
    }

    std::vector<std::vector<double>> samples;
    samples.reserve(paths.size());
    for (Timed& t : paths) samples.push_back(std::move(t.samples));
    return medians_against_bf16(kind, rows, cols, sweep, std::move(samples));
}

}  // namespace sp::ctl
