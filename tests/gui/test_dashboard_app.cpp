// The sp-dashboard executable, headless: --replay/--connect with --screenshot renders the window
// and exits 0; bad flags and unreadable files fail with a message naming what is wrong.
#include <QImage>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <sys/stat.h>

#include <fstream>

#include "dashboard_fixture.h"
#include "served_agent.h"
#include "sp/event_payload.h"

namespace {

const QString kDashboard = QStringLiteral(SP_BINARY_DIR "/app/sp-dashboard/sp-dashboard");

struct Result {
    int code = -1;
    QString out, err;
};

Result runDashboard(QStringList args, int timeout_ms = 60000) {
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("XDG_CONFIG_HOME"),
               QDir::tempPath() + QStringLiteral("/sp-dashboard-test-config"));
    p.setProcessEnvironment(env);
    args.prepend(QStringLiteral("offscreen"));
    args.prepend(QStringLiteral("-platform"));
    p.start(kDashboard, args);
    if (!p.waitForFinished(timeout_ms)) {
        p.kill();
        p.waitForFinished();
        return {-2, QString::fromUtf8(p.readAllStandardOutput()), QStringLiteral("timed out")};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
            QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class TestDashboardApp : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixture_;

  private slots:
    void initTestCase() {
        QVERIFY(QFile::exists(kDashboard));
        fixture_ = dir_.filePath(QStringLiteral("run.jsonl"));
        sp::test::writeDashboardFixture(fixture_.toStdString(), 8, 60);
    }

    void replayScreenshotAtBothSizes() {
        for (const QString& size : {QStringLiteral("1600x1000"), QStringLiteral("1280x800")}) {
            const QString png = dir_.filePath(QStringLiteral("replay-%1.png").arg(size));
            const Result r =
                runDashboard({QStringLiteral("--replay"), fixture_, QStringLiteral("--screenshot"), png,
                              QStringLiteral("--size"), size});
            QVERIFY2(r.code == 0, qPrintable(r.err));
            const QImage image(png);
            QVERIFY(!image.isNull());
            QCOMPARE(QStringLiteral("%1x%2").arg(image.width()).arg(image.height()), size);
        }
    }

    // --timings: open, first paint, loaded and screenshot, once each, as they happen, in seconds.
    void timingsNameEachMilestoneInOrder() {
        const QString png = dir_.filePath(QStringLiteral("timings.png"));
        const Result r = runDashboard({QStringLiteral("--replay"), fixture_, QStringLiteral("--screenshot"),
                                       png, QStringLiteral("--timings")});
        QVERIFY2(r.code == 0, qPrintable(r.err));
        static const QRegularExpression line(QStringLiteral("^sp-dashboard: timing (\\w+) ([0-9.]+)$"),
                                             QRegularExpression::MultilineOption);
        QStringList names;
        double last = 0.0;
        for (auto it = line.globalMatch(r.err); it.hasNext();) {
            const QRegularExpressionMatch m = it.next();
            names << m.captured(1);
            QVERIFY2(m.captured(2).toDouble() >= last, qPrintable(r.err));
            last = m.captured(2).toDouble();
        }
        // A small file may be loaded before the first frame with data: the middle two in either order.
        QCOMPARE(names.size(), 4);
        QCOMPARE(names.front(), QStringLiteral("open_s"));
        QCOMPARE(names.back(), QStringLiteral("screenshot_s"));
        QVERIFY(names.contains(QStringLiteral("first_paint_s")) &&
                names.contains(QStringLiteral("loaded_s")));
    }

    // A headless run neither reads the saved settings (a saved light theme does not change the
    // screenshot) nor writes them (--theme light does not reach the next interactive launch).
    void headlessRunLeavesSavedSettingsAlone() {
        const QString config = QDir::tempPath() + QStringLiteral("/sp-dashboard-test-config");
        const QString file = config + QStringLiteral("/selective-precision/sp-dashboard.conf");
        QDir(config).removeRecursively();
        auto screenshot = [&](const QString& name, const QStringList& extra) {
            const QString png = dir_.filePath(name);
            const Result r =
                runDashboard(QStringList{QStringLiteral("--replay"), fixture_, QStringLiteral("--screenshot"),
                                         png, QStringLiteral("--size"), QStringLiteral("1280x800")} +
                             extra);
            if (r.code != 0) qWarning("%s", qPrintable(r.err));
            return QImage(png);
        };
        const QImage plain = screenshot(QStringLiteral("plain.png"), {});
        QVERIFY(!plain.isNull());
        QVERIFY2(!QFile::exists(file), "a headless run wrote the settings");
        QVERIFY(QDir().mkpath(QFileInfo(file).path()));
        {
            QFile f(file);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("[General]\ntheme=light\n");
        }
        // The event log stamps connection events with the wall clock, so two runs can differ
        // there; the theme shows everywhere, so compare the left half (heatmap, charts) only.
        const QRect clock_free(0, 0, 790, 800);
        const QImage with_saved = screenshot(QStringLiteral("saved-light.png"), {});
        QVERIFY(with_saved.copy(clock_free) == plain.copy(clock_free));
        const QImage light =
            screenshot(QStringLiteral("light.png"), {QStringLiteral("--theme"), QStringLiteral("light")});
        QVERIFY(!light.isNull() && light.copy(clock_free) != plain.copy(clock_free));  // --theme applies
        QFile f(file);
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.readAll(), QByteArray("[General]\ntheme=light\n"));
        QDir(config).removeRecursively();
    }

