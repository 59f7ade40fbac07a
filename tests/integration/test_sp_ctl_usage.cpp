// sp-ctl's command line itself: each command's help, generated from its declarations, lists every flag
// it takes (with the defaults), and every usage error exits 2 with "sp-ctl CMD: ..." naming the flag or
// argument, before anything is contacted or written.
#include <QtTest>

#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <utility>
#include <vector>

#include "run_process.h"

namespace {

using sp::test::Run;
using sp::test::sp_ctl;

// Each live command's connection options.
const QStringList kConnection = {"--endpoint", "--timeout", "--json", "--server-key", "--client-key"};

const QStringList kCommands = {"simulate", "validate", "summarize", "gate", "pin",  "release", "release-all",
                               "mode",     "budget",   "snapshot",  "ping", "tail", "keygen"};

}  // namespace

class TestSpCtlUsage : public QObject {
    Q_OBJECT
  private slots:
    void help_lists_every_declared_flag() {
        const std::vector<std::pair<QStringList, QStringList>> commands = {
            {{"pin"},
             QStringList{"--blocks IDS", "--precision P", "--for-steps N", "--release-on-spike", "--no-wait",
                         "--telemetry-endpoint E", "--wait-timeout SECONDS", "(default: 60)",
                         "(default: tcp://127.0.0.1:5557)", "(default: 3)"} +
                 kConnection},
            {{"tail"},
             QStringList{"--topics T,...", "--count N", "(default: tcp://127.0.0.1:5556)"} + kConnection},
            {{"mode"}, QStringList{"MODE", "--no-wait"} + kConnection},
            {{"simulate"},
             {"--stats STATS.jsonl", "--config CFG.json", "--calibration CAL.json", "--format jsonl|table",
              "(default: jsonl)"}},
            {{"validate"}, {"FILE", "--json", "--max-problems N", "(default: 20)"}},
            {{"keygen"}, {"NAME", "--force", "--json"}},
        };
        for (const auto& [command, flags] : commands) {
            const Run r = sp_ctl({command.front(), "--help"});
            QCOMPARE(r.exit_code, 0);
            QVERIFY2(r.out.startsWith("usage: sp-ctl " + command.front().toUtf8() + " "), r.out.constData());
            QVERIFY2(r.out.contains("-h, --help") && r.out.contains("Exit codes: "), r.out.constData());
            for (const QString& flag : flags)
                QVERIFY2(r.out.contains(flag.toUtf8()), qPrintable(command.front() + " lacks " + flag));
            QVERIFY(r.err.isEmpty());
        }
        // Required options and arguments are in the usage line.
        QVERIFY(
            sp_ctl({"pin", "-h"}).out.startsWith("usage: sp-ctl pin --blocks IDS --precision P [options]\n"));
        QVERIFY(sp_ctl({"keygen", "-h"}).out.startsWith("usage: sp-ctl keygen NAME [options]\n"));

        const Run root = sp_ctl({"--help"});
        QCOMPARE(root.exit_code, 0);
        QVERIFY(root.out.startsWith("usage: sp-ctl <command> [options]\n"));
        for (const QString& command : kCommands)
            QVERIFY2(root.out.contains("\n  " + command.toUtf8() + " "), qPrintable(command));
        QVERIFY(root.out.contains("  pin          pin blocks of a running agent to a precision\n"));
        const Run help = sp_ctl({"help"});
        QCOMPARE(help.exit_code, 0);
        QCOMPARE(help.out, root.out);
        const Run none = sp_ctl({});
        QCOMPARE(none.exit_code, 2);
        QCOMPARE(none.err, root.out);
    }

