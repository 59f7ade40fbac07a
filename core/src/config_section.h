#pragma once
// Between config.cpp (the keys) and config_file.cpp (the document around them): reading one
// selective_precision object.
#include <string>

#include <nlohmann/json.hpp>

#include "sp/config.h"

namespace sp::detail {

// Reads one selective_precision object; throws ConfigError listing every problem. `prefix` is the
// object's path plus "." ("" for a bare root), so messages name each key as the user wrote it.
Config read_config_section(const nlohmann::json& obj, const std::string& prefix);

// ", got <value>" as every config message shows a bad value: on one line, cut to 80 characters.
std::string got_value(const nlohmann::json& v);

}  // namespace sp::detail
