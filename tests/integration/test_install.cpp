// The library as an outside trainer gets it: `cmake --install` into a prefix under the build tree,
// then examples/embed_agent configured against that prefix alone (find_package), built and run; and
// the installed sp-trainer finds its bundled text in the prefix.
#include <QDir>
#include <QFile>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "run_process.h"
#include "sp/config.h"

namespace {

using sp::test::Run;

constexpr int kSteps = 300;  // the example's own default: enough for its first routing decision

const QString kSource = QStringLiteral(SP_SOURCE_DIR);
const QString kBuild = QStringLiteral(SP_BINARY_DIR);

Run cmake(const QStringList& args) {
    return sp::test::run(SP_CMAKE_COMMAND, args, {}, 540000);
}

QString describe(const Run& r) {
    return QString::fromUtf8(r.out.right(3000) + "\n" + r.err.right(3000));
}

}  // namespace

class TestInstall : public QObject {
    Q_OBJECT
    // Fixed paths under the build tree (not a temporary folder), so the compiler cache serves a rerun.
    const QString root_ = kBuild + QStringLiteral("/install-test");
    const QString prefix_ = root_ + QStringLiteral("/prefix");

  private slots:
    void initTestCase() {
        QDir(root_).removeRecursively();
        for (const char* component : {"dev", "trainer"}) {
            const Run r = cmake({QStringLiteral("--install"), kBuild, QStringLiteral("--prefix"), prefix_,
                                 QStringLiteral("--component"), QString::fromLatin1(component)});
            QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        }
    }

    void installs_public_headers_only() {
        const QString include = prefix_ + QStringLiteral("/include/sp/");
        for (const char* h : {"agent/agent.h", "agent/precision_runtime.h", "transport/server_options.h",
                              "config.h", "policy.h"})
            QVERIFY2(QFile::exists(include + QString::fromLatin1(h)), h);
        for (const char* h : {"agent/telemetry_sink.h", "transport/agent_server.h"})
            QVERIFY2(!QFile::exists(include + QString::fromLatin1(h)), h);
        QVERIFY(QFile::exists(
            prefix_ + QStringLiteral("/lib/cmake/SelectivePrecision/SelectivePrecisionConfig.cmake")));
    }

    void example_builds_and_runs_against_the_prefix() {
        const QString build = root_ + QStringLiteral("/example");
        Run r = cmake({QStringLiteral("-S"), kSource + QStringLiteral("/examples/embed_agent"),
                       QStringLiteral("-B"), build, QStringLiteral("-G"), QStringLiteral("Ninja"),
                       QStringLiteral("-DCMAKE_BUILD_TYPE=Release"),
                       QStringLiteral("-DCMAKE_PREFIX_PATH=") + prefix_,
                       QStringLiteral("-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"),
                       QStringLiteral("-DCMAKE_CXX_COMPILER_LAUNCHER=") + QStringLiteral(SP_CXX_LAUNCHER)});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        r = cmake({QStringLiteral("--build"), build});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));

        // Self-contained: nothing in the example's compile lines points into this source tree.
        QFile commands(build + QStringLiteral("/compile_commands.json"));
        QVERIFY(commands.open(QIODevice::ReadOnly));
        const QByteArray lines = commands.readAll();
        QVERIFY2(!lines.contains((kSource + QStringLiteral("/core")).toUtf8()), lines.constData());
        QVERIFY2(!lines.contains((kSource + QStringLiteral("/agent")).toUtf8()), lines.constData());

        const QString telemetry = root_ + QStringLiteral("/example.jsonl");
        r = sp::test::run(qPrintable(build + QStringLiteral("/embed_agent")),
                          {QString::number(kSteps), telemetry});
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        for (int b = 0; b < 4; ++b) QVERIFY(r.out.contains(QStringLiteral("blocks.%1: ").arg(b).toUtf8()));
        QVERIFY(r.out.contains("bytes saved against all-BF16"));

        // The agent wrote a run: a header, then an update every update_interval_steps.
        QFile file(telemetry);
        QVERIFY(file.open(QIODevice::ReadOnly));
        int updates = 0;
        const QList<QByteArray> jsonl = file.readAll().split('\n');
        QCOMPARE(QString::fromStdString(nlohmann::json::parse(jsonl.first().toStdString())["type"]),
                 QStringLiteral("header"));
        for (const QByteArray& line : jsonl)
            if (!line.isEmpty() && nlohmann::json::parse(line.toStdString()).contains("step_id")) ++updates;
        QCOMPARE(updates, int((kSteps - 1) / sp::Config{}.update_interval_steps));
        // ... and ended it (the file's last line; split() leaves an empty string after the last newline).
        QVERIFY(jsonl.size() >= 2);
        const auto last = nlohmann::json::parse(jsonl[jsonl.size() - 2].toStdString());
        QCOMPARE(QString::fromStdString(last.value("kind", "")), QStringLiteral("run_end"));
    }

    void installed_trainer_reads_its_bundled_text() {
        const Run r =
            sp::test::run(qPrintable(prefix_ + QStringLiteral("/bin/sp-trainer")),
                          {QStringLiteral("--steps"), QStringLiteral("1"), QStringLiteral("--blocks"),
                           QStringLiteral("1"), QStringLiteral("--eval-batches"), QStringLiteral("1"),
                           QStringLiteral("--no-telemetry"), QStringLiteral("--no-network")},
                          root_);
        QVERIFY2(r.exit_code == 0, qPrintable(describe(r)));
        const QByteArray expected =
            "text: " + (prefix_ + QStringLiteral("/share/selective-precision/kjv_torah.txt")).toUtf8();
        QVERIFY2(r.out.contains(expected) || r.err.contains(expected), qPrintable(describe(r)));
    }
};

QTEST_GUILESS_MAIN(TestInstall)
#include "test_install.moc"
