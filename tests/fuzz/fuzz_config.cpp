// parse_config on arbitrary text: it either returns a Config or throws ConfigError (CONFIG.md);
// anything else escaping is a finding. A Config that loaded must pass validate() and write back
// (to_json) as text that loads again.
#include "fuzz_target.h"
#include "sp/config.h"

#include <nlohmann/json.hpp>

extern "C" int SP_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
    sp::Config config;
    try {
        config = sp::parse_config(sp::fuzz::as_text(data, size));
    } catch (const sp::ConfigError&) {
        return 0;
    }
    if (const auto problems = sp::validate(config); !problems.empty()) {
        sp::fuzz::finding("a loaded config fails validate(): " + problems.front());
    }
    const std::string written = sp::to_json(config).dump();
    try {
        sp::parse_config(written);
    } catch (const sp::ConfigError& e) {
        sp::fuzz::finding("a loaded config does not load again after to_json: " + std::string(e.what()) +
                          "\n" + written);
    }
    return 0;
}
