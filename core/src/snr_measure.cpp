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

double output_snr_db(Precision p, const float* w, std::size_t out, std::size_t in, const float* x,
                     std::size_t tokens, std::size_t int4_group) {
    std::vector<float> wq(out * in), xq(tokens * in);
    roundtrip(p, w, out, in, wq.data(), int4_group);
    roundtrip(p, x, tokens, in, xq.data(), int4_group);
    double signal = 0, error = 0;
    for (std::size_t t = 0; t < tokens; ++t) {
        const float* xt = x + t * in;
        const float* qt = xq.data() + t * in;
        for (std::size_t o = 0; o < out; ++o) {
            const float* wo = w + o * in;
            const float* qo = wq.data() + o * in;
            double y = 0, yq = 0;
            for (std::size_t i = 0; i < in; ++i) {
                y += double(wo[i]) * double(xt[i]);
                yq += double(qo[i]) * double(qt[i]);
            }
            signal += y * y;
            error += (y - yq) * (y - yq);
        }
    }
    if (!(signal > 0.0) || !std::isfinite(signal) || !std::isfinite(error))
        return std::numeric_limits<double>::quiet_NaN();
    if (error == 0.0) return std::numeric_limits<double>::infinity();
    return 10.0 * std::log10(signal / error);
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
