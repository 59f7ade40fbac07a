// The SNR estimators; the derivations are in sp/snr.h.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sp/snr.h"

namespace sp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// What the estimators need to know about a format's grid.
struct FloatGrid {
    int mantissa_bits;
    int min_normal_exp;
    double max_finite;
};

FloatGrid float_grid(Precision p) {
    switch (p) {
        case Precision::fp8_e4m3:
            return {3, -6, kFp8E4M3Max};
        case Precision::fp8_e5m2:
            return {2, -14, kFp8E5M2Max};
        case Precision::bf16:
            return {7, -126, 3.3895313892515355e38};
        default:
            throw std::invalid_argument("float_grid: not a floating point format");
    }
}

// Relative RMS rounding error of a normal value with m mantissa bits: 2^-m / sqrt(28).
double rounding_amplitude(int mantissa_bits) {
    return std::ldexp(1.0, -mantissa_bits) / std::sqrt(28.0);
}

double normal_cdf(double z) {
    return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

// P(|x| <= half_width) for x ~ N(mu, sigma); a point mass at mu when sigma is 0.
double band_probability(double half_width, double mu, double sigma) {
    if (!(sigma > 0.0)) return std::fabs(mu) <= half_width ? 1.0 : 0.0;
    return normal_cdf((half_width - mu) / sigma) - normal_cdf((-half_width - mu) / sigma);
}

double amplitude_to_db(double rho) {
    return rho > 0.0 ? -20.0 * std::log10(rho) : kInf;
}

// The seed's relative error amplitude (P0 for integers, rho for the floating point formats).
double zeroing_amplitude(Precision p, const TensorProfile& t, bool tensor_absmax) {
    const BulkEstimate& b = t.bulk;
    if (p == Precision::bf16) return b.absmax > 0.0 ? rounding_amplitude(float_grid(p).mantissa_bits) : 0.0;
    if (is_int(p)) {
        const double unit_absmax = p == Precision::int8 ? t.mean_row_absmax : t.mean_group_absmax;
        const double absmax = tensor_absmax ? b.absmax : unit_absmax;
        if (!(absmax > 0.0)) return 0.0;
        const double step = absmax / (p == Precision::int8 ? kInt8Max : kInt4Max);
        return band_probability(0.5 * step, b.mean, b.sigma);
    }
    const FloatGrid grid = float_grid(p);
    const double absmax = tensor_absmax ? b.absmax : t.mean_row_absmax;
    if (!(absmax > 0.0)) return 0.0;
    const double smallest_normal = absmax / grid.max_finite * std::ldexp(1.0, grid.min_normal_exp);
    const double underflow = band_probability(smallest_normal, b.mean, b.sigma);
    return underflow + (1.0 - underflow) * rounding_amplitude(grid.mantissa_bits);
}

// Quantizes every pooled sample value with its own unit's scale, exactly as roundtrip() does: each
// value becomes a two-element row {x, unit absmax}, whose absmax (and so whose scale) is the unit's.
double sampled_error_power(Precision p, const TensorProfile& t) {
    const std::size_t m = t.sample.size();
    std::vector<float> rows(2 * m), back(2 * m);
    const std::vector<float>& unit_absmax =
        p == Precision::int4 ? t.sample_group_absmax : t.sample_row_absmax;
    for (std::size_t j = 0; j < m; ++j) {
        rows[2 * j] = t.sample[j];
        rows[2 * j + 1] = unit_absmax[j];
    }
    roundtrip(p, rows.data(), m, 2, back.data(), 2);
    double error = 0;
    for (std::size_t j = 0; j < m; ++j) {
        const double d = double(t.sample[j]) - double(back[2 * j]);
        error += d * d;
    }
    return error / static_cast<double>(m);
}

double sample_snr_db(Precision p, const TensorProfile& t) {
    if (t.finite_count == 0 || t.sample.empty()) return std::numeric_limits<double>::quiet_NaN();
    const double error = sampled_error_power(p, t);
    if (error == 0.0) return kInf;
    return 10.0 * std::log10(t.signal_power / error);
}

}  // namespace

std::string_view to_string(SnrEstimator e) {
    switch (e) {
        case SnrEstimator::zeroing:
            return "zeroing";
        case SnrEstimator::sample:
            return "sample";
        case SnrEstimator::zeroing_tensor_absmax:
            return "zeroing_tensor_absmax";
    }
    return "zeroing";
}

std::optional<SnrEstimator> parse_snr_estimator(std::string_view text) {
    for (SnrEstimator e : {SnrEstimator::zeroing, SnrEstimator::sample, SnrEstimator::zeroing_tensor_absmax})
        if (to_string(e) == text) return e;
    return std::nullopt;
}

double estimated_snr_db(Precision p, const TensorProfile& t, SnrEstimator e) {
    if (e == SnrEstimator::sample) return sample_snr_db(p, t);
    return amplitude_to_db(zeroing_amplitude(p, t, e == SnrEstimator::zeroing_tensor_absmax));
}

double estimated_pair_snr_db(Precision p, const TensorProfile& weight, const TensorProfile& input,
                             SnrEstimator e) {
    if (e == SnrEstimator::sample) {
        // Relative error powers of independent errors add in a dot product (sp/snr.h).
        const double rw = std::pow(10.0, -sample_snr_db(p, weight) / 10.0);
        const double rx = std::pow(10.0, -sample_snr_db(p, input) / 10.0);
        const double r = rw + rx + rw * rx;
        return r > 0.0 ? -10.0 * std::log10(r) : (std::isnan(r) ? r : kInf);
    }
    const bool tensor_absmax = e == SnrEstimator::zeroing_tensor_absmax;
    const double pw = zeroing_amplitude(p, weight, tensor_absmax);
    const double px = zeroing_amplitude(p, input, tensor_absmax);
    return amplitude_to_db(pw + px - pw * px);
}

}  // namespace sp
