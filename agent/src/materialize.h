#pragma once
// The one definition of "a parameter materialized in a precision", shared by calibration (which
// measures what INT8 costs in output error) and the reference runtime (which makes the routing
// real): both must see exactly the same numbers, so neither rounds on its own.
//
//   BF16: round to bfloat16 (round-to-nearest-even, what `t.to(at::kBFloat16)` does) and back.
//   INT8: per-output-row symmetric absmax with the core reference (sp::quantize_int8_rows), then
//         dequantized. Rows = size(0) for dim >= 2 (cols = numel / rows); a 1-D tensor is one row;
//         a 0-D tensor is one row of one element.
//         A block with a planted fault (AgentBlock::harsh_int8_step = K > 0) is instead rounded
//         stochastically onto {-s, 0, s} per row with s = K * absmax (unbiased, very noisy).
//   FP8:  not routed in this build: std::invalid_argument.
//
// Bytes (what storing/streaming the block in that precision costs): BF16 = 2 * numel;
// INT8 = numel + 4 * rows (one fp32 scale per row).
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "sp/precision.h"

namespace sp::agent::detail {

// Throws std::invalid_argument unless `p` is BF16 or INT8.
void check_routable(Precision p);

// Number of INT8 scale rows of a tensor of this shape (see above).
std::int64_t int8_rows(const at::Tensor& t);

// Bytes `t` occupies when held in `p` (BF16 or INT8).
std::uint64_t materialized_bytes(const at::Tensor& t, Precision p);

// A new tensor with the dtype, shape and device of `src` holding its values materialized in `p`.
// `src` must be a floating point tensor; INT8 is computed in float (the reference works on float).
// `harsh_int8_step` only matters for INT8; 0 is the core reference.
at::Tensor materialized(const at::Tensor& src, Precision p, double harsh_int8_step = 0.0);

// Copies `value` into `param` in place (same storage: optimizers hold the parameter objects),
// without recording it for autograd. The copy bumps the parameter's version counter, so a graph
// that saved the old values and is still to be back-propagated fails loudly instead of silently
// using the new ones.
void assign(const at::Tensor& param, const at::Tensor& value);

}  // namespace sp::agent::detail
