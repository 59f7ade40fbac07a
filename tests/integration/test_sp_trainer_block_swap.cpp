// sp-trainer --weight-residency block-swap end to end: the same training as `streamed`, bit for bit
// (every train loss and the final eval loss), and the same bytes per step, in a routed map (the
// policy, whose formats change during the run), a uniform INT4 run and an adapters fine-tune (its
// frozen base streamed from cached payloads). Only when the weights move differs between the modes.
#include <QtTest>

#include <QTemporaryDir>

#include <fstream>

#include <nlohmann/json.hpp>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::run;

QStringList tiny(const QStringList& more) {
    return QStringList{"--blocks",
                       "3",
                       "--d-model",
                       "32",
                       "--heads",
                       "2",
                       "--seq-len",
                       "16",
                       "--batch",
                       "2",
                       "--eval-batches",
                       "1",
                       "--threads",
                       "1",
                       "--no-network",
                       "--quiet",
                       "--no-telemetry",
                       "--seed",
                       "5",
                       "--steps",
                       "6",
                       "--eval-every",
                       "3"} +
           more;
}

nlohmann::json summary_of(const QTemporaryDir& dir, const QString& residency, const QStringList& more) {
    const QString path = dir.filePath(residency + ".json");
    const Run r = run(SP_TRAINER_PATH,
                      tiny(more + QStringList{"--weight-residency", residency, "--summary-json", path}));
    if (r.exit_code != 0) qFatal("sp-trainer %s failed: %s", qPrintable(residency), r.err.constData());
    std::ifstream in(path.toStdString());
    return nlohmann::json::parse(in);
}

}  // namespace

class TestSpTrainerBlockSwap : public QObject {
    Q_OBJECT
  private slots:
    void same_losses_and_bytes_as_streamed_data() {
        QTest::addColumn<QStringList>("flags");
        QTest::newRow("policy") << QStringList{"--precision", "policy"};
        QTest::newRow("int4") << QStringList{"--precision", "int4"};
        QTest::newRow("adapters int8") << QStringList{"--precision", "int8", "--finetune-mode", "adapters"};
    }
    void same_losses_and_bytes_as_streamed() {
        QFETCH(QStringList, flags);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const nlohmann::json streamed = summary_of(dir, "streamed", flags);
        const nlohmann::json swapped = summary_of(dir, "block-swap", flags);
        QCOMPARE(swapped["weight_residency"].get<std::string>(), std::string("block-swap"));
        const auto losses = streamed["train_loss"].get<std::vector<double>>();
        QCOMPARE(losses.size(), std::size_t(6));
        // Compared as doubles, exactly: the same values computed, only moved at another time.
        QCOMPARE(swapped["train_loss"].get<std::vector<double>>(), losses);
        QVERIFY(swapped["final_eval_loss"].get<double>() == streamed["final_eval_loss"].get<double>());
        // Bytes: the same per upload, counted one step later. The runtime starts in BF16 and the
        // first map arrives in step 0's optimizer window: `streamed` counts that map's
        // materialization in step 0; block-swap uploads BF16 in step 0's forward and the map from
        // step 1 on. The map is fixed from then on in these runs, so over the 6 steps block-swap
        // moves one BF16 step where `streamed` moves one more step of the map.
        const double steps = 6, bf16 = streamed["bytes_bf16_per_step"].get<double>();
        const double per_step = streamed["bytes_copied_per_step"].get<double>();
        QCOMPARE(swapped["bytes_bf16_per_step"].get<double>(), bf16);
        QCOMPARE(swapped["bytes_copied_per_step"].get<double>() * steps, per_step * (steps - 1) + bf16);
        QVERIFY(per_step > 0.0);
        // profiling_share: the agent's profiling time on the training thread (profiling_s; step 0
        // profiles) as a share of the training steps' time.
        for (const nlohmann::json* summary : {&streamed, &swapped}) {
            QVERIFY2(summary->contains("profiling_share"), summary->dump().c_str());
            const double share = summary->at("profiling_share").get<double>();
            QVERIFY2(share >= 0.0 && share <= 1.0, std::to_string(share).c_str());
            QCOMPARE(share,
                     summary->at("profiling_s").get<double>() / summary->at("train_step_s").get<double>());
        }
    }
};

QTEST_GUILESS_MAIN(TestSpTrainerBlockSwap)
#include "test_sp_trainer_block_swap.moc"
