// The SNR estimator (seed 004): sampled bulk, zeroing probabilities, FP8 analogue, the sample
// estimator, the measured ground truth and Spearman's rank correlation.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sp/snr.h"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Box-Muller normals from splitmix64, so the tensors are the same everywhere.
class Normals {
  public:
    explicit Normals(std::uint64_t seed) : state_(seed) {}
    double next() {
        const double u1 = uniform(), u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }

  private:
    double uniform() {
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return (static_cast<double>((z ^ (z >> 31)) >> 11) + 0.5) * 0x1p-53;
    }
    std::uint64_t state_;
};

std::vector<float> gaussian(std::size_t n, double mean, double sigma, std::uint64_t seed) {
    Normals rng(seed);
    std::vector<float> x(n);
    for (float& v : x) v = static_cast<float>(mean + sigma * rng.next());
    return x;
}

// A profile written by hand: bulk N(mean, sigma) and the scaling-unit absmaxes given.
sp::TensorProfile profile_of(double mean, double sigma, double tensor_absmax, double unit_absmax) {
    sp::TensorProfile t;
    t.bulk.mean = mean;
    t.bulk.sigma = sigma;
    t.bulk.absmax = tensor_absmax;
    t.mean_row_absmax = unit_absmax;
    t.mean_group_absmax = unit_absmax;
    return t;
}

bool close(double a, double b, double tol) {
    return std::fabs(a - b) <= tol;
}

}  // namespace

class TestSnr : public QObject {
    Q_OBJECT

  private slots:
    // ---- zeroing estimator: closed forms -------------------------------------------------
    void zeroing_gaussian_matches_erf() {
        // INT8 step = 63.5 / 127 = 0.5: P0 = erf(0.25 / sqrt 2) = 0.19741265 -> 14.0925 dB.
        const auto t = profile_of(0.0, 1.0, 1000.0, 63.5);
        const double db = sp::estimated_snr_db(sp::Precision::int8, t);
        QVERIFY2(close(db, 14.0925004, 1e-6), qPrintable(QString::number(db, 'g', 12)));
        QCOMPARE(db, -20.0 * std::log10(std::erf(0.25 / std::sqrt(2.0))));
        // INT4: the group absmax 3.5 gives the same step 3.5 / 7 = 0.5.
        QVERIFY(
            close(sp::estimated_snr_db(sp::Precision::int4, profile_of(0, 1, 1000, 3.5)), 14.0925004, 1e-6));
    }

    void zeroing_non_zero_mean() {
        // mu = 1, sigma = 1, step 1: P0 = Phi(-0.5) - Phi(-1.5) = 0.24173034 -> 12.3334 dB.
        const auto t = profile_of(1.0, 1.0, 1000.0, 127.0);
        QVERIFY(close(sp::estimated_snr_db(sp::Precision::int8, t), 12.3333768, 1e-6));
        // The sign of the mean does not matter.
        QVERIFY(close(sp::estimated_snr_db(sp::Precision::int8, profile_of(-1.0, 1.0, 1000.0, 127.0)),
                      12.3333768, 1e-6));
    }

    void zeroing_tensor_absmax_is_the_seed_literal() {
        // The tensor absmax 63.5 sets the step, the unit absmax is ignored.
        const auto t = profile_of(0.0, 1.0, 63.5, 1.0);
        QVERIFY(close(sp::estimated_snr_db(sp::Precision::int8, t, sp::SnrEstimator::zeroing_tensor_absmax),
                      14.0925004, 1e-6));
        QVERIFY(sp::estimated_snr_db(sp::Precision::int8, t, sp::SnrEstimator::zeroing) > 40.0);
    }

    void zeroing_degenerate_bulks() {
        QCOMPARE(sp::estimated_snr_db(sp::Precision::int8, profile_of(0, 0, 0, 0)), kInf);  // all zero
        // Constant bulk: a point mass inside the zero band is all lost (0 dB), outside nothing.
        QCOMPARE(sp::estimated_snr_db(sp::Precision::int8, profile_of(0.1, 0.0, 127.0, 127.0)), 0.0);
        QCOMPARE(sp::estimated_snr_db(sp::Precision::int8, profile_of(5.0, 0.0, 127.0, 127.0)), kInf);
    }

