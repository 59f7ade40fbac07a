#pragma once
// The float64 reference every gradient-statistics test compares against (CPU collector, CUDA
// kernels): two passes over the finite values, no merging, so it is obviously right.
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

}  // namespace sp::test
