// The vectorized roundtrip() against the scalar reference quantizers it must equal (quantize then
// dequantize of each format), and output_snr_db at the shape the agent measures a layer on (128
// sampled rows, 32 sampled tokens). Each figure is the best of several repeats; ratios are to the
// scalar reference timed in the same process. Also checks the two agree bit for bit.
// Usage: bench_quantize [rows] [cols]   (default 128 512, the experiment's widest layer)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sp/quantize.h"
#include "sp/snr.h"

namespace {

using Clock = std::chrono::steady_clock;

// The scalar reference of roundtrip(p): what test_quantize_vector compares it with.
void reference(sp::Precision p, const float* w, std::size_t rows, std::size_t cols, float* out) {
    switch (p) {
        case sp::Precision::bf16:
            for (std::size_t i = 0; i < rows * cols; ++i) out[i] = sp::round_to_bf16(w[i]);
            return;
        case sp::Precision::int8:
            sp::dequantize_int8_rows(sp::quantize_int8_rows(w, rows, cols), out);
            return;
        case sp::Precision::int4:
            sp::dequantize_int4_groups(sp::quantize_int4_groups(w, rows, cols, sp::kDefaultInt4GroupSize),
                                       out);
            return;
        default:
            sp::dequantize_fp8_rows(sp::quantize_fp8_rows(w, rows, cols, p), out);
    }
}

template <typename F>
double best_seconds(int repeats, F f) {
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const auto t0 = Clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t rows = argc > 1 ? std::size_t(std::atol(argv[1])) : 128;
    const std::size_t cols = argc > 2 ? std::size_t(std::atol(argv[2])) : 512;
    std::vector<float> w(rows * cols), a(w.size()), b(w.size());
    std::uint64_t s = 42;
    for (float& x : w) {  // roughly normal, a few outliers
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = double(s >> 11) * 0x1p-53;
        x = float(std::tan(3.1 * (u - 0.5)) * 0.02);
    }
    std::printf("roundtrip of a %zu x %zu matrix, best of 20 (ratio = scalar reference / vectorized)\n", rows,
                cols);
    for (sp::Precision p : sp::kAllPrecisions) {
        const double scalar = best_seconds(20, [&] { reference(p, w.data(), rows, cols, a.data()); });
        const double vector = best_seconds(20, [&] { sp::roundtrip(p, w.data(), rows, cols, b.data()); });
        const bool same = std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        std::printf("  %-9s scalar %8.1f us  vectorized %7.1f us  x%5.1f  %s\n", sp::to_string(p).data(),
                    scalar * 1e6, vector * 1e6, scalar / vector, same ? "same bits" : "DIFFERENT BITS");
        if (!same) return 1;
    }
    const std::size_t tokens = 32;
    std::vector<float> x(w.begin(), w.begin() + std::ptrdiff_t(tokens * cols));
    const std::vector<sp::Precision> formats(sp::kLowFormatsCheapestFirst.begin(),
                                             sp::kLowFormatsCheapestFirst.end());
    double sink = 0;
    const double t = best_seconds(
        10, [&] { sink += sp::output_snr_db(formats, w.data(), rows, cols, x.data(), tokens).front(); });
    std::printf("output_snr_db, 4 low formats, %zu tokens: %.2f ms (%.2f GMAC/s in double; checksum %g)\n",
                tokens, t * 1e3, 5.0 * double(tokens * rows * cols) / t * 1e-9, sink);
    return 0;
}
