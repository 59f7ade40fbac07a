// The dequantize kernels' per-element code (dequantize_math.h) on the host, and the argument checks
// both paths share. Compiled with -ffp-contract=off, as the kernels with --fmad=false.
#include <stdexcept>
#include <string>

#include "dequantize_math.h"
#include "sp/cuda/dequantize_launcher.h"

namespace sp::cuda {

std::int64_t packed_code_bytes(const PackedTensor& t) {
    return t.format == PackedFormat::int4 ? t.rows * ((t.cols + 1) / 2) : t.rows * t.cols;
}

std::int64_t packed_scale_count(const PackedTensor& t) {
    if (t.format != PackedFormat::int4) return t.rows;
    return t.group > 0 ? t.rows * ((t.cols + t.group - 1) / t.group) : 0;
}

void check_dequantize_arguments(const PackedTensor& in, const void* out, DequantizedType type) {
    const auto fail = [](const std::string& why) { throw std::invalid_argument("dequantize: " + why); };
    const auto format = static_cast<std::int32_t>(in.format);
    if (format < 0 || format > static_cast<std::int32_t>(PackedFormat::fp8_e5m2)) fail("unknown format");
    if (type != DequantizedType::f32 && type != DequantizedType::bf16) fail("unknown output type");
    if (in.rows < 0 || in.cols < 0) fail("negative shape");
    if (in.format == PackedFormat::int4 && in.group < 1) fail("INT4 group below 1");
    if (in.rows == 0 || in.cols == 0) return;
    if (!in.codes || !in.scales || !out) fail("null pointer");
    if (reinterpret_cast<std::uintptr_t>(in.scales) % alignof(float) != 0) fail("scales not 4-byte aligned");
    const std::size_t out_align = type == DequantizedType::f32 ? 4 : 2;
    if (reinterpret_cast<std::uintptr_t>(out) % out_align != 0) fail("output misaligned for its type");
}

namespace {

template <PackedFormat kFormat, DequantizedType kType>
void expand_all(const PackedTensor& t, void* out) {
    for (std::int64_t row = 0; row < t.rows; ++row)
        for (std::int64_t col = 0; col < t.cols; ++col)
            dequant::store<kType>(out, row * t.cols + col, dequant::element_value<kFormat>(t, row, col));
}

template <PackedFormat kFormat>
void expand_format(const PackedTensor& t, void* out, DequantizedType type) {
    if (type == DequantizedType::f32)
        expand_all<kFormat, DequantizedType::f32>(t, out);
    else
        expand_all<kFormat, DequantizedType::bf16>(t, out);
}

}  // namespace

void dequantize_on_host(const PackedTensor& in, void* out, DequantizedType type) {
    check_dequantize_arguments(in, out, type);
    switch (in.format) {
        case PackedFormat::int8:
            expand_format<PackedFormat::int8>(in, out, type);
            break;
        case PackedFormat::int4:
            expand_format<PackedFormat::int4>(in, out, type);
            break;
        case PackedFormat::fp8_e4m3:
            expand_format<PackedFormat::fp8_e4m3>(in, out, type);
            break;
        case PackedFormat::fp8_e5m2:
            expand_format<PackedFormat::fp8_e5m2>(in, out, type);
            break;
    }
}

}  // namespace sp::cuda
