// The policy's modes by name (CONFIG.md "mode", PROTOCOL.md set_mode).
#include <string_view>

#include "sp/config.h"

namespace sp {

std::string_view to_string(Mode m) {
    switch (m) {
        case Mode::off:
            return "off";
        case Mode::static_:
            return "static";
        case Mode::dynamic:
            return "dynamic";
        case Mode::budget:
            return "budget";
        case Mode::tolerance:
            return "tolerance";
    }
    return "unknown";  // only for a value cast from outside the enum; validate() rejects it
}

bool parse_mode(std::string_view text, Mode& out) {
    for (Mode m : {Mode::off, Mode::static_, Mode::dynamic, Mode::budget, Mode::tolerance}) {
        if (to_string(m) == text) {
            out = m;
            return true;
        }
    }
    return false;
}

}  // namespace sp
