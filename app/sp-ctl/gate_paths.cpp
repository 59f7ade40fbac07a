// The CPU transfer paths `sp-ctl gate` times (gate_paths.h). Every format goes through the same
// template, so the paths differ only in the core functions they call.
#include "gate_paths.h"

#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sp/quantize.h"

namespace sp::ctl {
namespace {

// BF16 bits: the top half of a float that round_to_bf16 (core) has already rounded, so the
// truncation here is exact and the rounding is core's.
using Bf16Payload = std::vector<std::uint16_t>;

Bf16Payload to_bf16(const float* w, std::size_t n) {
    Bf16Payload out(n);  // a fresh buffer per trip, as the core quantizers allocate theirs
    for (std::size_t i = 0; i < n; ++i) {
        const float rounded = sp::round_to_bf16(w[i]);
        std::uint32_t bits = 0;
        std::memcpy(&bits, &rounded, sizeof bits);
        out[i] = static_cast<std::uint16_t>(bits >> 16);
    }
    return out;
}

void from_bf16(const Bf16Payload& p, float* out) {
    for (std::size_t i = 0; i < p.size(); ++i) {
        const std::uint32_t bits = std::uint32_t{p[i]} << 16;
        std::memcpy(&out[i], &bits, sizeof bits);
    }
}

// quantize -> copy-assign into `moved_` -> dequantize from `moved_`. The copy assignment is the CPU
// link: after the first trip `moved_` keeps its storage, so it is a plain copy of exactly the
// payload's bytes (codes and scales) into another buffer, and the dequantize reads that copy.
template <typename Payload, typename Quantize, typename Dequantize>
class CpuPath final : public TransferPath {
  public:
    CpuPath(Quantize quantize, Dequantize dequantize, std::uint64_t bytes)
        : quantize_(std::move(quantize)), dequantize_(std::move(dequantize)), bytes_(bytes) {}

    void run(const float* master, float* compute) override {
        const Payload sent = quantize_(master);
        moved_ = sent;
        dequantize_(moved_, compute);
    }
    std::uint64_t moved_bytes() const override { return bytes_; }

  private:
    Quantize quantize_;
    Dequantize dequantize_;
    std::uint64_t bytes_;
    Payload moved_;
};

template <typename Payload, typename Quantize, typename Dequantize>
std::unique_ptr<TransferPath> path(Quantize q, Dequantize d, std::uint64_t bytes) {
    return std::make_unique<CpuPath<Payload, Quantize, Dequantize>>(std::move(q), std::move(d), bytes);
}

}  // namespace

std::unique_ptr<TransferPath> make_cpu_path(sp::Precision format, std::uint64_t rows, std::uint64_t cols,
                                            std::uint64_t int4_group) {
    const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols),
               g = static_cast<std::size_t>(int4_group);
    const std::uint64_t bytes = sp::stored_bytes(format, r, c, g);
    switch (format) {
        case sp::Precision::bf16:
            return path<Bf16Payload>([n = r * c](const float* w) { return to_bf16(w, n); }, from_bf16, bytes);
        case sp::Precision::int8:
            return path<sp::Int8Rows>([r, c](const float* w) { return sp::quantize_int8_rows(w, r, c); },
                                      sp::dequantize_int8_rows, bytes);
        case sp::Precision::int4:
            return path<sp::Int4Groups>(
                [r, c, g](const float* w) { return sp::quantize_int4_groups(w, r, c, g); },
                sp::dequantize_int4_groups, bytes);
        case sp::Precision::fp8_e4m3:
        case sp::Precision::fp8_e5m2:
            return path<sp::Fp8Rows>(
                [r, c, format](const float* w) { return sp::quantize_fp8_rows(w, r, c, format); },
                sp::dequantize_fp8_rows, bytes);
    }
    throw std::invalid_argument("make_cpu_path: unknown format");
}

}  // namespace sp::ctl
