// The wire protocol's requests: every request and every rejection (exact wording), and a
// deterministic fuzz loop over parse_request. Replies, snapshots, telemetry lines, seq and the
// client round trips are in test_protocol_replies.cpp.
#include <QtTest>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol_fixtures.h"
#include "sp/protocol.h"

using nlohmann::json;
namespace proto = sp::protocol;
using namespace sp::test::protocol_fixtures;

namespace {

const std::string kNames = "pin, release, release_all, set_mode, set_budget, set_tolerance, snapshot, ping";

}  // namespace

class TestProtocol : public QObject {
    Q_OBJECT

  private slots:
    void parse_every_command() {
        proto::Request r = request_of(q("{'id':'c1','cmd':'pin','blocks':[3,1,3],'precision':'int8'}"));
        QCOMPARE(r.id, std::string("c1"));
        QVERIFY(r.kind == proto::Request::Kind::command);
        QVERIFY(r.command.kind == sp::Command::Kind::pin);
        QCOMPARE(r.command.blocks, (std::vector<int>{1, 3}));
        QVERIFY(r.command.precision == sp::Precision::int8);
        QCOMPARE(proto::cmd_name(r), std::string_view("pin"));

        r = request_of(q("{'id':'c2','cmd':'release','blocks':[0]}"));
        QVERIFY(r.kind == proto::Request::Kind::command && r.command.kind == sp::Command::Kind::release);
        QCOMPARE(r.command.blocks, std::vector<int>{0});

        r = request_of(q("{'cmd':'release_all','id':'c3','extra':{'ignored':[1,2]}}"));
        QVERIFY(r.kind == proto::Request::Kind::command && r.command.kind == sp::Command::Kind::release_all);
        QCOMPARE(r.id, std::string("c3"));

        r = request_of(q("{'id':'c4','cmd':'set_mode','mode':'static'}"));
        QVERIFY(r.command.kind == sp::Command::Kind::set_mode && r.command.mode == sp::Mode::static_);

        r = request_of(q("{'id':'c5','cmd':'snapshot'}"));
        QVERIFY(r.kind == proto::Request::Kind::snapshot);
        QCOMPARE(proto::cmd_name(r), std::string_view("snapshot"));

        r = request_of(q(" \n{ 'id' : 'c6' , 'cmd' : 'ping' }\r\n"));
        QVERIFY(r.kind == proto::Request::Kind::ping);
        QCOMPARE(r.id, std::string("c6"));

        // FP8 is valid protocol; this build's policy rejects it later, at apply time.
        r = request_of(q("{'id':'c7','cmd':'pin','blocks':[2],'precision':'fp8_e4m3'}"));
        QVERIFY(r.kind == proto::Request::Kind::command && r.command.precision == sp::Precision::fp8_e4m3);

        // Without a known model only the shape of block ids is checked (client-side validation).
        r = request_of(q("{'id':'c8','cmd':'release','blocks':[1000]}"), proto::kUnknownBlockCount);
        QCOMPARE(r.command.blocks, std::vector<int>{1000});
    }

    void size_limit() {
        const std::string big(70000, ' ');
        proto::RequestError e = error_of(big);
        QCOMPARE(e.error, std::string("request too large: 70000 bytes (limit 65536)"));
        QVERIFY(!e.id);

        // The limit is inclusive and counts raw bytes, whitespace included.
        std::string exact = q("{'id':'a','cmd':'ping'}");
        exact.resize(proto::kMaxRequestBytes, ' ');
        QCOMPARE(request_of(exact).id, std::string("a"));
        exact += ' ';
        QCOMPARE(error_of(exact).error, std::string("request too large: 65537 bytes (limit 65536)"));
    }

