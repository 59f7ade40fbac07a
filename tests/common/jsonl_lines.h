#pragma once
// Every non-empty line of a JSONL file, parsed (the suites that read an agent's telemetry file).
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sp::test {

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
    std::ifstream in(path);
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    return out;
}

}  // namespace sp::test
