// sp-trainer --weight-residency block-swap end to end: the same training as `streamed`, bit for bit
// (every train loss and the final eval loss), and the same bytes per upload, in a routed map (the
// policy, whose formats change during the run), a uniform INT4 run and adapters fine-tunes (their
// frozen base streamed from cached payloads, held in K slots and uploaded again for the backward:
// 2N - 1 uploads a step; in the weights scope computed in BF16). Only when the weights move differs
// between the modes.
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

// `more` as the residency takes it: --swap-slots is block-swap's alone.
nlohmann::json summary_of(const QTemporaryDir& dir, const QString& residency, QStringList more) {
    const qsizetype slots_at = more.indexOf("--swap-slots");
    if (residency != "block-swap" && slots_at >= 0) more.remove(slots_at, 2);
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
        QTest::newRow("adapters weights scope K=1")
            << QStringList{"--precision",       "policy",  "--finetune-mode", "adapters",
                           "--precision-scope", "weights", "--swap-slots",    "1"};
        QTest::newRow("adapters weights scope K=3")
            << QStringList{"--precision",       "int4",    "--finetune-mode", "adapters",
                           "--precision-scope", "weights", "--swap-slots",    "3"};
        QTest::newRow("full weights scope")
            << QStringList{"--precision", "policy", "--precision-scope", "weights"};
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
        // With a frozen base the slots hold the weights: every block but the last is uploaded again for
        // its backward, 2N - 1 uploads where `streamed` makes N (the tiny model's blocks are alike).
        const bool holds = flags.contains("adapters");
        const double uploads = holds ? 5.0 / 3.0 : 1.0;  // N = 3
        const double steps = 6, bf16 = streamed["bytes_bf16_per_step"].get<double>();
        const double per_step = streamed["bytes_copied_per_step"].get<double>();
        QCOMPARE(swapped["bytes_bf16_per_step"].get<double>(), bf16 * uploads);
        QCOMPARE(swapped["bytes_copied_per_step"].get<double>() * steps,
                 (per_step * (steps - 1) + bf16) * uploads);
        QVERIFY(per_step > 0.0);
        // The weights' device memory: K slots, each the largest block's weights (BF16 in the weights
        // scope, fp32 otherwise) and its largest payload (at most its BF16 bytes), when the slots hold
        // them; every block's weights otherwise.
        const auto k_slots = swapped["swap_slots"].get<double>();
        const auto block_bf16 = swapped["largest_block_bf16_bytes"].get<double>();
        const double weight_bytes = flags.contains("weights") ? block_bf16 : 2 * block_bf16;
        const auto peak = swapped["weights_peak_bytes"].get<double>();
        if (holds) {
            QVERIFY2(peak <= k_slots * (weight_bytes + block_bf16 + 256), qPrintable(QString::number(peak)));
            if (k_slots == 1) QVERIFY(peak < streamed["weights_peak_bytes"].get<double>());
        } else {
            QVERIFY(peak >= streamed["weights_peak_bytes"].get<double>());
        }
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
