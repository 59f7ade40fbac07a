#pragma once
// Numeric formats a block can be routed to, and what each costs in bytes.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sp {

// The numeric values are stable (the dashboard's store keeps them as a byte); new formats go last.
enum class Precision : std::uint8_t { bf16, int8, fp8_e4m3, fp8_e5m2, int4 };

inline constexpr std::size_t kPrecisionCount = 5;
inline constexpr std::array<Precision, kPrecisionCount> kAllPrecisions = {
    Precision::bf16, Precision::int8, Precision::fp8_e4m3, Precision::fp8_e5m2, Precision::int4};

// The formats below BF16 from cheapest to dearest, ties broken INT8, then FP8 E4M3, then E5M2:
// the order in which the SNR tiers try them (POLICY.md).
inline constexpr std::array<Precision, 4> kLowFormatsCheapestFirst = {
    Precision::int4, Precision::int8, Precision::fp8_e4m3, Precision::fp8_e5m2};

// Bytes one weight element occupies when a block is stored/streamed in this precision. Scales
// (per row, or per group for INT4) are extra: the runtime that measures real bytes counts them.
constexpr double bytes_per_element(Precision p) {
    switch (p) {
        case Precision::bf16:
            return 2.0;
        case Precision::int4:
            return 0.5;
        default:
            return 1.0;
    }
}

// True for the 8-bit floating point formats.
constexpr bool is_fp8(Precision p) {
    return p == Precision::fp8_e4m3 || p == Precision::fp8_e5m2;
}

// True for the integer formats (symmetric absmax, per row or per group).
constexpr bool is_int(Precision p) {
    return p == Precision::int8 || p == Precision::int4;
}

// A set of formats, one bit per Precision value.
using FormatMask = std::uint8_t;
constexpr FormatMask format_bit(Precision p) {
    return static_cast<FormatMask>(1u << static_cast<unsigned>(p));
}
inline constexpr FormatMask kAllFormats = (1u << kPrecisionCount) - 1;
constexpr bool has_format(FormatMask m, Precision p) {
    return (m & format_bit(p)) != 0;
}

// Per-format values (an SNR in dB, a threshold), indexed by the Precision value.
using PerFormat = std::array<double, kPrecisionCount>;

// Wire/file spelling: "bf16", "int8", "fp8_e4m3", "fp8_e5m2", "int4".
std::string_view to_string(Precision p);
std::optional<Precision> parse_precision(std::string_view text);

}  // namespace sp
