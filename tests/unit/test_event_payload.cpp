// The typed event payloads (sp/event_payload.h): each kind's writer gives the line the agent wrote
// when it built payloads as nlohmann objects (the lines below were written that way), the reader
// gives the payload back, and a payload a reader cannot trust is a named problem.
#include <QtTest>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sp/event_payload.h"
#include "sp/jsonl.h"
#include "sp/run_end.h"

using namespace sp;

// moc cannot read the raw strings below, and needs only the class.
#ifndef Q_MOC_RUN
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

LossEvidence evidence(double loss, double ema, double stddev, double z, std::int64_t history,
                      double threshold) {
    LossEvidence e;
    e.loss = loss;
    e.ema = ema;
    e.stddev = stddev;
    e.z = z;
    e.history = history;
    e.threshold = threshold;
    e.window_steps = 20;
    return e;
}

Command pin_command() {
    Command c;
    c.kind = Command::Kind::pin;
    c.blocks = {1, 2};
    c.precision = Precision::int8;
    c.for_steps = 200;
    c.release_on_spike = true;
    return c;
}

// One event of every kind the agent writes, and its line as the agent wrote it before payloads
// were typed (nlohmann::json objects, dumped, parsed and dumped again).
struct Golden {
    EventRecord event;
    std::string line;
};

