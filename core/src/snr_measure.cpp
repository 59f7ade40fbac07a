// Ground truth for the SNR estimators, and the rank correlation the validation reports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "simd_clones.h"
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
// wait for each other's, which is most of what a long double accumulation costs. The lanes are one
// vector of four doubles (lane k sums the products of elements k, k + 4, ...; the tail goes to lane
// 0), so the additions and their order are fixed whatever the vector width. On x86-64 it is compiled
// twice, for AVX2 (one register) and for the baseline (two), and the loader picks one: both give the
// same bits, since a product of two floats is exact in double (a fused multiply-add rounds as the
// separate add does).
using DoubleLanes = double __attribute__((vector_size(32)));
using FloatLanes = float __attribute__((vector_size(16)));

SP_AVX2_AND_BASELINE double dot(const float* a, const float* b, std::size_t n) {
    DoubleLanes sum = {0, 0, 0, 0};
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        FloatLanes fa, fb;
        std::memcpy(&fa, a + i, sizeof fa);
        std::memcpy(&fb, b + i, sizeof fb);
        sum += __builtin_convertvector(fa, DoubleLanes) * __builtin_convertvector(fb, DoubleLanes);
    }
    double s0 = sum[0];
    for (; i < n; ++i) s0 += double(a[i]) * double(b[i]);
    return (s0 + sum[1]) + (sum[2] + sum[3]);
}

// dot() of four rows of `w` (row stride n) with `x`, each on its own lanes: the same bits as four
// calls, with four independent chains of additions instead of one.
SP_AVX2_AND_BASELINE void dot4(const float* w, const float* x, std::size_t n, double* out) {
    DoubleLanes s[4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        FloatLanes fx;
        std::memcpy(&fx, x + i, sizeof fx);
        const DoubleLanes xi = __builtin_convertvector(fx, DoubleLanes);
        for (std::size_t r = 0; r < 4; ++r) {
            FloatLanes fw;
            std::memcpy(&fw, w + r * n + i, sizeof fw);
            s[r] += __builtin_convertvector(fw, DoubleLanes) * xi;
        }
    }
    for (std::size_t r = 0; r < 4; ++r) {
        double s0 = s[r][0];
        for (std::size_t k = i; k < n; ++k) s0 += double(w[r * n + k]) * double(x[k]);
        out[r] = (s0 + s[r][1]) + (s[r][2] + s[r][3]);
    }
}

// dot4() for two vectors x0 and x1 at once: eight chains of additions, and each row's floats
// converted once for both. Every (row, vector) pair has its own lanes: the bits of dot().
SP_AVX2_AND_BASELINE void dot4x2(const float* w, const float* x0, const float* x1, std::size_t n,
                                 double* out0, double* out1) {
    DoubleLanes s0[4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    DoubleLanes s1[4] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
    std::size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        FloatLanes f0, f1;
        std::memcpy(&f0, x0 + i, sizeof f0);
        std::memcpy(&f1, x1 + i, sizeof f1);
        const DoubleLanes a = __builtin_convertvector(f0, DoubleLanes);
        const DoubleLanes b = __builtin_convertvector(f1, DoubleLanes);
        for (std::size_t r = 0; r < 4; ++r) {
            FloatLanes fw;
            std::memcpy(&fw, w + r * n + i, sizeof fw);
            const DoubleLanes wr = __builtin_convertvector(fw, DoubleLanes);
            s0[r] += wr * a;
            s1[r] += wr * b;
        }
    }
    for (std::size_t r = 0; r < 4; ++r) {
        double t0 = s0[r][0], t1 = s1[r][0];
        for (std::size_t k = i; k < n; ++k) {
            t0 += double(w[r * n + k]) * double(x0[k]);
            t1 += double(w[r * n + k]) * double(x1[k]);
        }
        out0[r] = (t0 + s0[r][1]) + (s0[r][2] + s0[r][3]);
        out1[r] = (t1 + s1[r][1]) + (s1[r][2] + s1[r][3]);
    }
}

// y[o] = dot(w row o, x) for every output row o of an out x n matrix.
void dots(const float* w, std::size_t out, const float* x, std::size_t n, double* y) {
    std::size_t o = 0;
    for (; o + 4 <= out; o += 4) dot4(w + o * n, x, n, y + o);
    for (; o < out; ++o) y[o] = dot(w + o * n, x, n);
}

// y[t * out + o] = dot(w row o, x row t) for every token t of x [tokens x n], two tokens at a time.
void token_dots(const float* w, std::size_t out, const float* x, std::size_t tokens, std::size_t n,
                double* y) {
    std::size_t t = 0;
    for (; t + 2 <= tokens; t += 2) {
        const float* x0 = x + t * n;
        const float* x1 = x0 + n;
        double* y0 = y + t * out;
        double* y1 = y0 + out;
        std::size_t o = 0;
        for (; o + 4 <= out; o += 4) dot4x2(w + o * n, x0, x1, n, y0 + o, y1 + o);
        for (; o < out; ++o) {
            y0[o] = dot(w + o * n, x0, n);
            y1[o] = dot(w + o * n, x1, n);
        }
    }
    if (t < tokens) dots(w, out, x + t * n, n, y + t * out);
}

}  // namespace

OutputErrors output_errors(const std::vector<Precision>& formats, const float* w, std::size_t out,
                           std::size_t in, const float* x, std::size_t tokens, std::size_t int4_group,
                           bool quantize_inputs) {
    OutputErrors e;
    // The unquantized output once, for every format.
    std::vector<double> y(tokens * out);
    token_dots(w, out, x, tokens, in, y.data());
    for (double v : y) e.signal += v * v;
    std::vector<float> wq(out * in), xq(quantize_inputs ? tokens * in : 0);
    std::vector<double> yq(tokens * out);
    for (Precision p : formats) {
        roundtrip(p, w, out, in, wq.data(), int4_group);
        if (quantize_inputs) roundtrip(p, x, tokens, in, xq.data(), int4_group);
        token_dots(wq.data(), out, quantize_inputs ? xq.data() : x, tokens, in, yq.data());
        std::vector<double>& d = e.error.emplace_back(y.size());
        for (std::size_t i = 0; i < y.size(); ++i) d[i] = yq[i] - y[i];
    }
    return e;
}

double output_snr_db_of_powers(double signal, double error_power) {
    if (!(signal > 0.0) || !std::isfinite(signal) || !std::isfinite(error_power))
        return std::numeric_limits<double>::quiet_NaN();
    if (error_power == 0.0) return std::numeric_limits<double>::infinity();
    return 10.0 * std::log10(signal / error_power);
}

std::vector<double> output_snr_db(const OutputErrors& e) {
    std::vector<double> snr;
    snr.reserve(e.error.size());
    for (const std::vector<double>& d : e.error) {
        double error = 0;
        for (double v : d) error += v * v;
        snr.push_back(output_snr_db_of_powers(e.signal, error));
    }
    return snr;
}

std::vector<double> output_snr_db(const std::vector<Precision>& formats, const float* w, std::size_t out,
                                  std::size_t in, const float* x, std::size_t tokens,
                                  std::size_t int4_group) {
    return output_snr_db(output_errors(formats, w, out, in, x, tokens, int4_group, true));
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
