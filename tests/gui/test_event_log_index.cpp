// The event log's index (EventLog::select, findCommand, pendingCommands) against a scan of the log,
// through changes made with at(); EventLogFilter's rows against the same scan as the log grows and
// the step limit moves, by inserts and removals (no reset: the view keeps its scroll).
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QtTest>
#include <random>

#include "fake_telemetry_source.h"
#include "sp/ui/event_log.h"
#include "sp/ui/event_log_filter.h"
#include "sp/ui/event_log_model.h"
#include "sp/ui/run_session.h"

using sp::ui::CommandState;
using sp::ui::EventCategory;
using sp::ui::EventEntry;
using sp::ui::EventLog;
using Limit = std::optional<std::int64_t>;
using Kind = std::optional<EventCategory>;

namespace {

std::vector<std::size_t> scan(const EventLog& log, Kind kind, Limit limit) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < log.size(); ++i) {
        const EventEntry& e = log.at(i);
        if ((!kind || e.category == *kind) && (!limit || e.step <= *limit)) out.push_back(i);
    }
    return out;
}

// A log of `n` entries: steps mostly rising, some without a step, every tenth a command.
EventLog randomLog(std::mt19937& rng, int n) {
    EventLog log;
    std::int64_t step = 0;
    for (int i = 0; i < n; ++i) {
        EventEntry e;
        e.category = static_cast<EventCategory>(rng() % sp::ui::kEventCategories);
        step += std::int64_t(rng() % 3);
        e.step = rng() % 7 == 0 ? -1 : step - std::int64_t(rng() % 2) * 5;  // some out of order
        if (i % 10 == 0) {
            e.category = EventCategory::command;
            e.request_id = QStringLiteral("r%1").arg(i % 40);  // ids repeat: the latest wins
            e.state = CommandState::pending;
        }
        log.append(std::move(e));
    }
    return log;
}

}  // namespace

class TestEventLogIndex : public QObject {
    Q_OBJECT
  private slots:
    void lookUpsAgreeWithAScanThroughChanges() {
        std::mt19937 rng(27);
        EventLog log = randomLog(rng, 3000);
        for (int round = 0; round < 4; ++round) {
            for (int k = -1; k < int(sp::ui::kEventCategories); ++k) {
                const Kind kind = k < 0 ? Kind{} : Kind{static_cast<EventCategory>(k)};
                for (const Limit limit :
                     {Limit{}, Limit{-1}, Limit{0}, Limit{500}, Limit{1200}, Limit{100000}})
                    QCOMPARE(log.select(kind, limit), scan(log, kind, limit));
            }
            std::vector<std::size_t> pending;
            for (std::size_t i = 0; i < log.size(); ++i)
                if (log.at(i).category == EventCategory::command && log.at(i).state == CommandState::pending)
                    pending.push_back(i);
            QCOMPARE(log.pendingCommands(), pending);
            for (int id = 0; id < 40; ++id) {
                const QString rid = QStringLiteral("r%1").arg(id);
                std::optional<std::size_t> latest;
                for (std::size_t i = 0; i < log.size(); ++i)
                    if (log.at(i).request_id == rid && log.at(i).state != CommandState::none) latest = i;
                QCOMPARE(log.findCommand(rid), latest);
            }
            // Commands settle at a step (as RunSession does through at()), others move.
            for (int c = 0; c < 200; ++c) {
                EventEntry& e = log.at(rng() % log.size());
                e.step = std::int64_t(rng() % 1500) - 1;
                if (e.category == EventCategory::command)
                    e.state = rng() % 2 ? CommandState::applied : CommandState::rejected;
            }
        }
        log.clear();
        QVERIFY(log.select({}, Limit{10}).empty());
        QVERIFY(log.pendingCommands().empty());
        QVERIFY(!log.findCommand(QStringLiteral("r0")));
    }

    void filterFollowsTheLogAndTheStepLimit() {
        auto owned = std::make_unique<sp::test::FakeTelemetrySource>();
        sp::ui::RunSession session(std::move(owned));
        sp::ui::EventLogModel model(&session);
        sp::ui::EventLogFilter filter;
        QAbstractItemModelTester tester(&filter, QAbstractItemModelTester::FailureReportingMode::QtTest);
        filter.setSourceModel(&model);
        QCOMPARE(filter.headerData(0, Qt::Horizontal).toString(), QStringLiteral("Time"));  // also empty
        const auto rows = [&filter] {
            std::vector<std::size_t> out;
            for (int r = 0; r < filter.rowCount(); ++r)
                out.push_back(std::size_t(filter.mapToSource(filter.index(r, 0)).row()));
            return out;
        };
        for (int s = 0; s < 300; ++s)
            session.note(s % 3 == 0 ? EventCategory::rollback : EventCategory::warning,
                         QStringLiteral("entry %1").arg(s), {}, s % 50 == 0 ? -1 : s);
        model.sync();
        QCOMPARE(rows(), scan(session.events(), {}, {}));

        QSignalSpy resets(&filter, &QAbstractItemModel::modelReset);
        QSignalSpy inserted(&filter, &QAbstractItemModel::rowsInserted);
        QSignalSpy removed(&filter, &QAbstractItemModel::rowsRemoved);
        for (const Limit limit : {Limit{120}, Limit{40}, Limit{299}, Limit{-1}, Limit{}}) {
            filter.setStepLimit(limit);
            QCOMPARE(rows(), scan(session.events(), {}, limit));
        }
        filter.setCategory(EventCategory::rollback);
        filter.setStepLimit(Limit{200});
        QCOMPARE(rows(), scan(session.events(), EventCategory::rollback, Limit{200}));
        QCOMPARE(resets.count(), 0);  // the cursor moved: rows in and out, the view keeps its place
        QVERIFY(inserted.count() > 0 && removed.count() > 0);

        // New entries: those that pass appear at the end, the others wait for the limit.
        session.note(EventCategory::rollback, QStringLiteral("late"), {}, 150);
        session.note(EventCategory::rollback, QStringLiteral("future"), {}, 900);
        session.note(EventCategory::warning, QStringLiteral("other kind"), {}, 10);
        model.sync();
        QCOMPARE(rows(), scan(session.events(), EventCategory::rollback, Limit{200}));
        filter.setStepLimit({});
        QCOMPARE(rows(), scan(session.events(), EventCategory::rollback, {}));
        QCOMPARE(resets.count(), 0);
    }
};

QTEST_MAIN(TestEventLogIndex)
#include "test_event_log_index.moc"
