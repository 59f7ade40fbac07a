// The wire protocol's readers on an arbitrary frame: parse_request (for several model sizes),
// parse_reply, parse_snapshot and seq_of. protocol.h promises that none throws on network input, so
// nothing is caught here. What they accept must also be answerable: replies to a parsed request
// build, and a parsed snapshot written again by snapshot_reply parses again.
#include "fuzz_target.h"
#include "sp/protocol.h"

namespace proto = sp::protocol;

extern "C" int SP_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
    const std::string_view frame = sp::fuzz::as_text(data, size);
    for (int blocks : {proto::kUnknownBlockCount, 0, 1, 4, 48}) {
        const auto parsed = proto::parse_request(frame, blocks);
        if (const auto* r = std::get_if<proto::Request>(&parsed)) {
            proto::ack(*r, 1);
            proto::pong(*r, 1, 0.5);
        } else {
            const auto& e = std::get<proto::RequestError>(parsed);
            if (e.error.empty()) sp::fuzz::finding("parse_request: a RequestError without a message");
            proto::reject(e);
        }
    }
    std::string error;
    proto::parse_reply(frame, error);
    proto::seq_of(frame);

    proto::Snapshot snapshot;
    if (proto::parse_snapshot(frame, snapshot, error)) {
        const std::string again = proto::snapshot_reply(proto::Request{}, snapshot);
        proto::Snapshot back;
        if (!proto::parse_snapshot(again, back, error)) {
            sp::fuzz::finding("a parsed snapshot, written again, does not parse: " + error + "\n" + again);
        }
    }
    return 0;
}
