// packaging/demo.sh, the demo `setup.sh demo` runs: headless it trains the steps asked for and ends
// cleanly; with a display the trainer keeps training until the dashboard's window is closed, so an
// operator has time to steer it (here the "display" is offscreen and closing is SIGTERM).
#include <QtTest>

#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTemporaryDir>

#include <random>

#include <nlohmann/json.hpp>

#include "../common/loopback_port.h"

namespace {

constexpr int kRunMs = 240000;

// A telemetry port whose next one (control) is free too.
int free_port_pair() {
    std::mt19937 rng(std::random_device{}());
    for (int attempt = 0; attempt < 200; ++attempt) {
        const int port = 20000 + 2 * int(rng() % 15000);
        if (sp::test::loopback_port_free(port) && sp::test::loopback_port_free(port + 1)) return port;
    }
    qFatal("no free port pair");
}

QProcessEnvironment demo_environment(const QTemporaryDir& dir, bool display) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.remove("DISPLAY");
    env.remove("WAYLAND_DISPLAY");
    env.remove("SP_DEMO_STEPS");
    if (display) env.insert("DISPLAY", ":sp-demo-test");  // what the script looks at
    env.insert("QT_QPA_PLATFORM", "offscreen");           // the dashboard's "window"
    env.insert("SP_DEMO_DIR", dir.path());
    env.insert("SP_DEMO_PORT", QString::number(free_port_pair()));
    return env;
}

// The JSON lines of the demo's telemetry file.
std::vector<nlohmann::json> telemetry(const QTemporaryDir& dir) {
    std::vector<nlohmann::json> lines;
    QFile f(dir.filePath("run.jsonl"));
    if (!f.open(QIODevice::ReadOnly)) return lines;
    while (!f.atEnd()) {
        const QByteArray line = f.readLine().trimmed();
        if (line.isEmpty()) continue;
        nlohmann::json j = nlohmann::json::parse(line.toStdString(), nullptr, false);
        if (!j.is_discarded()) lines.push_back(std::move(j));
    }
    return lines;
}

std::int64_t last_update_step(const QTemporaryDir& dir) {
    std::int64_t step = -1;
    for (const auto& j : telemetry(dir))
        if (j.contains("step_id") && j["step_id"].is_number_integer())
            step = j["step_id"].get<std::int64_t>();
    return step;
}

// The run_end record's step: the last step the run began (-1 without one).
std::int64_t run_end_step(const QTemporaryDir& dir) {
    const auto lines = telemetry(dir);
    if (lines.empty() || lines.back().value("kind", "") != "run_end") return -1;
    return lines.back().value("step", std::int64_t(-1));
}

std::string run_end_reason(const QTemporaryDir& dir) {
    const auto lines = telemetry(dir);
    if (lines.empty() || lines.back().value("kind", "") != "run_end") return "<no run_end>";
    return lines.back().value("reason", "<no reason>");
}

void start_demo(QProcess& p, const QStringList& extra) {
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start("bash",
            QStringList{QStringLiteral(SP_SOURCE_DIR "/packaging/demo.sh"), QStringLiteral(SP_BINARY_DIR)} +
                extra);
    QVERIFY(p.waitForStarted());
}

}  // namespace

class TestDemoScript : public QObject {
    Q_OBJECT
  private slots:
    void headless_it_trains_the_steps_asked_for_and_ends_cleanly();
    void with_a_display_it_trains_until_the_window_is_closed();
    void a_bad_step_count_is_refused();
};

void TestDemoScript::headless_it_trains_the_steps_asked_for_and_ends_cleanly() {
    QTemporaryDir dir;
    QProcess p;
    p.setProcessEnvironment(demo_environment(dir, false));
    start_demo(p, {"--steps", "40"});
    QVERIFY(p.waitForFinished(kRunMs));
    const QByteArray out = p.readAll();
    QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, out.constData());
    QCOMPARE(run_end_reason(dir), std::string("completed"));
    QCOMPARE(run_end_step(dir), std::int64_t(39));  // steps 0..39
    QVERIFY2(out.contains("re-simulated offline by sp-ctl"), out.constData());
    QVERIFY(QFile::exists(dir.filePath("dashboard-live.png")));
    QVERIFY(QFile::exists(dir.filePath("dashboard-replay.png")));
}

void TestDemoScript::with_a_display_it_trains_until_the_window_is_closed() {
    QTemporaryDir dir;
    QProcess p;
    p.setProcessEnvironment(demo_environment(dir, true));
    start_demo(p, {});
    // Past the headless length (300 steps): still training while the window is open.
    QTRY_VERIFY_WITH_TIMEOUT(last_update_step(dir) > 300 || p.state() == QProcess::NotRunning, kRunMs);
    QVERIFY2(p.state() == QProcess::Running, p.readAll().constData());
    QCOMPARE(run_end_reason(dir), std::string("<no run_end>"));
    // Closing the window: the dashboard ends; the script stops the trainer between two steps.
    QProcess::execute("pkill", {"-TERM", "-P", QString::number(p.processId()), "-x", "sp-dashboard"});
    QVERIFY(p.waitForFinished(kRunMs));
    const QByteArray out = p.readAll();
    QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, out.constData());
    QCOMPARE(run_end_reason(dir), std::string("interrupted"));
    QVERIFY2(out.contains("re-simulated offline by sp-ctl"), out.constData());
}

void TestDemoScript::a_bad_step_count_is_refused() {
    QTemporaryDir dir;
    QProcess p;
    p.setProcessEnvironment(demo_environment(dir, false));
    start_demo(p, {"--steps", "ten"});
    QVERIFY(p.waitForFinished(kRunMs));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(p.readAll().contains("--steps must be a positive number of steps, got 'ten'"));
    QVERIFY(!QFile::exists(dir.filePath("run.jsonl")));
}

QTEST_GUILESS_MAIN(TestDemoScript)
#include "test_demo_script.moc"
