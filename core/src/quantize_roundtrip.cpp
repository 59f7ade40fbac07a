// roundtrip(): every format's quantize-then-dequantize in one pass, on vectors of eight floats. The
// lanes are the reference quantizers' arithmetic (quantize_lanes.h, which says how they stay equal
// to the scalar reference bit for bit); test_quantize_vector checks these kernels against the
// scalar quantize_*_rows, dequantize_*, round_to_fp8_* and round_to_bf16.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "quantize_lanes.h"
#include "simd_clones.h"
#include "sp/quantize.h"

namespace sp {
namespace {

using namespace detail::lanes;

SP_LANES void store(float* y, Floats v, std::size_t n) {
    std::memcpy(y, &v, n * sizeof(float));
}

// The per-vector bodies: each writes its lanes' dequantized values at y + i.
struct IntegerLanes {  // INT8/INT4: code * scale
    float* y;
    float scale, max_code;
    SP_LANES void operator()(std::size_t i, Floats v, std::size_t n) const {
        store(y + i, __builtin_convertvector(integer_codes(v, scale, max_code), Floats) * scale, n);
    }
};

template <int M, int MinExp>
struct Fp8Lanes {  // the signed FP8 value * scale, NaN -> +0
    float* y;
    float scale, max_finite;
    SP_LANES void operator()(std::size_t i, Floats v, std::size_t n) const {
        const Fp8Rounded r = fp8_round<M, MinExp>(v, scale, max_finite);
        store(y + i, select(r.nan, Floats{}, fp8_value<M, MinExp>(r) * scale), n);
    }
};

struct Bf16Lanes {
    float* y;
    SP_LANES void operator()(std::size_t i, Floats v, std::size_t n) const {
        store(y + i, floats(bf16_bits(v)), n);
    }
};

SP_LANES void integer_roundtrip_rows(const float* w, std::size_t rows, std::size_t cols, std::size_t group,
                                     float max_code, float min_scale, float* out) {
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t begin = 0; begin < cols; begin += group) {
            const std::size_t n = std::min(group, cols - begin);
            const float* x = w + r * cols + begin;
            const float scale = scale_of(x, n, max_code, min_scale);
            for_each_vector(x, n, IntegerLanes{out + r * cols + begin, scale, max_code});
        }
    }
}

template <int M, int MinExp>
SP_LANES void fp8_roundtrip_rows(const float* w, std::size_t rows, std::size_t cols, float max_finite,
                                 float* out) {
    for (std::size_t r = 0; r < rows; ++r) {
        const float* x = w + r * cols;
        const float scale = scale_of(x, cols, max_finite, kFp8MinScale);
        for_each_vector(x, cols, Fp8Lanes<M, MinExp>{out + r * cols, scale, max_finite});
    }
}

SP_AVX2_AND_BASELINE void roundtrip_kernel(Precision p, const float* w, std::size_t rows, std::size_t cols,
                                           float* out, std::size_t int4_group) {
    switch (p) {
        case Precision::bf16:
            for_each_vector(w, rows * cols, Bf16Lanes{out});
            return;
        case Precision::int8:
            if (cols > 0) integer_roundtrip_rows(w, rows, cols, cols, float(kInt8Max), kInt8MinScale, out);
            return;
        case Precision::int4:
            integer_roundtrip_rows(w, rows, cols, int4_group, float(kInt4Max), kInt4MinScale, out);
            return;
        case Precision::fp8_e4m3:
            fp8_roundtrip_rows<3, -6>(w, rows, cols, kFp8E4M3Max, out);
            return;
        case Precision::fp8_e5m2:
            fp8_roundtrip_rows<2, -14>(w, rows, cols, kFp8E5M2Max, out);
            return;
    }
}

}  // namespace

void roundtrip(Precision p, const float* w, std::size_t rows, std::size_t cols, float* out,
               std::size_t int4_group) {
    packed_row(p, cols, int4_group);  // throws for an unknown format or an INT4 group of 0
    roundtrip_kernel(p, w, rows, cols, out, int4_group);
}

}  // namespace sp
