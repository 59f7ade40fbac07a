#pragma once
// Internal to the update-record parser (update_record_parser.cpp): reading a JSON number from its
// text. An update record is mostly doubles (11 per block), and Debian's simdjson gives this
// translation unit its portable "fallback" stage 2, which reads a number's digits one at a time;
// read_short_double reads them eight at a time and takes the rest from simdjson.
#include <simdjson.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sp::detail {

inline bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// The 8 bytes at `p` as a word, each digit byte replaced by its value (0-9); other bytes are > 9.
inline std::uint64_t digit_values(const char* p) {
    std::uint64_t word = 0;
    std::memcpy(&word, p, 8);  // little-endian: p[0] is the low byte
    return word ^ 0x3030303030303030;
}

// How many of the bytes of `values` (digit_values) are digits before the first that is not: the
// high bit of each byte of the sum is set from the first byte over 9 on (a carry only leaves such
// a byte).
inline unsigned leading_digits(std::uint64_t values) {
    const std::uint64_t over9 = ((values + 0x7676767676767676) | values) & 0x8080808080808080;
    return over9 == 0 ? 8u : unsigned(__builtin_ctzll(over9)) / 8;
}

// The number written by the first `count` (1-8) digits of `values` (simdjson's SWAR conversion,
// after shifting the digits to the top so that the bytes below count as leading zeros).
inline std::uint64_t leading_value(std::uint64_t values, unsigned count) {
    std::uint64_t word = values << (64 - 8 * count);
    word = (word * 10 + (word >> 8)) & 0x00FF00FF00FF00FF;
    word = (word * 100 + (word >> 16)) & 0x0000FFFF0000FFFF;
    return (word * 10000 + (word >> 32)) & 0xFFFFFFFF;
}

constexpr std::array<std::uint64_t, 9> kPow10 = {1,      10,      100,      1000,     10000,
                                                 100000, 1000000, 10000000, 100000000};

// Appends the digits at `p` to `value`, without a branch per digit: three blocks of up to eight,
// each starting where the previous run stopped (a block after the run's end adds nothing).
// Returns where the digits end; a run of more than 24 is left unfinished (the caller's 19-digit
// limit refuses it). Reads up to 8 bytes past `p`'s 24th byte: the text is followed by padding.
inline const char* read_digits(const char* p, std::uint64_t& value) {
    for (int block = 0; block < 3; ++block) {
        const std::uint64_t values = digit_values(p);
        const unsigned count = leading_digits(values);
        const std::uint64_t add = count == 0 ? 0 : leading_value(values, count);
        value = value * kPow10[count] + add;
        p += count;
    }
    return p;
}

// JSON's number grammar (no "01", "1.", ".5", "+1"), on the error path only: it tells a malformed
// number from one out of range, and a fraction from an integer.
enum class NumberText : std::uint8_t { invalid, integer, fraction };

inline NumberText number_text(std::string_view t) {
    std::size_t i = 0;
    const auto digits = [&] {
        const std::size_t from = i;
        while (i < t.size() && is_digit(t[i])) ++i;
        return i > from;
    };
    if (i < t.size() && t[i] == '-') ++i;
    if (i < t.size() && t[i] == '0') {
        ++i;
    } else if (!digits()) {
        return NumberText::invalid;
    }
    NumberText kind = NumberText::integer;
    if (i < t.size() && t[i] == '.') {
        ++i;
        kind = NumberText::fraction;
        if (!digits()) return NumberText::invalid;
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        ++i;
        kind = NumberText::fraction;
        if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
        if (!digits()) return NumberText::invalid;
    }
    return i == t.size() ? kind : NumberText::invalid;
}

// Whether a number written "0.<z zeros><digits>[e<X>]" is below 1, about 10^(X - z - 1): for one
// beyond a double's range, that tells an underflow from an overflow.
inline bool below_one(std::string_view t) {
    std::size_t i = t.find('.');
    std::int64_t magnitude = -1;
    if (i != std::string_view::npos) {
        for (++i; i < t.size() && t[i] == '0'; ++i) --magnitude;
    }
    const std::size_t e = t.find_first_of("eE");
    if (e != std::string_view::npos) {
        std::int64_t exponent = 0;
        std::size_t j = e + 1;
        const bool negative = j < t.size() && t[j] == '-';
        if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
        for (; j < t.size() && exponent < 100000; ++j) exponent = exponent * 10 + (t[j] - '0');
        magnitude += negative ? -exponent : exponent;
    }
    return magnitude < 0;
}

// Reads `token` (a value's raw text up to the next structural character, which may end in
// whitespace) as a double when it is a JSON number of at most 19 significant digits whose value
// is a finite double, not below 1e-342: every number this format's writer produces. False for
// anything else (not a number, malformed, out of range, more digits, a rare rounding case), which
// the caller reads the exact slow way. Needs readable padding after the token.
inline bool read_short_double(std::string_view token, double& out) {
    const char* p = token.data();
    const char* const end = p + token.size();
    const bool negative = *p == '-';
    p += negative ? 1 : 0;
    std::uint64_t mantissa = 0;
    std::int64_t digits = 0;  // significant ones: the leading zeros of "0.000123" are not
    if (*p == '0') {
        ++p;
        if (is_digit(*p)) return false;  // "01" is not JSON
    } else {
        const char* const first = p;
        p = read_digits(p, mantissa);
        digits = p - first;
        if (digits == 0) return false;
    }
    std::int64_t exponent = 0;
    if (*p == '.') {
        const char* const fraction = ++p;
        if (mantissa == 0) {
            while (*p == '0') ++p;
        }
        const char* const significant = p;
        p = read_digits(p, mantissa);
        if (p == fraction) return false;  // "1." is not JSON
        digits += p - significant;
        exponent = -(p - fraction);
    }
    if (digits > 19) return false;
    if (*p == 'e' || *p == 'E') {
        ++p;
        const bool minus = *p == '-';
        p += (*p == '-' || *p == '+') ? 1 : 0;
        if (!is_digit(*p)) return false;
        std::int64_t written = 0;
        for (; is_digit(*p) && written < 100000; ++p) written = written * 10 + (*p - '0');
        if (is_digit(*p)) return false;  // a huge exponent: the slow way says what it means
        exponent += minus ? -written : written;
    }
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
    if (p != end) return false;
    if (exponent < simdjson::internal::smallest_power || exponent > simdjson::internal::largest_power) {
        return false;
    }
    // Clinger's exact fast path, else Eisel and Lemire's algorithm; false when the result would be
    // infinite or the rounding needs more digits than it keeps.
    return simdjson::builtin::numberparsing::compute_float_64(exponent, mantissa, negative, out);
}

}  // namespace sp::detail
