#pragma once
// What the two halves of sp::protocol's message layer (protocol.cpp, protocol_client.cpp) share.
// Private to sp_core.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sp::protocol::detail {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Replies must go out even when a client sent (and we echo) invalid UTF-8.
inline std::string dump(const ojson& j) {
    return j.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// The value after "[json.exception.parse_error.101] ".
inline std::string strip_exception_prefix(const char* what) {
    std::string_view w = what;
    if (!w.empty() && w.front() == '[') {
        const auto end = w.find("] ");
        if (end != std::string_view::npos) w.remove_prefix(end + 2);
    }
    return std::string(w);
}

}  // namespace sp::protocol::detail
