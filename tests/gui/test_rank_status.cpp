// Following a data-parallel job without sockets or widgets: the job's endpoints (parseJobSpec), the
// rank status model fed records directly (map agreement by checksum, a rank behind, a silent rank,
// with a clock the test moves), and RankJob writing the warnings into rank 0's event log.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QtTest>

#include "fake_telemetry_source.h"
#include "sp/ui/job_spec.h"
#include "sp/ui/rank_job.h"
#include "sp/ui/rank_status_model.h"
#include "sp/ui/run_session.h"

using sp::Precision;
using sp::ui::RankStatusModel;
using sp::ui::SourceState;
using namespace sp::test;

namespace {

// A model of `ranks` ranks on a clock the test owns, checked by QAbstractItemModelTester.
struct Rig {
    explicit Rig(int ranks) {
        QStringList endpoints;
        for (int r = 0; r < ranks; ++r) endpoints << QStringLiteral("tcp://h:%1").arg(5556 + 2 * r);
        model = std::make_unique<RankStatusModel>(endpoints);
        model->setClock([this] { return now; });
        tester = std::make_unique<QAbstractItemModelTester>(
            model.get(), QAbstractItemModelTester::FailureReportingMode::Fatal);
        for (int r = 0; r < ranks; ++r) {
            model->sourceState(r, SourceState::live);
            model->header(r, runHeader("job-1", 4));
        }
    }
    // Rank r's update at `step`: every block BF16 but those in `int8`, `fp8` in FP8 E4M3.
    void update(int r, std::int64_t step, const std::vector<int>& int8 = {}, const std::vector<int>& fp8 = {},
                std::optional<double> loss = std::nullopt) {
        sp::UpdateRecord u = uniformUpdate(step, 4);
        for (int b : int8) u.block_details[std::size_t(b)].precision = Precision::int8;
        for (int b : fp8) u.block_details[std::size_t(b)].precision = Precision::fp8_e4m3;
        u.train_loss = loss;
        model->records(r, {u});
    }
    QString cell(int r, int column) const { return model->index(r, column).data().toString(); }
    QStringList warnings() const { return model->warningText().split('\n', Qt::SkipEmptyParts); }

    qint64 now = 1000;
    std::unique_ptr<RankStatusModel> model;
    std::unique_ptr<QAbstractItemModelTester> tester;
};

}  // namespace

