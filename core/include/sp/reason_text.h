#pragma once
// The one renderer of a block's decision in words (the telemetry field "reason_text"), e.g.
// "sensitivity 0.100 < int8_threshold 0.300; int4 19.1 dB < 24.0 dB; int8 41.7 dB >= 30.0 dB: int8".
// The policy records its decisions as facts (sp/reason_facts.h); the words are made where they are
// read: the telemetry writer thread, the live stream's I/O thread, sp-ctl and the tests.
#include <string>

#include "sp/telemetry.h"

namespace sp {

// The block's reason_text as read from a file or a stream when it has one, else its facts in words;
// "" when it has neither (a record without reasons).
std::string reason_text(const BlockDetail& d);

// The same, appended to `out`. What it renders from facts is plain ASCII that needs no JSON escaping
// (numbers, format, mode and reason names, and fixed words), so a writer may quote it as it is.
void append_reason_text(std::string& out, const BlockDetail& d);

// Whether the block has words to render: read ones, or facts.
inline bool has_reason_text(const BlockDetail& d) {
    return !d.reason_text.empty() || d.facts.rule != ReasonRule::none;
}

}  // namespace sp
