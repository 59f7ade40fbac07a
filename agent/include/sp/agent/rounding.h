#pragma once
// Activations and gradients as a block's matrix products take them in its format: each row (the
// last dimension: a token's features) rounded with the core reference quantizers (sp/quantize.h):
// INT8 and FP8 with a scale per row, INT4 per group of `int4_group` elements, BF16 per element.
// The one definition shared by sp-trainer's GPT and the Python runtime (python/), so both round
// exactly alike; weights are materialized per output row instead (materialize.h, the runtime).
#include <ATen/core/Tensor.h>

#include <cstddef>

#include "sp/precision.h"
#include "sp/quantize.h"

namespace sp::agent {

// A new tensor with the shape, dtype and device of `x` holding its rows rounded to `format`. The
// values are computed in float on the host (the reference works on float). No autograd history.
at::Tensor rounded_rows(const at::Tensor& x, Precision format,
                        std::size_t int4_group = kDefaultInt4GroupSize);

}  // namespace sp::agent