    // app/sp-ctl/README.md's overview names every command and every option their help shows.
    void readme_names_every_option() {
        QFile file(QStringLiteral(SP_SOURCE_DIR) + "/app/sp-ctl/README.md");
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray readme = file.readAll();
        const QRegularExpression option(QStringLiteral("^  (?:-h, )?(--[a-z0-9-]+)"),
                                        QRegularExpression::MultilineOption);
        for (const QString& command : kCommands) {
            QVERIFY2(readme.contains("| `" + command.toUtf8() + "` |"), qPrintable(command));
            const Run r = sp_ctl({command, "--help"});
            int listed = 0;
            for (auto it = option.globalMatch(QString::fromUtf8(r.out)); it.hasNext(); ++listed) {
                const QString name = it.next().captured(1);
                if (name != "--help")
                    QVERIFY2(readme.contains("`" + name.toUtf8()), qPrintable(command + " " + name));
            }
            QVERIFY2(listed > 0, qPrintable(command));
        }
    }

    void usage_errors_exit_2_naming_the_flag() {
        const std::vector<std::pair<QStringList, QByteArray>> cases = {
            {{"pin", "--blocks", "1", "--precision", "int8", "--bogus"},
             "sp-ctl pin: unknown option '--bogus'\n"},
            {{"ping", "extra"}, "sp-ctl ping: unexpected argument 'extra'\n"},
            {{"validate", "a.jsonl", "b.jsonl"}, "sp-ctl validate: unexpected argument 'b.jsonl'\n"},
            {{"validate", "a.jsonl", "ping"},
             "sp-ctl validate: unexpected argument 'ping'\n"},  // one command
            {{"frobnicate"}, "sp-ctl: unknown command 'frobnicate'\n"},
            {{"release"}, "sp-ctl release: --blocks is required\n"},
            {{"mode"}, "sp-ctl mode: MODE is required\n"},
            {{"keygen"}, "sp-ctl keygen: NAME is required\n"},
            {{"validate", "a.jsonl", "--max-problems"},
             "sp-ctl validate: option '--max-problems' needs a value\n"},
            {{"tail", "--count", "0"}, "sp-ctl tail: --count: must be a whole number >= 1, got '0'\n"},
            {{"tail", "--count", "-3"}, "sp-ctl tail: --count: must be a whole number >= 1, got '-3'\n"},
            {{"tail", "--topics", "update,nope"},
             "sp-ctl tail: --topics: unknown topic 'nope' (hello, update, stats, event, heartbeat)\n"},
            {{"ping", "--timeout", "-1"},
             "sp-ctl ping: --timeout: must be a number of seconds in (0, 86400], got '-1'\n"},
            {{"snapshot", "--endpoint", ""}, "sp-ctl snapshot: --endpoint: must not be empty\n"},
            {{"pin", "--blocks", "1,,2", "--precision", "int8"},
             "sp-ctl pin: --blocks: an empty entry in '1,,2' (expected ids or names, e.g. --blocks 3,4 or "
             "--blocks blocks.3)\n"},
            {{"pin", "--blocks", "1", "--precision", "int8", "--wait-timeout", "never"},
             "sp-ctl pin: --wait-timeout: must be a number of seconds in (0, 86400], got 'never'\n"},
            {{"budget", "--target-pct", "lots"}, "sp-ctl budget: --target-pct: 'lots' is not a number\n"},
            {{"tolerance", "--pct", "lots"}, "sp-ctl tolerance: --pct: 'lots' is not a number\n"},
            {{"simulate", "--stats", "s.jsonl", "--format", "xml"},
             "sp-ctl simulate: --format: must be 'jsonl' or 'table', got 'xml'\n"},
            {{"gate", "--shapes", "64x32", "--out", "p.json", "--repeats", "1001"},
             "sp-ctl gate: --repeats: must be a whole number from 1 to 1000, got '1001'\n"},
            // Decimal, as sp-ctl always read numbers: 010 is ten (CLI11 alone would read eight).
            {{"gate", "--shapes", "64x32", "--out", "p.json", "--min-rows", "010", "--max-rows", "9"},
             "sp-ctl gate: --max-rows (9) must be >= --min-rows (10)\n"},
        };
        QTemporaryDir dir;  // the working directory: nothing may be written there
        for (const auto& [args, message] : cases) {
            const Run r = sp::test::run(SP_CTL_PATH, args, dir.path());
            QVERIFY2(r.exit_code == 2, qPrintable(args.join(' ') + " -> " + QString::number(r.exit_code)));
            QVERIFY2(r.err.startsWith(message), qPrintable(args.join(' ') + " -> " + r.err));
            QVERIFY(r.out.isEmpty());
        }
        QVERIFY(QDir(dir.path()).isEmpty());
    }

