// pack_rows(): the reference quantizers' codes and scales for a range of rows, written into the
// caller's storage, on vectors of eight floats. The lanes are the reference's arithmetic
// (quantize_lanes.h, which says how they stay equal to the scalar reference bit for bit);
// test_quantize_pack checks the result against quantize_int8_rows, quantize_fp8_rows,
// quantize_int4_groups and round_to_bf16. INT4 first writes a row's codes one per byte into a
// scratch row, then packs the pairs into nibbles: a group of odd size ends in the middle of a byte,
// and every group size takes the same path.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "quantize_lanes.h"
#include "simd_clones.h"
#include "sp/quantize.h"

namespace sp {
namespace {

using namespace detail::lanes;

using Codes = std::uint8_t __attribute__((vector_size(kLanes)));          // one byte per lane
using Halves = std::uint16_t __attribute__((vector_size(kLanes * 2)));    // BF16 patterns
using CodePairs = std::uint8_t __attribute__((vector_size(2 * kLanes)));  // INT4: 16 codes
constexpr std::size_t kScratchAlign = 2 * kLanes;                         // codes per CodePairs

SP_LANES void store(std::uint8_t* y, Codes c, std::size_t n) {
    std::memcpy(y, &c, n);
}

// Each lane's low byte: a code in [-128, 255] modulo 256, so INT8's negative codes become their two's
// complement. One byte shuffle (with AVX2 two vpshufb, a vpermq, a vpor), where
// __builtin_convertvector to bytes extracts the lanes one by one.
SP_LANES Codes low_bytes(Ints v) {
    using Bytes = std::uint8_t __attribute__((vector_size(4 * kLanes)));
    const auto b = __builtin_bit_cast(Bytes, v);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_shufflevector(b, b, 0, 4, 8, 12, 16, 20, 24, 28);
#else
    return __builtin_shufflevector(b, b, 3, 7, 11, 15, 19, 23, 27, 31);
#endif
}

// The per-vector bodies: each writes its lanes' codes at y + i (BF16: y + 2 i).
struct IntegerCodes {  // INT8/INT4
    std::uint8_t* y;
    float scale, max_code;
    SP_LANES void operator()(std::size_t i, Floats v, std::size_t n) const {
        store(y + i, low_bytes(integer_codes(v, scale, max_code)), n);
    }
};

template <int M, int MinExp>
struct Fp8Codes {
    std::uint8_t* y;
    float scale, max_finite;
    SP_LANES void operator()(std::size_t i, Floats v, std::size_t n) const {
        const Ints codes = fp8_codes<M, MinExp>(fp8_round<M, MinExp>(v, scale, max_finite));
        store(y + i, low_bytes(codes), n);
    }
};

struct Bf16Codes {
    std::uint8_t* y;
    SP_LANES void operator()(std::size_t i, Floats v, std::size_t n) const {
        const Halves h = __builtin_convertvector(UInts(bf16_bits(v)) >> 16, Halves);
        std::memcpy(y + 2 * i, &h, 2 * n);
    }
};

// INT8 and FP8: one scale per row, one code byte per element.
template <typename RowCodes>
SP_LANES void rows_with_one_scale(const float* w, std::size_t cols, std::size_t row_begin,
                                  std::size_t row_end, float fmt_max, float min_scale, std::uint8_t* codes,
                                  float* scales) {
    for (std::size_t r = row_begin; r < row_end; ++r) {
        const float* x = w + r * cols;
        const float scale = scale_of(x, cols, fmt_max, min_scale);
        scales[r] = scale;
        for_each_vector(x, cols, RowCodes{codes + r * cols, scale, fmt_max});
    }
}

// bytes[b] = low nibble of codes[2b] | low nibble of codes[2b + 1] << 4, for b < n; `codes` holds
// 2 * n codes rounded up to kScratchAlign.
SP_LANES void pack_nibbles(const std::uint8_t* codes, std::size_t n, std::uint8_t* bytes) {
    for (std::size_t b = 0; b < n; b += kLanes) {
        CodePairs pairs;
        std::memcpy(&pairs, codes + 2 * b, sizeof pairs);
        const Codes even = __builtin_shufflevector(pairs, pairs, 0, 2, 4, 6, 8, 10, 12, 14);
        const Codes odd = __builtin_shufflevector(pairs, pairs, 1, 3, 5, 7, 9, 11, 13, 15);
        store(bytes + b, (even & 0xF) | Codes(odd << 4), std::min(kLanes, n - b));
    }
}

// INT4: a scale per group; `scratch` holds a row's codes, zero past cols (the high nibble of an odd
// row's last byte).
SP_LANES void int4_rows(const float* w, std::size_t cols, std::size_t group, std::size_t row_begin,
                        std::size_t row_end, std::uint8_t* codes, float* scales, std::uint8_t* scratch) {
    constexpr float kMax = float(kInt4Max);
    const std::size_t groups = int4_groups_per_row(cols, group), row_bytes = int4_bytes_per_row(cols);
    for (std::size_t r = row_begin; r < row_end; ++r) {
        for (std::size_t g = 0; g < groups; ++g) {
            const std::size_t begin = g * group, n = std::min(group, cols - begin);
            const float* x = w + r * cols + begin;
            const float scale = scale_of(x, n, kMax, kInt4MinScale);
            scales[r * groups + g] = scale;
            for_each_vector(x, n, IntegerCodes{scratch + begin, scale, kMax});
        }
        pack_nibbles(scratch, row_bytes, codes + r * row_bytes);
    }
}

SP_AVX2_AND_BASELINE void pack_kernel(Precision p, const float* w, std::size_t cols, std::size_t row_begin,
                                      std::size_t row_end, std::uint8_t* codes, float* scales,
                                      std::size_t int4_group, std::uint8_t* scratch) {
    switch (p) {
        case Precision::bf16:
            for_each_vector(w + row_begin * cols, (row_end - row_begin) * cols,
                            Bf16Codes{codes + 2 * row_begin * cols});
            return;
        case Precision::int8:
            rows_with_one_scale<IntegerCodes>(w, cols, row_begin, row_end, float(kInt8Max), kInt8MinScale,
                                              codes, scales);
            return;
        case Precision::int4:
            int4_rows(w, cols, int4_group, row_begin, row_end, codes, scales, scratch);
            return;
        case Precision::fp8_e4m3:
            rows_with_one_scale<Fp8Codes<3, -6>>(w, cols, row_begin, row_end, kFp8E4M3Max, kFp8MinScale,
                                                 codes, scales);
            return;
        case Precision::fp8_e5m2:
            rows_with_one_scale<Fp8Codes<2, -14>>(w, cols, row_begin, row_end, kFp8E5M2Max, kFp8MinScale,
                                                  codes, scales);
            return;
    }
}

}  // namespace

void pack_rows(Precision p, const float* w, std::size_t cols, std::size_t row_begin, std::size_t row_end,
               std::uint8_t* codes, float* scales, std::size_t int4_group) {
    packed_row(p, cols, int4_group);  // throws for an unknown format or an INT4 group of 0
    if (row_begin > row_end) throw std::invalid_argument("pack_rows: row_begin is past row_end");
    if (row_begin == row_end) return;
    // INT4's scratch row: cols + 1 codes rounded up to whole CodePairs, zero-initialized.
    std::vector<std::uint8_t> scratch;
    if (p == Precision::int4) scratch.assign((cols + kScratchAlign) / kScratchAlign * kScratchAlign, 0);
    pack_kernel(p, w, cols, row_begin, row_end, codes, scales, int4_group, scratch.data());
}

}  // namespace sp
