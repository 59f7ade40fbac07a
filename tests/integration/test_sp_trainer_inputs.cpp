// sp-trainer's command line: --help lists every flag and the README documents each; a bad flag or
// value exits 2 naming it.
// sp-trainer's files and start-up (issue 30): what it refuses before it writes or binds anything (a
// symlink or a FIFO as --telemetry, a FIFO as a key file, a gate file that is a FIFO, a device, too
// large or not JSON: exit 2, a message naming the flag or key and the path), what it takes (a
// --telemetry path that is not UTF-8, tcp://localhost endpoints), and a signal during set-up. Every
// run is bounded by a limit only a hang reaches: a hang fails the test, and the trainer is killed.
#include <QtTest>

#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <fstream>
#include <memory>
#include <random>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include "../common/loopback_port.h"

namespace {

using json = nlohmann::json;

constexpr int kHangMs = 60000;  // start-up of the tiny model takes a second or two

// Every flag of sp-trainer: scripts, sp-experiment and the launcher's ranks pass these names.
const QStringList kFlags = {"--steps",
                            "--blocks",
                            "--d-model",
                            "--heads",
                            "--seq-len",
                            "--batch",
                            "--lr",
                            "--seed",
                            "--eval-every",
                            "--eval-batches",
                            "--text",
                            "--text-part",
                            "--device",
                            "--init-checkpoint",
                            "--save-checkpoint",
                            "--finetune-mode",
                            "--adapter-rank",
                            "--weight-residency",
                            "--threads",
                            "--config",
                            "--precision",
                            "--telemetry",
                            "--precision-scope",
                            "--no-telemetry",
                            "--every-step-stats",
                            "--telemetry-endpoint",
                            "--control-endpoint",
                            "--server-key",
                            "--allowed-clients",
                            "--insecure",
                            "--no-network",
                            "--world-size",
                            "--rank",
                            "--master-addr",
                            "--master-port",
                            "--spawn",
                            "--harsh-block",
                            "--harsh-step",
                            "--outlier-block",
                            "--outlier-scale",
                            "--snr-validation",
                            "--summary-json",
                            "--swap-slots",
                            "--probe-maps",
                            "--probe-out",
                            "--quiet",
                            "--help"};

struct Outcome {
    bool hung = false;
    int exit_code = -1;  // -1: ended by a signal
    QByteArray out, err;
};

Outcome run_bounded(const QString& program, const QStringList& args) {
    QProcess p;
    p.start(program, args);
    Outcome r;
    if (!p.waitForFinished(kHangMs)) {
        r.hung = true;
        p.kill();
        p.waitForFinished();
    }
    r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

Outcome trainer(const QStringList& args) {
    return run_bounded(QStringLiteral(SP_TRAINER_PATH), args);
}

void write_file(const QString& path, const QByteArray& text) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) qFatal("cannot write %s", qPrintable(path));
    f.write(text);
}

QByteArray read_all(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// A config without calibration (which would write its cache under $HOME), plus `extra`.
QString write_config(const QTemporaryDir& dir, json extra = json::object()) {
    extra["run_calibration"] = false;
    QString path = dir.filePath("cfg.json");
    write_file(path, QByteArray::fromStdString(extra.dump()));
    return path;
}

// A model small enough that set-up takes a moment; the rest comes from each test.
QStringList tiny(const QString& config) {
    return {"--steps", "2", "--blocks",     "1", "--d-model",      "16", "--heads",  "2",   "--seq-len", "16",
            "--batch", "2", "--eval-every", "1", "--eval-batches", "1",  "--config", config};
}

using sp::test::loopback_port_free;

int free_port() {
    std::mt19937 rng(std::random_device{}());
    for (int attempt = 0; attempt < 200; ++attempt)
        if (const int port = 20000 + int(rng() % 30000); loopback_port_free(port)) return port;
    qFatal("no free port");
}

// Reads the process's standard output until it holds `line` or the process ends; returns all of it.
QByteArray wait_for_output(QProcess& p, const QByteArray& line) {
    QByteArray out;
    while (!out.contains(line) && p.waitForReadyRead(kHangMs)) out += p.readAllStandardOutput();
    return out;
}

void stop(QProcess& p) {
    if (p.state() == QProcess::NotRunning) return;
    p.kill();
    p.waitForFinished();
}

}  // namespace