    void liveScreenshotAfterUpdates() {
        sp::test::ServedAgent agent(dir_.path().toStdString());
        agent.start("live-run");
        QProcess p;
        const QString png = dir_.filePath(QStringLiteral("live.png"));
        p.start(kDashboard,
                {QStringLiteral("-platform"), QStringLiteral("offscreen"), QStringLiteral("--connect"),
                 QString::fromStdString(agent.spec()), QStringLiteral("--exit-after-updates"),
                 QStringLiteral("3"), QStringLiteral("--screenshot"), png, QStringLiteral("--timeout"),
                 QStringLiteral("30")});
        QVERIFY(p.waitForStarted());
        std::int64_t step = 10;
        QElapsedTimer clock;
        clock.start();
        while (p.state() != QProcess::NotRunning && clock.elapsed() < 40000) {
            agent.publish_update(step);
            step += 10;
            p.waitForFinished(200);
        }
        agent.stop();
        QVERIFY2(p.state() == QProcess::NotRunning, "the dashboard did not exit after 3 updates");
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        QVERIFY(!QImage(png).isNull());
    }

    // An agent that restarts (a new run id) leaves the earlier run as a finished session beside the
    // live one; when the new run ends before the updates asked for, the headless run shows what came
    // and exits 0 (issue 45, item 4: it waited for the earlier run and timed out with 3).
    void liveExitsWhenARestartedRunEnds() {
        sp::test::ServedAgent agent(dir_.path().toStdString());
        agent.start("first-run");
        QProcess p;
        p.start(kDashboard,
                {QStringLiteral("-platform"), QStringLiteral("offscreen"), QStringLiteral("--connect"),
                 QString::fromStdString(agent.spec()), QStringLiteral("--exit-after-updates"),
                 QStringLiteral("1000"), QStringLiteral("--timeout"), QStringLiteral("20")});
        QVERIFY(p.waitForStarted());
        // The first run's updates until the dashboard has surely joined (its hello comes within 2 s).
        for (std::int64_t step = 10; step <= 300 && p.state() != QProcess::NotRunning; step += 10) {
            agent.publish_update(step);
            p.waitForFinished(50);
        }
        agent.stop();
        agent.start("second-run");
        for (std::int64_t step = 10; step <= 300 && p.state() != QProcess::NotRunning; step += 10) {
            agent.publish_update(step);
            p.waitForFinished(50);
        }
        agent.publish_event(
            sp::event_from_json_text("run_end", 300, 1.7e9 + 300, R"({"reason":"completed"})"));
        p.waitForFinished(15000);
        agent.stop();
        QVERIFY2(p.state() == QProcess::NotRunning, "the dashboard did not exit after the run ended");
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    }

