#include "utf8.h"

#include <cstddef>

namespace sp::detail {

void append_utf8(std::string& s, unsigned cp) {
    if (cp < 0x80) {
        s += char(cp);
    } else if (cp < 0x800) {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += char(0xE0 | (cp >> 12));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    } else {
        s += char(0xF0 | (cp >> 18));
        s += char(0x80 | ((cp >> 12) & 0x3F));
        s += char(0x80 | ((cp >> 6) & 0x3F));
        s += char(0x80 | (cp & 0x3F));
    }
}

std::size_t utf8_length(const char* p, const char* end) {
    const auto in = [&](std::ptrdiff_t i, unsigned lo, unsigned hi) {
        const auto c = static_cast<unsigned char>(p[i]);
        return i < end - p && c >= lo && c <= hi;
    };
    const auto c = static_cast<unsigned char>(*p);
    if (c >= 0xC2 && c <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        const unsigned lo = c == 0xE0 ? 0xA0 : 0x80,
                       hi = c == 0xED ? 0x9F : 0xBF;  // no overlong, no surrogate
        return in(1, lo, hi) && in(2, 0x80, 0xBF) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        const unsigned lo = c == 0xF0 ? 0x90 : 0x80,
                       hi = c == 0xF4 ? 0x8F : 0xBF;  // no overlong, <= U+10FFFF
        return in(1, lo, hi) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    }
    return 0;
}

}  // namespace sp::detail
