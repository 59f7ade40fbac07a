#pragma once
// Numeric formats a block can be routed to, and what each costs in bytes.
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sp {

enum class Precision : std::uint8_t { bf16, int8, fp8_e4m3, fp8_e5m2 };

inline constexpr std::array<Precision, 4> kAllPrecisions = {Precision::bf16, Precision::int8,
                                                            Precision::fp8_e4m3, Precision::fp8_e5m2};

// Bytes one weight element occupies when a block is stored/streamed in this precision
// (per-row scales are extra and are counted by the runtime that measures real bytes).
constexpr double bytes_per_element(Precision p) {
    return p == Precision::bf16 ? 2.0 : 1.0;
}

// True for the 8-bit floating point formats.
constexpr bool is_fp8(Precision p) {
    return p == Precision::fp8_e4m3 || p == Precision::fp8_e5m2;
}

// Wire/file spelling: "bf16", "int8", "fp8_e4m3", "fp8_e5m2".
std::string_view to_string(Precision p);
std::optional<Precision> parse_precision(std::string_view text);

}  // namespace sp