    void malformed_json() {
        struct Case {
            std::string frame;
            std::optional<std::string> id;  // echoed when it was read before the error
        };
        for (const Case& c : std::vector<Case>{{"{", std::nullopt},
                                               {q("{'id':'a'"), "a"},
                                               {q("{'id':'a','cmd':'ping'} x"), "a"},
                                               {"nul", std::nullopt},
                                               {q("{'id':'a\xff','cmd':'ping'}"), std::nullopt},
                                               {q("{'cmd':'ping','id':''"), std::nullopt}}) {
            const proto::RequestError e = error_of(c.frame);
            QVERIFY2(e.error.rfind("not valid JSON: column ", 0) == 0, e.error.c_str());
            QCOMPARE(e.id, c.id);
        }
        QCOMPARE(error_of("").error, std::string("not valid JSON: empty frame"));
        QCOMPARE(error_of(" \r\n\t").error, std::string("not valid JSON: empty frame"));
        QCOMPARE(
            error_of(q("{'id':'a'")).error,
            std::string("not valid JSON: column 10: syntax error while parsing object - unexpected end of "
                        "input; expected '}'"));
        // A number beyond double range is a clear rejection under the request's id, naming the key.
        const proto::RequestError big =
            error_of(q("{'id':'a','cmd':'pin','blocks':[0,1e309],'precision':'int8'}"));
        QVERIFY2(big.error ==
                     "not valid JSON: column 35, key 'blocks[1]': number beyond the range of a double: 1e309",
                 big.error.c_str());
        QCOMPARE(big.id, std::optional<std::string>("a"));
        // Invalid UTF-8 names the key and the byte (agent/PROTOCOL.md's table).
        const std::string utf8 = error_of("{\"x\":\"\xff\"}").error;
        QVERIFY2(utf8 ==
                     "not valid JSON: column 7, key 'x': syntax error while parsing value - invalid string: "
                     "ill-formed UTF-8 byte; last read: '\"\xFF'",
                 utf8.c_str());
    }

    void not_an_object() {
        QCOMPARE(error_of("[1,2]").error, std::string("request must be a JSON object, got array"));
        QCOMPARE(error_of(q("'ping'")).error, std::string("request must be a JSON object, got string"));
        QCOMPARE(error_of("42").error, std::string("request must be a JSON object, got number"));
        QCOMPARE(error_of("null").error, std::string("request must be a JSON object, got null"));
    }

    void bad_id() {
        const std::string must = "field 'id': must be a non-empty string, got ";
        QCOMPARE(error_of(q("{'cmd':'ping'}")).error,
                 std::string("field 'id': missing (every request needs a non-empty string id)"));
        QCOMPARE(error_of(q("{'id':7,'cmd':'ping'}")).error, must + "number");
        QCOMPARE(error_of(q("{'id':'','cmd':'ping'}")).error, must + "\"\"");
        QCOMPARE(error_of(q("{'id':null,'cmd':'ping'}")).error, must + "null");
        QCOMPARE(error_of(q("{'id':['a'],'cmd':'ping'}")).error, must + "array");
        const std::string long_id(300, 'x');
        QCOMPARE(error_of(q("{'id':'" + long_id + "','cmd':'ping'}")).error,
                 std::string("field 'id': too long: 300 bytes (limit 256)"));
        QVERIFY(!error_of(q("{'id':7,'cmd':'ping'}")).id);  // an unreadable id is answered with null
    }

    void bad_cmd() {
        proto::RequestError e = error_of(q("{'id':'a'}"));
        QCOMPARE(e.error, "field 'cmd': missing (expected one of " + kNames + ")");
        QCOMPARE(e.id.value_or("?"), std::string("a"));  // a readable id is echoed
        QCOMPARE(error_of(q("{'id':'a','cmd':3}")).error,
                 "field 'cmd': must be a string (one of " + kNames + "), got number");
        e = error_of(q("{'id':'b','cmd':'explode'}"));
        QCOMPARE(e.error, "field 'cmd': unknown command 'explode' (expected one of " + kNames + ")");
        QCOMPARE(e.id.value_or("?"), std::string("b"));
        const std::string blob(200, 'z');  // a long unknown name is cut in the message
        e = error_of(q("{'id':'b','cmd':'" + blob + "'}"));
        QVERIFY(contains(e.error, "'" + std::string(64, 'z') + "...'"));
        QVERIFY(!contains(e.error, std::string(65, 'z')));
    }