class TestSpTrainerInputs : public QObject {
    Q_OBJECT
  private slots:
    // --help is generated from the flags' declarations (trainer_flags.cpp): it lists every flag that
    // scripts and sp-experiment pass, no other, and the README's flag table documents each of them.
    void help_lists_every_flag_and_the_readme_documents_each() {
        const Outcome help = trainer({"--help"});
        QCOMPARE(help.exit_code, 0);
        QVERIFY2(help.out.contains("Usage: sp-trainer [OPTIONS]"), help.out.constData());
        QVERIFY(help.err.isEmpty());
        // Every format the agent routes to, not only the first two it had.
        QVERIFY2(help.out.contains("blocks to BF16, INT8, FP8 (E4M3, E5M2) or INT4"), help.out.constData());
        QStringList listed;
        const QRegularExpression option_line(R"(^  (?:-h,)?(--[a-z][a-z0-9-]*))",
                                             QRegularExpression::MultilineOption);
        for (auto it = option_line.globalMatch(QString::fromUtf8(help.out)); it.hasNext();)
            listed << it.next().captured(1);
        listed.sort();
        QStringList expected = kFlags;
        expected.sort();
        QCOMPARE(listed, expected);
        const QString readme =
            QString::fromUtf8(read_all(QStringLiteral(SP_SOURCE_DIR "/app/sp-trainer/README.md")));
        QVERIFY(!readme.isEmpty());
        // In the first column of the flag table, not merely mentioned.
        for (const QString& flag : kFlags)
            QVERIFY2(readme.contains(QRegularExpression("^\\|[^|\\n]*`" + flag + "[ `]",
                                                        QRegularExpression::MultilineOption)),
                     qPrintable(flag + " is not in app/sp-trainer/README.md's flag table"));
    }

    // A bad command line exits 2 before anything else, naming the flag in sp-trainer's own words.
    void bad_usage_exits_2_naming_the_flag() {
        const struct {
            QStringList args;
            QByteArray says;
        } cases[] = {
            {{"--bogus"}, "sp-trainer: unknown flag '--bogus'"},
            {{"--steps", "3", "--bogus=1"}, "sp-trainer: unknown flag '--bogus'"},
            {{"stray"}, "sp-trainer: unexpected argument 'stray' (sp-trainer takes flags only)"},
            {{"--steps", "ten"}, "sp-trainer: --steps: expected an integer, got 'ten'"},
            {{"--steps=12abc"}, "sp-trainer: --steps: expected an integer, got '12abc'"},
            {{"--seed", "-1"}, "sp-trainer: --seed: '-1' is out of range (0 .. 18446744073709551615)"},
            {{"--lr", "2"}, "sp-trainer: --lr: '2' is out of range (0, 1]"},
            {{"--device", "tpu"}, "sp-trainer: --device: expected cpu or cuda, got 'tpu'"},
            {{"--finetune-mode", "lora"},
             "sp-trainer: --finetune-mode: expected full or adapters, got 'lora'"},
            {{"--quiet=yes"}, "sp-trainer: --quiet takes no value"},
            {{"--quiet", "--steps"}, "sp-trainer: --steps needs a value"},
            // Not "--no-network" taken for the file name, as CLI11 alone would.
            {{"--telemetry=", "--no-network"}, "sp-trainer: --telemetry: the file name is empty"},
            // Decimal, not octal: 010 blocks are ten.
            {{"--blocks", "010", "--harsh-block", "12"},
             "sp-trainer: --harsh-block: block 12 does not exist (--blocks 10)"},
            {{"--swap-slots", "3"},
             "sp-trainer: --swap-slots needs --weight-residency block-swap (the other residencies have no "
             "slots)"},
            {{"--weight-residency", "block-swap", "--swap-slots", "0"},
             "sp-trainer: --swap-slots: '0' is out of range (1 .. 1024)"},
        };
        for (const auto& c : cases) {
            const Outcome r = trainer(c.args);
            QVERIFY2(r.exit_code == 2, qPrintable(c.args.join(' ') + " -> " + QString::number(r.exit_code)));
            QVERIFY2(r.err.contains(c.says + "\nTry 'sp-trainer --help' for usage."), r.err.constData());
            QVERIFY2(r.out.isEmpty(), r.out.constData());
        }
    }