std::vector<Golden> goldens() {
    std::vector<Golden> g;
    const auto add = [&](std::int64_t step, double ts, EventPayload p, const char* line) {
        g.push_back({make_event(step, ts, std::move(p)), line});
    };
    add(120, 1717171717.25, PrecisionChangePayload{3, "blocks.3", Precision::bf16, Precision::int8, "policy"},
        R"({"type":"event","kind":"precision_change","step":120,"timestamp":1717171717.25,"block":3,"from":"bf16","name":"blocks.3","reason":"policy","to":"int8"})");
    add(7, 1764214324.1234567,
        PrecisionChangePayload{0, "h\xC3\xA9llo \"q\"\n\x01", Precision::int8, Precision::fp8_e4m3,
                               "rollback"},
        "{\"type\":\"event\",\"kind\":\"precision_change\",\"step\":7,\"timestamp\":1764214324.1234567,"
        "\"block\":0,"
        "\"from\":\"int8\",\"name\":\"h\xC3\xA9llo "
        "\\\"q\\\"\\n\\u0001\",\"reason\":\"rollback\",\"to\":\"fp8_e4m3\"}");
    add(10, 100000.0, CommandEventPayload{pin_command(), true, "t-pin-1", 2, std::nullopt},
        R"({"type":"event","kind":"command","step":10,"timestamp":100000.0,"changes":2,"command":{"blocks":[1,2],"cmd":"pin","for_steps":200,"precision":"int8","release_on_spike":true},"id":"t-pin-1","ok":true})");
    Command budget;
    budget.kind = Command::Kind::set_budget;
    budget.target_pct = 37.5;
    add(11, 0.0001, CommandEventPayload{budget, false, std::nullopt, std::nullopt, "no budget mode"},
        R"({"type":"event","kind":"command","step":11,"timestamp":0.0001,"command":{"cmd":"set_budget","target_pct":37.5},"error":"no budget mode","ok":false})");
    Command all;
    all.kind = Command::Kind::release_all;
    add(12, 1e16, CommandEventPayload{all, true, std::nullopt, 0, std::nullopt},
        R"({"type":"event","kind":"command","step":12,"timestamp":1e+16,"changes":0,"command":{"cmd":"release_all"},"ok":true})");
    add(140, 1717171730.5, PinReleasePayload{EventTrigger::expired, {}, std::nullopt, {2}, {"blocks.2"}},
        R"({"type":"event","kind":"pin_release","step":140,"timestamp":1717171730.5,"blocks":[2],"names":["blocks.2"],"trigger":"expired"})");
    add(230, 1717171790.5,
        PinReleasePayload{
            EventTrigger::spike, evidence(2.9, 2.3, 0.05, 12.0, 230, 6.0), 330, {1}, {"blocks.1"}},
        R"({"type":"event","kind":"pin_release","step":230,"timestamp":1717171790.5,"blocks":[1],"cooldown_until":330,"ema":2.3,"history":230,"loss":2.9,"names":["blocks.1"],"stddev":0.05,"threshold":6.0,"trigger":"spike","window_steps":20,"z":12.0})");
    add(230, 1717171790.5,
        LossSpikePayload{EventTrigger::spike, evidence(1e5, 2.3456789012345, 0.048, 27.1, 42, 6.0)},
        R"({"type":"event","kind":"loss_spike","step":230,"timestamp":1717171790.5,"ema":2.3456789012345,"history":42,"loss":100000.0,"stddev":0.048,"threshold":6.0,"trigger":"spike","window_steps":20,"z":27.1})");
    add(42, 1717171717.25,
        RollbackPayload{EventTrigger::nonfinite,
                        evidence(kNaN, 2.61, 0.048, 0.0, 42, 6.5),
                        {1, 3},
                        {"blocks.1", "blocks.3"},
                        142},
        R"({"type":"event","kind":"rollback","step":42,"timestamp":1717171717.25,"blocks":[1,3],"cooldown_until":142,"ema":2.61,"history":42,"loss":null,"names":["blocks.1","blocks.3"],"stddev":0.048,"threshold":6.5,"trigger":"nonfinite","window_steps":20,"z":0.0})");
    add(50, 1717171720.5,
        MapAdoptedPayload{0,
                          {2, 5},
                          std::vector<Precision>{Precision::bf16, Precision::int4},
                          std::vector<Reason>{Reason::policy, Reason::pin},
                          "blocks.2 int8 here, bf16 on rank 0"},
        R"({"type":"event","kind":"map_adopted","step":50,"timestamp":1717171720.5,"blocks":[2,5],"difference":"blocks.2 int8 here, bf16 on rank 0","from_rank":0,"reasons":["policy","pin"],"to":["bf16","int4"]})");
    add(120, 1717171717.25,
        DroppedPayload{3, 5, 3, std::string("writing telemetry file 'run.jsonl' failed: File too large")},
        R"({"type":"event","kind":"dropped","step":120,"timestamp":1717171717.25,"count":3,"total":5,"write_errors":3,"error":"writing telemetry file 'run.jsonl' failed: File too large"})");
    add(-1, 1717171717.25, DroppedPayload{1, 1, std::nullopt, std::nullopt},
        R"({"type":"event","kind":"dropped","step":-1,"timestamp":1717171717.25,"count":1,"total":1})");
    add(3, 1717171717.25,
        WarningPayload{std::string("telemetry record not written: EventRecord has no kind")},
        R"({"type":"event","kind":"warning","step":3,"timestamp":1717171717.25,"message":"telemetry record not written: EventRecord has no kind"})");
    add(5, 1717171717.25, TelemetryLossPayload{"/tmp/run.jsonl", true, 4, 4, 100, std::string("disk full")},
        R"({"type":"event","kind":"telemetry_loss","step":5,"timestamp":1717171717.25,"error":"disk full","file":"/tmp/run.jsonl","lost":4,"lost_to_errors":4,"offered":100,"state":"failing"})");
    add(6, 1717171717.25, TelemetryLossPayload{"/tmp/run.jsonl", false, 4, 4, 100, std::nullopt},
        R"({"type":"event","kind":"telemetry_loss","step":6,"timestamp":1717171717.25,"file":"/tmp/run.jsonl","lost":4,"lost_to_errors":4,"offered":100,"state":"recovered"})");
    g.push_back(
        {make_run_end_event({2399, "completed"}, 1717173400.5),
         R"({"type":"event","kind":"run_end","step":2399,"timestamp":1717173400.5,"reason":"completed"})"});
    g.push_back(
        {make_run_end_event({-1, "error: bad \"thing\""}, 1717173400.5),
         R"({"type":"event","kind":"run_end","step":-1,"timestamp":1717173400.5,"reason":"error: bad \"thing\""})"});
    return g;
}

