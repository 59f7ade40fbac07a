// Validation of the SNR estimators (sp/snr.h) against the SNR measured by really quantizing.
//
// Synthetic, seeded tensors (five distributions x three shapes x three scales x two seeds) are
// profiled once; for every low format each estimator's SNR is compared with measured_snr_db.
// Weight/input pairs are compared with the SNR of the real product Y = X W^T, computed in double
// from the quantized operands. Prints per format and estimator the Spearman rank correlation,
// the mean absolute error and mean signed error in dB, the estimate threshold that keeps every
// accepted case at or above the target (30 dB) measured, a per-distribution table, and its own run time.
// Usage: bench_snr_estimator [--rate R] [--samples K] [--target dB]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "sp/snr.h"

namespace {

double kTargetDb = 30.0;  // --target
constexpr sp::SnrEstimator kEstimators[] = {
    sp::SnrEstimator::zeroing, sp::SnrEstimator::zeroing_tensor_absmax, sp::SnrEstimator::sample};

// splitmix64 with Box-Muller normals: the same tensors on every platform.
class Rng {
  public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1p-53; }  // (0, 1)
    double normal() {
        return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
    }
    double student_t3() {
        double chi2 = 0;
        for (int k = 0; k < 3; ++k) {
            const double z = normal();
            chi2 += z * z;
        }
        return normal() / std::sqrt(chi2 / 3.0);
    }

  private:
    std::uint64_t state_;
};

enum class Dist { gaussian, outliers, nonzero_mean, student_t3, outlier_channels };
constexpr Dist kDists[] = {Dist::gaussian, Dist::outliers, Dist::nonzero_mean, Dist::student_t3,
                           Dist::outlier_channels};

const char* name(Dist d) {
    switch (d) {
        case Dist::gaussian:
            return "gaussian";
        case Dist::outliers:
            return "gauss+0.1%@50sd";
        case Dist::nonzero_mean:
            return "mean=2sd";
        case Dist::student_t3:
            return "student-t3";
        case Dist::outlier_channels:
            return "1%cols x30";
    }
    return "?";
}

// rows x cols, standard deviation `scale` for the bulk.
std::vector<float> make_tensor(Dist d, std::size_t rows, std::size_t cols, double scale, std::uint64_t seed) {
    Rng rng(seed);
    std::vector<float> x(rows * cols);
    for (std::size_t i = 0; i < x.size(); ++i) {
        double v = d == Dist::student_t3 ? rng.student_t3() : rng.normal();
        if (d == Dist::nonzero_mean) v += 2.0;
        if (d == Dist::outliers && rng.uniform() < 0.001) v = (rng.uniform() < 0.5 ? -50.0 : 50.0);
        if (d == Dist::outlier_channels && (i % cols) % 100 == 7) v *= 30.0;  // every 100th column
        x[i] = static_cast<float>(v * scale);
    }
    return x;
}

struct Case {
    Dist dist;
    double measured[sp::kPrecisionCount];
    double estimated[sp::kPrecisionCount][3];
};

std::size_t index(sp::Precision p) {
    return static_cast<std::size_t>(p);
}

// Y = X W^T in double; X is tokens x in, W is out x in.
std::vector<double> matmul_t(const std::vector<float>& x, const std::vector<float>& w, std::size_t tokens,
                             std::size_t in, std::size_t out) {
    std::vector<double> y(tokens * out);
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t o = 0; o < out; ++o) {
            double acc = 0;
            for (std::size_t k = 0; k < in; ++k) acc += double(x[t * in + k]) * double(w[o * in + k]);
            y[t * out + o] = acc;
        }
    return y;
}

double pair_measured_db(sp::Precision p, const std::vector<float>& x, const std::vector<float>& w,
                        std::size_t tokens, std::size_t in, std::size_t out) {
    std::vector<float> xq(x.size()), wq(w.size());
    sp::roundtrip(p, x.data(), tokens, in, xq.data());
    sp::roundtrip(p, w.data(), out, in, wq.data());
    const auto y = matmul_t(x, w, tokens, in, out);
    const auto yq = matmul_t(xq, wq, tokens, in, out);
    double signal = 0, error = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
        signal += y[i] * y[i];
        error += (y[i] - yq[i]) * (y[i] - yq[i]);
    }
    return error > 0 ? 10.0 * std::log10(signal / error) : std::numeric_limits<double>::infinity();
}

