// The wire protocol's replies and telemetry: topics, the reply and snapshot shapes read back with
// nlohmann, hello and heartbeat, seq splicing and lookup, and the client round trips. Requests and
// their rejections are in test_protocol.cpp.
#include <QtTest>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol_fixtures.h"
#include "sp/jsonl.h"
#include "sp/protocol.h"
#include "sp/record_line.h"

using nlohmann::json;
namespace proto = sp::protocol;
using namespace sp::test::protocol_fixtures;

namespace {

sp::UpdateRecord sample_update() {
    sp::UpdateRecord r;
    r.step_id = 50;
    r.timestamp = 1717171717.25;
    r.blocks_bf16 = 1;
    r.blocks_int8 = 1;
    r.mean_sensitivity = 0.45;
    r.precision_changes = 1;
    r.estimated_bandwidth_saving_pct = 25.0;
    r.mode = sp::Mode::dynamic;
    for (int i = 0; i < 2; ++i) {
        sp::BlockDetail d;
        d.id = i;
        d.precision = i == 0 ? sp::Precision::int8 : sp::Precision::bf16;
        d.sensitivity = 0.2 + 0.5 * i;
        d.reason = sp::Reason::policy;
        r.block_details.push_back(d);
    }
    return r;
}

proto::Snapshot sample_snapshot() {
    proto::Snapshot s;
    s.seq = 41;
    s.step = 120;
    s.run_id = "run-7";
    s.rank = 0;
    s.mode = sp::Mode::static_;
    s.layout = sp::uniform_layout(2, 4096);
    s.precision = {sp::Precision::int8, sp::Precision::bf16};
    s.pins = {sp::Precision::int8, std::nullopt};
    s.config_json = q("{'mode':'dynamic','warmup_steps':10}");
    s.last_update = sample_update();
    return s;
}

}  // namespace

class TestProtocolReplies : public QObject {
    Q_OBJECT

  private slots:
    void topics() {
        for (proto::Topic t : {proto::Topic::hello, proto::Topic::update, proto::Topic::stats,
                               proto::Topic::event, proto::Topic::heartbeat}) {
            QVERIFY(proto::parse_topic(proto::to_string(t)) == t);
        }
        QCOMPARE(proto::to_string(proto::Topic::heartbeat), std::string_view("heartbeat"));
        QVERIFY(!proto::parse_topic("updates"));
        QVERIFY(!proto::parse_topic(""));
    }

    void ack_pong_reject_shapes() {
        const proto::Request pin = request_of(q("{'id':'c1','cmd':'pin','blocks':[1],'precision':'int8'}"));
        json j = json::parse(proto::ack(pin, 121));
        QCOMPARE(j.size(), std::size_t(4));
        QCOMPARE(j["id"].get<std::string>(), std::string("c1"));
        QCOMPARE(j["ok"].get<bool>(), true);
        QCOMPARE(j["cmd"].get<std::string>(), std::string("pin"));
        QCOMPARE(j["effective_step"].get<std::int64_t>(), std::int64_t(121));

        const proto::Request ping = request_of(q("{'id':'p','cmd':'ping'}"));
        j = json::parse(proto::pong(ping, 7, 12.5));
        QCOMPARE(j["id"].get<std::string>(), std::string("p"));
        QVERIFY(j["ok"].get<bool>() && j["pong"].get<bool>());
        QCOMPARE(j["step"].get<std::int64_t>(), std::int64_t(7));
        QCOMPARE(j["time"].get<double>(), 12.5);
        QCOMPARE(j["protocol"].get<int>(), proto::kVersion);

        j = json::parse(proto::reject(std::nullopt, "not valid JSON: x"));
        QVERIFY(j["id"].is_null());
        QCOMPARE(j["ok"].get<bool>(), false);
        QCOMPARE(j["error"].get<std::string>(), std::string("not valid JSON: x"));
        j = json::parse(proto::reject(error_of(q("{'id':'z','cmd':'explode'}"))));
        QCOMPARE(j["id"].get<std::string>(), std::string("z"));
        QVERIFY(contains(j["error"].get<std::string>(), "unknown command 'explode'"));
        // Invalid UTF-8 in an error (echoed client bytes) must not break the reply.
        j = json::parse(proto::reject(std::string("a\xff"), "bad \xfe"));
        QCOMPARE(j["ok"].get<bool>(), false);
    }