    // A symlink at the telemetry path would have its target truncated, or a dangling one's target
    // created: both are refused, and the file the link points to keeps its content.
    void telemetry_symlink_is_refused_and_nothing_is_written() {
        QTemporaryDir dir;
        const QString victim = dir.filePath("victim.jsonl"), link = dir.filePath("run.jsonl"),
                      dangling = dir.filePath("dangling.jsonl"), nowhere = dir.filePath("nowhere.jsonl");
        write_file(victim, "someone else's file\n");
        QVERIFY(QFile::link(victim, link));
        QVERIFY(QFile::link(nowhere, dangling));
        for (const QString& path : {link, dangling}) {
            const Outcome r = trainer(tiny(write_config(dir)) << "--no-network"
                                                              << "--telemetry" << path);
            QVERIFY2(!r.hung, "sp-trainer hung");
            QVERIFY2(r.exit_code == 2, r.err.constData());
            QVERIFY2(r.err.contains("sp-trainer: --telemetry: '" + path.toUtf8() +
                                    "' is a symbolic link; telemetry is never written through one"),
                     r.err.constData());
        }
        QCOMPARE(read_all(victim), QByteArray("someone else's file\n"));
        QVERIFY(!QFileInfo::exists(nowhere));
    }

    // Opening a FIFO waits for its other end: sp-trainer used to hang there, silent, before training.
    void fifo_as_telemetry_or_key_file_exits_2_at_once() {
        QTemporaryDir dir;
        const QString fifo = dir.filePath("pipe");
        QCOMPARE(::mkfifo(qPrintable(fifo), 0600), 0);
        for (const char* name : {"server", "client"}) {
            QProcess keygen;
            keygen.start(QStringLiteral(SP_CTL_PATH), {"keygen", dir.filePath(name)});
            QVERIFY(keygen.waitForFinished(kHangMs) && keygen.exitCode() == 0);
        }
        const QStringList live = {"--no-telemetry", "--telemetry-endpoint", "ipc://" + dir.filePath("tel"),
                                  "--control-endpoint", "ipc://" + dir.filePath("ctl")};
        const QString key = dir.filePath("server.key"), allowed = dir.filePath("client.pub");
        const struct {
            QStringList args;
            QByteArray says;
        } cases[] = {
            {{"--no-network", "--telemetry", fifo},
             "sp-trainer: --telemetry: '" + fifo.toUtf8() + "' is not a regular file (a FIFO)"},
            {QStringList(live) << "--server-key" << fifo << "--allowed-clients" << allowed,
             "sp-trainer: --server-key: cannot read CURVE key file '" + fifo.toUtf8() +
                 "': not a regular file"},
            {QStringList(live) << "--server-key" << key << "--allowed-clients" << fifo,
             "sp-trainer: --allowed-clients: cannot read CURVE allow-list '" + fifo.toUtf8() +
                 "': not a regular file"},
        };
        for (const auto& c : cases) {
            const Outcome r = trainer(tiny(write_config(dir)) << c.args);
            QVERIFY2(!r.hung, qPrintable("sp-trainer hung: " + c.args.join(' ')));
            QVERIFY2(r.exit_code == 2, r.err.constData());
            QVERIFY2(r.err.contains(c.says), r.err.constData());
        }
    }

