// sp::RecordLine: a record the agent gives to both its JSONL file and its PUB socket is serialized
// once, by whichever asks first, and both send the same bytes; a malformed record fails every ask
// (and never wedges the next one).
#include <QtTest>

#include <array>
#include <string>
#include <thread>

#include "sp/jsonl.h"
#include "sp/record_line.h"

namespace {

sp::UpdateRecord sample_update() {
    sp::UpdateRecord r;
    r.step_id = 50;
    r.timestamp = 1717171717.25;
    r.mean_sensitivity = 0.1 + 0.2;  // a double that needs 17 digits
    sp::BlockDetail d;
    d.id = 0;
    d.precision = sp::Precision::int8;
    d.sensitivity = 1.0 / 3.0;
    r.block_details.push_back(d);
    r.blocks_int8 = 1;
    return r;
}

}  // namespace

class TestRecordLine : public QObject {
    Q_OBJECT
  private slots:
    void line_is_the_writers_line() {
        const sp::UpdateRecord r = sample_update();
        const sp::SharedRecord shared = sp::share_record(r);
        QCOMPARE(shared->line(), sp::to_json_line(r));
        QVERIFY(std::holds_alternative<sp::UpdateRecord>(shared->record()));
    }

    void concurrent_readers_get_the_whole_line() {
        // The file's writer thread and the PUB socket's I/O thread ask at the same time: each gets the
        // complete line, and the record keeps it (that only one of them serialized it is what the
        // lock in line() is for; test_telemetry_sink and test_agent_server check each consumer asks
        // the shared record rather than serializing on its own).
        const sp::SharedRecord shared = sp::share_record(sample_update());
        std::array<const std::string*, 8> seen{};
        std::array<std::thread, 8> readers;
        for (std::size_t i = 0; i < readers.size(); ++i)
            readers[i] = std::thread([&, i] { seen[i] = &shared->line(); });
        for (std::thread& t : readers) t.join();
        for (const std::string* line : seen) QCOMPARE(line, seen[0]);
        QCOMPARE(*seen[0], sp::to_json_line(sample_update()));
        QVERIFY(shared->serialized());
    }

    void a_malformed_record_fails_every_ask() {
        sp::EventRecord no_kind;  // an event without a kind cannot be written
        no_kind.step = 3;
        const sp::SharedRecord shared = sp::share_record(no_kind);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shared->line());
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, shared->line());
    }
};

QTEST_GUILESS_MAIN(TestRecordLine)
#include "test_record_line.moc"