EventRecord read_line(const std::string& line) {
    TelemetryRecord rec;
    std::string error;
    if (parse_record(line, rec, error) != ParseStatus::ok) throw std::runtime_error(error);
    return std::get<EventRecord>(rec);
}

// The problem the reader names for an event of `kind` with these fields; "" when none.
std::string problem_of(const char* kind, const char* fields) {
    return event_problem(read_line(std::string(R"({"type":"event","kind":")") + kind +
                                   R"(","step":1,"timestamp":2.0)" + (fields[0] ? "," : "") + fields + "}"));
}

}  // namespace

static void eachKindWritesTheAgentsLine() {
    for (const Golden& g : goldens())
        QCOMPARE(QString::fromStdString(to_json_line(g.event)), QString::fromStdString(g.line));
}

// write -> read -> the same payload (compared as its line: the writer writes every field).
static void eachKindReadsBackToItsPayload() {
    for (const Golden& g : goldens()) {
        const EventRecord back = read_line(g.line);
        QCOMPARE(back.payload.index(), g.event.payload.index());
        QCOMPARE(QString::fromStdString(event_problem(back)), QString());
        QCOMPARE(back.step, g.event.step);
        QCOMPARE(QString::fromStdString(to_json_line(back)), QString::fromStdString(g.line));
    }
    const EventRecord rollback = read_line(goldens()[8].line);
    const auto& r = std::get<RollbackPayload>(rollback.payload);
    QVERIFY(std::isnan(*r.evidence.loss));
    QCOMPARE(r.blocks, (std::vector<int>{1, 3}));
    QCOMPARE(*r.cooldown_until, std::int64_t(142));
    QVERIFY(r.trigger == EventTrigger::nonfinite);
    const EventRecord command = read_line(goldens()[2].line);
    const auto& c = std::get<CommandEventPayload>(command.payload);
    QVERIFY(c.command && c.command->kind == Command::Kind::pin && c.command->for_steps == 200);
    QCOMPARE(*c.id, std::string("t-pin-1"));
    QCOMPARE(*c.changes, std::uint64_t(2));
}

// Numbers and strings are spelled as nlohmann's dump spells them, whatever their value.
static void numbersAndStringsAsNlohmannWritesThem() {
    for (double v : {0.0, -0.0, 6.0, 1e5, 123456.0, 1e-4, 1.5e-7, 1e16, 1e21, 0.1 + 0.2, 5e-324,
                     1.7976931348623157e308, -2.5, 1764214324.1234567}) {
        LossSpikePayload p;
        p.evidence.loss = v;
        const std::string expected = R"({"type":"event","kind":"loss_spike","step":1,"timestamp":)" +
                                     nlohmann::json(v).dump() + R"(,"loss":)" + nlohmann::json(v).dump() +
                                     "}";
        QCOMPARE(QString::fromStdString(to_json_line(make_event(1, v, p))), QString::fromStdString(expected));
    }
    for (const std::string name :
         {"plain", "tab\there", "back\\slash", "\x7f", "caf\xC3\xA9", "bad \xFF byte"}) {
        const std::string line = to_json_line(make_event(1, 2.0, WarningPayload{name}));
        const std::string expected =
            R"({"type":"event","kind":"warning","step":1,"timestamp":2.0,"message":)" +
            nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "}";
        QCOMPARE(QString::fromStdString(line), QString::fromStdString(expected));
    }
}