    // Set-up that waits (here rank 0 for a rank 1 that never comes, for the hour the config allows)
    // must not outlast a SIGTERM: before the first step the signal ends the process at once.
    void a_signal_during_set_up_ends_the_process() {
        QTemporaryDir dir;
        QProcess p;
        p.start(QStringLiteral(SP_TRAINER_PATH), tiny(write_config(dir, {{"process_group_timeout_s", 3600}}))
                                                     << "--no-network"
                                                     << "--no-telemetry"
                                                     << "--world-size"
                                                     << "2"
                                                     << "--rank"
                                                     << "0"
                                                     << "--master-port" << QString::number(free_port()));
        QVERIFY(p.waitForStarted(kHangMs));
        const QByteArray out = wait_for_output(p, "data-parallel: rank 0 of 2");
        if (!out.contains("data-parallel: rank 0 of 2")) stop(p);
        QVERIFY2(out.contains("data-parallel: rank 0 of 2"), (out + p.readAllStandardError()).constData());
        ::kill(pid_t(p.processId()), SIGTERM);
        const bool ended = p.waitForFinished(kHangMs);
        stop(p);
        QVERIFY2(ended, "SIGTERM during set-up did not end sp-trainer");
        QCOMPARE(p.exitStatus(), QProcess::CrashExit);  // the signal's default action
    }

    // A Linux file name is bytes: a --telemetry path that is not UTF-8 is written as given, and the
    // header and --summary-json show it with U+FFFD for the invalid byte.
    void telemetry_path_that_is_not_utf8_is_written() {
        QTemporaryDir dir;
        const QString summary = dir.filePath("summary.json");
        // QProcess passes arguments as UTF-8; the shell's printf makes the raw byte 0xff.
        const QString script = R"(t="$1/run$(printf '\377').jsonl"; shift; exec "$0" --telemetry "$t" "$@")";
        const Outcome r = run_bounded("/bin/sh", QStringList{"-c", script, SP_TRAINER_PATH, dir.path()}
                                                     << tiny(write_config(dir)) << "--no-network"
                                                     << "--quiet"
                                                     << "--summary-json" << summary);
        const std::string dir_bytes = dir.path().toStdString(), file = dir_bytes + "/run\xff.jsonl";
        // QTemporaryDir cannot remove a name that is not UTF-8 (Qt decodes it with U+FFFD).
        const std::unique_ptr<const char, void (*)(const char*)> remove_file(
            file.c_str(), [](const char* f) { ::unlink(f); });
        QVERIFY2(!r.hung, "sp-trainer hung");
        QVERIFY2(r.exit_code == 0, r.err.constData());
        std::ifstream in(file);
        QVERIFY(in);
        std::string first;
        QVERIFY(std::getline(in, first));
        const std::string shown = dir_bytes + "/run\xef\xbf\xbd.jsonl";  // U+FFFD in UTF-8
        QCOMPARE(QString::fromStdString(json::parse(first)["config"]["telemetry_file"].get<std::string>()),
                 QString::fromStdString(shown));
        const json s = json::parse(read_all(summary).toStdString());
        QCOMPARE(QString::fromStdString(s["config"]["telemetry_file"].get<std::string>()),
                 QString::fromStdString(shown));
    }

