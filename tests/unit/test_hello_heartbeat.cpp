// sp::protocol's readers of the two telemetry messages that are not records, hello and
// heartbeat: what the agent writes reads back whole, and every malformed body is refused with a
// message naming the field (the dashboard and sp-ctl tail both read through them).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <string>

#include "sp/protocol.h"

namespace proto = sp::protocol;

namespace {

// JSON written with single quotes for readability.
std::string q(std::string text) {
    std::replace(text.begin(), text.end(), '\'', '"');
    return text;
}

// parse_hello's error for `body`, "<accepted>" when it parsed.
std::string hello_error(const std::string& body) {
    std::string error;
    return proto::parse_hello(body, error) ? "<accepted>" : error;
}

sp::BlockLayout two_blocks() {
    return {{0, "blocks.0", 2048}, {1, "blocks.1", 4096}};
}

}  // namespace

class TestHelloHeartbeat : public QObject {
    Q_OBJECT
  private slots:
    void a_hello_reads_back_what_the_agent_wrote();
    void a_hello_without_optional_fields_takes_their_defaults();
    void calibration_errors_beyond_the_layout_are_ignored_and_null_reads_as_nan();
    void a_malformed_hello_is_refused_naming_the_field_data();
    void a_malformed_hello_is_refused_naming_the_field();
    void a_heartbeat_reads_back_and_a_bad_one_is_refused();
};

void TestHelloHeartbeat::a_hello_reads_back_what_the_agent_wrote() {
    const std::string body =
        proto::hello(7, "run-x", 3, two_blocks(), q("{'mode':'budget'}"), 12.5, {0.01, 0.02});
    std::string error;
    const auto hello = proto::parse_hello(body, error);
    QVERIFY2(hello, error.c_str());
    QVERIFY(error.empty());
    QCOMPARE(hello->protocol, std::optional<int>(proto::kVersion));
    QCOMPARE(hello->rank, 3);
    QCOMPARE(hello->header.producer, std::string("hello"));
    QCOMPARE(hello->header.run_id, std::string("run-x"));
    QCOMPARE(hello->header.schema_version, sp::kTelemetrySchemaVersion);
    QCOMPARE(hello->header.blocks.size(), std::size_t(2));
    QCOMPARE(hello->header.blocks[1].name, std::string("blocks.1"));
    QCOMPARE(hello->header.blocks[1].bytes_bf16, std::uint64_t(4096));
    QCOMPARE(hello->header.config_json, q("{'mode':'budget'}"));
    QCOMPARE(hello->header.calibration_errors, (std::vector<double>{0.01, 0.02}));
}

void TestHelloHeartbeat::a_hello_without_optional_fields_takes_their_defaults() {
    std::string error;
    const auto hello = proto::parse_hello(q("{'run_id':'r','blocks':[]}"), error);
    QVERIFY2(hello, error.c_str());
    QCOMPARE(hello->protocol, std::optional<int>());
    QCOMPARE(hello->rank, 0);
    QCOMPARE(hello->header.config_json, std::string("{}"));
    QVERIFY(hello->header.blocks.empty());
    QVERIFY(hello->header.calibration_errors.empty());
}

void TestHelloHeartbeat::calibration_errors_beyond_the_layout_are_ignored_and_null_reads_as_nan() {
    std::string error;
    const auto hello = proto::parse_hello(
        q("{'run_id':'r','blocks':[{'id':0,'name':'a','bytes_bf16':1}],'calibration_errors':[null,0.5]}"),
        error);
    QVERIFY2(hello, error.c_str());
    QCOMPARE(hello->header.calibration_errors.size(), std::size_t(1));
    QVERIFY(std::isnan(hello->header.calibration_errors[0]));
}

void TestHelloHeartbeat::a_malformed_hello_is_refused_naming_the_field_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("error");
    QTest::newRow("not json") << "{"
                              << "hello is not valid JSON";
    QTest::newRow("not an object") << "[]"
                                   << "hello is not a JSON object";
    QTest::newRow("no run id") << "{'blocks':[]}"
                               << "field 'hello.run_id': missing";
    QTest::newRow("run id a number") << "{'run_id':7,'blocks':[]}"
                                     << "field 'hello.run_id': expected a string";
    QTest::newRow("no blocks") << "{'run_id':'r'}"
                               << "field 'hello.blocks': missing";
    QTest::newRow("block not an object") << "{'run_id':'r','blocks':[3]}"
                                         << "field 'hello.blocks[0]'";
    QTest::newRow("block id missing") << "{'run_id':'r','blocks':[{'name':'a','bytes_bf16':1}]}"
                                      << "field 'hello.blocks[0].id': missing";
    QTest::newRow("block id a string") << "{'run_id':'r','blocks':[{'id':'0','name':'a','bytes_bf16':1}]}"
                                       << "field 'hello.blocks[0].id': expected an integer";
    QTest::newRow("block name null") << "{'run_id':'r','blocks':[{'id':0,'name':null,'bytes_bf16':1}]}"
                                     << "field 'hello.blocks[0].name': expected a string";
    QTest::newRow("negative bytes") << "{'run_id':'r','blocks':[{'id':0,'name':'a','bytes_bf16':-1}]}"
                                    << "field 'hello.blocks[0].bytes_bf16'";
    QTest::newRow("protocol a string") << "{'protocol':'1','run_id':'r','blocks':[]}"
                                       << "field 'hello.protocol': expected an integer";
    QTest::newRow("rank too large") << "{'rank':9999999999,'run_id':'r','blocks':[]}"
                                    << "field 'hello.rank': expected an integer in range";
}

void TestHelloHeartbeat::a_malformed_hello_is_refused_naming_the_field() {
    QFETCH(QString, body);
    QFETCH(QString, error);
    const std::string got = hello_error(q(body.toStdString()));
    QVERIFY2(got.find(error.toStdString()) != std::string::npos, got.c_str());
}

void TestHelloHeartbeat::a_heartbeat_reads_back_and_a_bad_one_is_refused() {
    std::string error;
    const auto beat = proto::parse_heartbeat(proto::heartbeat(4, 120, 9.5), error);
    QVERIFY2(beat, error.c_str());
    QCOMPARE(beat->step, std::int64_t(120));
    QCOMPARE(beat->time, std::optional<double>(9.5));
    QVERIFY(!proto::parse_heartbeat(q("{'seq':1}"), error));
    QCOMPARE(error, std::string("field 'heartbeat.step': missing"));
    QVERIFY(!proto::parse_heartbeat(q("{'step':1.5}"), error));
    QVERIFY2(error.find("field 'heartbeat.step': expected an integer") != std::string::npos, error.c_str());
    QVERIFY(!proto::parse_heartbeat("[1]", error));
    QCOMPARE(error, std::string("heartbeat is not a JSON object"));
}

QTEST_GUILESS_MAIN(TestHelloHeartbeat)
#include "test_hello_heartbeat.moc"
