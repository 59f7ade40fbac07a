#pragma once
// How far apart two strings are, for "did you mean" suggestions (config keys).
#include <cstddef>
#include <string_view>

namespace sp::detail {

// Optimal string alignment distance (Levenshtein plus adjacent transpositions), so that both
// "treshold" and "thresohld" count as one or two slips.
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace sp::detail