// A known kind whose payload a reader cannot trust: an UntypedEvent naming what is wrong.
static void malformedPayloadsAreNamedProblems() {
    const struct {
        const char* kind;
        const char* fields;
        const char* problem;
    } cases[] = {
        {"precision_change", R"("from":"bf16","to":"int8")", "'block' is missing"},
        {"precision_change", R"("block":null,"from":"bf16","to":"int8")",
         "'block' must be a non-negative integer, got null"},
        {"precision_change", R"("block":1,"from":"bf16","to":"fp9")",
         "'to' must be a precision name, got \"fp9\""},
        {"precision_change", R"("block":1,"from":"bf16","to":"int8","reason":3)",
         "'reason' must be a string, got 3"},
        {"command", R"("command":{"cmd":"fly"},"ok":true)", "'command': "},
        {"command", R"("ok":"yes")", "'ok' must be a boolean, got \"yes\""},
        {"command", R"("ok":true,"changes":-1)", "'changes' must be a non-negative integer, got -1"},
        {"pin_release", R"("blocks":[1])", "'trigger' is missing"},
        {"pin_release", R"("trigger":"expired","blocks":[1,"x"])",
         "'blocks[1]' must be a non-negative integer, got \"x\""},
        {"pin_release", R"("trigger":"later","blocks":[1])",
         "'trigger' must be \"expired\", \"spike\" or \"nonfinite\", got \"later\""},
        {"loss_spike", R"("loss":"high")", "'loss' must be a number or null, got \"high\""},
        {"loss_spike", R"("trigger":"expired")",
         "'trigger' must be \"spike\" or \"nonfinite\", got \"expired\""},
        {"rollback", R"("trigger":"spike")", "'blocks' is missing"},
        {"rollback", R"("blocks":[1],"names":[2])", "'names[0]' must be a string, got 2"},
        {"rollback", R"("blocks":[1],"history":1.5)", "'history' must be an integer, got 1.5"},
        {"map_adopted", R"("blocks":{})", "'blocks' must be an array, got {}"},
        {"map_adopted", R"("blocks":[1],"to":["bf16"],"reasons":["whim"])",
         "'reasons[0]' must be a reason name, got \"whim\""},
        {"map_adopted", R"("blocks":[1],"to":[],"reasons":[])",
         "'to' and 'reasons' must be as long as 'blocks'"},
        {"dropped", R"("total":3)", "'count' is missing"},
        {"dropped", R"("count":3,"write_errors":true)",
         "'write_errors' must be a non-negative integer, got true"},
        {"warning", R"("message":["x"])", "'message' must be a string, got [\"x\"]"},
        {"telemetry_loss", R"("file":"f","state":"meh","lost":1,"lost_to_errors":1,"offered":1)",
         "'state' must be \"failing\" or \"recovered\", got \"meh\""},
        {"telemetry_loss", R"("file":"f","state":"failing","lost":1,"offered":1)",
         "'lost_to_errors' is missing"},
        {"run_end", R"("reason":7)", "'reason' must be a string, got 7"},
    };
    for (const auto& c : cases) {
        const std::string problem = problem_of(c.kind, c.fields);
        QVERIFY2(problem.rfind(c.problem, 0) == 0,
                 qPrintable(QString::fromStdString(std::string(c.kind) + " {" + c.fields + "}: " + problem)));
    }
    // Kept, never lost: the line reads back as it came.
    const std::string line =
        R"({"type":"event","kind":"precision_change","step":1,"timestamp":2.0,"block":null})";
    QCOMPARE(QString::fromStdString(to_json_line(read_line(line))), QString::fromStdString(line));
    // A malformed run_end still ends the run.
    const auto end =
        read_run_end(read_line(R"({"type":"event","kind":"run_end","step":9,"timestamp":2.0,"reason":7})"));
    QVERIFY(end && end->step == 9 && end->reason.empty());
    // A malformed command event still names the command it answers (a string id only).
    const EventRecord bad_command =
        read_line(R"({"type":"event","kind":"command","step":3,"timestamp":1.0,"id":"dash-7","ok":"yes"})");
    QCOMPARE(QString::fromStdString(std::get<UntypedEvent>(bad_command.payload).id), QString("dash-7"));
    QVERIFY(!event_problem(bad_command).empty());
    const EventRecord numeric_id =
        read_line(R"({"type":"event","kind":"command","step":3,"timestamp":1.0,"id":7,"ok":true})");
    QVERIFY(std::get<UntypedEvent>(numeric_id.payload).id.empty());
}

