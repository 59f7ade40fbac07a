// sp-experiment, short: two schemes, one seed, a few steps of a tiny model, so that the driver of
// the precision experiment (tools/experiment) cannot rot. The real thing runs for minutes and its
// results live in docs/experiment.
#include <QtTest>

#include <QImage>
#include <QTemporaryDir>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::run;

QStringList short_run(const QString& out) {
    return {"--out",   out, "--steps",      "12", "--blocks",        "2", "--d-model", "32",
            "--seeds", "5", "--eval-every", "6",  "--outlier-block", "1", "--schemes", "int8,sp_tiers"};
}

QString read(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

}  // namespace

class TestSpExperiment : public QObject {
    Q_OBJECT

  private slots:
    void short_run_writes_the_report_and_reuses_its_runs() {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const Run first = run(SP_EXPERIMENT_PATH, short_run(dir.path()));
        QVERIFY2(first.exit_code == 0, first.err.constData());
        // All-BF16 joins the two chosen schemes: every comparison is against it.
        QCOMPARE(first.out.count("seed 5: eval"), 3);
        QCOMPARE(first.out.count("(cached)"), 0);

        const QString md = read(dir.filePath("results.md"));
        for (const char* row : {"| All BF16 |", "| All INT8 |", "| SP, SNR tiers |", "## Against the goals",
                                "The SNR tiers never route the planted block 1"})
            QVERIFY2(md.contains(row), row);
        const QStringList csv = read(dir.filePath("results.csv")).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(csv.size(), 4);  // header + three runs
        QVERIFY(
            csv[0].startsWith("scheme,label,family,seed,final_eval_loss,delta_vs_bf16_pct,bytes_saved_pct"));
        const QStringList int8 = csv[2].split(',');
        QCOMPARE(int8[0], QString("int8"));
        QVERIFY2(int8[6].toDouble() > 30.0, qPrintable(csv[2]));  // bytes saved: INT8 really materialized
        QVERIFY(csv[1].startsWith("bf16,") && csv[1].split(',')[5].toDouble() == 0.0);
        for (const char* png : {"frontier.png", "eval_loss.png"}) {
            const QImage image(dir.filePath(png));
            QVERIFY2(!image.isNull() && image.width() >= 1000, png);
        }

        // A second run with the same settings reads every run back; one more scheme runs alone.
        QStringList again = short_run(dir.path());
        again.last() = "int8,sp_tiers,fp8_e4m3";
        const Run second = run(SP_EXPERIMENT_PATH, again);
        QVERIFY2(second.exit_code == 0, second.err.constData());
        QCOMPARE(second.out.count("(cached)"), 3);
        QVERIFY(second.out.contains("All FP8 E4M3"));
        QCOMPARE(read(dir.filePath("results.csv")).split('\n', Qt::SkipEmptyParts).size(), 5);
        QCOMPARE(read(dir.filePath("results.csv")).split('\n')[2], csv[2]);  // the cached INT8 row, unchanged
    }

    void bad_flags_exit_2_naming_the_problem() {
        QTemporaryDir dir;
        const Run unknown = run(SP_EXPERIMENT_PATH, {"--out", dir.path(), "--schemes", "int8,int3"});
        QCOMPARE(unknown.exit_code, 2);
        QVERIFY2(unknown.err.contains("unknown scheme 'int3'"), unknown.err.constData());
        const Run block =
            run(SP_EXPERIMENT_PATH, {"--out", dir.path(), "--blocks", "2", "--outlier-block", "2"});
        QCOMPARE(block.exit_code, 2);
        QVERIFY2(block.err.contains("--outlier-block"), block.err.constData());
        const Run no_out = run(SP_EXPERIMENT_PATH, {"--steps", "12"});
        QCOMPARE(no_out.exit_code, 2);
        QVERIFY2(no_out.err.contains("--out DIR is required"), no_out.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestSpExperiment)
#include "test_sp_experiment.moc"
