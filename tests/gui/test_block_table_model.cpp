// BlockTableModel over a RunSession: model consistency while data arrives, numeric sorting,
// filtering, and repaints of changed cells only.
#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QtTest>

#include "sp/jsonl.h"
#include "sp/policy.h"

#include "fake_telemetry_source.h"
#include "sp/ui/block_table_model.h"
#include "sp/ui/run_session.h"

using sp::ForcedBy;
using sp::Precision;
using sp::ui::BlockTableModel;
using sp::ui::RunSession;
using namespace sp::test;

namespace {

struct Rig {
    Rig() {
        auto owned = std::make_unique<FakeTelemetrySource>();
        source = owned.get();
        session = std::make_unique<RunSession>(std::move(owned));
        model = std::make_unique<BlockTableModel>(session.get());
        model->setMinRefreshInterval(0);  // every batch, so the checks below need no waiting
        proxy.setSourceModel(model.get());
        proxy.setSortRole(BlockTableModel::SortRole);
    }
    QString text(int row, int column) const { return model->data(model->index(row, column)).toString(); }

    FakeTelemetrySource* source = nullptr;
    std::unique_ptr<RunSession> session;
    std::unique_ptr<BlockTableModel> model;
    QSortFilterProxyModel proxy;
};

// A 3-block update whose relative magnitudes sort differently as text and as numbers.
sp::UpdateRecord magnitudes(std::int64_t step) {
    auto r = updateRecord(step, {blockDetail(0, Precision::bf16, 0.7), blockDetail(1, Precision::int8, 0.2),
                                 blockDetail(2, Precision::int8, 0.3, ForcedBy::pin)});
    r.block_details[0].relative_magnitude = 10.0;
    r.block_details[1].relative_magnitude = 2.0;
    r.block_details[2].relative_magnitude = 9.0;
    return r;
}

}  // namespace

class TestBlockTableModel : public QObject {
    Q_OBJECT
  private slots:
    void initTestCase() { sp::ui::registerUiMetaTypes(); }