class TestRankStatus : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase() { sp::ui::registerUiMetaTypes(); }

    // --ranks N from one base: ports + 2·r for telemetry and control (control base = port + 1 or
    // given); a ';' list is rank by position, any transport.
    void jobSpecExpandsRanks() {
        QString error;
        auto job = sp::ui::parseJobSpec(QStringLiteral("tcp://10.0.0.5:5556"), 3, &error);
        QVERIFY2(job, qPrintable(error));
        QCOMPARE(job->size(), std::size_t(3));
        QCOMPARE((*job)[0].telemetry, QStringLiteral("tcp://10.0.0.5:5556"));
        QCOMPARE((*job)[0].control, QStringLiteral("tcp://10.0.0.5:5557"));
        QCOMPARE((*job)[2].telemetry, QStringLiteral("tcp://10.0.0.5:5560"));
        QCOMPARE((*job)[2].control, QStringLiteral("tcp://10.0.0.5:5561"));
        job = sp::ui::parseJobSpec(QStringLiteral("tcp://h:6000,tcp://h:7000"), 2, &error);
        QVERIFY2(job, qPrintable(error));
        QCOMPARE((*job)[1].telemetry, QStringLiteral("tcp://h:6002"));
        QCOMPARE((*job)[1].control, QStringLiteral("tcp://h:7002"));
        job = sp::ui::parseJobSpec(QStringLiteral("ipc:///a/t,ipc:///a/c; tcp://b:5556"), 0, &error);
        QVERIFY2(job, qPrintable(error));
        QCOMPARE(job->size(), std::size_t(2));
        QCOMPARE((*job)[1].control, QStringLiteral("tcp://b:5557"));
        QCOMPARE(sp::ui::jobSpecText(*job),
                 QStringLiteral("ipc:///a/t,ipc:///a/c;tcp://b:5556,tcp://b:5557"));
        // One agent stays one agent, ipc included.
        job = sp::ui::parseJobSpec(QStringLiteral("ipc:///a/t,ipc:///a/c"), 1, &error);
        QVERIFY2(job && job->size() == 1, qPrintable(error));
    }

    void jobSpecRefusesWhatCannotBeARank_data() {
        QTest::addColumn<QString>("spec");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<QString>("message");
        QTest::newRow("ipc has no port") << "ipc:///a/t,ipc:///a/c" << 2 << "has no port";
        QTest::newRow("past 65535") << "tcp://h:65530" << 4 << "would need port";
        QTest::newRow("list of another length")
            << "tcp://a:5556;tcp://b:5556" << 3 << "lists 2 ranks separated by ';', not 3";
        QTest::newRow("bad element") << "tcp://a:5556;tcp://b" << 0 << "rank 1: 'tcp://b': missing :PORT";
        QTest::newRow("empty element") << "tcp://a:5556;" << 0 << "rank 1 is empty";
        QTest::newRow("same endpoint twice") << "tcp://a:5556;tcp://a:5557,tcp://a:5558" << 0
                                             << "rank 1: 'tcp://a:5557' is already another rank's";
    }
    void jobSpecRefusesWhatCannotBeARank() {
        QFETCH(QString, spec);
        QFETCH(int, ranks);
        QFETCH(QString, message);
        QString error;
        QVERIFY(!sp::ui::parseJobSpec(spec, ranks, &error));
        QVERIFY2(error.contains(message), qPrintable(error));
    }

    // One row per rank, side by side: endpoint, state, run, steps, latest update, loss.
    void rowsShowEachRank() {
        Rig rig(3);
        QCOMPARE(rig.model->rowCount(), 3);
        QCOMPARE(rig.model->columnCount(), int(RankStatusModel::ColumnCount));
        QCOMPARE(rig.cell(2, RankStatusModel::EndpointColumn), QStringLiteral("tcp://h:5560"));
        QCOMPARE(rig.cell(1, RankStatusModel::RunColumn), QStringLiteral("job-1"));
        QCOMPARE(rig.cell(1, RankStatusModel::StepColumn), QStringLiteral("—"));
        rig.update(0, 40, {}, {}, 2.5);
        rig.update(1, 40, {}, {}, 2.75);
        rig.model->heartbeat(0, 47);
        QCOMPARE(rig.cell(0, RankStatusModel::StepColumn), QStringLiteral("47"));
        QCOMPARE(rig.cell(1, RankStatusModel::StepColumn), QStringLiteral("40"));
        QCOMPARE(rig.cell(1, RankStatusModel::BehindColumn), QStringLiteral("7"));
        QCOMPARE(rig.cell(0, RankStatusModel::BehindColumn), QStringLiteral("0"));
        QCOMPARE(rig.cell(1, RankStatusModel::UpdateColumn), QStringLiteral("40"));
        QCOMPARE(rig.cell(1, RankStatusModel::LossColumn), QStringLiteral("2.75"));
        // The loss every rank reports is the job's all-reduced mean, and the column says so.
        QCOMPARE(rig.model->headerData(RankStatusModel::LossColumn, Qt::Horizontal).toString(),
                 QStringLiteral("Job loss"));
        QVERIFY(rig.model->headerData(RankStatusModel::LossColumn, Qt::Horizontal, Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("all-reduces")));
        QCOMPARE(rig.cell(0, RankStatusModel::MapColumn), QStringLiteral("reference"));
        QCOMPARE(rig.cell(1, RankStatusModel::MapColumn), QStringLiteral("agrees (step 40)"));
        QCOMPARE(rig.cell(2, RankStatusModel::MapColumn), QStringLiteral("—"));
        QCOMPARE(rig.cell(0, RankStatusModel::StateColumn), QStringLiteral("live"));
        QVERIFY(rig.model->warnings().empty());
    }

    // A rank's map at step S against rank 0's at S, whichever arrives first; the warning names the
    // rank, the step and the differing blocks, and stays until a later update agrees.
    void differingMapWarnsUntilALaterUpdateAgrees() {
        Rig rig(2);
        QSignalSpy spy(rig.model.get(), &RankStatusModel::warningsChanged);
        rig.update(0, 10, {1});
        rig.update(1, 10, {1});
        QVERIFY(rig.model->warnings().empty());
        QCOMPARE(spy.count(), 0);

        rig.update(1, 20, {1, 2});  // rank 1 first: nothing to compare with yet
        QVERIFY(rig.model->warnings().empty());
        QCOMPARE(rig.cell(1, RankStatusModel::MapColumn), QStringLiteral("agrees (step 10)"));
        rig.update(0, 20, {1}, {2});
        QCOMPARE(spy.count(), 1);
        QCOMPARE(rig.warnings(),
                 QStringList{QStringLiteral("rank 1's map at step 20 differs from rank 0's: blocks.2 int8 on "
                                            "rank 1, fp8_e4m3 on rank 0")});
        QVERIFY(rig.model->warnings().front().kind == RankStatusModel::WarningKind::map);
        QCOMPARE(rig.model->warnings().front().step, std::int64_t(20));
        QCOMPARE(rig.cell(1, RankStatusModel::MapColumn), QStringLiteral("differs (step 20)"));
        QVERIFY(rig.model->index(1, RankStatusModel::MapColumn).data(RankStatusModel::WarnedRole).toBool());
        QVERIFY(!rig.model->index(1, RankStatusModel::StepColumn).data(RankStatusModel::WarnedRole).toBool());
        QVERIFY(rig.model->status(1).difference.contains(QStringLiteral("blocks.2")));

        // Rank 0 moves on alone: still the warning of step 20.
        rig.update(0, 30, {1});
        QCOMPARE(rig.model->warnings().size(), std::size_t(1));
        // A later update that agrees clears it.
        rig.update(1, 30, {1});
        QVERIFY(rig.model->warnings().empty());
        QCOMPARE(spy.count(), 2);
        QCOMPARE(rig.cell(1, RankStatusModel::MapColumn), QStringLiteral("agrees (step 30)"));
    }

    // More than max(2 × update_interval_steps, 20) behind the furthest rank for longer than the
    // grace; clears when the rank catches up.
    void rankBehindWarnsAfterTheGrace() {
        Rig rig(3);
        sp::RunHeader h = runHeader("job-1", 4);
        h.config_json = R"({"update_interval_steps": 25})";
        rig.model->header(0, h);
        QCOMPARE(rig.model->behindThreshold(), std::int64_t(50));
        rig.model->heartbeat(0, 200);
        rig.model->heartbeat(1, 200);
        rig.model->heartbeat(2, 150);  // 50 behind: not more than the threshold
        rig.now += 10 * RankStatusModel::kBehindGraceMs;
        rig.model->evaluate();
        QVERIFY(rig.model->warnings().empty());
        rig.model->heartbeat(0, 260);
        rig.model->heartbeat(1, 260);
        rig.model->heartbeat(2, 170);  // 90 behind, just now
        QVERIFY(rig.model->warnings().empty());
        rig.now += RankStatusModel::kBehindGraceMs;
        rig.model->evaluate();
        QCOMPARE(rig.warnings(), QStringList{QStringLiteral("rank 2 is 90 steps behind (step 170, rank 0 at "
                                                            "step 260; more than 50); this clears when it "
                                                            "catches up")});
        QVERIFY(
            rig.model->index(2, RankStatusModel::BehindColumn).data(RankStatusModel::WarnedRole).toBool());
        rig.model->heartbeat(2, 250);
        QVERIFY(rig.model->warnings().empty());

        // A short interval: the floor of 20 steps.
        h.config_json = R"({"update_interval_steps": 5})";
        rig.model->header(0, h);
        QCOMPARE(rig.model->behindThreshold(), RankStatusModel::kMinBehindSteps);
    }

    // Nothing from a rank (heartbeats count) for more than 5 s while the others are heard; clears
    // when it is heard again. All silent, or the rank's run ended: no warning.
    void silentRankWarnsWhileOthersAreHeard() {
        Rig rig(2);
        rig.model->heartbeat(0, 10);
        rig.model->heartbeat(1, 10);
        rig.now += RankStatusModel::kSilentMs;
        rig.model->heartbeat(0, 11);
        rig.model->evaluate();
        QVERIFY(rig.model->warnings().empty());  // exactly 5 s is not more than 5 s
        rig.now += 1000;
        rig.model->heartbeat(0, 12);
        QCOMPARE(rig.warnings(), QStringList{QStringLiteral("rank 1 (tcp://h:5558) has sent nothing for 6 s "
                                                            "while the others are heard; this clears when it "
                                                            "is heard again")});
        QVERIFY(rig.cell(1, RankStatusModel::StateColumn).contains(QStringLiteral("silent 6 s")));
        rig.model->heartbeat(1, 12);
        QVERIFY(rig.model->warnings().empty());

        rig.now += 60000;  // everyone silent: nothing to compare with
        rig.model->evaluate();
        QVERIFY(rig.model->warnings().empty());

        rig.model->heartbeat(0, 13);
        rig.model->records(1, {eventRecord("run_end", 13, R"({"kind":"run_end","reason":"completed"})")});
        rig.now += 10000;
        rig.model->heartbeat(0, 14);
        QVERIFY(rig.model->warnings().empty());
        QCOMPARE(rig.cell(1, RankStatusModel::StateColumn), QStringLiteral("finished"));
    }

    // A new run id on a rank (its agent restarted): its steps and maps start over.
    void restartStartsTheRankOver() {
        Rig rig(2);
        rig.update(0, 20, {1});
        rig.update(1, 20, {2});
        QCOMPARE(rig.model->warnings().size(), std::size_t(1));
        rig.model->header(1, runHeader("job-2", 4));
        QCOMPARE(rig.cell(1, RankStatusModel::RunColumn), QStringLiteral("job-2"));
        QCOMPARE(rig.cell(1, RankStatusModel::StepColumn), QStringLiteral("—"));
        QCOMPARE(rig.cell(1, RankStatusModel::MapColumn), QStringLiteral("—"));
        QVERIFY(rig.model->warnings().empty());
    }

    // RankJob: the other ranks' sources and rank 0's session's source feed the model; a warning is
    // logged in rank 0's event log once when it appears and once when it clears.
    void jobLogsWarningsInRankZerosLog() {
        auto rank0 = std::make_unique<FakeTelemetrySource>();
        FakeTelemetrySource* zero = rank0.get();
        sp::ui::RunSession session(std::move(rank0));
        std::vector<std::unique_ptr<sp::ui::TelemetrySource>> others;
        others.push_back(std::make_unique<FakeTelemetrySource>());
        auto* one = static_cast<FakeTelemetrySource*>(others.back().get());
        auto* job = new sp::ui::RankJob(&session, std::move(others));
        QCOMPARE(job->parent(), &session);
        QCOMPARE(job->rankCount(), 2);
        job->start();
        QVERIFY(one->started);
        for (FakeTelemetrySource* s : {zero, one}) {
            s->state(SourceState::live);
            s->header(runHeader("job-1", 4));
        }
        const auto warnings = [&session](const QString& text) {
            int n = 0;
            for (std::size_t i = 0; i < session.events().size(); ++i)
                n += session.events().at(i).text.contains(text);
            return n;
        };
        sp::UpdateRecord a = uniformUpdate(10, 4);
        sp::UpdateRecord b = a;
        b.block_details[3].precision = Precision::int8;
        zero->records({a});
        one->records({b});
        QCOMPARE(session.store().updateCount(), std::size_t(1));  // rank 0's stream is the run
        QCOMPARE(
            warnings(QStringLiteral("rank 1's map at step 10 differs from rank 0's: blocks.3 int8 on rank "
                                    "1, bf16 on rank 0")),
            1);
        zero->records({uniformUpdate(20, 4)});
        one->records({uniformUpdate(20, 4)});
        QCOMPARE(warnings(QStringLiteral("differs")), 1);
        QCOMPARE(warnings(QStringLiteral("rank 1's map agrees with rank 0's again at step 20")), 1);
        job->stop();
        QVERIFY(!one->started);
    }
};

QTEST_MAIN(TestRankStatus)
#include "test_rank_status.moc"