    void liveTimesOutWithExitCode3() {
        const QString spec = QStringLiteral("ipc://%1/nobody-tel,ipc://%1/nobody-ctl").arg(dir_.path());
        const Result r =
            runDashboard({QStringLiteral("--connect"), spec, QStringLiteral("--exit-after-updates"),
                          QStringLiteral("1"), QStringLiteral("--timeout"), QStringLiteral("1")});
        QCOMPARE(r.code, 3);
        QVERIFY(r.err.contains(QStringLiteral("timed out")));
    }

    // A replay that is still loading when --timeout expires exits with 3 at once, and a file with a
    // 50 MB line loads well within the timeout (the line is skipped, not parsed).
    void timeoutHoldsWhileLoading() {
        const QString huge = dir_.filePath(QStringLiteral("huge-line.jsonl"));
        {
            std::ofstream out(huge.toStdString(), std::ios::binary);
            std::ifstream in(fixture_.toStdString(), std::ios::binary);
            out << in.rdbuf() << "{\"x\":\"" << std::string(50 << 20, 'a') << "\"}\n";
        }
        const QString png = dir_.filePath(QStringLiteral("huge-line.png"));
        Result r = runDashboard({QStringLiteral("--replay"), huge, QStringLiteral("--screenshot"), png,
                                 QStringLiteral("--timeout"), QStringLiteral("20")});
        QVERIFY2(r.code == 0, qPrintable(r.err));

        const QString big = dir_.filePath(QStringLiteral("big.jsonl"));
        sp::test::writeDashboardFixture(big.toStdString(), 8, 400000);  // loads for several seconds
        QElapsedTimer clock;
        clock.start();
        r = runDashboard({QStringLiteral("--replay"), big, QStringLiteral("--screenshot"), png,
                          QStringLiteral("--timeout"), QStringLiteral("1")});
        QCOMPARE(r.code, 3);
        QVERIFY2(r.err.contains(QStringLiteral("timed out")), qPrintable(r.err));
        QFile::remove(big);
    }

    // A replay source that blocks for good (a FIFO no one writes to, a device that never ends)
    // still lets --timeout end the run with exit 3: the blocked reader is not waited for.
    void timeoutEndsARunWhoseSourceBlocks() {
        const QString fifo = dir_.filePath(QStringLiteral("no-writer.fifo"));
        QVERIFY(::mkfifo(fifo.toLocal8Bit().constData(), 0600) == 0);
        for (const QString& source : {fifo, QStringLiteral("/dev/zero")}) {
            const Result r = runDashboard({QStringLiteral("--replay"), source, QStringLiteral("--screenshot"),
                                           dir_.filePath(QStringLiteral("blocked.png")),
                                           QStringLiteral("--timeout"), QStringLiteral("1")},
                                          30000);
            QVERIFY2(r.code == 3, qPrintable(source + QStringLiteral(": ") + r.err));
            QVERIFY2(r.err.contains(QStringLiteral("timed out")), qPrintable(r.err));
        }
    }