    void consistentWhileDataArrives() {
        Rig rig;
        QAbstractItemModelTester tester(rig.model.get(),
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
        QAbstractItemModelTester proxy_tester(&rig.proxy,
                                              QAbstractItemModelTester::FailureReportingMode::Fatal);
        rig.proxy.sort(BlockTableModel::SensitivityColumn, Qt::DescendingOrder);
        QCOMPARE(rig.model->rowCount(), 0);

        // No header: blocks appear as records name them (with one, an id beyond its layout would be
        // a bad record: test_run_session).
        rig.source->records({uniformUpdate(10, 3, Precision::int8)});
        QCOMPARE(rig.model->rowCount(), 3);

        QSignalSpy inserted(rig.model.get(), &QAbstractItemModel::rowsInserted);
        QSignalSpy resets(rig.model.get(), &QAbstractItemModel::modelReset);
        for (int step = 20; step <= 50; step += 10) {
            const int blocks = step < 30 ? 3 : 5;  // the layout grows at step 30
            rig.source->records({uniformUpdate(step, blocks, step % 20 ? Precision::int8 : Precision::bf16)});
        }
        QCOMPARE(rig.model->rowCount(), 5);
        QCOMPARE(rig.proxy.rowCount(), 5);
        QCOMPARE(inserted.count(), 1);
        QCOMPARE(resets.count(), 0);
        QCOMPARE(rig.text(4, BlockTableModel::NameColumn), QString("blocks.4"));
        QCOMPARE(rig.text(4, BlockTableModel::PrecisionColumn), QString("int8"));
        QCOMPARE(rig.text(4, BlockTableModel::SensitivityColumn), QString("0.500"));
        // Switches and last change come from the store's history (bf16 <-> int8 every update).
        QCOMPARE(rig.text(0, BlockTableModel::SwitchesColumn), QString("4"));
        QCOMPARE(rig.text(0, BlockTableModel::LastChangeColumn), QString("50"));
        // Sorted by sensitivity, descending: block 4 first.
        QCOMPARE(rig.proxy.data(rig.proxy.index(0, BlockTableModel::IdColumn)).toInt(), 4);

        // The run's header, late (the same names: nothing to rebuild); then an agent restart with
        // fewer blocks rebuilds the model.
        rig.source->header(runHeader("run-A", 5));
        QCOMPARE(resets.count(), 0);
        rig.source->header(runHeader("run-B", 2));
        QCOMPARE(resets.count(), 1);
        QCOMPARE(rig.model->rowCount(), 2);
        rig.source->records({uniformUpdate(10, 2)});
        QCOMPARE(rig.proxy.rowCount(), 2);
    }

    void sortsNumerically() {
        Rig rig;
        rig.source->header(runHeader("run-A", 3));
        rig.source->records({magnitudes(10)});
        rig.proxy.sort(BlockTableModel::RelativeMagnitudeColumn, Qt::AscendingOrder);
        QList<int> order;
        for (int r = 0; r < 3; ++r)
            order << rig.proxy.data(rig.proxy.index(r, BlockTableModel::IdColumn)).toInt();
        QCOMPARE(order, (QList<int>{1, 2, 0}));  // 2 < 9 < 10, where text would give "10.000" first
        QCOMPARE(rig.text(0, BlockTableModel::RelativeMagnitudeColumn), QString("10.000"));
        // Forced column: pins say which precision, config says config.
        QCOMPARE(rig.text(2, BlockTableModel::ForcedColumn), QString("pin: int8"));
        QCOMPARE(rig.text(0, BlockTableModel::ForcedColumn), QString());
        QVERIFY(
            rig.model->data(rig.model->index(2, 0), Qt::ToolTipRole).toString().contains("pinned to int8"));
        // Missing values sort last, not as zero.
        rig.source->records(
            {updateRecord(20, {blockDetail(0, Precision::bf16, 0.7), blockDetail(2, Precision::int8, 0.1)})});
        rig.proxy.sort(BlockTableModel::SensitivityColumn, Qt::AscendingOrder);
        QCOMPARE(rig.proxy.data(rig.proxy.index(0, BlockTableModel::IdColumn)).toInt(), 2);
        QCOMPARE(rig.proxy.data(rig.proxy.index(2, BlockTableModel::IdColumn)).toInt(), 1);
        QCOMPARE(rig.text(1, BlockTableModel::SensitivityColumn), QString());
    }

    void filtersByName() {
        Rig rig;
        sp::RunHeader h = runHeader("run-A", 6);
        for (auto& b : h.blocks) b.name = (b.id % 2 ? "mlp." : "attn.") + std::to_string(b.id / 2);
        rig.source->header(h);
        rig.source->records({uniformUpdate(10, 6)});
        rig.proxy.setFilterKeyColumn(BlockTableModel::NameColumn);
        rig.proxy.setFilterRole(Qt::DisplayRole);
        rig.proxy.setFilterFixedString("attn");
        QCOMPARE(rig.proxy.rowCount(), 3);
        for (int r = 0; r < 3; ++r)
            QVERIFY(rig.proxy.data(rig.proxy.index(r, BlockTableModel::NameColumn))
                        .toString()
                        .startsWith("attn."));
        rig.proxy.setFilterFixedString("mlp.2");
        QCOMPARE(rig.proxy.rowCount(), 1);
        QCOMPARE(rig.proxy.data(rig.proxy.index(0, BlockTableModel::IdColumn)).toInt(), 5);
    }

    void refreshRepaintsChangedCellsOnly() {
        Rig rig;
        rig.source->header(runHeader("run-A", 4));
        rig.source->records({uniformUpdate(10, 4)});
        QSignalSpy changed(rig.model.get(), &QAbstractItemModel::dataChanged);
        // Same values at a new step: nothing to repaint.
        rig.source->records({uniformUpdate(20, 4)});
        QCOMPARE(changed.count(), 0);
        // Only block 1's sensitivity moves.
        auto r = uniformUpdate(30, 4);
        r.block_details[1].sensitivity = 0.9;
        rig.source->records({r});
        QCOMPARE(changed.count(), 1);
        const auto top_left = changed[0].at(0).value<QModelIndex>();
        const auto bottom_right = changed[0].at(1).value<QModelIndex>();
        QCOMPARE(top_left.row(), 1);
        QCOMPARE(bottom_right.row(), 1);
        QCOMPARE(top_left.column(), int(BlockTableModel::SensitivityColumn));
        QCOMPARE(bottom_right.column(), int(BlockTableModel::SensitivityColumn));
        QCOMPARE(rig.text(1, BlockTableModel::SensitivityColumn), QString("0.900"));
    }

    void coalescesFastBatches() {
        Rig rig;
        rig.model->setMinRefreshInterval(200);
        rig.source->header(runHeader("run-A", 2));
        rig.source->records({uniformUpdate(10, 2, Precision::bf16)});
        QCOMPARE(rig.text(0, BlockTableModel::PrecisionColumn), QString("bf16"));  // the first shows at once
        QSignalSpy changed(rig.model.get(), &QAbstractItemModel::dataChanged);
        rig.source->records({uniformUpdate(20, 2, Precision::int8)});
        rig.source->records({uniformUpdate(30, 2, Precision::int8)});
        QCOMPARE(changed.count(), 0);  // coalesced...
        QTRY_COMPARE_WITH_TIMEOUT(rig.text(0, BlockTableModel::PrecisionColumn), QString("int8"),
                                  5000);  // ...then shown
        QCOMPARE(rig.text(0, BlockTableModel::LastChangeColumn), QString("20"));
        // A state change (a replay finishing) shows pending data at once.
        rig.source->records({uniformUpdate(40, 2, Precision::bf16)});
        QCOMPARE(rig.text(0, BlockTableModel::PrecisionColumn), QString("int8"));
        rig.source->state(sp::ui::SourceState::loaded);
        QCOMPARE(rig.text(0, BlockTableModel::PrecisionColumn), QString("bf16"));
    }

    // A hold after a released pin says so, and a running cooldown says when it ends (the run's
    // min_steps_between_switches, from its header); both in the Why column and the tooltip.
    void explainsAHoldAfterAReleasedPinAndTheCooldown() {
        Rig rig;
        sp::RunHeader h = runHeader("run-A", 2);
        h.config_json = R"({"min_steps_between_switches": 50})";
        rig.source->header(h);
        auto held = [](int id, Precision p) {
            sp::BlockDetail d = blockDetail(id, p, 0.25);
            d.reason = sp::Reason::hold;
            return d;
        };
        // Block 0: moved to INT8 by the policy at step 10. Block 1: pinned BF16 at 20, released at 30.
        rig.source->records({updateRecord(10, {blockDetail(0, Precision::int8, 0.1, ForcedBy::none, true),
                                               held(1, Precision::int8)}),
                             updateRecord(20, {held(0, Precision::int8),
                                               blockDetail(1, Precision::bf16, 0.26, ForcedBy::pin, true)}),
                             updateRecord(30, {held(0, Precision::int8), held(1, Precision::bf16)})});
        QCOMPARE(rig.text(1, BlockTableModel::WhyColumn),
                 QString("held at bf16 since the pin was released at step 30"));
        QCOMPARE(rig.text(0, BlockTableModel::WhyColumn), QString("may switch again at step 60"));
        QVERIFY(rig.model->data(rig.model->index(1, BlockTableModel::PrecisionColumn), Qt::ToolTipRole)
                    .toString()
                    .contains("why: held at bf16 since the pin was released at step 30"));
        // Once the cooldown is over, nothing more to say about block 0; block 1's story stands.
        rig.source->records({updateRecord(70, {held(0, Precision::int8), held(1, Precision::bf16)})});
        QCOMPARE(rig.text(0, BlockTableModel::WhyColumn), QString());
        QCOMPARE(rig.text(1, BlockTableModel::WhyColumn),
                 QString("held at bf16 since the pin was released at step 30"));
        // Back at an earlier update (a replay moved back) the sentence is gone, but Why still says
        // which rule decided, and the story that holds there.
        rig.model->setUpdate(1);
        QCOMPARE(rig.text(1, BlockTableModel::WhyColumn), QString("reason: pin"));
        QVERIFY(!rig.text(0, BlockTableModel::WhyColumn).isEmpty());
        rig.model->setUpdate(BlockTableModel::kFollowLatest);
        // The columns an operator reads first come first.
        QCOMPARE(int(BlockTableModel::NameColumn), 0);
        QCOMPARE(int(BlockTableModel::PrecisionColumn), 1);
        QCOMPARE(int(BlockTableModel::WhyColumn), 2);
        QCOMPARE(rig.model->headerData(2, Qt::Horizontal).toString(), QString("Why"));
        // A header says what each column measures.
        QVERIFY(rig.model->headerData(BlockTableModel::ErrorScoreColumn, Qt::Horizontal, Qt::ToolTipRole)
                    .toString()
                    .contains("quant_error_threshold"));
    }

    // Planned on the loss estimate (POLICY.md rule 23), the Why column and the tooltip quote what each
    // format would cost: the record as the policy makes it, through the JSONL line a reader gets.
    void quotesTheLossEstimate() {
        Rig rig;
        rig.source->header(runHeader("run-L", 2));
        sp::Config c;
        c.warmup_steps = 0;
        c.mode = sp::Mode::tolerance;
        c.loss_tolerance_pct = 0.3;
        sp::Policy policy(c, sp::uniform_layout(2, 100));
        sp::BlockLossEstimate e;
        for (int b = 0; b < 2; ++b) {
            e.block_id = b;
            e.loss_delta[std::size_t(Precision::int4)] = (b == 0 ? 0.41 : 0.2) / 50;  // a loss of 2
            e.loss_delta[std::size_t(Precision::int8)] = 0.002 / 50;
            policy.observe_loss_estimate(e);
        }
        policy.observe_loss(0, 2.0);
        sp::TelemetryRecord parsed;
        std::string error;
        QVERIFY2(sp::parse_record_line(sp::to_json_line(*policy.update(0, 0.0)), parsed, error),
                 error.c_str());
        rig.source->records({std::get<sp::UpdateRecord>(parsed)});
        const QString why = rig.text(0, BlockTableModel::WhyColumn);
        QVERIFY2(why.contains(QString::fromUtf8("tolerance 0.30%, on the loss estimate: int8, which costs ≈ "
                                                "+0.002% loss; int4 would cost ≈ +0.41% loss")),
                 qPrintable(why));
        QVERIFY(rig.model->data(rig.model->index(0, BlockTableModel::PrecisionColumn), Qt::ToolTipRole)
                    .toString()
                    .contains(QString::fromUtf8("int4 would cost ≈ +0.41% loss")));
        QVERIFY2(rig.text(1, BlockTableModel::WhyColumn)
                     .contains(QString::fromUtf8("int4, which costs ≈ +0.20% loss")),
                 qPrintable(rig.text(1, BlockTableModel::WhyColumn)));
    }

    // A command in flight shows on the rows it touches until the agent applies or rejects it.
    void pendingCommandsShowOnTheirRows() {
        Rig rig;
        rig.source->state(sp::ui::SourceState::live);
        rig.source->header(runHeader("run-A", 3));
        rig.source->records({uniformUpdate(10, 3)});
        const QString pin = rig.session->pin({1}, Precision::int8);
        QVERIFY(!pin.isEmpty());
        QCOMPARE(rig.text(1, BlockTableModel::ForcedColumn), QString("pending: pin int8"));
        QCOMPARE(rig.text(0, BlockTableModel::ForcedColumn), QString());
        QVERIFY(rig.model->data(rig.model->index(1, BlockTableModel::PrecisionColumn), Qt::ToolTipRole)
                    .toString()
                    .contains("pending (sent, not yet applied): pin int8"));
        const QString payload = QStringLiteral(R"({"command":{"cmd":"pin","blocks":[1],"precision":"int8"},)"
                                               R"("ok":true,"changes":1,"id":"%1"})")
                                    .arg(pin);
        rig.source->records({eventRecord("command", 11, payload.toStdString())});
        QCOMPARE(rig.text(1, BlockTableModel::ForcedColumn), QString());

        const QString all = rig.session->releaseAll();
        QCOMPARE(rig.text(2, BlockTableModel::ForcedColumn), QString("pending: release all"));
        rig.source->reply(all, false, QStringLiteral("nothing to release"), -1);
        QCOMPARE(rig.text(2, BlockTableModel::ForcedColumn), QString());
    }

    void showsAChosenUpdate() {
        Rig rig;
        rig.source->header(runHeader("run-A", 2));
        rig.source->records({uniformUpdate(10, 2, Precision::bf16), uniformUpdate(20, 2, Precision::int8)});
        QVERIFY(rig.model->followsLatest());
        QCOMPARE(rig.text(0, BlockTableModel::PrecisionColumn), QString("int8"));
        rig.model->setUpdate(0);
        QCOMPARE(rig.model->shownUpdate(), std::size_t(0));
        QCOMPARE(rig.text(0, BlockTableModel::PrecisionColumn), QString("bf16"));
        // A pinned view stays where it is while data arrives.
        rig.source->records({uniformUpdate(30, 2, Precision::bf16)});
        QCOMPARE(rig.model->shownUpdate(), std::size_t(0));
        QCOMPARE(rig.text(0, BlockTableModel::LastChangeColumn), QString());
        rig.model->setUpdate(BlockTableModel::kFollowLatest);
        QCOMPARE(rig.model->shownUpdate(), std::size_t(2));
        QCOMPARE(rig.text(0, BlockTableModel::SwitchesColumn), QString("2"));
        QCOMPARE(rig.text(0, BlockTableModel::LastChangeColumn), QString("30"));
        rig.model->setUpdate(99);  // clamped
        QCOMPARE(rig.model->shownUpdate(), std::size_t(2));
    }
};

QTEST_MAIN(TestBlockTableModel)
#include "test_block_table_model.moc"