    void unknown_blocks() {
        proto::RequestError e = error_of(q("{'id':'a','cmd':'pin','blocks':[12],'precision':'int8'}"));
        QCOMPARE(e.error, std::string("field 'blocks': unknown block 12 (the model has 4 blocks: 0..3)"));
        QCOMPARE(e.id.value_or("?"), std::string("a"));
        QCOMPARE(error_of(q("{'id':'a','cmd':'release','blocks':[1,4,9,4]}")).error,
                 std::string("field 'blocks': unknown blocks 4, 9 (the model has 4 blocks: 0..3)"));
        QCOMPARE(error_of(q("{'id':'a','cmd':'release','blocks':[1]}"), 1).error,
                 std::string("field 'blocks': unknown block 1 (the model has 1 block: 0)"));
        QCOMPARE(error_of(q("{'id':'a','cmd':'release','blocks':[0]}"), 0).error,
                 std::string("field 'blocks': unknown block 0 (the model has no blocks)"));
        std::string many = "{'id':'a','cmd':'release','blocks':[";
        for (int i = 0; i < 20; ++i) many += std::to_string(100 + i) + (i < 19 ? "," : "]}");
        QCOMPARE(error_of(q(many)).error,
                 std::string("field 'blocks': unknown blocks 100, 101, 102, 103, 104, 105, 106, 107, 108, "
                             "109, ... (the model has 4 blocks: 0..3)"));
        QCOMPARE(request_of(q("{'id':'a','cmd':'release','blocks':[3]}")).id, std::string("a"));
    }

    void bad_precision_and_types() {
        proto::RequestError e = error_of(q("{'id':'a','cmd':'pin','blocks':[1],'precision':'fp4'}"));
        QVERIFY2(e.error.rfind("field 'precision': unknown precision ", 0) == 0, e.error.c_str());
        QVERIFY(contains(e.error, "fp4") && contains(e.error, "bf16, int8, fp8_e4m3, fp8_e5m2"));
        QCOMPARE(e.id.value_or("?"), std::string("a"));

        struct Case {
            std::string frame, starts;
        };
        const std::vector<Case> cases = {
            {"{'id':'a','cmd':'pin','blocks':[1],'precision':8}", "field 'precision': must be a string"},
            {"{'id':'a','cmd':'pin','blocks':[1]}", "field 'precision': missing"},
            {"{'id':'a','cmd':'pin','precision':'int8'}", "field 'blocks': missing"},
            {"{'id':'a','cmd':'pin','blocks':'3','precision':'int8'}",
             "field 'blocks': must be a non-empty array"},
            {"{'id':'a','cmd':'release','blocks':[]}", "field 'blocks': must be a non-empty array"},
            {"{'id':'a','cmd':'release','blocks':[1,-1]}",
             "field 'blocks': element [1] must be a non-negative"},
            {"{'id':'a','cmd':'release','blocks':[1.5]}",
             "field 'blocks': element [0] must be a non-negative"},
            {"{'id':'a','cmd':'set_mode','mode':'fast'}", "field 'mode': unknown mode"},
            {"{'id':'a','cmd':'set_mode'}", "field 'mode': missing"},
            {"{'id':'a','cmd':'set_mode','mode':true}", "field 'mode': must be a string"},
        };
        for (const Case& c : cases) {
            e = error_of(q(c.frame));
            QVERIFY2(e.error.rfind(c.starts, 0) == 0, (c.frame + " -> " + e.error).c_str());
            QCOMPARE(e.id.value_or("?"), std::string("a"));
        }
    }

    void deep_nesting() {
        const std::string deep(10000, '[');
        QCOMPARE(error_of(deep).error,
                 std::string("request nests too deep: more than 32 levels of arrays/objects"));
        std::string inner = q("{'id':'a','cmd':'pin','precision':'int8','blocks':");
        inner += std::string(40, '[') + "1" + std::string(40, ']') + "}";
        QVERIFY(contains(error_of(inner).error, "nests too deep"));
        QCOMPARE(error_of(inner).id, std::optional<std::string>("a"));
        // Brackets inside strings do not count.
        const std::string quoted = q("{'id':'" + std::string(100, '[') + "','cmd':'ping'}");
        QCOMPARE(request_of(quoted).id, std::string(100, '['));
        // Within the limit, the value is named (and cut) in the message.
        inner = q("{'id':'a','cmd':'release','blocks':") + std::string(20, '[') + "1" + std::string(20, ']') +
                "}";
        QVERIFY(contains(error_of(inner).error, "element [0]"));
    }

