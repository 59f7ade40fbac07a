#include "sp/run_end.h"

#include <algorithm>
#include <variant>

namespace sp {

EventRecord make_run_end_event(const RunEnd& end, double timestamp) {
    return make_event(end.step, timestamp, RunEndPayload{end.reason});
}

std::optional<RunEnd> read_run_end(const EventRecord& event) {
    if (event.kind != kRunEndKind) return std::nullopt;
    RunEnd end;
    end.step = event.step;
    // A malformed payload (a reason that is not a string) still ends the run, with no reason.
    if (const auto* p = std::get_if<RunEndPayload>(&event.payload)) end.reason = p->reason.value_or("");
    return end;
}

void RunEndTracker::see(const TelemetryRecord& record) {
    saw_record_ = true;
    std::optional<std::int64_t> step;
    if (std::holds_alternative<RunHeader>(record)) {
        // A second run appended to the same file: its end is judged on its own.
        has_header_ = true;
        end_.reset();
        last_step_.reset();
    } else if (const auto* u = std::get_if<UpdateRecord>(&record)) {
        step = u->step_id;
    } else if (const auto* s = std::get_if<StepStatsRecord>(&record)) {
        step = s->step;
    } else if (const auto* e = std::get_if<EventRecord>(&record)) {
        if (auto end = read_run_end(*e)) end_ = std::move(end);
        step = e->step;
    }
    // Negative steps are the writer's own (a loss report at shutdown), not the run's.
    if (step && *step >= 0) last_step_ = std::max(last_step_.value_or(*step), *step);
}

std::string RunEndTracker::cut_message() const {
    if (!has_header_ || end_) return {};
    const std::string where = last_step_ ? "at step " + std::to_string(*last_step_) : "before its first step";
    return "ends " + where + " without a run_end record: the run was cut";
}

std::string RunEndTracker::no_record_message() const {
    return saw_record_ ? std::string() : std::string("cut: no header");
}

}  // namespace sp