    // The budget target travels beside the mode (additive: absent from older agents, then nullopt).
    void snapshot_carries_the_budget_target() {
        const proto::Request r = request_of(q("{'id':'s3','cmd':'snapshot'}"));
        proto::Snapshot s = sample_snapshot();
        proto::Snapshot back;
        std::string error;
        QVERIFY2(proto::parse_snapshot(proto::snapshot_reply(r, s), back, error), error.c_str());
        QVERIFY(!back.budget_target_pct);
        s.budget_target_pct = 62.5;
        const std::string text = proto::snapshot_reply(r, s);
        QCOMPARE(json::parse(text)["snapshot"]["budget_target_pct"].get<double>(), 62.5);
        QVERIFY2(proto::parse_snapshot(text, back, error), error.c_str());
        QCOMPARE(*back.budget_target_pct, 62.5);
        std::string bad = text;
        bad.replace(bad.find("\"budget_target_pct\":62.5"), 24, "\"budget_target_pct\":-1.0");
        QVERIFY(!proto::parse_snapshot(bad, back, error));
        QVERIFY2(contains(error, "budget_target_pct"), error.c_str());
    }

    // A pin's terms (POLICY.md rule 20) travel per block, only where the block is pinned with them.
    void snapshot_carries_pin_terms() {
        const proto::Request r = request_of(q("{'id':'s2','cmd':'snapshot'}"));
        proto::Snapshot s = sample_snapshot();
        s.pin_until = {std::int64_t(320), std::int64_t(999)};  // block 1 is not pinned: not written
        s.pin_release_on_spike = {true, false};
        const std::string text = proto::snapshot_reply(r, s);
        const json blocks = json::parse(text)["snapshot"]["blocks"];
        QCOMPARE(blocks[0]["pin_until"].get<std::int64_t>(), std::int64_t(320));
        QCOMPARE(blocks[0]["pin_release_on_spike"].get<bool>(), true);
        QVERIFY(!blocks[1].contains("pin_until") && !blocks[1].contains("pin_release_on_spike"));
        proto::Snapshot back;
        std::string error;
        QVERIFY2(proto::parse_snapshot(text, back, error), error.c_str());
        QVERIFY(back.pin_until ==
                (std::vector<std::optional<std::int64_t>>{std::int64_t(320), std::nullopt}));
        QVERIFY(back.pin_release_on_spike == (std::vector<bool>{true, false}));
        // A wrong type is named.
        std::string bad = text;
        bad.replace(bad.find("\"pin_release_on_spike\":true"), 27, "\"pin_release_on_spike\":\"y\"");
        QVERIFY(!proto::parse_snapshot(bad, back, error));
        QVERIFY2(contains(error, "pin_release_on_spike"), error.c_str());
    }

