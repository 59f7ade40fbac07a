// Ground truth for the SNR estimators, and the rank correlation the validation reports.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "sp/snr.h"

namespace sp {
namespace {

// Average ranks (1-based), ties share the mean of the ranks they span. +inf sorts last.
std::vector<double> average_ranks(const std::vector<double>& v) {
    std::vector<std::size_t> order(v.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
    std::vector<double> ranks(v.size());
    for (std::size_t i = 0; i < order.size();) {
        std::size_t j = i;
        while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
        const double rank = 0.5 * static_cast<double>(i + j) + 1.0;
        for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
        i = j + 1;
    }
    return ranks;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
    const double n = static_cast<double>(a.size());
    const double mean_a = std::accumulate(a.begin(), a.end(), 0.0) / n;
    const double mean_b = std::accumulate(b.begin(), b.end(), 0.0) / n;
    double cov = 0, var_a = 0, var_b = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        cov += (a[i] - mean_a) * (b[i] - mean_b);
        var_a += (a[i] - mean_a) * (a[i] - mean_a);
        var_b += (b[i] - mean_b) * (b[i] - mean_b);
    }
    if (var_a == 0.0 || var_b == 0.0) return std::numeric_limits<double>::quiet_NaN();
    return cov / std::sqrt(var_a * var_b);
}

}  // namespace

double measured_snr_db(Precision p, const float* x, std::size_t rows, std::size_t cols,
                       std::size_t int4_group) {
    const std::size_t n = rows * cols;
    std::vector<float> back(n);
    roundtrip(p, x, rows, cols, back.data(), int4_group);
    double signal = 0, error = 0;
    std::size_t finite = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (!std::isfinite(x[i])) continue;
        const double d = double(x[i]) - double(back[i]);
        signal += double(x[i]) * double(x[i]);
        error += d * d;
        ++finite;
    }
    if (finite == 0) return std::numeric_limits<double>::quiet_NaN();
    if (error == 0.0) return std::numeric_limits<double>::infinity();
    return 10.0 * std::log10(signal / error);
}

namespace {

// A dot product accumulated in double on four independent lanes: the additions of one lane do not
// wait for each other's, which is most of what a long double accumulation costs.
double dot(const float* a, const float* b, std::size_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += double(a[i]) * double(b[i]);
        s1 += double(a[i + 1]) * double(b[i + 1]);
        s2 += double(a[i + 2]) * double(b[i + 2]);
        s3 += double(a[i + 3]) * double(b[i + 3]);
    }
    for (; i < n; ++i) s0 += double(a[i]) * double(b[i]);
    return (s0 + s1) + (s2 + s3);
}

}  // namespace

std::vector<double> output_snr_db(const std::vector<Precision>& formats, const float* w, std::size_t out,
                                  std::size_t in, const float* x, std::size_t tokens,
                                  std::size_t int4_group) {
    // The unquantized output once, for every format.
    std::vector<double> y(tokens * out);
    double signal = 0;
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t o = 0; o < out; ++o) {
            y[t * out + o] = dot(w + o * in, x + t * in, in);
            signal += y[t * out + o] * y[t * out + o];
        }
    std::vector<double> snr;
    snr.reserve(formats.size());
    std::vector<float> wq(out * in), xq(tokens * in);
    for (Precision p : formats) {
        roundtrip(p, w, out, in, wq.data(), int4_group);
        roundtrip(p, x, tokens, in, xq.data(), int4_group);
        double error = 0;
        for (std::size_t t = 0; t < tokens; ++t)
            for (std::size_t o = 0; o < out; ++o) {
                const double d = y[t * out + o] - dot(wq.data() + o * in, xq.data() + t * in, in);
                error += d * d;
            }
        if (!(signal > 0.0) || !std::isfinite(signal) || !std::isfinite(error))
            snr.push_back(std::numeric_limits<double>::quiet_NaN());
        else if (error == 0.0)
            snr.push_back(std::numeric_limits<double>::infinity());
        else
            snr.push_back(10.0 * std::log10(signal / error));
    }
    return snr;
}

double output_snr_db(Precision p, const float* w, std::size_t out, std::size_t in, const float* x,
                     std::size_t tokens, std::size_t int4_group) {
    return output_snr_db(std::vector<Precision>{p}, w, out, in, x, tokens, int4_group).front();
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) throw std::invalid_argument("spearman: sizes differ");
    const auto has_nan = [](const std::vector<double>& v) {
        return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
    };
    if (a.size() < 2 || has_nan(a) || has_nan(b)) return std::numeric_limits<double>::quiet_NaN();
    return pearson(average_ranks(a), average_ranks(b));
}

}  // namespace sp
