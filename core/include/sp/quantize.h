#pragma once
// Reference quantization math, pure CPU and dependency-free: the agent's kernels are checked
// against these functions and the calibration error is defined by them. Every step is written
// down so a GPU kernel can reproduce the results bit for bit.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sp/precision.h"

namespace sp {

// ---------------------------------------------------------------------------------------------
// INT8, symmetric absmax, one scale per output row of a row-major [rows x cols] matrix.
//
// Per row r, all in float (IEEE binary32, no fused or wider intermediates):
//   absmax_r = max |w[r][c]| over the FINITE elements of the row (0 if there are none)
//   scale_r  = max(absmax_r / 127.0f, kInt8MinScale)        // float division
//   x        = w[r][c] / scale_r                               // float division
//   q        = round_half_to_even(clamp(x, -127, 127))        // exact on floats
// and dequantize is w' = float(q) * scale_r.
// Non-finite inputs (they do not take part in absmax, so one bad value cannot wipe out a row):
//   NaN -> q = 0;  +inf -> q = +127;  -inf -> q = -127   (infinities saturate).
// An all-zero row gets scale 1e-8 and all q = 0. Rounding is implemented explicitly, so the
// result does not depend on the floating point environment's rounding mode.
// ---------------------------------------------------------------------------------------------
inline constexpr float kInt8MinScale = 1e-8f;
inline constexpr int kInt8Max = 127;  // -128 is never produced: the range is symmetric

struct Int8Rows {
    std::vector<std::int8_t> q;  // rows * cols, row-major
    std::vector<float> scales;   // one per row
    std::size_t rows = 0;
    std::size_t cols = 0;
};

Int8Rows quantize_int8_rows(const float* w, std::size_t rows, std::size_t cols);
// Writes rows * cols floats to `out`.
void dequantize_int8_rows(const Int8Rows& m, float* out);

// 1-D convenience: the vector is one row.
Int8Rows quantize_int8(const std::vector<float>& v);
std::vector<float> dequantize_int8(const Int8Rows& m);

// Quantize + dequantize in one go (what the model sees when a block runs in INT8).
std::vector<float> int8_roundtrip_rows(const float* w, std::size_t rows, std::size_t cols);

// ---------------------------------------------------------------------------------------------
// FP8, per-element, no scaling (apply any scale before calling).
//
// E4M3 (OCP "FN"): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits. Max finite 448, no
//   infinity, NaN = S.1111.111 (0x7F/0xFF). Smallest subnormal 2^-9, smallest normal 2^-6.
// E5M2: 1 sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like. Max finite 57344,
//   inf = S.11111.00, NaN = S.11111.{01,10,11}. Smallest subnormal 2^-16, smallest normal 2^-14.
//
// round_to_fp8_*: the nearest representable value, ties to even mantissa, computed exactly in
// double. Finite values beyond the largest finite value SATURATE to +-max (as a "satfinite"
// conversion does), including values that would round to the next power of two. NaN stays NaN.
// Infinity: E4M3 has none, so +-inf saturates to +-448; E5M2 represents it, so +-inf stays +-inf.
// Signs are kept, including on zero and on values that round to zero (-1e-30 -> -0.0).
//
// encode_fp8_*: the bit pattern of round_to_fp8_*(x); NaN encodes as 0x7F (sign bit kept).
// decode_fp8_*: the exact value of a pattern (all 256 are defined). decode(encode(x)) ==
// round_to_fp8(x) for every non-NaN float x.
// ---------------------------------------------------------------------------------------------
inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

float round_to_fp8_e4m3(float x);
float round_to_fp8_e5m2(float x);
std::uint8_t encode_fp8_e4m3(float x);
std::uint8_t encode_fp8_e5m2(float x);
float decode_fp8_e4m3(std::uint8_t bits);
float decode_fp8_e5m2(std::uint8_t bits);

// ---------------------------------------------------------------------------------------------
// INT4, symmetric absmax, one scale per GROUP of `group` consecutive elements along each row of a
// row-major [rows x cols] matrix (the last group of a row is shorter when group does not divide cols;
// groups never span rows).
//
// Per row r and group g (elements c in [g*group, min((g+1)*group, cols))), all in float:
//   absmax_rg = max |w[r][c]| over the FINITE elements of the group (0 if there are none)
//   scale_rg  = max(absmax_rg / 7.0f, kInt4MinScale)          // float division
//   q         = round_half_to_even(clamp(w[r][c] / scale_rg, -7, 7))
// and dequantize is w' = float(q) * scale_rg. Non-finite inputs as in INT8: NaN -> 0, +inf -> +7,
// -inf -> -7, and they do not take part in absmax. -8 is never produced (symmetric range).
//
// Storage: codes are two's-complement nibbles, two per byte. Each row starts on a byte boundary and
// takes ceil(cols / 2) bytes; column c of row r lives in byte r * ceil(cols/2) + c/2, in the LOW
// nibble when c is even and the HIGH nibble when c is odd. With odd cols the last byte's high nibble
// is 0. Scales are row-major: scales[r * ceil(cols/group) + g].
// ---------------------------------------------------------------------------------------------
inline constexpr int kInt4Max = 7;
inline constexpr float kInt4MinScale = 1e-8f;
inline constexpr std::size_t kDefaultInt4GroupSize = 64;

struct Int4Groups {
    std::vector<std::uint8_t> packed;  // rows * ceil(cols / 2) bytes
    std::vector<float> scales;         // rows * ceil(cols / group), row-major
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::size_t group = 0;
};

// ceil(cols / 2) and ceil(cols / group) (group >= 1).
constexpr std::size_t int4_bytes_per_row(std::size_t cols) {
    return (cols + 1) / 2;
}
constexpr std::size_t int4_groups_per_row(std::size_t cols, std::size_t group) {
    return (cols + group - 1) / group;
}

// group == 0 throws std::invalid_argument.
Int4Groups quantize_int4_groups(const float* w, std::size_t rows, std::size_t cols, std::size_t group);
// Writes rows * cols floats to `out`.
void dequantize_int4_groups(const Int4Groups& m, float* out);
// The signed code stored for (r, c): a two's-complement nibble sign-extended to [-8, 7].
int int4_code(const Int4Groups& m, std::size_t r, std::size_t c);

// ---------------------------------------------------------------------------------------------
// FP8 (E4M3 or E5M2) with one fp32 scale per row of a row-major [rows x cols] matrix: the row's
// absmax is mapped onto the format's largest finite value, so the whole row uses the top of the
// format's range. Per row r, all in float:
//   absmax_r = max |w[r][c]| over the FINITE elements of the row (0 if there are none)
//   scale_r  = max(absmax_r / fmt_max, kFp8MinScale)      // fmt_max = 448 or 57344; float division
//   x        = w[r][c] / scale_r                            // float division
//   code     = NaN(x) ? 0x00 : encode_fp8_*(clamp(x, -fmt_max, fmt_max))
// and dequantize is w' = decode_fp8_*(code) * scale_r (one float multiplication).
// Non-finite inputs as in INT8: NaN -> code 0x00 (+0), +-inf -> +-fmt_max (the clamp makes E5M2
// saturate too instead of keeping its infinity). x may exceed fmt_max by an ulp because scale_r is
// rounded; encode saturates finite values, so the absmax element always gets the largest code.
//
// Why kFp8MinScale = 1e-12 (and not INT8's 1e-8): the floor only exists so that an all-zero row
// does not divide by zero. It should never bind for a real tensor: with 1e-12 it binds only for
// rows with absmax below 4.5e-10 (E4M3) or 5.7e-8 (E5M2), whereas 1e-8 would already bind below
// 5.7e-4 for E5M2, a normal gradient magnitude. It is also large enough that every dequantized
// non-zero value, at least (smallest subnormal 2^-16) * 1e-12 ~ 1.5e-17, is a NORMAL float, so a
// GPU kernel that flushes float subnormals to zero gives the same bits; and w / scale_r stays
// finite because |w| <= absmax_r < fmt_max * 1e-12 whenever the floor binds.
// ---------------------------------------------------------------------------------------------
inline constexpr float kFp8MinScale = 1e-12f;

struct Fp8Rows {
    std::vector<std::uint8_t> q;  // rows * cols codes, row-major
    std::vector<float> scales;    // one per row
    std::size_t rows = 0;
    std::size_t cols = 0;
    Precision format = Precision::fp8_e4m3;
};

// format must be fp8_e4m3 or fp8_e5m2, else std::invalid_argument.
Fp8Rows quantize_fp8_rows(const float* w, std::size_t rows, std::size_t cols, Precision format);
// Writes rows * cols floats to `out`.
void dequantize_fp8_rows(const Fp8Rows& m, float* out);

// ---------------------------------------------------------------------------------------------
// One entry point for every format.
//
// stored_bytes: bytes a row-major rows x cols tensor occupies in `p`, codes and scales (fp32) as
// stored above: bf16 2*n; int8 n + 4*rows; fp8 n + 4*rows;
// int4 rows*ceil(cols/2) + 4*rows*ceil(cols/group). int4 with int4_group == 0 throws
// std::invalid_argument.
//
// roundtrip: w materialized in p (quantize then dequantize) into out[rows*cols]; exactly the
// per-format functions above (INT8 per row, INT4 per group, FP8 per row). BF16 is round_to_bf16 per
// element. It is computed on vectors (core/src/quantize_roundtrip.cpp); those scalar functions are
// its oracle, equal bit for bit (tests/unit/test_quantize_vector.cpp).
//
// round_to_bf16: round to nearest, ties to even, on the bit pattern (what c10::BFloat16 and
// at::Tensor::to(kBFloat16) do): bits' = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000.
// Overflow goes to +-inf (finite values at or past the midpoint above bf16's largest finite
// value, 0x7F7F, round to infinity), +-inf stays +-inf, subnormals round like normals, and every
// NaN (either sign, any payload) becomes the quiet NaN 0x7FC0 (float bits 0x7FC00000).
// ---------------------------------------------------------------------------------------------
std::uint64_t stored_bytes(Precision p, std::size_t rows, std::size_t cols,
                           std::size_t int4_group = kDefaultInt4GroupSize);
void roundtrip(Precision p, const float* w, std::size_t rows, std::size_t cols, float* out,
               std::size_t int4_group = kDefaultInt4GroupSize);
float round_to_bf16(float x);

// ---------------------------------------------------------------------------------------------
// Packing: the codes and scales above, written into storage the caller provides, a range of rows at
// a time, so that a caller can split a matrix's rows over threads. Vectorized like roundtrip (core/
// src/quantize_pack.cpp); the scalar quantizers above are its oracle, equal bit for bit
// (tests/unit/test_quantize_pack.cpp).
//
// packed_row: what one row of `cols` elements takes in `p`: code_bytes bytes of codes and `scales`
// fp32 scales. bf16 {2*cols, 0}; int8, fp8 {cols, 1}; int4 {ceil(cols/2), ceil(cols/group)}. A
// matrix's codes and scales are its rows' one after the other (stored_bytes = rows * (code_bytes +
// 4 * scales)). int4 with int4_group == 0, or an unknown p, throws std::invalid_argument.
//
// pack_rows: `w`, `codes` and `scales` point at row 0 of a row-major [rows x cols] matrix and of its
// packed codes and scales (sized for all its rows by packed_row). Reads rows [row_begin, row_end) of
// w and writes exactly their part of the outputs, nothing else:
//   codes[row_begin * code_bytes, row_end * code_bytes), scales[row_begin * s, row_end * s)
// (s = packed_row(...).scales), so calls on disjoint row ranges may run at the same time. What it
// writes there is, bit for bit, what the reference stores for those rows:
//   bf16      round_to_bf16(w[i])'s upper 16 bits per element, as a uint16 in the host's byte order
//             (what c10::BFloat16 holds); `scales` is not touched (it may be null);
//   int8      quantize_int8_rows(...).q (two's complement bytes) and .scales;
//   fp8_*     quantize_fp8_rows(..., p).q and .scales;
//   int4      quantize_int4_groups(..., int4_group).packed (each row from a byte of its own; with
//             odd cols the high nibble of the row's last byte is 0) and .scales.
// row_begin > row_end, int4 with int4_group == 0 or an unknown p throws std::invalid_argument before
// anything is written.
// ---------------------------------------------------------------------------------------------
struct PackedRow {
    std::size_t code_bytes = 0;
    std::size_t scales = 0;
};

PackedRow packed_row(Precision p, std::size_t cols, std::size_t int4_group = kDefaultInt4GroupSize);
void pack_rows(Precision p, const float* w, std::size_t cols, std::size_t row_begin, std::size_t row_end,
               std::uint8_t* codes, float* scales, std::size_t int4_group = kDefaultInt4GroupSize);

// ---------------------------------------------------------------------------------------------
// ||a - b||_2 / ||a||_2, accumulated in double. `a` is the reference.
// ||a|| == 0: returns 0 when b is all zero too (nothing was lost), +infinity otherwise.
// n == 0 returns 0. Any NaN in a or b gives NaN; an infinity gives inf or NaN as the
// arithmetic says (callers treat a non-finite error as "unsafe to quantize").
// ---------------------------------------------------------------------------------------------
double relative_error(const float* a, const float* b, std::size_t n);
// Throws std::invalid_argument when the sizes differ.
double relative_error(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace sp