    void snapshot_shape_and_round_trip() {
        const proto::Request r = request_of(q("{'id':'s1','cmd':'snapshot'}"));
        const proto::Snapshot s = sample_snapshot();
        const std::string text = proto::snapshot_reply(r, s);
        const json j = json::parse(text);
        QCOMPARE(j["id"].get<std::string>(), std::string("s1"));
        QVERIFY(j["ok"].get<bool>());
        const json& snap = j["snapshot"];
        QCOMPARE(snap["protocol"].get<int>(), 1);
        QCOMPARE(snap["seq"].get<std::uint64_t>(), std::uint64_t(41));
        QCOMPARE(snap["step"].get<std::int64_t>(), std::int64_t(120));
        QCOMPARE(snap["run_id"].get<std::string>(), std::string("run-7"));
        QCOMPARE(snap["mode"].get<std::string>(), std::string("static"));
        QCOMPARE(snap["blocks"].size(), std::size_t(2));
        QCOMPARE(snap["blocks"][0]["name"].get<std::string>(), std::string("blocks.0"));
        QCOMPARE(snap["blocks"][0]["bytes_bf16"].get<std::uint64_t>(), std::uint64_t(4096));
        QCOMPARE(snap["blocks"][0]["precision"].get<std::string>(), std::string("int8"));
        QCOMPARE(snap["blocks"][0]["pin"].get<std::string>(), std::string("int8"));
        QVERIFY(snap["blocks"][1]["pin"].is_null());
        QCOMPARE(snap["config"]["warmup_steps"].get<int>(), 10);
        QCOMPARE(snap["last_update"]["step_id"].get<int>(), 50);
        QCOMPARE(snap["last_update"]["block_details"]["0"]["precision"].get<std::string>(),
                 std::string("int8"));

        proto::Snapshot back;
        std::string error;
        QVERIFY2(proto::parse_snapshot(text, back, error), error.c_str());
        QCOMPARE(back.seq, s.seq);
        QCOMPARE(back.step, s.step);
        QCOMPARE(back.run_id, s.run_id);
        QVERIFY(back.mode == s.mode);
        QCOMPARE(back.layout.size(), std::size_t(2));
        QCOMPARE(back.layout[1].name, std::string("blocks.1"));
        QVERIFY(back.precision == s.precision);
        QVERIFY(back.pins == s.pins);
        // Without terms: the blocks carry none, and the parse reports none.
        QVERIFY(!snap["blocks"][0].contains("pin_until"));
        QVERIFY(back.pin_until == (std::vector<std::optional<std::int64_t>>{std::nullopt, std::nullopt}));
        QVERIFY(back.pin_release_on_spike == (std::vector<bool>{false, false}));
        QCOMPARE(json::parse(back.config_json), json::parse(s.config_json));
        QVERIFY(back.last_update.has_value());
        QCOMPARE(sp::to_json_line(*back.last_update), sp::to_json_line(*s.last_update));

        // No update yet: null; and a state that does not cover the layout is the caller's bug.
        proto::Snapshot fresh = s;
        fresh.last_update.reset();
        fresh.config_json.clear();
        QVERIFY(json::parse(proto::snapshot_reply(r, fresh))["snapshot"]["last_update"].is_null());
        QVERIFY(proto::parse_snapshot(proto::snapshot_reply(r, fresh), back, error) && !back.last_update);
        fresh.pins.pop_back();
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, proto::snapshot_reply(r, fresh));
        fresh = s;
        fresh.pin_until = {std::nullopt};  // terms, when given, cover every block
        fresh.pin_release_on_spike = {false};
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, proto::snapshot_reply(r, fresh));
        fresh = s;
        fresh.config_json = "[1]";
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, proto::snapshot_reply(r, fresh));

        QVERIFY(!proto::parse_snapshot(proto::reject(std::string("s1"), "no"), back, error));
        QVERIFY(!proto::parse_snapshot(q("{'id':'s1','ok':true,'snapshot':{'seq':-1}}"), back, error));
        QVERIFY2(contains(error, "snapshot.seq"), error.c_str());
        QVERIFY(!proto::parse_snapshot("{", back, error) && !error.empty());
        // Block fields out of their type's range (a float, a negative size) are errors, not casts.
        for (const auto& [from, to] :
             {std::pair<std::string, std::string>{"\"bytes_bf16\":", "\"bytes_bf16\":-1e300,\"x\":"},
              std::pair<std::string, std::string>{"\"id\":0,", "\"id\":3e9,"}}) {
            std::string bad = text;
            bad.replace(bad.find(from, bad.find("\"blocks\"")), from.size(), to);
            QVERIFY2(!proto::parse_snapshot(bad, back, error), bad.c_str());
            QVERIFY2(contains(error, "expected an integer in range"), error.c_str());
        }
        std::string deep = text;
        deep.insert(deep.find("\"config\":{") + 10,
                    "\"deep\":" + std::string(300, '[') + std::string(300, ']') + ",");
        QVERIFY(!proto::parse_snapshot(deep, back, error));
        QVERIFY2(contains(error, "nested deeper than 64"), error.c_str());
    }

    void snapshot_carries_the_published_line() {
        // The agent's snapshot holds no copy of its last update: the reply splices in the line the
        // stream carried, byte for byte, and that line wins over any record in the snapshot.
        const proto::Request r = request_of(q("{'id':'s2','cmd':'snapshot'}"));
        proto::Snapshot s = sample_snapshot();
        sp::UpdateRecord published = *s.last_update;
        published.step_id = 60;
        const sp::SharedRecord line = sp::share_record(published);
        const std::string text = proto::snapshot_reply(r, s, line.get());
        const std::string tail = ",\"last_update\":" + line->line() + "}}";
        QVERIFY2(text.size() > tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0,
                 text.c_str());
        proto::Snapshot back;
        std::string error;
        QVERIFY2(proto::parse_snapshot(text, back, error), error.c_str());
        QCOMPARE(back.last_update->step_id, std::int64_t(60));
        // Without a line the record in the snapshot is written: the same reply as the line's.
        s.last_update = published;
        QCOMPARE(proto::snapshot_reply(r, s), text);
    }

    void hello_and_heartbeat() {
        const std::string h = proto::hello(1, "run-7", 2, sp::uniform_layout(3, 8), "", 5.25);
        const json j = json::parse(h);
        QVERIFY(h.rfind("{\"seq\":1,", 0) == 0);
        QCOMPARE(j["protocol"].get<int>(), 1);
        QCOMPARE(j["telemetry_schema"].get<int>(), sp::kTelemetrySchemaVersion);
        QCOMPARE(j["run_id"].get<std::string>(), std::string("run-7"));
        QCOMPARE(j["rank"].get<int>(), 2);
        QCOMPARE(j["time"].get<double>(), 5.25);
        QCOMPARE(j["blocks"].size(), std::size_t(3));
        QCOMPARE(j["blocks"][2]["id"].get<int>(), 2);
        QVERIFY(j["config"].is_object() && j["config"].empty());
        QVERIFY(j.contains("version"));
        QCOMPARE(proto::seq_of(h).value_or(0), std::uint64_t(1));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, proto::hello(1, "r", 0, {}, "nope", 0.0));
        // No calibration yet: no key; once calibrated, one error per block, null where not finite.
        QVERIFY(!j.contains("calibration_errors"));
        const json c = json::parse(proto::hello(2, "run-7", 0, sp::uniform_layout(3, 8), "", 5.5,
                                                {0.01, std::numeric_limits<double>::infinity(), 0.03}));
        QCOMPARE(c["calibration_errors"], json::parse("[0.01, null, 0.03]"));

        const std::string b = proto::heartbeat(9, 300, 6.5);
        QCOMPARE(json::parse(b), json::parse(q("{'seq':9,'step':300,'time':6.5}")));
        QCOMPARE(proto::seq_of(b).value_or(0), std::uint64_t(9));
    }

    void with_seq_on_record_lines() {
        // Update: nested block_details; the line must read back as the same record.
        const std::string update = sp::to_json_line(sample_update());
        std::string line = proto::with_seq(update, 17);
        json j = json::parse(line);
        QCOMPARE(j["seq"].get<std::uint64_t>(), std::uint64_t(17));
        j.erase("seq");
        QCOMPARE(j, json::parse(update));
        sp::TelemetryRecord rec;
        std::string error;
        QVERIFY2(sp::parse_record_line(line, rec, error), error.c_str());
        QCOMPARE(sp::to_json_line(rec), update);

        // Event with a nested payload object.
        const sp::EventRecord ev = sp::event_from_json_text(
            "command", 120, 3.5,
            q("{'command':{'cmd':'pin','blocks':[1],'precision':'int8'},'ok':true,'id':'c1'}"));
        const std::string event = sp::to_json_line(ev);
        line = proto::with_seq(event, 18);
        j = json::parse(line);
        QCOMPARE(j["seq"].get<std::uint64_t>(), std::uint64_t(18));
        QCOMPARE(j["command"]["blocks"][0].get<int>(), 1);
        j.erase("seq");
        QCOMPARE(j, json::parse(event));

        // Step stats (an array of objects).
        sp::StepStatsRecord st;
        st.step = 4;
        st.blocks.resize(2);
        st.blocks[1].block_id = 1;
        const std::string stats = sp::to_json_line(st);
        line = proto::with_seq(stats, std::numeric_limits<std::uint64_t>::max());
        j = json::parse(line);
        QCOMPARE(j["seq"].get<std::uint64_t>(), std::numeric_limits<std::uint64_t>::max());
        j.erase("seq");
        QCOMPARE(j, json::parse(stats));

        // Edge shapes: an empty object, surrounding whitespace and a newline.
        QCOMPARE(proto::with_seq("{}", 1), std::string("{\"seq\":1}"));
        QCOMPARE(proto::with_seq(" { \n} \n", 2), std::string("{\"seq\":2 \n}"));
        QCOMPARE(json::parse(proto::with_seq(" {\"a\":1}\n", 3)), json::parse(q("{'seq':3,'a':1}")));
        for (const char* bad : {"", "{", "[1]", "x{}", "}{"}) {
            QVERIFY_THROWS_EXCEPTION(std::invalid_argument, proto::with_seq(bad, 1));
        }
    }

    void seq_lookup() {
        QCOMPARE(proto::seq_of(proto::with_seq(sp::to_json_line(sample_update()), 5)).value_or(0),
                 std::uint64_t(5));
        QCOMPARE(proto::seq_of(q("  { 'seq' : 12 , 'a':1}")).value_or(0), std::uint64_t(12));
        QCOMPARE(proto::seq_of(q("{'seq':0}")).value_or(99), std::uint64_t(0));
        QCOMPARE(proto::seq_of(q("{'seq':18446744073709551615}")).value_or(0),
                 std::numeric_limits<std::uint64_t>::max());
        // Not first: the slow path still finds it.
        QCOMPARE(proto::seq_of(q("{'a':{'seq':1},'seq':4}")).value_or(0), std::uint64_t(4));
        for (const std::string& none :
             {q("{'a':{'seq':3}}"), q("{'seq':-1}"), q("{'seq':1.5}"), q("{'seq':1e3}"), q("{'seq':'7'}"),
              q("{'seq':18446744073709551616}"), q("{'seq':01}"), std::string("[1]"), std::string("{"),
              std::string(""), q("{'seq':}"), q("{'seq':5")}) {
            QVERIFY2(!proto::seq_of(none), none.c_str());
        }
    }

    void client_round_trips() {
        std::vector<sp::Command> commands(4);
        commands[0].kind = sp::Command::Kind::pin;
        commands[0].blocks = {0, 2};
        commands[0].precision = sp::Precision::int8;
        commands[1].kind = sp::Command::Kind::release;
        commands[1].blocks = {2};
        commands[2].kind = sp::Command::Kind::release_all;
        commands[3].kind = sp::Command::Kind::set_mode;
        commands[3].mode = sp::Mode::off;
        for (const sp::Command& c : commands) {
            const std::string text = proto::make_request("cli-1", c);
            QVERIFY(text.rfind("{\"id\":\"cli-1\",\"cmd\":", 0) == 0);
            const proto::Request r = request_of(text);
            QCOMPARE(r.id, std::string("cli-1"));
            QVERIFY(r.kind == proto::Request::Kind::command);
            QCOMPARE(sp::to_json(r.command), sp::to_json(c));

            std::string error;
            const auto reply = proto::parse_reply(proto::ack(r, 11), error);
            QVERIFY2(reply.has_value(), error.c_str());
            QCOMPARE(reply->id.value_or("?"), std::string("cli-1"));
            QVERIFY(reply->ok && reply->error.empty());
            QCOMPARE(reply->effective_step.value_or(-1), std::int64_t(11));
        }
        QVERIFY(request_of(proto::make_request("p", proto::Request::Kind::ping)).kind ==
                proto::Request::Kind::ping);
        QVERIFY(request_of(proto::make_request("s", proto::Request::Kind::snapshot)).kind ==
                proto::Request::Kind::snapshot);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 proto::make_request("x", proto::Request::Kind::command));

        std::string error;
        auto reply = proto::parse_reply(proto::reject(error_of("[]")), error);
        QVERIFY(reply && !reply->id && !reply->ok);
        QCOMPARE(reply->error, std::string("request must be a JSON object, got array"));
        QVERIFY(!reply->effective_step);
        const std::string pong = proto::pong(request_of(q("{'id':'p','cmd':'ping'}")), 3, 1.0);
        reply = proto::parse_reply(pong, error);
        QVERIFY(reply && reply->ok && !reply->effective_step);
        QCOMPARE(reply->text, pong);

        struct Bad {
            std::string frame, error;
        };
        for (const Bad& b : std::vector<Bad>{
                 {"{",
                  "reply is not valid JSON: column 2: syntax error while parsing object key - unexpected "
                  "end of input; expected string literal"},
                 {"{'id':'a','ok':true,'effective_step':1e309}",
                  "reply is not valid JSON: column 38, key 'effective_step': number beyond the range of a "
                  "double: 1e309"},
                 {"[]", "reply must be a JSON object, got array"},
                 {"{'ok':true}", "reply: field 'id': missing"},
                 {"{'id':1,'ok':true}", "reply: field 'id': expected a string or null, got number"},
                 {"{'id':'a'}", "reply: field 'ok': missing or not a boolean"},
                 {"{'id':'a','ok':false}",
                  "reply: ok is false but field 'error' is missing or not a non-empty string"},
                 {"{'id':'a','ok':true,'effective_step':'3'}",
                  "reply: field 'effective_step': expected an integer, got string"}}) {
            QVERIFY(!proto::parse_reply(q(b.frame), error));
            QCOMPARE(error, b.error);
        }
    }
};

QTEST_APPLESS_MAIN(TestProtocolReplies)
#include "test_protocol_replies.moc"