    // /dev/zero grew the trainer by hundreds of MB/s, a FIFO blocked it: only a regular file of at
    // most 16 MiB is read. The FIFO comes first: before the fix it hangs, and /dev/zero is not tried.
    void gate_file_that_is_a_fifo_a_device_or_too_large_exits_2() {
        QTemporaryDir dir;
        const QString fifo = dir.filePath("gate.fifo"), big = dir.filePath("big.json");
        const QString telemetry = dir.filePath("t.jsonl");
        QCOMPARE(::mkfifo(qPrintable(fifo), 0600), 0);
        {
            QFile f(big);
            QVERIFY(f.open(QIODevice::WriteOnly) && f.resize((qint64(16) << 20) + 1));  // sparse
        }
        const struct {
            QString gate;
            QByteArray why;
        } cases[] = {{fifo, "not a regular file: a FIFO"},
                     {"/dev/urandom", "not a regular file: a character device"},
                     {"/dev/zero", "not a regular file: a character device"},
                     {big, "larger than 16 MiB (the limit for a JSON document)"}};
        for (const auto& c : cases) {
            if (!QFileInfo::exists(c.gate)) continue;
            const QString cfg = write_config(dir, {{"format_gate_file", c.gate.toStdString()}});
            const Outcome r = trainer(tiny(cfg) << "--no-network"
                                                << "--telemetry" << telemetry);
            QVERIFY2(!r.hung, qPrintable("sp-trainer hung on the gate file " + c.gate));
            QVERIFY2(r.exit_code == 2, r.err.constData());
            QVERIFY2(
                r.err.contains("sp-trainer: --config: format_gate_file: invalid format gate policy:\n  " +
                               c.gate.toUtf8() + ": cannot read the file (" + c.why + ")"),
                r.err.constData());
            QVERIFY(!QFileInfo::exists(telemetry));
        }
    }

    // The help says 2 for a bad config value, and a gate file that is not JSON is one.
    void gate_file_that_is_not_json_exits_2_and_writes_nothing() {
        QTemporaryDir dir;
        const QString gate = dir.filePath("gate.json"), telemetry = dir.filePath("t.jsonl");
        write_file(gate, "this is not JSON\n");
        const QString cfg = write_config(dir, {{"format_gate_file", gate.toStdString()}});
        const Outcome r = trainer(tiny(cfg) << "--no-network"
                                            << "--telemetry" << telemetry);
        QVERIFY2(!r.hung, "sp-trainer hung");
        QVERIFY2(r.exit_code == 2, r.err.constData());
        QVERIFY2(r.err.contains("sp-trainer: --config: format_gate_file: invalid format gate policy:\n  " +
                                gate.toUtf8() + ": not valid JSON: "),
                 r.err.constData());
        QVERIFY(!QFileInfo::exists(telemetry));
    }

    // libzmq took "localhost" in a bind for an interface name ("No such device"): it binds 127.0.0.1,
    // and a client reaches it as tcp://localhost too.
    void localhost_endpoints_bind_and_answer() {
        QTemporaryDir dir;
        const QString telemetry_ep = QString("tcp://localhost:%1").arg(free_port());
        int control_port = free_port();
        while (QString::number(control_port) == telemetry_ep.section(':', -1)) control_port = free_port();
        const QString control_ep = QString("tcp://localhost:%1").arg(control_port);
        QProcess p;
        QStringList args = tiny(write_config(dir));
        args[1] = "1000000";  // --steps: until the SIGTERM below
        p.start(QStringLiteral(SP_TRAINER_PATH), args << "--no-telemetry"
                                                      << "--telemetry-endpoint" << telemetry_ep
                                                      << "--control-endpoint" << control_ep);
        QVERIFY(p.waitForStarted(kHangMs));
        const QByteArray live =
            "live: telemetry " + telemetry_ep.toUtf8() + ", control " + control_ep.toUtf8();
        const QByteArray out = wait_for_output(p, live);
        if (!out.contains(live)) stop(p);
        QVERIFY2(out.contains(live), (out + p.readAllStandardError()).constData());
        const Outcome ping = run_bounded(QStringLiteral(SP_CTL_PATH), {"ping", "--endpoint", control_ep});
        ::kill(pid_t(p.processId()), SIGTERM);
        const bool ended = p.waitForFinished(kHangMs);
        stop(p);
        QVERIFY2(ping.exit_code == 0, ping.err.constData());
        QVERIFY(ended);
    }
};

QTEST_GUILESS_MAIN(TestSpTrainerInputs)
#include "test_sp_trainer_inputs.moc"
