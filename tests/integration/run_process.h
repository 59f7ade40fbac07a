#pragma once
// Runs a program to completion for the integration tests and keeps what it printed.
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QtGlobal>

namespace sp::test {

struct Run {
    int exit_code = -1;  // -1 when the program crashed
    QByteArray out, err;
};

// `limit_ms` only keeps a hung program from hanging the suite (qFatal names it).
inline Run run(const char* program, const QStringList& args, const QString& cwd = {}, int limit_ms = 300000) {
    QProcess p;
    if (!cwd.isEmpty()) p.setWorkingDirectory(cwd);
    p.start(QString::fromUtf8(program), args);
    if (!p.waitForFinished(limit_ms)) qFatal("%s did not finish", program);
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, p.readAllStandardOutput(),
            p.readAllStandardError()};
}

#ifdef SP_CTL_PATH
inline Run sp_ctl(const QStringList& args) {
    return run(SP_CTL_PATH, args, {}, 120000);
}
#endif

}  // namespace sp::test
