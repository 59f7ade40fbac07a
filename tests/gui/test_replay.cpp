// ReplaySource + RunSession over saved telemetry files (fixtures in tests/gui/data/).
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "fake_telemetry_source.h"
#include "sp/ui/block_table_model.h"
#include "sp/ui/replay_source.h"
#include "sp/ui/run_session.h"

using sp::Precision;
using sp::ui::EventCategory;
using sp::ui::ReplaySource;
using sp::ui::RunSession;
using sp::ui::SourceState;

namespace {

QString fixture(const char* name) {
    return QStringLiteral(SP_SOURCE_DIR "/tests/gui/data/") + name;
}

std::unique_ptr<RunSession> replay(const QString& path) {
    return std::make_unique<RunSession>(std::make_unique<ReplaySource>(path));
}

// Starts the session and waits for the load to end; false on timeout.
bool load(RunSession& session) {
    QSignalSpy finished(&session, &RunSession::loadFinished);
    session.start();
    return finished.count() > 0 || finished.wait(20000);
}

int count(const RunSession& s, EventCategory c) {
    int n = 0;
    for (std::size_t i = 0; i < s.events().size(); ++i) n += s.events().at(i).category == c;
    return n;
}

}  // namespace

class TestReplay : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() { sp::ui::registerUiMetaTypes(); }

    void loadsFixture() {
        auto session = replay(fixture("replay_small.jsonl"));
        QSignalSpy states(session.get(), &RunSession::stateChanged);
        QSignalSpy progress(session.get(), &RunSession::loadProgress);
        QVERIFY(load(*session));
        QTRY_COMPARE_WITH_TIMEOUT(int(session->state()), int(SourceState::loaded), 5000);
        QCOMPARE(int(states.first().at(0).value<SourceState>()), int(SourceState::loading));

        const auto& report = session->loadReport();
        QVERIFY(report.error.isEmpty());
        QVERIFY(!report.cancelled);
        QCOMPARE(report.records, std::uint64_t(20));  // header + 8 events (run_end last) + 11 updates
        QCOMPARE(report.lines, std::uint64_t(21));
        QCOMPARE(report.unknown_types, std::uint64_t(1));
        QCOMPARE(report.problem_count, std::uint64_t(0));
        QCOMPARE(qint64(report.bytes), QFileInfo(fixture("replay_small.jsonl")).size());
        QVERIFY(progress.count() >= 1);
        QCOMPARE(progress.last().at(0).toLongLong(), progress.last().at(1).toLongLong());

        const auto& store = session->store();
        QCOMPARE(session->header().run_id, std::string("fixture-run-1"));
        QCOMPARE(store.blockCount(), 6);
        QCOMPARE(store.updateCount(), std::size_t(11));
        QCOMPARE(store.row(10).step, std::int64_t(110));
        const std::size_t last = store.updateCount() - 1;
        int bf16 = 0, int8 = 0;
        for (int b = 0; b < store.blockCount(); ++b) {
            QVERIFY(store.cell(b, last).present);
            (store.cell(b, last).precision == Precision::bf16 ? bf16 : int8) += 1;
        }
        QCOMPARE(bf16, 2);
        QCOMPARE(int8, 4);
        QCOMPARE(store.row(last).blocks_bf16, 2);
        QCOMPARE(store.row(last).blocks_int8, 4);
        QCOMPARE(int(store.cell(3, last).precision), int(Precision::bf16));
        QCOMPARE(int(store.cell(0, last).forced), int(sp::ForcedBy::config));
        QCOMPARE(session->pinOf(4), std::optional<Precision>(Precision::int8));
        QVERIFY(!session->pinOf(3));
        QCOMPARE(store.lastChangeStep(4, last), std::int64_t(50));
        QCOMPARE(store.switchesUpTo(4, last), 1);
        QCOMPARE(store.switchesUpTo(1, last), 1);  // bf16 -> int8 at its first assignment

        QCOMPARE(count(*session, EventCategory::precision_change), 4);
        QCOMPARE(count(*session, EventCategory::command), 1);
        QCOMPARE(count(*session, EventCategory::warning), 1);
        QCOMPARE(count(*session, EventCategory::dropped), 1);
        QCOMPARE(count(*session, EventCategory::load), 1);  // the unknown record
        QVERIFY(!session->canControl());
        QVERIFY(session->pin({1}, Precision::int8).isEmpty());
        // The file ends with its run_end record: the run finished, nothing was cut.
        QVERIFY(session->runEnd().has_value());
        QCOMPARE(session->stateText(), QString("finished at step 119"));
        QVERIFY(session->cutMessage().isEmpty());

        sp::ui::BlockTableModel table(session.get());
        QCOMPARE(table.rowCount(), 6);
        QCOMPARE(table.data(table.index(4, sp::ui::BlockTableModel::ForcedColumn)).toString(),
                 QString("pin: int8"));
        QCOMPARE(table.data(table.index(5, sp::ui::BlockTableModel::ForcedColumn)).toString(),
                 QString("config"));
        QCOMPARE(table.data(table.index(2, sp::ui::BlockTableModel::PrecisionColumn)).toString(),
                 QString("int8"));
    }

    void corruptLinesAreReportedAndSkipped() {
        auto session = replay(fixture("replay_corrupt.jsonl"));
        QVERIFY(load(*session));
        const auto& report = session->loadReport();
        QCOMPARE(report.problem_count, std::uint64_t(4));
        QCOMPARE(report.problems.size(), std::size_t(4));
        QCOMPARE(report.problems[0].line, std::uint64_t(3));  // not JSON
        QCOMPARE(report.problems[1].line, std::uint64_t(5));  // blocks_int8 is a string
        QVERIFY2(QString::fromStdString(report.problems[1].reason).contains("blocks_int8"),
                 report.problems[1].reason.c_str());
        QCOMPARE(report.problems[2].line, std::uint64_t(8));   // an array
        QCOMPARE(report.problems[3].line, std::uint64_t(10));  // torn last line
        QVERIFY(QString::fromStdString(report.problems[3].reason).startsWith("truncated last line"));
        // Every good line is in.
        const auto& store = session->store();
        QCOMPARE(store.updateCount(), std::size_t(4));
        for (std::size_t u = 0; u < 4; ++u) QCOMPARE(store.row(u).step, std::int64_t(10 * (u + 1)));
        QCOMPARE(session->header().run_id, std::string("fixture-run-1"));
        // The log says how many and where the first one is.
        bool logged = false;
        for (std::size_t i = 0; i < session->events().size(); ++i) {
            const auto& e = session->events().at(i);
            if (e.category == EventCategory::load && e.text.startsWith("4 bad lines; first: line 3: ")) {
                logged = true;
                QVERIFY(e.detail.contains("line 10: truncated last line"));
            }
        }
        QVERIFY(logged);
        QTRY_COMPARE_WITH_TIMEOUT(int(session->state()), int(SourceState::loaded), 5000);
        // Its torn last line and no run_end: the run was cut, and the state and the log say where.
        const QString cut("ends at step 40 without a run_end record: the run was cut");
        QCOMPARE(session->cutMessage(), cut);
        QCOMPARE(session->stateText(), QString("loaded: cut at step 40 (no run_end record)"));
        bool warned = false;
        for (std::size_t i = 0; i < session->events().size(); ++i)
            warned |= session->events().at(i).category == EventCategory::warning &&
                      session->events().at(i).text == "the file " + cut && session->events().at(i).step == 40;
        QVERIFY(warned);
    }

    void originalToolFile() {
        auto session = replay(fixture("replay_original_tool.jsonl"));
        QVERIFY(load(*session));
        const auto& store = session->store();
        QCOMPARE(session->loadReport().problem_count, std::uint64_t(0));
        QCOMPARE(store.updateCount(), std::size_t(5));
        for (std::size_t u = 0; u < 5; ++u) QVERIFY(!store.row(u).has_details);
        QCOMPARE(store.row(4).step, std::int64_t(50));
        QCOMPARE(store.row(4).blocks_int8, 4);
        QCOMPARE(store.row(4).blocks_bf16, 2);
        QVERIFY(std::abs(store.row(4).estimated_saving_pct - 33.3333f) < 1e-3f);
        QCOMPARE(store.blockCount(), 0);
        QVERIFY(session->header().run_id.empty());
    }

    void missingFileFails() {
        const QString path = QStringLiteral("/nonexistent-dir-sp/telemetry.jsonl");
        auto session = replay(path);
        QVERIFY(load(*session));
        QTRY_COMPARE_WITH_TIMEOUT(int(session->state()), int(SourceState::failed), 5000);
        const QString error = session->loadReport().error;
        QVERIFY2(error.contains(path), qPrintable(error));
        QVERIFY2(error.contains("No such file", Qt::CaseInsensitive), qPrintable(error));
        QVERIFY(session->store().empty());
        QVERIFY(count(*session, EventCategory::load) >= 1);

        QTemporaryDir dir;
        auto on_dir = replay(dir.path());
        QVERIFY(load(*on_dir));
        QTRY_COMPARE_WITH_TIMEOUT(int(on_dir->state()), int(SourceState::failed), 5000);
        QVERIFY2(on_dir->loadReport().error.contains(dir.path()), qPrintable(on_dir->loadReport().error));
        QVERIFY(on_dir->loadReport().error.contains("directory"));
    }

    void cancelKeepsAPrefix() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString path = dir.filePath("big.jsonl");
        const int updates = 8000;
        {
            sp::JsonlWriter writer(path.toStdString(), sp::JsonlWriter::OpenMode::truncate);
            writer.write(sp::test::runHeader("cancel-run", 2));
            for (int u = 0; u < updates; ++u) writer.write(sp::test::uniformUpdate(10 * u, 2));
        }
        auto session = replay(path);
        // Cancel on the first batch: the worker can be at most a few batches ahead (back-pressure),
        // so the load stops well before the end whatever the timing.
        connect(session.get(), &RunSession::updatesAppended, session.get(),
                [&session](std::size_t, std::size_t) { session->source().cancel(); });
        QVERIFY(load(*session));
        const auto& report = session->loadReport();
        QVERIFY(report.cancelled);
        const auto& store = session->store();
        QVERIFY(store.updateCount() > 0);
        QVERIFY2(store.updateCount() <=
                     std::size_t(ReplaySource::kBatchRecords) * (ReplaySource::kMaxBatchesInFlight + 2),
                 qPrintable(QString::number(store.updateCount())));
        for (std::size_t u = 0; u < store.updateCount(); ++u)
            QCOMPARE(store.row(u).step, std::int64_t(10 * u));
        QVERIFY(report.records >= store.updateCount());
        QTRY_COMPARE_WITH_TIMEOUT(int(session->state()), int(SourceState::loaded), 5000);
    }

    // A 50 MB line is one reported problem, skipped without being held; the records around it load.
    void overlongLineIsReportedAndSkipped() {
        QTemporaryDir dir;
        const QString path = dir.filePath("long.jsonl");
        {
            sp::JsonlWriter writer(path.toStdString(), sp::JsonlWriter::OpenMode::truncate);
            writer.write(sp::test::runHeader("long-run", 2));
            writer.write(sp::test::uniformUpdate(10, 2));
            writer.write_line("{\"x\":\"" + std::string(50 << 20, 'a') + "\"}");
            writer.write(sp::test::uniformUpdate(20, 2));
        }
        auto session = replay(path);
        QVERIFY(load(*session));
        QTRY_COMPARE_WITH_TIMEOUT(int(session->state()), int(SourceState::loaded), 20000);
        const auto& report = session->loadReport();
        QCOMPARE(report.problem_count, std::uint64_t(1));
        QCOMPARE(report.problems[0].line, std::uint64_t(3));
        QVERIFY2(
            QString::fromStdString(report.problems[0].reason).startsWith("line too long: 52428808 bytes"),
            report.problems[0].reason.c_str());
        QCOMPARE(session->store().updateCount(), std::size_t(2));
    }

    void stopEmitsNothingAfterwards() {
        QTemporaryDir dir;
        const QString path = dir.filePath("stop.jsonl");
        {
            sp::JsonlWriter writer(path.toStdString(), sp::JsonlWriter::OpenMode::truncate);
            for (int u = 0; u < 3000; ++u) writer.write(sp::test::uniformUpdate(u, 4));
        }
        ReplaySource source(path);
        QSignalSpy records(&source, &ReplaySource::recordsReceived);
        QSignalSpy finished(&source, &ReplaySource::loadFinished);
        source.start();
        source.stop();
        const auto seen = records.count();
        QTest::qWait(100);
        QCOMPARE(records.count(), seen);
        QCOMPARE(finished.count(), 0);
    }
};

QTEST_MAIN(TestReplay)
#include "test_replay.moc"
