#pragma once
// UTF-8 for the fast update-record parser: encoding a code point, and checking the sequence at hand
// by the same rules nlohmann applies, so that both readers accept and refuse the same strings.
#include <cstddef>
#include <string>

namespace sp::detail {

// Appends code point `cp` (at most U+10FFFF) encoded as UTF-8.
void append_utf8(std::string& s, unsigned cp);

// Length of the well-formed UTF-8 sequence at p (RFC 3629's table, as nlohmann checks it), 0 when
// it is ill-formed: a telemetry file is UTF-8, and the writer could not write such a string back.
std::size_t utf8_length(const char* p, const char* end);

}  // namespace sp::detail
