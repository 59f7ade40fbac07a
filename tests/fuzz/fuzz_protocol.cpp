// The wire protocol's readers on an arbitrary frame: parse_request (for several model sizes),
// parse_reply, parse_snapshot, parse_hello, parse_heartbeat and seq_of. protocol.h promises that none throws
// on network input, so nothing is caught here. What they accept must also be answerable: replies to a parsed
// request build, a parsed snapshot written again by snapshot_reply parses again, and so does a parsed hello
// written again by hello().
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
    if (const auto hello = proto::parse_hello(frame, error)) {
        if (!error.empty()) sp::fuzz::finding("parse_hello: a hello with an error");
        const std::string again =
            proto::hello(1, hello->header.run_id, hello->rank, hello->header.blocks,
                         hello->header.config_json, 0.5, hello->header.calibration_errors);
        const auto back = proto::parse_hello(again, error);
        if (!back || back->header.blocks.size() != hello->header.blocks.size())
            sp::fuzz::finding("a parsed hello, written again, does not parse back: " + error + "\n" + again);
    } else if (error.empty()) {
        sp::fuzz::finding("parse_hello: refused without a message");
    }
    proto::parse_heartbeat(frame, error);
    return 0;
}
