// Where the config object sits in a document (core/CONFIG.md "Where the object may sit"), and
// reading the document from text and from a file: the JSON limits, keys given twice, and files that
// are not regular or too large (sp/json_input.h).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config_section.h"
#include "sp/config.h"
#include "sp/json_input.h"

namespace sp {
namespace {

using json = nlohmann::json;

// Follows one level of nesting: the member `name` of `parent` must be an object when present.
const json* member_object(const json& parent, const char* name, const std::string& path) {
    const auto it = parent.find(name);
    if (it == parent.end()) return nullptr;
    if (!it->is_object())
        throw ConfigError({"key '" + path + "': must be an object" + detail::got_value(*it)});
    return &*it;
}

}  // namespace

Config config_from_json(const json& j) {
    if (!j.is_object()) throw ConfigError({"the configuration must be a JSON object" + detail::got_value(j)});
    // Wrapped forms: only the selective_precision object is ours; its siblings belong to others.
    if (j.contains("selective_precision")) {
        const json* sp = member_object(j, "selective_precision", "selective_precision");
        return detail::read_config_section(*sp, "selective_precision.");
    }
    if (const json* memory = member_object(j, "memory", "memory")) {
        const json* stagehand = member_object(*memory, "stagehand", "memory.stagehand");
        if (!stagehand) return Config{};
        const json* sp =
            member_object(*stagehand, "selective_precision", "memory.stagehand.selective_precision");
        // A stagehand config without our section runs with the defaults, as a missing key would.
        return sp ? detail::read_config_section(*sp, "memory.stagehand.selective_precision.") : Config{};
    }
    return detail::read_config_section(j, "");
}

Config parse_config(std::string_view json_text) {
    json j;
    JsonError error;
    JsonLimits limits;
    // Anywhere in the document: which of two values would win cannot be seen in the file.
    limits.reject_duplicate_keys = true;
    if (!parse_json(json_text, j, error, limits)) {
        if (error.kind == JsonError::Kind::duplicate_key)
            throw ConfigError({"key '" + error.path + "': given more than once in the same object (" +
                               error.location() + "); give each key once"});
        throw ConfigError({"not valid JSON: " + error.message()});
    }
    return config_from_json(j);
}

Config load_config_file(const std::string& path) {
    std::string text, problem;
    if (!read_json_file(path, text, problem))
        throw ConfigError({path + ": cannot read the file (" + problem + ")"});
    try {
        return parse_config(text);
    } catch (const ConfigError& e) {
        std::vector<std::string> problems;
        for (const std::string& p : e.problems()) problems.push_back(path + ": " + p);
        throw ConfigError(std::move(problems));
    }
}

}  // namespace sp