    void fp8_analogue_closed_form() {
        // Row absmax 448 * 64 -> scale 64, smallest normal 2^-6 * 64 = 1 in the data's units:
        // P_sub = erf(1 / sqrt 2) = 0.68268949, rho = P_sub + (1 - P_sub) 2^-3 / sqrt 28 -> 3.22069 dB.
        const auto t = profile_of(0.0, 1.0, 1e9, 448.0 * 64.0);
        QVERIFY(close(sp::estimated_snr_db(sp::Precision::fp8_e4m3, t), 3.2206865, 1e-6));
        // Without underflow (a point mass at 1, far above 4 / 448 * 2^-6) only the rounding term is
        // left: 32.53 dB (E4M3), 26.51 dB (E5M2), 56.62 dB (BF16).
        const auto wide = profile_of(1.0, 0.0, 4.0, 4.0);
        QVERIFY(close(sp::estimated_snr_db(sp::Precision::fp8_e4m3, wide), 32.5333801, 1e-6));
        QVERIFY(close(sp::estimated_snr_db(sp::Precision::fp8_e5m2, wide), 26.5127801, 1e-6));
        QVERIFY(close(sp::estimated_snr_db(sp::Precision::bf16, wide), 56.6157797, 1e-6));
        QCOMPARE(sp::estimated_snr_db(sp::Precision::fp8_e4m3, profile_of(0, 0, 0, 0)), kInf);
    }

    void zeroing_pair_is_the_seeds_combination() {
        const auto weight = profile_of(0.0, 1.0, 1000.0, 63.5);  // P1 = 0.19741265
        const auto input = profile_of(1.0, 1.0, 1000.0, 127.0);  // P2 = 0.24173034
        const double p1 = 0.19741265136584743, p2 = 0.2417303374571288;
        const double db = sp::estimated_pair_snr_db(sp::Precision::int8, weight, input);
        QVERIFY(close(db, -20.0 * std::log10(p1 + p2 - p1 * p2), 1e-6));
        QVERIFY(db < sp::estimated_snr_db(sp::Precision::int8, weight));  // a pair never beats its operands
        QCOMPARE(
            sp::estimated_pair_snr_db(sp::Precision::int8, profile_of(0, 0, 0, 0), profile_of(0, 0, 0, 0)),
            kInf);
    }

    // ---- sampled bulk ------------------------------------------------------------------------
    void bulk_of_a_gaussian() {
        const auto x = gaussian(200000, 0.5, 2.0, 11);
        const auto b = sp::estimate_bulk(x.data(), x.size(), sp::SamplingConfig{}, 1);
        QCOMPARE(b.numel, std::uint64_t(200000));
        QCOMPARE(b.sample_size, std::size_t(2000));  // rate 0.01
        QVERIFY2(close(b.mean, 0.5, 0.2), qPrintable(QString::number(b.mean)));
        // Least of 5 variances is biased low, but only by a few percent at 2,000 elements.
        QVERIFY2(close(b.sigma, 2.0, 0.15), qPrintable(QString::number(b.sigma)));
        float absmax = 0;
        for (float v : x) absmax = std::max(absmax, std::fabs(v));
        QCOMPARE(b.absmax, double(absmax));
    }

    void least_variance_sample_rejects_planted_outliers() {
        // 10 outliers of 1000 in 100,000 N(0, 1) values: a 1,000-element sample holds one with
        // probability ~0.1 (and then sigma >= ~30); the least variance of 5 almost never does.
        auto x = gaussian(100000, 0.0, 1.0, 5);
        for (std::size_t i = 0; i < 10; ++i) x[i * 9973 + 17] = 1000.0f;
        int hit_with_one_sample = 0;
        for (std::uint64_t stream = 0; stream < 40; ++stream) {
            const auto one = sp::estimate_bulk(x.data(), x.size(), sp::SamplingConfig{1, 0.01, 3}, stream);
            hit_with_one_sample += one.sigma > 10.0;
            const auto five = sp::estimate_bulk(x.data(), x.size(), sp::SamplingConfig{5, 0.01, 3}, stream);
            QVERIFY2(five.sigma < 1.1, qPrintable(QString("stream %1 sigma %2").arg(stream).arg(five.sigma)));
            QCOMPARE(five.absmax, 1000.0);
        }
        QVERIFY2(hit_with_one_sample > 0,
                 "the planted outliers must be reachable, or the test proves nothing");
    }