struct Summary {
    double spearman, mae, max_error, bias, threshold;
    std::size_t finite, accepted, good;
};

// Spearman and errors over the cases where both values are finite; the threshold is the largest
// estimate among cases measured below the target (every case estimated above it measured at least that).
Summary summarize(const std::vector<Case>& cases, sp::Precision p, std::size_t e) {
    std::vector<double> est, meas;
    Summary s{};
    s.threshold = -std::numeric_limits<double>::infinity();
    double abs_sum = 0, signed_sum = 0;
    for (const Case& c : cases) {
        const double m = c.measured[index(p)], v = c.estimated[index(p)][e];
        if (m < kTargetDb && v > s.threshold) s.threshold = v;
        if (!std::isfinite(m) || !std::isfinite(v)) continue;
        est.push_back(v);
        meas.push_back(m);
        abs_sum += std::fabs(v - m);
        s.max_error = std::max(s.max_error, std::fabs(v - m));
        signed_sum += v - m;
    }
    for (const Case& c : cases) {
        s.good += c.measured[index(p)] >= kTargetDb;
        s.accepted += c.measured[index(p)] >= kTargetDb && c.estimated[index(p)][e] > s.threshold;
    }
    s.finite = est.size();
    s.spearman = sp::spearman(est, meas);
    s.mae = abs_sum / static_cast<double>(s.finite);
    s.bias = signed_sum / static_cast<double>(s.finite);
    return s;
}

void print_summary(const char* title, const std::vector<Case>& cases) {
    std::printf("\n%s (%zu cases)\n", title, cases.size());
    std::printf(
        "| format | estimator | Spearman | MAE dB | max error dB | bias dB | threshold for >= %.0f dB | "
        "accepted / >= %.0f "
        "dB |\n",
        kTargetDb, kTargetDb);
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (sp::Precision p : sp::kLowFormatsCheapestFirst) {
        for (std::size_t e = 0; e < 3; ++e) {
            const Summary s = summarize(cases, p, e);
            std::printf("| %s | %s | %.3f | %.2f | %.2f | %+.2f | %.1f | %zu / %zu |\n",
                        std::string(sp::to_string(p)).c_str(),
                        std::string(sp::to_string(kEstimators[e])).c_str(), s.spearman, s.mae, s.max_error,
                        s.bias, s.threshold, s.accepted, s.good);
        }
    }
}

void print_per_distribution(const char* title, const std::vector<Case>& cases) {
    std::printf(
        "\n%s: mean over each distribution's cases, dB (measured | zeroing | zeroing_tensor_absmax | "
        "sample)\n",
        title);
    std::printf("| distribution |");
    for (sp::Precision p : sp::kLowFormatsCheapestFirst)
        std::printf(" %s |", std::string(sp::to_string(p)).c_str());
    std::printf("\n|---|---|---|---|---|\n");
    for (Dist d : kDists) {
        std::printf("| %s |", name(d));
        for (sp::Precision p : sp::kLowFormatsCheapestFirst) {
            double m = 0, est[3] = {0, 0, 0};
            int count = 0;
            for (const Case& c : cases) {
                if (c.dist != d) continue;
                m += c.measured[index(p)];
                for (std::size_t e = 0; e < 3; ++e) est[e] += c.estimated[index(p)][e];
                ++count;
            }
            std::printf(" %.1f &#124; %.1f &#124; %.1f &#124; %.1f |", m / count, est[0] / count,
                        est[1] / count, est[2] / count);
        }
        std::printf("\n");
    }
}

}  // namespace

