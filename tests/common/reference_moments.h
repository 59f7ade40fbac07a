#pragma once
// The float64 reference every gradient-statistics test compares against (CPU collector, CUDA
// kernels): two passes over the finite values, no merging, so it is obviously right; and the one
// comparison with it that those tests share.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace sp::test {

struct ReferenceMoments {
    std::uint64_t finite = 0, nonfinite = 0;
    double mean = 0, variance = 0, l2 = 0, max_abs = 0, rms = 0;
};

// `finite` holds a block's finite values; `nonfinite` counts the NaN/Inf ones left out.
inline ReferenceMoments reference_moments(const std::vector<double>& finite, std::uint64_t nonfinite) {
    ReferenceMoments r;
    r.nonfinite = nonfinite;
    r.finite = finite.size();
    if (finite.empty()) return r;
    double sum = 0, sumsq = 0;
    for (double x : finite) {
        sum += x;
        sumsq += x * x;
        r.max_abs = std::max(r.max_abs, std::fabs(x));
    }
    r.mean = sum / double(finite.size());
    double m2 = 0;
    for (double x : finite) m2 += (x - r.mean) * (x - r.mean);
    r.variance = m2 / double(finite.size());
    r.l2 = std::sqrt(sumsq);
    r.rms = std::sqrt(sumsq / double(finite.size()));
    return r;
}

inline bool rel_close(double got, double want, double tol) {
    return std::fabs(got - want) <= tol * std::fabs(want) || (want == 0 && got == 0);
}

// One block's statistics as a collector reports them, in the reference's terms.
struct MeasuredMoments {
    std::uint64_t finite = 0, nonfinite = 0;
    double max_abs = 0, l2 = 0, mean = 0, variance = 0;
};

// Compares one block's statistics with the reference; failures name the case. Counts and max |g| are
// exact; l2 and variance agree to `rel_tol` relative, the mean to `rel_tol` of |mean| + rms (the mean
// of centred data is a cancelling sum, so relative-to-itself would be meaningless).
inline void check_moments(const MeasuredMoments& got, const ReferenceMoments& want, double rel_tol,
                          const QString& what) {
    QVERIFY2(got.finite == want.finite,
             qPrintable(what + QString(": finite %1 != %2").arg(got.finite).arg(want.finite)));
    QVERIFY2(got.nonfinite == want.nonfinite,
             qPrintable(what + QString(": nonfinite %1 != %2").arg(got.nonfinite).arg(want.nonfinite)));
    QVERIFY2(
        got.max_abs == want.max_abs,
        qPrintable(what +
                   QString(": max_abs %1 != %2").arg(got.max_abs, 0, 'g', 17).arg(want.max_abs, 0, 'g', 17)));
    QVERIFY2(rel_close(got.l2, want.l2, rel_tol),
             qPrintable(what + QString(": l2 %1 != %2").arg(got.l2, 0, 'g', 17).arg(want.l2, 0, 'g', 17)));
    QVERIFY2(
        std::fabs(got.mean - want.mean) <= rel_tol * (std::fabs(want.mean) + want.rms),
        qPrintable(what + QString(": mean %1 != %2").arg(got.mean, 0, 'g', 17).arg(want.mean, 0, 'g', 17)));
    QVERIFY2(
        rel_close(got.variance, want.variance, rel_tol),
        qPrintable(
            what +
            QString(": variance %1 != %2").arg(got.variance, 0, 'g', 17).arg(want.variance, 0, 'g', 17)));
}

}  // namespace sp::test
