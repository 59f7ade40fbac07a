// sp-experiment, short: a tiny model pretrained for a few steps, fine-tuned under a few schemes in
// both settings (adapters + weights scope, full + compute scope) with one seed, and its paired
// measures with the exact oracle and the agent's estimates, so that the driver of the precision experiment
// (tools/experiment) cannot rot. The real thing runs for minutes and its results live in
// docs/experiment. And its command line: bad flags exit 2 naming the problem, and --help lists every
// flag, each documented in the README's flag table.
#include <QtTest>

#include <QFileInfo>
#include <QImage>
#include <QRegularExpression>
#include <QTemporaryDir>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::run;

QStringList short_run(const QString& out) {
    return {
        "--out",          out, "--pretrain-steps", "20", "--finetune-steps", "10",
        "--probe-points", "2", "--blocks",         "2",  "--d-model",        "32",
        "--seeds",        "5", "--outlier-block",  "1",  "--schemes",        "int8,sp_tiers,loss_budget50"};
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
        // All-BF16 joins the three chosen schemes: every comparison is against it; both settings.
        QCOMPARE(first.out.count("seed 5: eval"), 8);
        QCOMPARE(first.out.count("(cached)"), 0);
        QVERIFY(first.out.contains("pretrain: 20 steps"));
        QVERIFY(first.out.contains("paired measures, adapters-weights:"));
        QVERIFY(first.out.contains("paired measures, full-compute:"));

        const QString md = read(dir.filePath("results.md"));
        for (const char* row :
             {"| All BF16 |", "| All INT8 |", "| SP, SNR tiers |", "| SP loss budget 50% |",
              "## Fine-tune: adapters + weights scope", "## Fine-tune: full + compute scope",
              "## Against the goals", "The planted block 1 never computes from INT8 or INT4",
              "## Paired measures", "| Exact oracle (step 10) |", "## The estimate against the measured gaps",
              "| Step | Pairs | ρ, loss estimate | ρ, sensitivity |", "## What the saved bytes buy"})
            QVERIFY2(md.contains(row), row);
        const QStringList csv = read(dir.filePath("results.csv")).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(csv.size(), 10);  // header, the pretraining, four schemes in two settings
        QVERIFY(csv[0].startsWith("phase,mode,scheme,label,family,seed,initial_eval_loss,final_eval_loss"));
        QVERIFY(csv[0].endsWith(",gap_pct,scope,estimator"));
        QVERIFY(csv[1].startsWith("pretrain,,bf16,"));
        const QStringList int8 = csv[3].split(',');
        QCOMPARE(int8[0] + "," + int8[1] + "," + int8[2], QString("finetune,adapters,int8"));
        QVERIFY2(int8[9].toDouble() > 30.0, qPrintable(csv[3]));  // bytes saved: INT8 really materialized
        QVERIFY(!int8[int8.size() - 3].isEmpty());                // the paired gap of seed 5's map
        QCOMPARE(int8[int8.size() - 2] + "," + int8.last(), QString("weights,"));  // uniform: no estimator
        QVERIFY(csv[2].startsWith("finetune,adapters,bf16,") && csv[2].split(',')[8].toDouble() == 0.0);
        QVERIFY(csv[5].startsWith("finetune,adapters,loss_budget50,") && csv[5].endsWith(",weights,loss"));
        QVERIFY(csv[8].startsWith("finetune,full,sp_tiers,") && csv[8].endsWith(",compute,sensitivity"));
        // Every checkpoint eval is the pretrained model's on the fine-tune part: the same in every row.
        QCOMPARE(csv[3].split(',')[6], csv[2].split(',')[6]);
        const QStringList paired = read(dir.filePath("paired.csv")).split('\n', Qt::SkipEmptyParts);
        QVERIFY(paired[0].startsWith("mode,seed,step,map_name,map,saving_pct,gap_pct"));
        QVERIFY(paired[0].endsWith(",scope"));
        // The exact oracle's budget and tolerance plans, per setting and step.
        QVERIFY(paired.filter(",oracle:budget:").size() >= 4);
        QVERIFY(paired.filter(",oracle:tolerance:").size() >= 4);
        QVERIFY(paired.filter(QRegularExpression("^adapters,5,0,single:1:int4,")).size() == 1);
        for (const char* png : {"frontier_full-compute.png", "eval_loss_adapters-weights.png", "pretrain.png",
                                "paired_full-compute.png", "paired_adapters-weights.png"}) {
            const QImage image(dir.filePath(png));
            QVERIFY2(!image.isNull() && image.width() >= 1000, png);
        }

        // A second run with the same settings reads every run back; one more scheme runs alone.
        QStringList again = short_run(dir.path());
        again.last() = "int8,sp_tiers,loss_budget50,fp8_e4m3";
        const Run second = run(SP_EXPERIMENT_PATH, again);
        QVERIFY2(second.exit_code == 0, second.err.constData());
        QCOMPARE(second.out.count("(cached)"), 9);  // the pretraining and eight fine-tunes
        QVERIFY(second.out.contains("All FP8 E4M3"));
        QCOMPARE(read(dir.filePath("results.csv")).split('\n', Qt::SkipEmptyParts).size(), 12);
        QCOMPARE(read(dir.filePath("results.csv")).split('\n')[3], csv[3]);  // the cached INT8 row, unchanged
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
        const Run modes = run(SP_EXPERIMENT_PATH, {"--out", dir.path(), "--modes", "full,lora"});
        QCOMPARE(modes.exit_code, 2);
        QVERIFY2(modes.err.contains("--modes: expected full and/or adapters"), modes.err.constData());
        const Run scopes = run(SP_EXPERIMENT_PATH, {"--out", dir.path(), "--scopes", "weights,memory"});
        QCOMPARE(scopes.exit_code, 2);
        QVERIFY2(scopes.err.contains("--scopes: expected weights and/or compute, got 'memory'"),
                 scopes.err.constData());
        const Run pairs = run(SP_EXPERIMENT_PATH, {"--out", dir.path(), "--modes", "full,adapters,full",
                                                   "--scopes", "weights,compute"});
        QCOMPARE(pairs.exit_code, 2);
        QVERIFY2(pairs.err.contains("--modes and --scopes: as many of each, or one of either"),
                 pairs.err.constData());
        const Run no_out = run(SP_EXPERIMENT_PATH, {"--finetune-steps", "12"});
        QCOMPARE(no_out.exit_code, 2);
        QVERIFY2(no_out.err.contains("--out DIR is required"), no_out.err.constData());
        const Run bogus = run(SP_EXPERIMENT_PATH, {"--out", dir.path(), "--bogus", "1"});
        QCOMPARE(bogus.exit_code, 2);
        QVERIFY2(bogus.err.contains("sp-experiment: unknown flag '--bogus'"), bogus.err.constData());
        const Run jobs = run(SP_EXPERIMENT_PATH, {"--out", dir.path(), "--jobs", "two"});
        QCOMPARE(jobs.exit_code, 2);
        QVERIFY2(jobs.err.contains("sp-experiment: --jobs: expected an integer in 1..64, got 'two'"),
                 jobs.err.constData());
        const Run last = run(SP_EXPERIMENT_PATH, {"--out", dir.path(), "--jobs"});
        QCOMPARE(last.exit_code, 2);
        QVERIFY2(last.err.contains("sp-experiment: --jobs needs a value"), last.err.constData());
        // An empty value is one: CLI11 alone would take "--rerun" for the folder.
        const Run empty = run(SP_EXPERIMENT_PATH, {"--out=", "--rerun"}, dir.path());
        QCOMPARE(empty.exit_code, 2);
        QVERIFY2(empty.err.contains("--out DIR is required"), empty.err.constData());
        QVERIFY(!QFileInfo::exists(dir.filePath("--rerun")));
    }

    // --help is generated from the flags' declarations (experiment_main.cpp): it lists every flag and
    // no other, and the README's flag table documents each of them.
    void help_lists_every_flag_and_the_readme_documents_each() {
        const Run help = run(SP_EXPERIMENT_PATH, {"--help"});
        QCOMPARE(help.exit_code, 0);
        QVERIFY2(help.out.contains("Usage: sp-experiment [OPTIONS]"), help.out.constData());
        QStringList listed;
        const QRegularExpression option_line(R"(^  (?:-h,)?(--[a-z][a-z0-9-]*))",
                                             QRegularExpression::MultilineOption);
        for (auto it = option_line.globalMatch(QString::fromUtf8(help.out)); it.hasNext();)
            listed << it.next().captured(1);
        listed.sort();
        QStringList expected = {"--out",
                                "--seeds",
                                "--pretrain-steps",
                                "--finetune-steps",
                                "--modes",
                                "--scopes",
                                "--adapter-rank",
                                "--finetune-lr",
                                "--probe-points",
                                "--probe-batches",
                                "--blocks",
                                "--d-model",
                                "--outlier-block",
                                "--outlier-scale",
                                "--schemes",
                                "--jobs",
                                "--rerun",
                                "--trainer",
                                "--help"};
        expected.sort();
        QCOMPARE(listed, expected);
        const QString readme = read(SP_SOURCE_DIR "/tools/experiment/README.md");
        QVERIFY(!readme.isEmpty());
        for (const QString& flag : expected)
            QVERIFY2(readme.contains(QRegularExpression("^\\|[^|\\n]*`" + flag + "[ `]",
                                                        QRegularExpression::MultilineOption)),
                     qPrintable(flag + " is not in tools/experiment/README.md's flag table"));
    }
};

QTEST_GUILESS_MAIN(TestSpExperiment)
#include "test_sp_experiment.moc"