int main(int argc, char** argv) {
    sp::SamplingConfig cfg;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--rate") == 0) cfg.rate = std::atof(argv[i + 1]);
        if (std::strcmp(argv[i], "--samples") == 0) cfg.samples = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--target") == 0) kTargetDb = std::atof(argv[i + 1]);
    }
    const auto start = std::chrono::steady_clock::now();
    const std::size_t shapes[][2] = {{128, 128}, {384, 128}, {512, 512}};
    const double scales[] = {1e-3, 1.0, 100.0};
    std::vector<Case> tensors;
    double profile_seconds = 0, measure_seconds = 0;
    std::uint64_t stream = 0;
    for (Dist d : kDists)
        for (const auto& shape : shapes)
            for (double scale : scales)
                for (std::uint64_t seed = 1; seed <= 2; ++seed) {
                    const auto x = make_tensor(d, shape[0], shape[1], scale, seed * 7919 + stream);
                    const auto t0 = std::chrono::steady_clock::now();
                    const auto profile = sp::profile_tensor(x.data(), shape[0], shape[1], cfg, stream++);
                    Case c{d, {}, {}};
                    for (sp::Precision p : sp::kAllPrecisions)
                        for (std::size_t e = 0; e < 3; ++e)
                            c.estimated[index(p)][e] = sp::estimated_snr_db(p, profile, kEstimators[e]);
                    const auto t1 = std::chrono::steady_clock::now();
                    for (sp::Precision p : sp::kAllPrecisions)
                        c.measured[index(p)] = sp::measured_snr_db(p, x.data(), shape[0], shape[1]);
                    const auto t2 = std::chrono::steady_clock::now();
                    profile_seconds += std::chrono::duration<double>(t1 - t0).count();
                    measure_seconds += std::chrono::duration<double>(t2 - t1).count();
                    tensors.push_back(c);
                }

    // Pairs: weights Gaussian or Student-t, inputs from every distribution, 128 tokens, 128 outputs.
    std::vector<Case> pairs;
    for (Dist wd : {Dist::gaussian, Dist::student_t3})
        for (Dist xd : kDists)
            for (std::size_t in : {std::size_t(128), std::size_t(512)})
                for (std::uint64_t seed = 1; seed <= 2; ++seed) {
                    const std::size_t tokens = 128, out = 128;
                    const auto w = make_tensor(wd, out, in, 0.02, seed * 31 + stream);
                    const auto x = make_tensor(xd, tokens, in, 1.0, seed * 37 + stream);
                    const auto pw = sp::profile_tensor(w.data(), out, in, cfg, stream++);
                    const auto px = sp::profile_tensor(x.data(), tokens, in, cfg, stream++);
                    Case c{xd, {}, {}};
                    for (sp::Precision p : sp::kAllPrecisions) {
                        c.measured[index(p)] = pair_measured_db(p, x, w, tokens, in, out);
                        for (std::size_t e = 0; e < 3; ++e)
                            c.estimated[index(p)][e] = sp::estimated_pair_snr_db(p, pw, px, kEstimators[e]);
                    }
                    pairs.push_back(c);
                }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::printf("SNR estimator validation: K = %d samples, rate %.4g, min %zu elements per sample\n",
                cfg.samples, cfg.rate, sp::kMinSampleElements);
    print_summary("Single tensors: estimated_snr_db vs measured_snr_db", tensors);
    print_per_distribution("Single tensors", tensors);
    print_summary("Weight/input pairs: estimated_pair_snr_db vs SNR of X W^T", pairs);
    print_per_distribution("Pairs (by input distribution)", pairs);
    std::printf(
        "\nBF16 (single tensors): measured mean %.1f dB, zeroing %.1f dB\n",
        [&] {
            double s = 0;
            for (const Case& c : tensors) s += c.measured[index(sp::Precision::bf16)];
            return s / static_cast<double>(tensors.size());
        }(),
        tensors.front().estimated[index(sp::Precision::bf16)][0]);
    std::printf(
        "\nrun time %.2f s (profiling + all estimates %.3f s, measuring every format %.3f s, pairs the "
        "rest)\n",
        total, profile_seconds, measure_seconds);
    return 0;
}
