#pragma once
// What the protocol suites share (test_protocol, test_protocol_replies): JSON written with single
// quotes, and the request or the rejection parse_request makes of a frame.
#include <algorithm>
#include <optional>
#include <string>
#include <variant>

#include "sp/protocol.h"

namespace sp::test::protocol_fixtures {

// JSON written with single quotes for readability (and because moc mis-parses raw strings that
// contain quote-paren sequences); none of the test texts needs a literal single quote.
inline std::string q(std::string text) {
    std::replace(text.begin(), text.end(), '\'', '"');
    return text;
}

// The rejection of `frame`; error "<accepted>" when it parsed.
inline sp::protocol::RequestError error_of(const std::string& frame, int blocks = 4) {
    auto result = sp::protocol::parse_request(frame, blocks);
    if (auto* e = std::get_if<sp::protocol::RequestError>(&result)) return *e;
    return {std::nullopt, "<accepted>"};
}

// The request `frame` holds; kind ping with id "<rejected: ...>" when it was rejected.
inline sp::protocol::Request request_of(const std::string& frame, int blocks = 4) {
    auto result = sp::protocol::parse_request(frame, blocks);
    if (auto* r = std::get_if<sp::protocol::Request>(&result)) return *r;
    sp::protocol::Request r;
    r.id = "<rejected: " + std::get<sp::protocol::RequestError>(result).error + ">";
    return r;
}

inline bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace sp::test::protocol_fixtures