    // An endpoint ZeroMQ refuses is a usage error of whichever command connects with it: exit 2 naming
    // the option and the endpoint, nothing sent (it aborted with an uncaught zmq::error_t). Each of these
    // reaches zmq_connect and is refused there; "tcp://:5557x" or port 99999, which zmq takes, are not.
    void a_malformed_endpoint_exits_2_naming_it() {
        const QStringList bad = {
            "garbage",           "tcp://",          "ipc://", "tcp://127.0.0.1", "tcp://127.0.0.1:notaport",
            "udp://127.0.0.1:1", "foo://agent:5557"};
        const std::vector<QStringList> routing = {{"pin", "--blocks", "1", "--precision", "int8"},
                                                  {"release", "--blocks", "1"},
                                                  {"release-all"},
                                                  {"mode", "budget"},
                                                  {"budget", "--target-pct", "10"},
                                                  {"tolerance", "--pct", "0.5"}};
        std::vector<std::pair<QStringList, QString>> cases;  // the command line, the option at fault
        for (const QString& endpoint : bad) {
            for (const char* command : {"ping", "snapshot", "tail"})
                cases.push_back({{command, "--endpoint", endpoint}, "--endpoint"});
            for (const QStringList& command : routing) {
                cases.push_back({command + QStringList{"--no-wait", "--endpoint", endpoint}, "--endpoint"});
                cases.push_back(
                    {command + QStringList{"--telemetry-endpoint", endpoint}, "--telemetry-endpoint"});
            }
        }
        QTemporaryDir dir;
        for (const auto& [args, option] : cases) {
            const Run r = sp::test::run(SP_CTL_PATH, args, dir.path());
            const QString endpoint = args[args.indexOf(option) + 1];
            const QByteArray message = "sp-ctl " + args.front().toUtf8() + ": " + option.toUtf8() + ": '" +
                                       endpoint.toUtf8() + "' is not an endpoint sp-ctl can connect to (";
            QVERIFY2(r.exit_code == 2, qPrintable(args.join(' ') + " -> " + QString::number(r.exit_code)));
            QVERIFY2(
                r.err.startsWith(message) && r.err.endsWith("; expected tcp://HOST:PORT or ipc://PATH)\n"),
                qPrintable(args.join(' ') + " -> " + r.err));
            QVERIFY(r.out.isEmpty());
        }
        QVERIFY(QDir(dir.path()).isEmpty());
    }

    // An argument that happens to be another command's name is the argument, and the usual forms of a
    // value (--flag=value, the last of repeated values) are taken.
    void a_command_name_is_an_argument_after_the_command() {
        QTemporaryDir dir;
        const QString nobody = "ipc://" + dir.filePath("nobody");
        const Run mode = sp_ctl(
            {"mode", "budget", "--no-wait", "--endpoint=" + nobody, "--timeout", "9", "--timeout", "0.5"});
        QCOMPARE(mode.exit_code, 3);  // no answer: the command went out, as "mode budget"
        QVERIFY2(mode.err.startsWith("sp-ctl mode: no answer from " + nobody.toUtf8() + " within 0.5 s"),
                 mode.err.constData());
        const Run keygen = sp::test::run(SP_CTL_PATH, {"keygen", "ping"}, dir.path());
        QVERIFY2(keygen.exit_code == 0, keygen.err.constData());
        QVERIFY(QFile::exists(dir.filePath("ping.key")) && QFile::exists(dir.filePath("ping.pub")));
    }
};

QTEST_GUILESS_MAIN(TestSpCtlUsage)
#include "test_sp_ctl_usage.moc"
