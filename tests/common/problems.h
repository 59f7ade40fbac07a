#pragma once
// Checking lists of problem messages (config and gate-file errors): one problem must hold every
// fragment (the key's name, the value, the rule), whatever else the list holds.
#include <initializer_list>
#include <string>
#include <vector>

namespace sp::test {

inline bool has_problem(const std::vector<std::string>& ps, std::initializer_list<std::string> fragments) {
    for (const auto& p : ps) {
        bool all = true;
        for (const auto& f : fragments) all = all && p.find(f) != std::string::npos;
        if (all) return true;
    }
    return false;
}

// One problem per line, for failure messages.
inline std::string joined(const std::vector<std::string>& ps) {
    std::string out;
    for (const auto& p : ps) out += p + "\n";
    return out;
}

}  // namespace sp::test
