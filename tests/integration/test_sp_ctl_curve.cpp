// sp-ctl against the agent's real transport (AgentServer) with CURVE and an allow-list: an admitted
// client gets its answer; a client whose key is not on the list, or that does not speak CURVE, is
// told so at once instead of "no answer ... is the agent running?"; a wrong server key gets a hint.
#include <QtTest>

#include <QElapsedTimer>
#include <QTemporaryDir>

#include <fstream>
#include <iterator>
#include <string>

#include "agent_server.h"
#include "run_process.h"
#include "sp/keys/curve_key_file.h"

namespace {

using sp::test::Run;
using sp::test::sp_ctl;
namespace keys = sp::keys;
namespace tr = sp::transport;

class NoBackend : public tr::ServerBackend {
  public:
    std::int64_t submit(const sp::Command&, const std::string&) override { return 1; }
};

std::string read_whole(const QString& path) {
    std::ifstream in(path.toStdString());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An agent whose allow-list admits `client` only, on ipc:// endpoints in `dir`.
struct CurveAgent {
    CurveAgent(const QTemporaryDir& dir, NoBackend& backend) : server(options(dir), backend) {
        server.set_run("curve-run", sp::uniform_layout(2, 64), "{}");
    }
    static tr::ServerOptions options(const QTemporaryDir& dir) {
        const std::string base = dir.path().toStdString();
        keys::write_key_pair(base + "/server", keys::Replace::yes);
        keys::write_key_pair(base + "/client", keys::Replace::yes);
        keys::write_key_pair(base + "/intruder", keys::Replace::yes);
        std::ofstream(base + "/allowed") << read_whole(dir.filePath("client.pub"));
        tr::ServerOptions o;
        o.telemetry_endpoint = "ipc://" + base + "/telemetry";
        o.control_endpoint = "ipc://" + base + "/control";
        o.server_secret_key_file = base + "/server.key";
        o.allowed_clients_file = base + "/allowed";
        o.hello_interval_s = 0.1;
        o.log = [](const std::string&) {};
        return o;
    }
    tr::AgentServer server;
};

QString control(const QTemporaryDir& dir) {
    return "ipc://" + dir.filePath("control");
}

// Generous: a refusal must come long before it (it comes at the first handshake).
QStringList curve(const QTemporaryDir& dir, const QString& who, QStringList args,
                  const QString& server_key = "server") {
    return args << "--endpoint" << control(dir) << "--timeout"
                << "30"
                << "--server-key" << dir.filePath(server_key + ".pub") << "--client-key" << dir.filePath(who);
}

}  // namespace

class TestSpCtlCurve : public QObject {
    Q_OBJECT
  private slots:
    void admitted_client_gets_its_answer() {
        QTemporaryDir dir;
        NoBackend backend;
        CurveAgent agent(dir, backend);
        const Run r = sp_ctl(curve(dir, "client", {"ping"}));
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY2(r.out.startsWith("pong: "), r.out.constData());
    }

    void refused_key_is_told_so_at_once() {
        QTemporaryDir dir;
        NoBackend backend;
        CurveAgent agent(dir, backend);
        const QByteArray refused =
            " refused this client's key (authentication failed): is its public key "
            "in the agent's --allowed-clients file?\n";
        for (const QStringList& command :
             {QStringList{"ping"}, QStringList{"pin", "--blocks", "1", "--precision", "int8", "--no-wait"}}) {
            QElapsedTimer timer;
            timer.start();
            const Run r = sp_ctl(curve(dir, "intruder", command));
            QCOMPARE(r.exit_code, 3);
            QCOMPARE(r.err,
                     "sp-ctl " + command[0].toUtf8() + ": the agent at " + control(dir).toUtf8() + refused);
            QVERIFY2(timer.elapsed() < 20000, qPrintable(QString::number(timer.elapsed())));  // not the 30 s
        }
        // The telemetry socket is a CURVE server with the same allow-list: tail is told the same.
        const Run tail =
            sp_ctl({"tail", "--endpoint", "ipc://" + dir.filePath("telemetry"), "--timeout", "30",
                    "--server-key", dir.filePath("server.pub"), "--client-key", dir.filePath("intruder")});
        QCOMPARE(tail.exit_code, 3);
        QCOMPARE(tail.err, "sp-ctl tail: the agent at ipc://" + dir.filePath("telemetry").toUtf8() + refused);
    }

    void plain_client_is_told_curve_is_required() {
        QTemporaryDir dir;
        NoBackend backend;
        CurveAgent agent(dir, backend);
        const Run r = sp_ctl({"ping", "--endpoint", control(dir), "--timeout", "30"});
        QCOMPARE(r.exit_code, 3);
        QCOMPARE(r.err, "sp-ctl ping: the agent at " + control(dir).toUtf8() +
                            " requires CURVE: pass --server-key AGENT.pub and --client-key NAME\n");
    }

    void wrong_server_key_gets_a_hint() {
        QTemporaryDir dir;
        NoBackend backend;
        CurveAgent agent(dir, backend);
        QStringList args = curve(dir, "client", {"ping"}, "intruder");  // not the agent's public key
        args[args.indexOf("--timeout") + 1] = "2";
        const Run r = sp_ctl(args);
        QCOMPARE(r.exit_code, 3);
        QCOMPARE(r.err, "sp-ctl ping: no answer from " + control(dir).toUtf8() +
                            " within 2 s (the agent closed the connection during the CURVE handshake: is "
                            "--server-key its public key?)\n");
    }
};

QTEST_GUILESS_MAIN(TestSpCtlCurve)
#include "test_sp_ctl_curve.moc"
