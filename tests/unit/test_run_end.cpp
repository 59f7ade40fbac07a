// The run_end record and RunEndTracker: a run that ended says how and where; one that stops
// without the record was cut, and the tracker names the step it stopped at.
#include <QtTest>

#include <string>

#include "sp/jsonl.h"
#include "sp/run_end.h"

namespace {

sp::TelemetryRecord header() {
    sp::RunHeader h;
    h.run_id = "run-1";
    h.producer = "test";
    h.blocks = {{0, "blocks.0", 100}};
    return h;
}

sp::TelemetryRecord update(std::int64_t step) {
    sp::UpdateRecord u;
    u.step_id = step;
    return u;
}

sp::TelemetryRecord event_at(std::int64_t step, const char* kind) {
    return sp::event_from_json_text(kind, step, 0.0, "{}");
}

sp::TelemetryRecord run_end(std::int64_t step, const char* reason) {
    return sp::make_run_end_event({step, reason}, 1000.0);
}

}  // namespace

class TestRunEnd : public QObject {
    Q_OBJECT

  private slots:
    void the_event_round_trips_through_a_line() {
        const std::string line = sp::to_json_line(run_end(42, "interrupted"));
        QCOMPARE(line, std::string(R"({"type":"event","kind":"run_end","step":42,"timestamp":1000.0,)"
                                   R"("reason":"interrupted"})"));
        sp::TelemetryRecord back;
        std::string error;
        QVERIFY2(sp::parse_record_line(line, back, error), error.c_str());
        const auto end = sp::read_run_end(std::get<sp::EventRecord>(back));
        QVERIFY(end.has_value());
        QCOMPARE(end->step, std::int64_t(42));
        QCOMPARE(end->reason, std::string("interrupted"));
        QVERIFY(!sp::read_run_end(std::get<sp::EventRecord>(event_at(3, "rollback"))));
    }

    void a_run_without_run_end_was_cut_at_its_last_step() {
        sp::RunEndTracker t;
        for (const auto& r : {header(), update(10), event_at(55, "precision_change"), update(40)}) t.see(r);
        // The last step is the highest any record named, events and statistics lines included.
        QCOMPARE(t.last_step().value_or(-2), std::int64_t(55));
        QCOMPARE(t.cut_message(), std::string("ends at step 55 without a run_end record: the run was cut"));
        // A loss report the writer adds at shutdown (step -1) is not a step of the run.
        t.see(event_at(-1, "dropped"));
        QCOMPARE(t.last_step().value_or(-2), std::int64_t(55));
    }

    void a_run_with_run_end_ended() {
        sp::RunEndTracker t;
        for (const auto& r : {header(), update(10), run_end(59, "completed"), event_at(-1, "dropped")})
            t.see(r);
        QVERIFY(t.end().has_value());
        QCOMPARE(t.end()->step, std::int64_t(59));
        QCOMPARE(t.end()->reason, std::string("completed"));
        QCOMPARE(t.cut_message(), std::string());
    }

    void a_second_run_in_the_file_is_judged_on_its_own() {
        sp::RunEndTracker t;
        for (const auto& r : {header(), update(10), run_end(10, "completed"), header(), update(5)}) t.see(r);
        QVERIFY(!t.end().has_value());
        QCOMPARE(t.cut_message(), std::string("ends at step 5 without a run_end record: the run was cut"));
        sp::RunEndTracker early;
        early.see(header());
        QCOMPARE(early.cut_message(),
                 std::string("ends before its first step without a run_end record: the run was cut"));
    }

    void the_original_tools_headerless_files_are_not_judged() {
        sp::RunEndTracker t;
        t.see(update(10));
        t.see(update(20));
        QVERIFY(!t.has_header());
        QCOMPARE(t.cut_message(), std::string());
        QCOMPARE(t.no_record_message(), std::string());
    }

    // Not even a header: the producer stopped before it wrote one.
    void no_record_at_all_is_cut_without_a_header() {
        sp::RunEndTracker t;
        QCOMPARE(t.no_record_message(), std::string("cut: no header"));
        QCOMPARE(t.cut_message(), std::string());  // no run to judge
        t.see(header());
        QCOMPARE(t.no_record_message(), std::string());
    }
};

QTEST_GUILESS_MAIN(TestRunEnd)
#include "test_run_end.moc"
