#pragma once
// How a run ended. The agent's last record is an event of kind "run_end" with the step and the
// reason (core/TELEMETRY.md, "Run end"); a file or stream that stops without one was cut: the
// process died or was killed, or the file was truncated. RunEndTracker follows the records of a
// file in order and says which; replay, `sp-ctl summarize` and `sp-ctl validate` share it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sp/jsonl.h"

namespace sp {

inline constexpr std::string_view kRunEndKind = "run_end";

// The reasons the reference trainer writes. An embedder may give any one-line text; a run that
// stopped on an exception says "error: <what>".
inline constexpr std::string_view kRunEndCompleted = "completed";
inline constexpr std::string_view kRunEndInterrupted = "interrupted";

struct RunEnd {
    std::int64_t step = -1;  // the last step the run began (-1: none)
    std::string reason;
};

// The run_end event for `end` (kind, step, timestamp and {"reason": ...}).
EventRecord make_run_end_event(const RunEnd& end, double timestamp);
// The run_end an event announces; nullopt for any other kind. A missing or non-string reason reads "".
std::optional<RunEnd> read_run_end(const EventRecord& event);

class RunEndTracker {
  public:
    void see(const TelemetryRecord& record);

    // The current run's run_end, when seen (a later header starts a new run and clears it).
    const std::optional<RunEnd>& end() const { return end_; }
    // The highest step any record of the current run named (update, statistics line or event).
    std::optional<std::int64_t> last_step() const { return last_step_; }
    // True when records of this project's format were seen (a header): the original tool's
    // headerless files never carried a run_end, so their end says nothing.
    bool has_header() const { return has_header_; }
    // "ends at step 60 without a run_end record: the run was cut" when the run (with a header) stops
    // without one; "" when it ended cleanly or there is no such run.
    std::string cut_message() const;
    // "cut: no header" when no record at all was seen (a 0-byte file, or only blank or bad lines):
    // the producer stopped before its header, so such a file is not a clean, empty run. "" once any
    // record was seen. The sp-ctl readers report it; cut_message() judges a run that has a header.
    std::string no_record_message() const;

  private:
    std::optional<RunEnd> end_;
    std::optional<std::int64_t> last_step_;
    bool has_header_ = false;
    bool saw_record_ = false;
};

}  // namespace sp