    void sampling_is_deterministic_per_seed_and_stream() {
        const auto x = gaussian(50000, 0.0, 1.0, 9);
        const sp::SamplingConfig cfg{5, 0.01, 42};
        const auto a = sp::estimate_bulk(x.data(), x.size(), cfg, 7);
        const auto b = sp::estimate_bulk(x.data(), x.size(), cfg, 7);
        QCOMPARE(a.mean, b.mean);
        QCOMPARE(a.sigma, b.sigma);
        const auto other_stream = sp::estimate_bulk(x.data(), x.size(), cfg, 8);
        const auto other_seed = sp::estimate_bulk(x.data(), x.size(), sp::SamplingConfig{5, 0.01, 43}, 7);
        QVERIFY(other_stream.mean != a.mean);
        QVERIFY(other_seed.mean != a.mean);
        const auto pa = sp::profile_tensor(x.data(), 100, 500, cfg, 7);
        const auto pb = sp::profile_tensor(x.data(), 100, 500, cfg, 7);
        QCOMPARE(pa.sample, pb.sample);
        QCOMPARE(pa.bulk.sigma, a.sigma);  // the profile's bulk is estimate_bulk's
    }

    void small_tensors_use_every_element() {
        // n = 100 < 256: one pass over all of 1..100 -> mean 50.5, population sigma sqrt(9999/12).
        std::vector<float> x(100);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i + 1);
        const auto b = sp::estimate_bulk(x.data(), x.size(), sp::SamplingConfig{}, 0);
        QCOMPARE(b.sample_size, std::size_t(100));
        QVERIFY(close(b.mean, 50.5, 1e-12));
        QVERIFY(close(b.sigma, 28.8660700477, 1e-9));
        QCOMPARE(b.absmax, 100.0);
        // A 1,000-element tensor at rate 0.01 still samples the minimum of 256.
        std::vector<float> y(1000, 1.0f);
        QCOMPARE(sp::estimate_bulk(y.data(), y.size(), sp::SamplingConfig{}, 0).sample_size,
                 sp::kMinSampleElements);
    }

    void non_finite_values_are_skipped() {
        const std::vector<float> x = {1.0f, kNaN, 3.0f, std::numeric_limits<float>::infinity(), -5.0f};
        const auto b = sp::estimate_bulk(x.data(), x.size(), sp::SamplingConfig{}, 0);
        QCOMPARE(b.sample_size, std::size_t(3));
        QVERIFY(close(b.mean, -1.0 / 3.0, 1e-12));
        QCOMPARE(b.absmax, 5.0);
        const auto t = sp::profile_tensor(x.data(), 1, 5, sp::SamplingConfig{}, 0);
        QCOMPARE(t.finite_count, std::uint64_t(3));
        QVERIFY(close(t.signal_power, 35.0 / 3.0, 1e-12));
    }

    void invalid_configs_throw() {
        const std::vector<float> x(10, 1.0f);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::estimate_bulk(x.data(), 10, sp::SamplingConfig{0, 0.01, 0}, 0));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::estimate_bulk(x.data(), 10, sp::SamplingConfig{5, 0.0, 0}, 0));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::estimate_bulk(x.data(), 10, sp::SamplingConfig{5, 1.5, 0}, 0));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 sp::profile_tensor(x.data(), 2, 5, sp::SamplingConfig{}, 0, 0));
    }

    void profile_scaling_unit_absmax() {
        // 2 rows x 5 cols, groups of 2: row absmax {4, 8}, group absmax {2, 4, 1, 8, 6, 0}.
        const std::vector<float> x = {1, -2, 4, 3, 1, 0, -8, 6, 5, 0};
        const auto t = sp::profile_tensor(x.data(), 2, 5, sp::SamplingConfig{}, 0, 2);
        QCOMPARE(t.mean_row_absmax, 6.0);
        QCOMPARE(t.mean_group_absmax, 21.0 / 6.0);
        QCOMPARE(t.sample.size(), std::size_t(10));
        QCOMPARE(t.sample_row_absmax, (std::vector<float>{4, 4, 4, 4, 4, 8, 8, 8, 8, 8}));
        QCOMPARE(t.sample_group_absmax, (std::vector<float>{2, 2, 4, 4, 1, 8, 8, 6, 6, 0}));
    }

    // ---- measured SNR ------------------------------------------------------------------------
    void measured_hand_made_cases() {
        const std::vector<float> exact = {127.0f, -64.0f, 32.0f};  // INT8 scale 1: lossless
        QCOMPARE(sp::measured_snr_db(sp::Precision::int8, exact.data(), 1, 3), kInf);
        // {127, 0.5}: 0.5 rounds to 0 (tie to even): error 0.25 of signal 16129.25 -> 48.0967 dB.
        const std::vector<float> half = {127.0f, 0.5f};
        QVERIFY(close(sp::measured_snr_db(sp::Precision::int8, half.data(), 1, 2), 48.0967416, 1e-6));
        // INT4 group 2 on {7, 0.5}: error 0.25 of 49.25 -> 22.9447 dB.
        const std::vector<float> four = {7.0f, 0.5f};
        QVERIFY(close(sp::measured_snr_db(sp::Precision::int4, four.data(), 1, 2, 2), 22.9446623, 1e-6));
        // BF16: 1 + 2^-8 rounds to 1: error 2^-16 -> 51.1921 dB.
        const std::vector<float> bf = {1.0f, 1.0f + std::ldexp(1.0f, -8)};
        QVERIFY(close(sp::measured_snr_db(sp::Precision::bf16, bf.data(), 1, 2), 51.1920638, 1e-6));
        const std::vector<float> zeros(8, 0.0f);
        QCOMPARE(sp::measured_snr_db(sp::Precision::fp8_e5m2, zeros.data(), 2, 4), kInf);
        const std::vector<float> nans(4, kNaN);
        QVERIFY(std::isnan(sp::measured_snr_db(sp::Precision::int8, nans.data(), 1, 4)));
    }

    // ---- sample estimator --------------------------------------------------------------------
    void sample_estimator_is_exact_on_small_tensors() {
        // 12 x 20 = 240 <= 256 elements: the pooled sample is the whole tensor, taken once.
        const auto x = gaussian(240, 0.3, 1.0, 21);
        const auto t = sp::profile_tensor(x.data(), 12, 20, sp::SamplingConfig{}, 0, 8);
        for (sp::Precision p : sp::kAllPrecisions) {
            const double measured = sp::measured_snr_db(p, x.data(), 12, 20, 8);
            const double estimated = sp::estimated_snr_db(p, t, sp::SnrEstimator::sample);
            QVERIFY2(close(estimated, measured, 1e-9),
                     qPrintable(
                         QString("%1: %2 vs %3").arg(sp::to_string(p).data()).arg(estimated).arg(measured)));
        }
    }

    void sample_estimator_tracks_measured_on_large_tensors() {
        auto x = gaussian(256 * 512, 0.0, 1.0, 33);
        for (std::size_t i = 0; i < x.size(); i += 997) x[i] *= 40.0f;  // ~0.1% outliers
        const auto t = sp::profile_tensor(x.data(), 256, 512, sp::SamplingConfig{}, 4);
        for (sp::Precision p : sp::kLowFormatsCheapestFirst) {
            const double measured = sp::measured_snr_db(p, x.data(), 256, 512);
            const double estimated = sp::estimated_snr_db(p, t, sp::SnrEstimator::sample);
            QVERIFY2(close(estimated, measured, 0.5),
                     qPrintable(
                         QString("%1: %2 vs %3").arg(sp::to_string(p).data()).arg(estimated).arg(measured)));
        }
    }

    void sample_pair_adds_relative_error_powers() {
        const auto w = gaussian(200, 0.0, 1.0, 1), x = gaussian(200, 0.0, 3.0, 2);
        const auto pw = sp::profile_tensor(w.data(), 10, 20, sp::SamplingConfig{}, 0);
        const auto px = sp::profile_tensor(x.data(), 10, 20, sp::SamplingConfig{}, 1);
        const double rw = std::pow(10.0, -sp::measured_snr_db(sp::Precision::int4, w.data(), 10, 20) / 10.0);
        const double rx = std::pow(10.0, -sp::measured_snr_db(sp::Precision::int4, x.data(), 10, 20) / 10.0);
        QVERIFY(close(sp::estimated_pair_snr_db(sp::Precision::int4, pw, px, sp::SnrEstimator::sample),
                      -10.0 * std::log10(rw + rx + rw * rx), 1e-9));
    }

    // ---- Spearman ----------------------------------------------------------------------------
    // Outlier features (sp-trainer --outlier-block): 4 of 64 input channels x50, the matching weight
    // columns /50. The layer computes the same function; per-row INT8 of the inputs now spends its
    // range on the 4 channels and loses the other 60, which per-operand powers barely notice but the
    // output does. FP8 keeps every channel's relative precision.
    void output_snr_sees_outlier_features() {
        const std::size_t out = 48, in = 64, tokens = 32;
        std::vector<float> w = gaussian(out * in, 0.0, 0.02, 1), x = gaussian(tokens * in, 0.0, 1.0, 2);
        const double int8_plain = sp::output_snr_db(sp::Precision::int8, w.data(), out, in, x.data(), tokens);
        const double e4m3_plain =
            sp::output_snr_db(sp::Precision::fp8_e4m3, w.data(), out, in, x.data(), tokens);
        for (std::size_t c = 0; c < in; c += 16) {
            for (std::size_t t = 0; t < tokens; ++t) x[t * in + c] *= 50.0f;
            for (std::size_t o = 0; o < out; ++o) w[o * in + c] /= 50.0f;
        }
        const double int8_planted =
            sp::output_snr_db(sp::Precision::int8, w.data(), out, in, x.data(), tokens);
        const double e4m3_planted =
            sp::output_snr_db(sp::Precision::fp8_e4m3, w.data(), out, in, x.data(), tokens);
        QVERIFY2(int8_planted < int8_plain - 15.0,
                 qPrintable(QString("%1 -> %2").arg(int8_plain).arg(int8_planted)));
        QVERIFY2(std::fabs(e4m3_planted - e4m3_plain) < 3.0,
                 qPrintable(QString("%1 -> %2").arg(e4m3_plain).arg(e4m3_planted)));
        QVERIFY(int8_plain > 30.0 && e4m3_planted > int8_planted + 5.0);
        // BF16 of exactly representable operands loses nothing; an all-zero output is NaN.
        std::vector<float> ones(in, 1.0f), zeros(out * in, 0.0f);
        QCOMPARE(sp::output_snr_db(sp::Precision::bf16, ones.data(), 1, in, ones.data(), 1), kInf);
        QVERIFY(std::isnan(sp::output_snr_db(sp::Precision::int8, zeros.data(), out, in, x.data(), tokens)));
    }

    // The products are blocked (four rows, two tokens at a time) and vectorized; each output element
    // must still be the documented four-lane sum, and the SNR the plain double sums over it, bit for
    // bit, at every shape (odd rows, tokens and widths leave every kind of remainder).
    void output_snr_is_the_plain_four_lane_sum() {
        const auto lane_dot = [](const float* a, const float* b, std::size_t n) {
            double lane[4] = {0, 0, 0, 0};
            std::size_t i = 0;
            for (; i + 4 <= n; i += 4)
                for (std::size_t k = 0; k < 4; ++k) lane[k] += double(a[i + k]) * double(b[i + k]);
            for (; i < n; ++i) lane[0] += double(a[i]) * double(b[i]);
            return (lane[0] + lane[1]) + (lane[2] + lane[3]);
        };
        for (std::size_t out = 1; out <= 9; out += 2)
            for (std::size_t tokens = 1; tokens <= 5; ++tokens)
                for (std::size_t in : {1u, 3u, 4u, 9u, 13u, 67u}) {
                    const auto w = gaussian(out * in, 0.0, 1.0, out), x = gaussian(tokens * in, 0.0, 2.0, in);
                    std::vector<float> wq(w.size()), xq(x.size());
                    sp::roundtrip(sp::Precision::int4, w.data(), out, in, wq.data(), 4);
                    sp::roundtrip(sp::Precision::int4, x.data(), tokens, in, xq.data(), 4);
                    double signal = 0, error = 0;
                    for (std::size_t t = 0; t < tokens; ++t)
                        for (std::size_t o = 0; o < out; ++o) {
                            const double y = lane_dot(w.data() + o * in, x.data() + t * in, in);
                            const double d = y - lane_dot(wq.data() + o * in, xq.data() + t * in, in);
                            signal += y * y;
                            error += d * d;
                        }
                    const double expected = error == 0.0 ? kInf : 10.0 * std::log10(signal / error);
                    const double actual =
                        sp::output_snr_db(sp::Precision::int4, w.data(), out, in, x.data(), tokens, 4);
                    QVERIFY2(actual == expected,
                             qPrintable(QString::asprintf("%zu x %zu, %zu tokens: %a, expected %a", out, in,
                                                          tokens, actual, expected)));
                }
    }

    void sample_rows_are_distinct_ordered_and_reproducible() {
        std::vector<float> x(100 * 3);
        for (std::size_t i = 0; i < x.size(); ++i) {
            const std::size_t row = i / 3;  // row r holds r, r, r
            x[i] = float(row);
        }
        const auto a = sp::sample_rows(x.data(), 100, 3, 10, 7, 1);
        QCOMPARE(a.size(), std::size_t(30));
        for (std::size_t r = 1; r < 10; ++r) QVERIFY(a[r * 3] > a[(r - 1) * 3]);  // distinct, in order
        QCOMPARE(sp::sample_rows(x.data(), 100, 3, 10, 7, 1), a);
        QVERIFY(sp::sample_rows(x.data(), 100, 3, 10, 7, 2) != a);
        QCOMPARE(sp::sample_rows(x.data(), 4, 3, 10, 7, 1), std::vector<float>(x.begin(), x.begin() + 12));
        // The indices are the rows sample_rows copies (row r holds the value r).
        const auto picked = sp::sample_row_indices(100, 10, 7, 1);
        QCOMPARE(picked.size(), std::size_t(10));
        for (std::size_t k = 0; k < picked.size(); ++k) QCOMPARE(a[k * 3], float(picked[k]));
        QCOMPARE(sp::sample_row_indices(4, 10, 7, 1), (std::vector<std::size_t>{0, 1, 2, 3}));
    }

    // Every format scales a weight row on its own, so the output SNR measured through some rows is
    // the same whether those rows are quantized alone or inside the whole matrix: the agent quantizes
    // only its sampled rows.
    void output_snr_of_sampled_rows_is_theirs_in_the_whole_matrix() {
        const std::size_t out = 300, in = 70, tokens = 5;
        std::vector<float> w(out * in), x(tokens * in);
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * float(i)) * (1.0f + float(i % 11));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * float(i));
        const auto picked = sp::sample_row_indices(out, 16, 3, 9);
        const auto rows = sp::sample_rows(w.data(), out, in, 16, 3, 9);
        for (sp::Precision p : sp::kLowFormatsCheapestFirst) {
            std::vector<float> whole(w.size());
            sp::roundtrip(p, w.data(), out, in, whole.data(), 32);
            std::vector<float> alone(rows.size());
            sp::roundtrip(p, rows.data(), picked.size(), in, alone.data(), 32);
            for (std::size_t k = 0; k < picked.size(); ++k)
                for (std::size_t c = 0; c < in; ++c) QCOMPARE(alone[k * in + c], whole[picked[k] * in + c]);
        }
    }

    void spearman_known_ranks() {
        QCOMPARE(sp::spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
        QCOMPARE(sp::spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
        QCOMPARE(sp::spearman({1, 2, 3, 4}, {1, 8, 27, 1e9}), 1.0);  // only the order counts
        // Ties: {5, 6, 7, 8, 7} ranks {1, 2, 3.5, 5, 3.5}; r = 8 / sqrt(10 * 9.5) = 0.8207827.
        QVERIFY(close(sp::spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 0.82078268, 1e-8));
        QCOMPARE(sp::spearman({1, 2, 3}, {1, 2, kInf}), 1.0);  // +inf ranks last
    }

    void spearman_degenerate_inputs() {
        QVERIFY(std::isnan(sp::spearman({1}, {2})));
        QVERIFY(std::isnan(sp::spearman({1, 1, 1}, {1, 2, 3})));
        QVERIFY(std::isnan(sp::spearman({1, 2, std::nan("")}, {1, 2, 3})));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, sp::spearman({1, 2}, {1, 2, 3}));
    }

    void estimator_names() {
        for (auto e :
             {sp::SnrEstimator::zeroing, sp::SnrEstimator::sample, sp::SnrEstimator::zeroing_tensor_absmax})
            QCOMPARE(sp::parse_snr_estimator(sp::to_string(e)), std::optional<sp::SnrEstimator>(e));
        QCOMPARE(sp::to_string(sp::SnrEstimator::zeroing), std::string_view("zeroing"));
        QCOMPARE(sp::to_string(sp::SnrEstimator::sample), std::string_view("sample"));
        QVERIFY(!sp::parse_snr_estimator("Zeroing"));
    }
};

QTEST_APPLESS_MAIN(TestSnr)
#include "test_snr.moc"