    // --help and --version answer without a display (no platform plugin is loaded for them).
    void helpAndVersionNeedNoDisplay() {
        for (const char* flag : {"--help", "--version"}) {
            QProcess p;
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.remove(QStringLiteral("DISPLAY"));
            env.remove(QStringLiteral("WAYLAND_DISPLAY"));
            env.remove(QStringLiteral("QT_QPA_PLATFORM"));
            p.setProcessEnvironment(env);
            p.start(kDashboard, {QString::fromLatin1(flag)});
            QVERIFY(p.waitForFinished(30000));
            const QString out = QString::fromUtf8(p.readAllStandardOutput());
            QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0,
                     qPrintable(out + QString::fromUtf8(p.readAllStandardError())));
            QVERIFY2(out.contains(QLatin1String(flag[2] == 'h' ? "--replay" : SP_VERSION)), qPrintable(out));
        }
    }

    void badInputIsNamed_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<int>("code");
        QTest::addColumn<QString>("message");
        QTest::newRow("unknown flag") << QStringList{QStringLiteral("--frobnicate")} << 2 << "frobnicate";
        QTest::newRow("screenshot alone")
            << QStringList{QStringLiteral("--screenshot"), QStringLiteral("x.png")} << 2
            << "--screenshot needs";
        QTest::newRow("bad count") << QStringList{QStringLiteral("--connect"),
                                                  QStringLiteral("tcp://127.0.0.1:5556"),
                                                  QStringLiteral("--exit-after-updates"),
                                                  QStringLiteral("zero")}
                                   << 2 << "--exit-after-updates";
        QTest::newRow("bad size") << QStringList{QStringLiteral("--replay"), QStringLiteral("x"),
                                                 QStringLiteral("--size"), QStringLiteral("big")}
                                  << 2 << "--size";
        QTest::newRow("bad endpoint")
            << QStringList{QStringLiteral("--connect"), QStringLiteral("http://example")} << 2
            << "http://example";
        // A data-parallel job: --ranks N and a ';' list of the ranks' endpoints.
        QTest::newRow("bad ranks") << QStringList{QStringLiteral("--connect"),
                                                  QStringLiteral("tcp://127.0.0.1:5556"),
                                                  QStringLiteral("--ranks"), QStringLiteral("zero")}
                                   << 2 << "--ranks: expected a positive integer, got 'zero'";
        QTest::newRow("ranks alone") << QStringList{QStringLiteral("--ranks"), QStringLiteral("2")} << 2
                                     << "--ranks needs --connect";
        QTest::newRow("ranks over ipc")
            << QStringList{QStringLiteral("--connect"), QStringLiteral("ipc:///tmp/t,ipc:///tmp/c"),
                           QStringLiteral("--ranks"), QStringLiteral("2")}
            << 2
            << "--connect 'ipc:///tmp/t,ipc:///tmp/c' with --ranks 2: endpoint 'ipc:///tmp/t' has no port";
        QTest::newRow("ranks against a list")
            << QStringList{QStringLiteral("--connect"), QStringLiteral("tcp://a:5556;tcp://b:5556"),
                           QStringLiteral("--ranks"), QStringLiteral("3")}
            << 2 << "lists 2 ranks separated by ';', not 3";
        QTest::newRow("bad rank in a list")
            << QStringList{QStringLiteral("--connect"), QStringLiteral("tcp://a:5556;tcp://b")} << 2
            << "--connect 'tcp://a:5556;tcp://b': rank 1: 'tcp://b': missing :PORT";
        QTest::newRow("missing file")
            << QStringList{QStringLiteral("--replay"), QStringLiteral("/nonexistent/run.jsonl"),
                           QStringLiteral("--screenshot"), dir_.filePath(QStringLiteral("missing.png"))}
            << 1 << "/nonexistent/run.jsonl";
    }
    // A file that holds no telemetry record (empty, or nothing but bad lines) is a failed load, not a
    // green "loaded" with exit 0 (issue 29, item 9).
    void fileWithoutRecordsFailsTheHeadlessRun() {
        const QString empty = dir_.filePath(QStringLiteral("empty.jsonl"));
        const QString garbage = dir_.filePath(QStringLiteral("garbage.jsonl"));
        QFile(empty).open(QIODevice::WriteOnly);
        QFile g(garbage);
        QVERIFY(g.open(QIODevice::WriteOnly));
        g.write("not json\n{\"also\": \"not a record\"\n");
        g.close();
        const Result e = runDashboard({QStringLiteral("--replay"), empty, QStringLiteral("--screenshot"),
                                       dir_.filePath(QStringLiteral("empty.png"))});
        QCOMPARE(e.code, 1);
        QVERIFY2(e.err.contains(empty + QStringLiteral(": no telemetry record in it")), qPrintable(e.err));
        const Result b = runDashboard({QStringLiteral("--replay"), garbage, QStringLiteral("--screenshot"),
                                       dir_.filePath(QStringLiteral("garbage.png"))});
        QCOMPARE(b.code, 1);
        QVERIFY2(
            b.err.contains(garbage + QStringLiteral(": no telemetry record in it (2 bad lines; line 1: ")),
            qPrintable(b.err));
    }

    void badInputIsNamed() {
        QFETCH(QStringList, args);
        QFETCH(int, code);
        QFETCH(QString, message);
        const Result r = runDashboard(args);
        QCOMPARE(r.code, code);
        QVERIFY2(r.err.contains(message), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestDashboardApp)
#include "test_dashboard_app.moc"
