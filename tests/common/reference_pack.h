#pragma once
// A matrix's packed codes and scales as the scalar reference quantizers give them (sp/quantize.h),
// laid out as sp::pack_rows writes them: the oracle of test_quantize_pack, test_precision_runtime's
// payload check and bench_quantize's. Qt-free and LibTorch-free.
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "sp/quantize.h"

namespace sp::test {

struct Packed {
    std::vector<std::uint8_t> codes;
    std::vector<float> scales;
};

// BF16: round_to_bf16's upper 16 bits in the host's byte order; INT8: the codes' two's complement
// bytes; FP8 and INT4: the reference's bytes as they are. Scales as the reference returns them.
inline Packed reference_pack(Precision p, const float* w, std::size_t rows, std::size_t cols,
                             std::size_t group = kDefaultInt4GroupSize) {
    switch (p) {
        case Precision::bf16: {
            Packed out{std::vector<std::uint8_t>(2 * rows * cols), {}};
            for (std::size_t i = 0; i < rows * cols; ++i) {
                std::uint32_t bits = 0;
                const float rounded = round_to_bf16(w[i]);
                std::memcpy(&bits, &rounded, sizeof bits);
                const auto half = static_cast<std::uint16_t>(bits >> 16);
                std::memcpy(out.codes.data() + 2 * i, &half, sizeof half);
            }
            return out;
        }
        case Precision::int8: {
            Int8Rows q = quantize_int8_rows(w, rows, cols);
            Packed out{std::vector<std::uint8_t>(q.q.size()), std::move(q.scales)};
            std::memcpy(out.codes.data(), q.q.data(), q.q.size());
            return out;
        }
        case Precision::int4: {
            Int4Groups q = quantize_int4_groups(w, rows, cols, group);
            return {std::move(q.packed), std::move(q.scales)};
        }
        default: {
            Fp8Rows q = quantize_fp8_rows(w, rows, cols, p);
            return {std::move(q.q), std::move(q.scales)};
        }
    }
}

}  // namespace sp::test
