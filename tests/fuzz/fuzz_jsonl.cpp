// parse_record on each line of the input, as JsonlReader feeds it (one TelemetryRecord reused), and
// three properties of every line the parser (simdjson On-Demand) accepts as an update record:
//   - sp::parse_json and the nlohmann oracle (tests/common/update_record_oracle.h, tests only)
//     accept it too, with an equal record (differential);
//   - the writer can write that record (to_json_line throws nothing);
//   - what it writes parses back to an equal record (round trip);
// and every event's typed payload (sp/event_payload.h) writes a line that reads back to itself.
// One input in eight is also read whole by JsonlReader on one thread and with parse_on_two_threads
// (small batches): the same records, counts and problems, call for call.
// parse_record reports bad lines as values, so no exception may escape.
#include <algorithm>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../common/same_update_record.h"
#include "../common/update_record_oracle.h"
#include "fuzz_target.h"
#include "sp/event_payload.h"
#include "sp/json_input.h"
#include "sp/jsonl.h"
#include "update_record_parser.h"

namespace {

std::string printable(const sp::UpdateRecord& r) {
    try {
        return sp::to_json_line(r);
    } catch (const std::exception& e) {
        return std::string("(to_json_line threw: ") + e.what() + ")";
    }
}

[[noreturn]] void disagree(std::string_view line, const std::string& what, const sp::UpdateRecord& fast,
                           const sp::UpdateRecord* other) {
    std::string text =
        what + "\n  line:  " + std::string(line.substr(0, 4000)) + "\n  fast:  " + printable(fast);
    if (other) text += "\n  other: " + printable(*other);
    sp::fuzz::finding(text);
}

void check_update(std::string_view line, const sp::UpdateRecord& fast) {
    using sp::test::update_record_difference;
    nlohmann::ordered_json j;
    sp::JsonError bad;
    if (!sp::parse_json(line, j, bad)) {  // the project's one way of reading JSON (TELEMETRY.md)
        disagree(line, "the parser accepts a line sp::parse_json rejects: " + bad.message(), fast, nullptr);
    }
    sp::UpdateRecord dom;
    std::string error;
    if (!sp::test::update_record_from_json(j, dom, error)) {
        disagree(line, "the parser accepts a line the oracle rejects: " + error, fast, nullptr);
    }
    if (const std::string field = update_record_difference(fast, dom); !field.empty()) {
        disagree(line, "the parser and the oracle differ in " + field, fast, &dom);
    }
    const std::string written = sp::to_json_line(fast);
    sp::UpdateRecord back;
    if (!sp::detail::parse_update_record(written, back, error)) {
        disagree(written, "the writer's line does not parse back: " + error, fast, nullptr);
    }
    if (const std::string field = update_record_difference(fast, back); !field.empty()) {
        disagree(written, "the writer's line reads back different in " + field, fast, &back);
    }
}

// An event's typed payload (sp/event_payload.h), read by parse_record whatever its fields hold (a
// problem is a value, never an exception: a precision_change whose block was null killed every
// dashboard following a run), writes a line that reads back to the same line.
void check_event(const sp::EventRecord& event) {
    std::string line;
    try {
        line = sp::to_json_line(event);
    } catch (const std::invalid_argument&) {
        return;  // only a record without a kind; a read one always has one
    }
    sp::TelemetryRecord back;
    std::string error;
    if (sp::parse_record(line, back, error) != sp::ParseStatus::ok ||
        !std::holds_alternative<sp::EventRecord>(back) ||
        sp::to_json_line(std::get<sp::EventRecord>(back)) != line)
        sp::fuzz::finding("an event's line does not read back to itself: " + line + " (" + error + ")");
}

// What JsonlReader::next returned and every count after it, call for call.
std::vector<std::string> reader_trace(std::string_view input, std::size_t two_thread_batch) {
    std::istringstream in{std::string(input)};
    sp::JsonlReader reader(in);
    if (two_thread_batch > 0) reader.parse_on_two_threads(two_thread_batch);
    sp::TelemetryRecord record;
    std::vector<std::string> trace;
    for (bool more = true; more;) {
        more = reader.next(record);
        std::string entry = !more ? "end" : std::to_string(record.index());
        if (more && std::holds_alternative<sp::UpdateRecord>(record))
            entry += printable(std::get<sp::UpdateRecord>(record));
        entry += " " + std::to_string(reader.lines_read()) + " " + std::to_string(reader.bytes_read()) + " " +
                 std::to_string(reader.records_read()) + " " + std::to_string(reader.unknown_type_count()) +
                 " " + std::to_string(reader.problem_count());
        for (const sp::LineProblem& p : reader.problems())
            entry += " [" + std::to_string(p.line) + " " + p.reason + "]";
        trace.push_back(std::move(entry));
    }
    return trace;
}

}  // namespace

extern "C" int SP_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
    std::string_view input = sp::fuzz::as_text(data, size);
    sp::TelemetryRecord record;  // reused, as JsonlReader does
    std::string error;
    // One input in eight (by its hash, so a finding replays): two readers and a thread per input
    // would take the executions per second from about 270 to about 35 under the sanitizers.
    const bool compare_readers = std::hash<std::string_view>{}(input) % 8 == 0;
    const std::vector<std::string> one_thread =
        compare_readers ? reader_trace(input, 0) : std::vector<std::string>{};
    const std::vector<std::string> two_threads = compare_readers ? reader_trace(input, 100) : one_thread;
    if (one_thread != two_threads) {
        std::size_t i = 0;
        while (i < one_thread.size() && i < two_threads.size() && one_thread[i] == two_threads[i]) ++i;
        sp::fuzz::finding("JsonlReader on two threads differs from one thread at call " +
                          std::to_string(i + 1));
    }
    while (!input.empty()) {
        const std::string_view line = input.substr(0, input.find('\n'));
        input.remove_prefix(std::min(input.size(), line.size() + 1));
        const sp::ParseStatus status = sp::parse_record(line, record, error);
        if (status == sp::ParseStatus::ok && std::holds_alternative<sp::UpdateRecord>(record)) {
            check_update(line, std::get<sp::UpdateRecord>(record));
        }
        if (status == sp::ParseStatus::ok && std::holds_alternative<sp::EventRecord>(record)) {
            check_event(std::get<sp::EventRecord>(record));
        }
    }
    return 0;
}
