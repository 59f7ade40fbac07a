// The vectorized roundtrip() against the scalar reference quantizers it must equal (quantize then
// dequantize of each format), and output_snr_db at the shape the agent measures a layer on (128
// sampled rows, 32 sampled tokens). Each figure is the best of several repeats; ratios are to the
// scalar reference timed in the same process. Also checks the two agree bit for bit.
// Then packing (full mode's step, issue 46): pack_rows on one thread, and the scalar reference
// quantizers that pack_payload ran before (allocating their result, as it did), on 4096 x 1024 fp32
// masters, each timed turn about with a memcpy of the same bytes: ms per GB of masters, median of
// several runs, ratio = pack / memcpy (the aim: <= 3). The multithreaded agent path is
// bench_pack_payload. Checks that pack_rows gives the reference's bytes.
// Usage: bench_quantize [rows] [cols] [pack_mb]   (default 128 512, the experiment's widest layer;
//        64 MiB of masters)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../common/reference_pack.h"
#include "pack_bench.h"
#include "sp/quantize.h"
#include "sp/snr.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPackRuns = 7;

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

// pack_rows (whole matrices, one thread) and the scalar reference against a memcpy; false when
// their bytes differ.
bool bench_packing(std::size_t megabytes) {
    using sp::bench::kPackCols;
    using sp::bench::kPackRows;
    const std::vector<std::vector<float>> m = sp::bench::masters(megabytes);
    std::vector<std::vector<float>> copies(m.size(), std::vector<float>(kPackRows * kPackCols));
    const std::size_t bytes = sp::bench::master_bytes(m);
    std::printf("packing %zu masters of %zu x %zu fp32 (%.0f MB), median of %d (x = time / memcpy)\n",
                m.size(), kPackRows, kPackCols, double(bytes) * 1e-6, kPackRuns);
    for (sp::Precision p : sp::kAllPrecisions) {
        const sp::PackedRow row = sp::packed_row(p, kPackCols);
        std::vector<sp::test::Packed> out(m.size(), {std::vector<std::uint8_t>(kPackRows * row.code_bytes),
                                                     std::vector<float>(kPackRows * row.scales)});
        const sp::bench::PackTiming vectorized = sp::bench::time_against_memcpy(m, copies, kPackRuns, [&] {
            for (std::size_t k = 0; k < m.size(); ++k)
                sp::pack_rows(p, m[k].data(), kPackCols, 0, kPackRows, out[k].codes.data(),
                              out[k].scales.data());
        });
        std::vector<sp::test::Packed> reference(m.size());
        const sp::bench::PackTiming scalar = sp::bench::time_against_memcpy(m, copies, kPackRuns, [&] {
            for (std::size_t k = 0; k < m.size(); ++k)
                reference[k] = sp::test::reference_pack(p, m[k].data(), kPackRows, kPackCols);
        });
        const char* format = sp::to_string(p).data();
        sp::bench::print_pack_row(format, "pack_rows, 1 thread", vectorized, bytes);
        sp::bench::print_pack_row(format, "scalar reference, 1 thread", scalar, bytes);
        for (std::size_t k = 0; k < m.size(); ++k)
            if (out[k].codes != reference[k].codes || out[k].scales != reference[k].scales) {
                std::printf("  %s: pack_rows and the reference DIFFER\n", format);
                return false;
            }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t rows = argc > 1 ? std::size_t(std::atol(argv[1])) : 128;
    const std::size_t cols = argc > 2 ? std::size_t(std::atol(argv[2])) : 512;
    const std::vector<float> w = sp::bench::weights(rows * cols, 42);
    std::vector<float> a(w.size()), b(w.size());
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
    return bench_packing(argc > 3 ? std::size_t(std::atol(argv[3])) : 64) ? 0 : 1;
}
