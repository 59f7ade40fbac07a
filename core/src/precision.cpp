#include "sp/precision.h"

namespace sp {

std::string_view to_string(Precision p) {
    switch (p) {
        case Precision::bf16:
            return "bf16";
        case Precision::int8:
            return "int8";
        case Precision::fp8_e4m3:
            return "fp8_e4m3";
        case Precision::fp8_e5m2:
            return "fp8_e5m2";
        case Precision::int4:
            return "int4";
    }
    return "bf16";
}

std::optional<Precision> parse_precision(std::string_view text) {
    for (Precision p : kAllPrecisions) {
        if (to_string(p) == text) return p;
    }
    return std::nullopt;
}

}  // namespace sp
