#pragma once
// The SNR estimator (seed 004, "precision speculation"): predict how much a tensor loses in a low
// format from a few small random samples plus one cheap exact pass, without quantizing it, and the
// ground truth it is validated against (core/SNR.md has the validation and the thresholds).
//
// ---------------------------------------------------------------------------------------------
// Bulk estimate (seed 004, section 2.1). The tensor's bulk is modelled as N(mu, sigma). K
// independent samples, each of m = min(n, max(kMinSampleElements, ceil(rate * n))) elements drawn
// uniformly WITH replacement; the sample of least variance is kept (a sample that contains an
// outlier has a much larger variance, so the least-variance one is the most likely outlier-free).
// When m == n every element is used once instead (small tensors are measured, not sampled).
// Non-finite sampled values are skipped. absmax is exact: max |x| over all finite x.
//
// ---------------------------------------------------------------------------------------------
// SnrEstimator::zeroing (seed 004, section 2.2), integer formats (INT8 per row, INT4 per group).
// Step Delta = M / q_max with q_max = 127 or 7: the step of core's quantizer (the seed writes
// 2M / (2^b - 1), i.e. 2M/255 and 2M/15; ours is 2M/254 and 2M/14 because -128/-8 are never used).
// M is the mean over the scaling units (rows for INT8, groups for INT4) of each unit's exact
// absmax: the quantizer scales per unit, so the seed's tensor-wide absmax (kept as
// SnrEstimator::zeroing_tensor_absmax) overstates Delta in every unit that holds no outlier.
// A bulk value is zeroed when |x| <= Delta / 2:
//   P0 = Phi((Delta/2 - mu) / sigma) - Phi((-Delta/2 - mu) / sigma)   (= erf(Delta / (2 sqrt2 sigma)) at mu =
//   0)
// The seed reads P0 as the relative error amplitude of a dot product with that operand:
//   single tensor SNR = -20 log10(P0);  weight/input pair SNR = -20 log10(P1 + P2 - P1 P2).
// sigma == 0 (constant bulk): P0 = 1 if |mu| <= Delta/2 else 0. M == 0 (nothing finite and
// non-zero): nothing is lost, +inf.
//
// FP8 analogue (our derivation; the seed leaves floating point out). Per row the absmax M is
// scaled onto the format's largest finite value F (448 or 57344): s = M / F, with M again the mean
// row absmax. Two losses, both as a relative error amplitude like P0:
//   1. Underflow: a bulk value whose scaled magnitude is below the smallest normal 2^e_min
//      (2^-6 for E4M3, 2^-14 for E5M2) lands in the subnormal range, whose fixed spacing
//      2^(e_min - m) leaves it few or no significant bits; counted as lost entirely, as the seed
//      counts a zeroed value (an upper bound):
//        P_sub = Phi((t - mu) / sigma) - Phi((-t - mu) / sigma),  t = s * 2^e_min.
//   2. Rounding: a normal value x in [2^e, 2^(e+1)) is rounded with spacing q = 2^(e - m)
//      (m = 3 or 2 mantissa bits), error uniform in [-q/2, q/2] (power q^2 / 12). With the mantissa
//      uniform in [1, 2) the mean of x^2 over the binade is (7/3) 4^e, so the relative error power
//      is 4^-m / 28, independent of the binade and of the scale:
//        eps_m = 2^-m / sqrt(28)   (E4M3: 0.0236, 32.5 dB; E5M2: 0.0472, 26.5 dB; BF16, m = 7: 56.6 dB)
//   combined as disjoint shares of the bulk: rho = P_sub + (1 - P_sub) eps_m, SNR = -20 log10(rho),
//   and for a pair rho1 + rho2 - rho1 rho2 like the seed's P1 + P2 - P1 P2.
// Assumptions: Gaussian bulk; Delta (resp. the FP8 quantum) small against the spread of values
// within a binade; errors of different elements independent. BF16 uses eps_7 alone (no scaling,
// float's exponent range: no underflow in practice).
//
// ---------------------------------------------------------------------------------------------
// SnrEstimator::sample (ours). The exact pass that finds the absmax also gives, at no extra cost,
// every row's and every INT4 group's absmax and the exact signal power mean(x^2). The pooled K
// samples are then really quantized with core's reference (each sampled value with the scale of
// its own row or group, bit for bit what roundtrip() gives it) and
//   SNR = 10 log10(exact mean(x^2) / sampled mean((x - Q(x))^2)).
// The error of an integer format is bounded by half a step, so its mean is estimated with a small
// relative variance even for heavy-tailed data, while the heavy-tailed signal power is exact. For
// a pair the relative error powers r = 10^(-SNR/10) of independent errors in a dot product add:
// r_pair = r1 + r2 + r1 r2 (E[(sum e_i x_i)^2] = n E[e^2] E[x^2] for independent zero-mean terms),
// SNR_pair = -10 log10(r_pair).
// ---------------------------------------------------------------------------------------------
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sp/precision.h"
#include "sp/quantize.h"

