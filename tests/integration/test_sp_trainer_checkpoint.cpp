// sp-trainer's checkpoints end to end: a save/load round trip scores the same eval loss to the last
// bit, --steps 0 evaluates and exits, outliers planted into a loaded model leave its function alone,
// and a checkpoint of another model (or no checkpoint at all) is a bad value: exit 2, nothing written.
#include <QtTest>

#include <QFile>
#include <QTemporaryDir>

#include <fstream>

#include <nlohmann/json.hpp>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::run;

// A small model, every block in BF16: the eval after a load sees exactly the weights the saving run
// evaluated last.
QStringList small(const QStringList& more) {
    return QStringList{"--blocks",     "2",       "--d-model",      "32",   "--seq-len", "32",
                       "--batch",      "4",       "--eval-batches", "2",    "--threads", "1",
                       "--no-network", "--quiet", "--precision",    "bf16", "--seed",    "3"} +
           more;
}

nlohmann::json summary_of(const QString& path) {
    std::ifstream in(path.toStdString());
    return nlohmann::json::parse(in);
}

Run trainer(const QStringList& args) {
    return run(SP_TRAINER_PATH, args);
}

}  // namespace

class TestSpTrainerCheckpoint : public QObject {
    Q_OBJECT
  private slots:
    void round_trip_scores_the_same_eval_loss_to_the_last_bit() {
        QTemporaryDir dir;
        const QString ckpt = dir.filePath("c.pt"), a = dir.filePath("a.json"), b = dir.filePath("b.json");
        Run r = trainer(
            small({"--steps", "15", "--no-telemetry", "--save-checkpoint", ckpt, "--summary-json", a}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(QFile::exists(ckpt));
        // --steps 0: evaluates the checkpoint and exits; its telemetry says the run completed.
        const QString telemetry = dir.filePath("eval.jsonl");
        r = trainer(small(
            {"--steps", "0", "--init-checkpoint", ckpt, "--summary-json", b, "--telemetry", telemetry}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto saved = summary_of(a), loaded = summary_of(b);
        QCOMPARE(loaded["steps"].get<int>(), 0);
        QCOMPARE(loaded["initial_eval_loss"].get<double>(), saved["final_eval_loss"].get<double>());
        QVERIFY(saved["initial_eval_loss"].get<double>() != saved["final_eval_loss"].get<double>());
        QVERIFY(run(SP_CTL_PATH, {"validate", telemetry}).exit_code == 0);

        // Training goes on from the checkpoint (weights and AdamW state).
        const QString c = dir.filePath("c.json");
        r = trainer(
            small({"--steps", "3", "--no-telemetry", "--init-checkpoint", ckpt, "--summary-json", c}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(summary_of(c)["initial_eval_loss"].get<double>(), saved["final_eval_loss"].get<double>());
    }

    // The plant is function-preserving (a power-of-two scale): a loaded model with outliers planted
    // scores what it scored without them.
    void outliers_planted_into_a_loaded_model_keep_its_function() {
        QTemporaryDir dir;
        const QString ckpt = dir.filePath("c.pt"), a = dir.filePath("a.json"), b = dir.filePath("b.json");
        QVERIFY(trainer(small({"--steps", "10", "--no-telemetry", "--save-checkpoint", ckpt, "--summary-json",
                               a}))
                    .exit_code == 0);
        const Run r = trainer(small({"--steps", "0", "--no-telemetry", "--init-checkpoint", ckpt,
                                     "--outlier-block", "1", "--summary-json", b}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(summary_of(b)["initial_eval_loss"].get<double>(),
                 summary_of(a)["final_eval_loss"].get<double>());
    }

    void another_model_or_no_checkpoint_exits_2_and_writes_nothing() {
        QTemporaryDir dir;
        const QString ckpt = dir.filePath("c.pt");
        QVERIFY(trainer(small({"--steps", "1", "--no-telemetry", "--save-checkpoint", ckpt})).exit_code == 0);
        const QString telemetry = dir.filePath("t.jsonl");
        Run r = run(SP_TRAINER_PATH,
                    {"--blocks", "3", "--d-model", "48", "--heads", "4", "--seq-len", "32", "--no-network",
                     "--steps", "0", "--init-checkpoint", ckpt, "--telemetry", telemetry});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("holds another model: --blocks 2 (this run 3), --d-model 32 (this run 48)"),
                 r.err.constData());
        QVERIFY(!QFile::exists(telemetry));

        const QString text = dir.filePath("not.pt");
        QFile f(text);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("not a checkpoint\n");
        f.close();
        r = trainer(small({"--steps", "0", "--init-checkpoint", text, "--telemetry", telemetry}));
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("is not an sp-trainer checkpoint"), r.err.constData());
        QVERIFY(!QFile::exists(telemetry));
        for (const QString& bad : {dir.filePath("missing.pt"), dir.path()}) {
            r = trainer(small({"--steps", "0", "--init-checkpoint", bad}));
            QCOMPARE(r.exit_code, 2);
            QVERIFY2(r.err.contains("--init-checkpoint: "), r.err.constData());
        }
        r = trainer(small({"--steps", "1", "--save-checkpoint", dir.filePath("no/such/folder/c.pt")}));
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("--save-checkpoint: the folder"), r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestSpTrainerCheckpoint)
#include "test_sp_trainer_checkpoint.moc"
