#pragma once
// What the config suites share (test_config, test_config_validation): the problems
// config_from_json reports for an input, and a check that one of them holds every fragment.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/problems.h"
#include "sp/config.h"

namespace sp::test::config_fixtures {

// The problems config_from_json reports; empty when it accepted the input.
inline std::vector<std::string> problems_of(const nlohmann::json& j) {
    try {
        sp::config_from_json(j);
    } catch (const sp::ConfigError& e) {
        return e.problems();
    }
    return {};
}

}  // namespace sp::test::config_fixtures

#define EXPECT_PROBLEM(ps, ...) \
    QVERIFY2(sp::test::has_problem(ps, {__VA_ARGS__}), sp::test::joined(ps).c_str())