namespace sp {

// K, gamma and the seed of the sampling. samples >= 1 and 0 < rate <= 1, else std::invalid_argument.
struct SamplingConfig {
    int samples = 5;
    double rate = 0.01;
    std::uint64_t seed = 0;
};

// The least number of elements one sample draws (all of them when the tensor is smaller), so that
// small tensors still get a usable estimate of sigma (relative standard error ~ 1/sqrt(2*256) = 4%).
inline constexpr std::size_t kMinSampleElements = 256;

struct BulkEstimate {
    double mean = 0;
    double sigma = 0;   // population standard deviation of the kept sample
    double absmax = 0;  // exact, over all finite values
    std::uint64_t numel = 0;
    std::size_t sample_size = 0;  // finite values in the kept sample
};

// Deterministic for (x, n, cfg, stream): `stream` distinguishes tensors (e.g. block id * 1000 +
// tensor index) so that samples of different tensors are independent. The generator is splitmix64
// (self-contained: the same numbers on every standard library); index = next() % n (bias < n/2^64).
BulkEstimate estimate_bulk(const float* x, std::size_t n, const SamplingConfig& cfg, std::uint64_t stream);

// What the estimators know about one row-major rows x cols tensor (a linear layer's weight, or its
// input with one row per token): the bulk, the exact scaling-unit absmaxes and signal power (one
// pass over the tensor), and the pooled samples for SnrEstimator::sample.
struct TensorProfile {
    BulkEstimate bulk;
    std::size_t rows = 1, cols = 0;
    std::size_t int4_group = kDefaultInt4GroupSize;
    double mean_row_absmax = 0;    // mean over rows of each row's finite absmax (INT8 and FP8 scale)
    double mean_group_absmax = 0;  // mean over INT4 groups of each group's finite absmax
    double signal_power = 0;       // mean of x^2 over the finite elements, exact
    std::uint64_t finite_count = 0;
    // All K samples pooled (finite values only), each with the absmax of its row and of its group.
    std::vector<float> sample;
    std::vector<float> sample_row_absmax;
    std::vector<float> sample_group_absmax;
};

// int4_group >= 1, else std::invalid_argument. The bulk is estimate_bulk(x, rows*cols, cfg, stream).
TensorProfile profile_tensor(const float* x, std::size_t rows, std::size_t cols, const SamplingConfig& cfg,
                             std::uint64_t stream, std::size_t int4_group = kDefaultInt4GroupSize);

// Config key values: "zeroing" (seed 004 with scaling-unit absmax; the default), "sample", and
// "zeroing_tensor_absmax" (seed 004 to the letter: the tensor's absmax sets Delta).
enum class SnrEstimator : std::uint8_t { zeroing, sample, zeroing_tensor_absmax };
std::string_view to_string(SnrEstimator e);
std::optional<SnrEstimator> parse_snr_estimator(std::string_view text);

// Estimated SNR in dB of quantizing the tensor in `p` (bf16 included: its relative rounding
// error); +inf when nothing is lost.
double estimated_snr_db(Precision p, const TensorProfile& t, SnrEstimator e = SnrEstimator::zeroing);
// For a weight/input pair: the seed's combination of the two zeroing probabilities (and the FP8
// analogue), or for SnrEstimator::sample the sum of relative error powers.
double estimated_pair_snr_db(Precision p, const TensorProfile& weight, const TensorProfile& input,
                             SnrEstimator e = SnrEstimator::zeroing);

// Ground truth: roundtrip(p, x, ...) with core's reference, then 10 log10(sum x^2 / sum (x - x')^2)
// over the finite elements of x, accumulated in double. +inf when the error power is 0 (an
// all-zero tensor included); NaN when nothing is finite.
double measured_snr_db(Precision p, const float* x, std::size_t rows, std::size_t cols,
                       std::size_t int4_group = kDefaultInt4GroupSize);

// The SNR of a linear layer's output in `p`: y = W x for each of the `tokens` rows of x (row-major
// [tokens x in]; W row-major [out x in]) against y' = roundtrip(W) roundtrip(x), both operands
// materialized in `p` by core's reference (x per token row, as activations are scaled), summed in
// double: 10 log10(sum y^2 / sum (y - y')^2). +inf when nothing is lost, NaN when y is all zero or
// not finite. Unlike per-operand powers it sees outlier features: a few large input channels that
// carry little of the output but set every token's scale, or the small weight columns they meet.
double output_snr_db(Precision p, const float* w, std::size_t out, std::size_t in, const float* x,
                     std::size_t tokens, std::size_t int4_group = kDefaultInt4GroupSize);
// The same for several formats at once (the unquantized output is computed once): one SNR per
// entry of `formats`, in their order. The dot products are summed in double on four lanes.
std::vector<double> output_snr_db(const std::vector<Precision>& formats, const float* w, std::size_t out,
                                  std::size_t in, const float* x, std::size_t tokens,
                                  std::size_t int4_group = kDefaultInt4GroupSize);

// A linear layer's output error per format, on the same operands as output_snr_db: y = W x and, per
// entry of `formats`, y_f - y with W materialized in the format and, when `quantize_inputs` (the
// "compute" scope), x as well; without it (the "weights" scope) x is taken as it is.
struct OutputErrors {
    double signal = 0;                       // sum of y^2
    std::vector<std::vector<double>> error;  // per format: [tokens x out], token-major
};
OutputErrors output_errors(const std::vector<Precision>& formats, const float* w, std::size_t out,
                           std::size_t in, const float* x, std::size_t tokens, std::size_t int4_group,
                           bool quantize_inputs);
// 10 log10(signal / error power) per format, as output_snr_db.
std::vector<double> output_snr_db(const OutputErrors& errors);
// The same from the two powers (sum y^2, sum (y_f - y)^2), wherever they were summed (the agent's
// device path reduces them where the operands live): NaN when the signal is not positive and
// finite or the error power is not finite, +inf when the error power is 0.
double output_snr_db_of_powers(double signal, double error_power);

// `count` distinct rows of a row-major [rows x cols] tensor (all of them when rows <= count), chosen
// uniformly with splitmix64 seeded by (seed, stream), in their original order, copied out.
std::vector<float> sample_rows(const float* x, std::size_t rows, std::size_t cols, std::size_t count,
                               std::uint64_t seed, std::uint64_t stream);
// The indices sample_rows takes, ascending (so a caller can gather the rows where they are, on a
// device, and copy only those).
std::vector<std::size_t> sample_row_indices(std::size_t rows, std::size_t count, std::uint64_t seed,
                                            std::uint64_t stream);

// Spearman's rank correlation: Pearson correlation of the ranks, ties get their average rank
// (+inf ranks above every finite value, infinities tie with each other). NaN when fewer than two
// pairs, when either side has no spread, or when a value is NaN. Sizes differ: std::invalid_argument.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace sp