// Another producer's kind: its fields kept as text, in their order, and its message shown.
static void otherKindsKeepTheirFields() {
    const std::string line =
        R"({"type":"event","kind":"mystery","step":4,"timestamp":2.5,"z":1,"message":"hi","a":[1,{"b":null}]})";
    const EventRecord e = read_line(line);
    const auto& u = std::get<UntypedEvent>(e.payload);
    QCOMPARE(QString::fromStdString(u.fields_json), QString(R"({"z":1,"message":"hi","a":[1,{"b":null}]})"));
    QCOMPARE(QString::fromStdString(u.message), QString("hi"));
    QVERIFY(u.problem.empty());
    QCOMPARE(QString::fromStdString(to_json_line(e)), QString::fromStdString(line));
    const EventRecord built =
        event_from_json_text("mystery", 4, 2.5, R"({"kind":"x","z":1,"message":"hi","a":[1,{"b":null}]})");
    QCOMPARE(QString::fromStdString(to_json_line(built)), QString::fromStdString(line));
    QCOMPARE(QString::fromStdString(event_problem(event_from_json_text("warning", 1, 2.0, "not json"))),
             QString("the payload is not a JSON object"));
}

// What sp-ctl validate checks against the layout: every block each kind names; none of a refused
// command (why it was refused may be that block) or of an untrusted payload.
static void eventBlocksAreTheBlocksEachKindNames() {
    const auto blocks = [](const char* kind, const char* fields) {
        return event_blocks(event_from_json_text(kind, 1, 2.0, fields));
    };
    using Ids = std::vector<int>;
    QCOMPARE(blocks("precision_change", R"({"block":99,"from":"bf16","to":"int8"})"), Ids{99});
    QCOMPARE(blocks("pin_release", R"({"trigger":"expired","blocks":[1,7]})"), (Ids{1, 7}));
    QCOMPARE(blocks("rollback", R"({"blocks":[5,6]})"), (Ids{5, 6}));
    QCOMPARE(blocks("map_adopted", R"({"blocks":[0,8]})"), (Ids{0, 8}));
    const char* pin = R"({"command":{"cmd":"pin","blocks":[4],"precision":"int8"},"ok":true})";
    QCOMPARE(blocks("command", pin), Ids{4});
    QCOMPARE(blocks("command", R"({"command":{"cmd":"release","blocks":[3]}})"),
             Ids{3});  // ok absent: applied
    QVERIFY(
        blocks("command", R"({"command":{"cmd":"pin","blocks":[4],"precision":"int8"},"ok":false})").empty());
    QVERIFY(blocks("precision_change", R"({"block":-1,"from":"bf16","to":"int8"})").empty());
    QVERIFY(blocks("warning", R"({"message":"block 3"})").empty());
}

static void writerRefusesInconsistentRecords() {
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, to_json_line(EventRecord{}));
    EventRecord e = make_event(1, 2.0, WarningPayload{});
    e.kind = "rollback";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, to_json_line(e));
    EventRecord bad;
    bad.kind = "mystery";
    bad.payload = UntypedEvent{"not an object", "", "", ""};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, to_json_line(bad));
}
#endif  // Q_MOC_RUN

class TestEventPayload : public QObject {
    Q_OBJECT
  private slots:
    void eachKindWritesTheAgentsLine() { ::eachKindWritesTheAgentsLine(); }
    void eachKindReadsBackToItsPayload() { ::eachKindReadsBackToItsPayload(); }
    void numbersAndStringsAsNlohmannWritesThem() { ::numbersAndStringsAsNlohmannWritesThem(); }
    void malformedPayloadsAreNamedProblems() { ::malformedPayloadsAreNamedProblems(); }
    void otherKindsKeepTheirFields() { ::otherKindsKeepTheirFields(); }
    void writerRefusesInconsistentRecords() { ::writerRefusesInconsistentRecords(); }
    void eventBlocksAreTheBlocksEachKindNames() { ::eventBlocksAreTheBlocksEachKindNames(); }
};

QTEST_APPLESS_MAIN(TestEventPayload)
#include "test_event_payload.moc"
