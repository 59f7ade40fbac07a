// The SNR estimator's inputs: sampled bulk estimate (seed 004, section 2.1) and the tensor profile.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sp/snr.h"

namespace sp {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): tiny, passes BigCrush, identical on every platform.
class SplitMix64 {
  public:
    explicit SplitMix64(std::uint64_t state) : state_(state) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

  private:
    std::uint64_t state_;
};

// One generator per (seed, stream): the stream is mixed through the generator's own output
// function so that neighbouring stream ids start far apart.
SplitMix64 generator_for(std::uint64_t seed, std::uint64_t stream) {
    SplitMix64 mix(seed);
    return SplitMix64(mix.next() ^ SplitMix64(stream).next());
}

void check_config(const SamplingConfig& cfg) {
    if (cfg.samples < 1) throw std::invalid_argument("SamplingConfig: samples must be at least 1");
    if (!(cfg.rate > 0.0 && cfg.rate <= 1.0))
        throw std::invalid_argument("SamplingConfig: rate must be in (0, 1]");
}

std::size_t sample_elements(std::size_t n, double rate) {
    const auto by_rate = static_cast<std::size_t>(std::ceil(rate * static_cast<double>(n)));
    return std::min(n, std::max(kMinSampleElements, by_rate));
}

// The K samples as element indices; a single sample of every index when one sample would cover n.
std::vector<std::vector<std::size_t>> draw_samples(std::size_t n, const SamplingConfig& cfg,
                                                   std::uint64_t stream) {
    check_config(cfg);
    const std::size_t m = sample_elements(n, cfg.rate);
    if (m == n) {
        std::vector<std::size_t> all(n);
        for (std::size_t i = 0; i < n; ++i) all[i] = i;
        return {std::move(all)};
    }
    SplitMix64 rng = generator_for(cfg.seed, stream);
    std::vector<std::vector<std::size_t>> samples(static_cast<std::size_t>(cfg.samples));
    for (auto& s : samples) {
        s.resize(m);
        for (auto& index : s) index = static_cast<std::size_t>(rng.next() % n);
    }
    return samples;
}

struct Moments {
    double mean = 0, variance = 0;
    std::size_t count = 0;
};

// Two passes in double (the mean first), finite values only.
Moments sample_moments(const float* x, const std::vector<std::size_t>& indices) {
    Moments m;
    double sum = 0;
    for (std::size_t i : indices) {
        if (!std::isfinite(x[i])) continue;
        sum += x[i];
        ++m.count;
    }
    if (m.count == 0) return m;
    m.mean = sum / static_cast<double>(m.count);
    double squares = 0;
    for (std::size_t i : indices) {
        if (!std::isfinite(x[i])) continue;
        const double d = x[i] - m.mean;
        squares += d * d;
    }
    m.variance = squares / static_cast<double>(m.count);
    return m;
}

double finite_absmax(const float* x, std::size_t n) {
    float absmax = 0.0f;
    for (std::size_t i = 0; i < n; ++i)
        if (std::isfinite(x[i])) absmax = std::max(absmax, std::fabs(x[i]));
    return absmax;
}

// The bulk from drawn samples: the least-variance sample's moments, the exact absmax.
BulkEstimate bulk_from(const float* x, std::size_t n, const std::vector<std::vector<std::size_t>>& samples) {
    BulkEstimate bulk;
    bulk.numel = n;
    bulk.absmax = finite_absmax(x, n);
    double least_variance = std::numeric_limits<double>::infinity();
    for (const auto& s : samples) {
        const Moments m = sample_moments(x, s);
        if (m.count == 0 || m.variance >= least_variance) continue;
        least_variance = m.variance;
        bulk.mean = m.mean;
        bulk.sigma = std::sqrt(m.variance);
        bulk.sample_size = m.count;
    }
    return bulk;
}

}  // namespace

BulkEstimate estimate_bulk(const float* x, std::size_t n, const SamplingConfig& cfg, std::uint64_t stream) {
    return bulk_from(x, n, draw_samples(n, cfg, stream));
}

TensorProfile profile_tensor(const float* x, std::size_t rows, std::size_t cols, const SamplingConfig& cfg,
                             std::uint64_t stream, std::size_t int4_group) {
    if (int4_group == 0)
        throw std::invalid_argument("profile_tensor: the INT4 group size must be at least 1");
    const std::size_t n = rows * cols;
    TensorProfile t;
    t.rows = rows;
    t.cols = cols;
    t.int4_group = int4_group;
    const auto samples = draw_samples(n, cfg, stream);
    t.bulk = bulk_from(x, n, samples);

    // The exact pass: every scaling unit's absmax and the signal power.
    const std::size_t groups = int4_groups_per_row(cols, int4_group);
    std::vector<float> row_absmax(rows), group_absmax(rows * groups);
    double squares = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t g = 0; g < groups; ++g) {
            const std::size_t begin = r * cols + g * int4_group;
            const std::size_t width = std::min(int4_group, cols - g * int4_group);
            float absmax = 0.0f;
            for (std::size_t i = begin; i < begin + width; ++i) {
                if (!std::isfinite(x[i])) continue;
                absmax = std::max(absmax, std::fabs(x[i]));
                squares += double(x[i]) * double(x[i]);
                ++t.finite_count;
            }
            group_absmax[r * groups + g] = absmax;
            row_absmax[r] = std::max(row_absmax[r], absmax);
        }
    }
    double row_sum = 0, group_sum = 0;
    for (float a : row_absmax) row_sum += a;
    for (float a : group_absmax) group_sum += a;
    if (rows > 0) t.mean_row_absmax = row_sum / static_cast<double>(rows);
    if (!group_absmax.empty()) t.mean_group_absmax = group_sum / static_cast<double>(group_absmax.size());
    if (t.finite_count > 0) t.signal_power = squares / static_cast<double>(t.finite_count);

    for (const auto& s : samples) {
        for (std::size_t i : s) {
            if (!std::isfinite(x[i])) continue;
            const std::size_t r = i / cols, c = i % cols;
            t.sample.push_back(x[i]);
            t.sample_row_absmax.push_back(row_absmax[r]);
            t.sample_group_absmax.push_back(group_absmax[r * groups + c / int4_group]);
        }
    }
    return t;
}

std::vector<std::size_t> sample_row_indices(std::size_t rows, std::size_t count, std::uint64_t seed,
                                            std::uint64_t stream) {
    std::vector<std::size_t> out;
    out.reserve(std::min(rows, count));
    // Selection sampling (Knuth's algorithm S): each row is taken with probability
    // (still needed) / (still left), which yields exactly min(rows, count) distinct rows in order.
    SplitMix64 rng = generator_for(seed, stream);
    std::size_t needed = std::min(rows, count);
    for (std::size_t r = 0; r < rows && needed > 0; ++r) {
        const double u = double(rng.next() >> 11) * 0x1.0p-53;
        if (u * double(rows - r) < double(needed)) {
            out.push_back(r);
            --needed;
        }
    }
    return out;
}

std::vector<float> sample_rows(const float* x, std::size_t rows, std::size_t cols, std::size_t count,
                               std::uint64_t seed, std::uint64_t stream) {
    std::vector<float> out;
    out.reserve(std::min(rows, count) * cols);
    for (std::size_t r : sample_row_indices(rows, count, seed, stream))
        out.insert(out.end(), x + r * cols, x + (r + 1) * cols);
    return out;
}

}  // namespace sp
