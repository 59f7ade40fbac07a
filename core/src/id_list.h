#pragma once
// Block ids in an error message, bounded: a config naming two million bad ids gets one line per
// key, not two million (sp-ctl once printed 173 MB of errors for such a file).
#include <cstddef>
#include <string>
#include <vector>

namespace sp::detail {

inline constexpr std::size_t kIdsShown = 10;

// "48" / "48, 49, 50" / "48, 49, ..., 57 and 1999990 more" (ids in the order given).
inline std::string id_list(const std::vector<int>& ids) {
    std::string text;
    for (std::size_t i = 0; i < ids.size() && i < kIdsShown; ++i)
        text += (i == 0 ? "" : ", ") + std::to_string(ids[i]);
    if (ids.size() > kIdsShown) text += " and " + std::to_string(ids.size() - kIdsShown) + " more";
    return text;
}

}  // namespace sp::detail
