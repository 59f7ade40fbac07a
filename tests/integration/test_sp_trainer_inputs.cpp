// sp-trainer's files and start-up (issue 30): what it refuses before it writes or binds anything (a
// symlink or a FIFO as --telemetry, a FIFO as a key file, a gate file that is a FIFO, a device, too
// large or not JSON: exit 2, a message naming the flag or key and the path). Every run is bounded
// by a limit only a hang reaches: a hang fails the test, and the trainer is killed.
#include <QtTest>

#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>

#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace {

using json = nlohmann::json;

constexpr int kHangMs = 60000;  // start-up of the tiny model takes a second or two

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
    const QString path = dir.filePath("cfg.json");
    write_file(path, QByteArray::fromStdString(extra.dump()));
    return path;
}

// A model small enough that set-up takes a moment; the rest comes from each test.
QStringList tiny(const QString& config) {
    return {"--steps", "2", "--blocks",     "1", "--d-model",      "16", "--heads",  "2",   "--seq-len", "16",
            "--batch", "2", "--eval-every", "1", "--eval-batches", "1",  "--config", config};
}

}  // namespace

class TestSpTrainerInputs : public QObject {
    Q_OBJECT
  private slots:
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
};

QTEST_GUILESS_MAIN(TestSpTrainerInputs)
#include "test_sp_trainer_inputs.moc"