    // 20,000 random and mutated frames: parse_request never throws and always answers with a
    // request or a non-empty error, and every answer serialises to valid JSON.
    void fuzz() {
        std::mt19937_64 rng(20240601);
        auto below = [&rng](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
        const std::vector<std::string> valid = {
            q("{'id':'a','cmd':'pin','blocks':[0,3],'precision':'int8'}"),
            q("{'id':'b','cmd':'release','blocks':[1]}"),
            q("{'id':'c','cmd':'release_all'}"),
            q("{'id':'d','cmd':'set_mode','mode':'dynamic'}"),
            q("{'id':'e','cmd':'snapshot'}"),
            q("{'id':'f','cmd':'ping'}"),
        };
        const std::string alphabet = "{}[]\":,.-+0123456789eE \\/tnrufalsidcmpbokv\x01\xff\xc3";
        int accepted = 0, rejected = 0;
        for (int i = 0; i < 20000; ++i) {
            std::string frame;
            switch (i % 7) {
                case 0:  // random bytes
                    frame.resize(below(200));
                    for (char& c : frame) c = static_cast<char>(rng());
                    break;
                case 1:  // random JSON-ish text
                    frame.resize(below(120));
                    for (char& c : frame) c = alphabet[below(alphabet.size())];
                    break;
                case 2:  // truncation of a valid request
                    frame = valid[below(valid.size())];
                    frame.resize(below(frame.size() + 1));
                    break;
                case 3:  // byte flips of a valid request
                    frame = valid[below(valid.size())];
                    for (std::size_t n = 1 + below(4); n > 0; --n) {
                        frame[below(frame.size())] ^= static_cast<char>(1u << below(8));
                    }
                    break;
                case 4:  // character substitutions from the JSON alphabet
                    frame = valid[below(valid.size())];
                    for (std::size_t n = 1 + below(3); n > 0; --n) {
                        frame[below(frame.size())] = alphabet[below(alphabet.size())];
                    }
                    break;
                case 5: {  // deep nesting, bare or inside a request
                    const std::size_t depth = 1 + below(i % 2 ? 200 : 40);
                    const char open = below(2) ? '[' : '{';
                    const bool in_request = below(2) != 0;
                    frame = in_request ? q("{'id':'x','cmd':'pin','precision':'int8','blocks':") : "";
                    frame += std::string(depth, open) + std::string(depth, open == '[' ? ']' : '}');
                    if (in_request) frame += '}';
                    break;
                }
                case 6:  // huge frames now and then, otherwise random block ids and precisions
                    if (i % 500 == 6) {
                        frame.assign(proto::kMaxRequestBytes + below(4096), ' ');
                        frame.replace(0, valid[0].size(), valid[0]);
                    } else {
                        frame = q("{'id':'r','cmd':'pin','blocks':[" + std::to_string(below(8)) +
                                  "],'precision':'" + (below(2) ? "int8" : "fp" + std::to_string(below(20))) +
                                  "'}");
                    }
                    break;
            }
            std::variant<proto::Request, proto::RequestError> result;
            try {
                result = proto::parse_request(frame, 4);
            } catch (...) {
                QFAIL(("parse_request threw on fuzz case " + std::to_string(i)).c_str());
            }
            if (const auto* e = std::get_if<proto::RequestError>(&result)) {
                ++rejected;
                QVERIFY2(!e->error.empty(), ("empty error on fuzz case " + std::to_string(i)).c_str());
                QVERIFY(json::parse(proto::reject(*e))["ok"] == false);
            } else {
                ++accepted;
                const auto& r = std::get<proto::Request>(result);
                QVERIFY(!r.id.empty());
                QVERIFY(json::parse(proto::ack(r, 1))["ok"] == true);
            }
        }
        // Both outcomes are exercised (the counts are fixed by the seed).
        const std::string counts =
            std::to_string(accepted) + " accepted, " + std::to_string(rejected) + " rejected";
        QVERIFY2(accepted > 500 && rejected > 10000, counts.c_str());
        qInfo("fuzz: %s", counts.c_str());
    }
};

QTEST_APPLESS_MAIN(TestProtocol)
#include "test_protocol.moc"
