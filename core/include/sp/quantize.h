#pragma once
// Reference quantization math, pure CPU and dependency-free: the agent's kernels are checked
// against these functions and the calibration error is defined by them. Every step is written
// down so a GPU kernel can reproduce the results bit for bit.
#include <cstddef>
#include <cstdint>
#include <vector>

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
// ||a - b||_2 / ||a||_2, accumulated in double. `a` is the reference.
// ||a|| == 0: returns 0 when b is all zero too (nothing was lost), +infinity otherwise.
// n == 0 returns 0. Any NaN in a or b gives NaN; an infinity gives inf or NaN as the
// arithmetic says (callers treat a non-finite error as "unsafe to quantize").
// ---------------------------------------------------------------------------------------------
double relative_error(const float* a, const float* b, std::size_t n);
// Throws std::invalid_argument when the sizes differ.
double relative_error(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace sp
