#include "dashboard_options.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QRegularExpression>
#include <cstdio>

#include "sp/ui/job_spec.h"

namespace sp::dashboard {
namespace {

std::optional<DashboardOptions> usageError(const QString& message) {
    std::fprintf(stderr, "sp-dashboard: %s\nTry 'sp-dashboard --help'.\n", qPrintable(message));
    return std::nullopt;
}

bool positiveInt(const QString& text, int& out) {
    bool ok = false;
    const int v = text.toInt(&ok);
    if (!ok || v <= 0) return false;
    out = v;
    return true;
}

// Every option sp-dashboard takes (ui/README.md documents each).
struct Flags {
    const QCommandLineOption replay{QStringLiteral("replay"),
                                    QStringLiteral("Replay a JSONL telemetry file (repeatable)."),
                                    QStringLiteral("FILE")};
    const QCommandLineOption connect{
        QStringLiteral("connect"),
        QStringLiteral("Follow an agent: TELEMETRY endpoint (control = port + 1) or TELEMETRY,CONTROL "
                       "(repeatable, one run each). A data-parallel job as one run: each rank's SPEC "
                       "separated by ';', rank 0 first, or one SPEC with --ranks."),
        QStringLiteral("SPEC")};
    const QCommandLineOption ranks{
        QStringLiteral("ranks"),
        QStringLiteral("Each --connect is a data-parallel job of N ranks: rank r at the SPEC's ports + 2*r "
                       "(a ';' list must name N). Rank 0 is shown and steered; the Ranks panel compares "
                       "the others with it."),
        QStringLiteral("N")};
    const QCommandLineOption server_key{QStringLiteral("server-key"),
                                        QStringLiteral("CURVE: the agents' public key file."),
                                        QStringLiteral("FILE")};
    const QCommandLineOption client_key{
        QStringLiteral("client-key"),
        QStringLiteral("CURVE: this client's secret key (sp-ctl keygen; mode 0600)."),
        QStringLiteral("NAME.key")};
    const QCommandLineOption screenshot{
        QStringLiteral("screenshot"),
        QStringLiteral(
            "Render the window once loaded (or after --exit-after-updates), save it as PNG and exit."),
        QStringLiteral("FILE.png")};
    const QCommandLineOption exit_after{
        QStringLiteral("exit-after-updates"),
        QStringLiteral("Live: exit 0 once N updates have arrived, or the run has ended."),
        QStringLiteral("N")};
    const QCommandLineOption timeout{
        QStringLiteral("timeout"),
        QStringLiteral("Headless runs fail (exit 3) after S seconds (default 120)."), QStringLiteral("S")};
    const QCommandLineOption size{
        QStringLiteral("size"),
        QStringLiteral(
            "Window size, e.g. 1280x800 (over a saved size; screenshots and a first launch: 1600x1000)."),
        QStringLiteral("WxH")};
    const QCommandLineOption theme{QStringLiteral("theme"), QStringLiteral("dark or light."),
                                   QStringLiteral("NAME")};
    const QCommandLineOption timings{
        QStringLiteral("timings"),
        QStringLiteral("Print when each milestone was reached, in seconds since the start, to stderr: "
                       "'sp-dashboard: timing NAME S' for open_s, first_paint_s, loaded_s, screenshot_s.")};
    const QCommandLineOption retain{
        QStringLiteral("retain-updates"),
        QStringLiteral("Live: keep each block's history of the latest N updates at full resolution, older "
                       "ones as a min/max/mean summary (default %1; 0 keeps all). Replays keep all.")
            .arg(sp::ui::RunSession::kDefaultLiveRetainUpdates),
        QStringLiteral("N")};

    QList<QCommandLineOption> all() const {
        return {replay,     connect, ranks, server_key, client_key, screenshot,
                exit_after, timeout, size,  theme,      timings,    retain};
    }
};

// The numbers and names given, checked one by one: "" or what is wrong with the first bad one.
QString readValues(const QCommandLineParser& parser, const Flags& f, DashboardOptions& o) {
    o.replay = parser.values(f.replay);
    o.connect = parser.values(f.connect);
    o.server_key_file = parser.value(f.server_key);
    o.client_key_file = parser.value(f.client_key);
    o.screenshot = parser.value(f.screenshot);
    o.timings = parser.isSet(f.timings);
    if (parser.isSet(f.exit_after) && !positiveInt(parser.value(f.exit_after), o.exit_after_updates))
        return QStringLiteral("--exit-after-updates: expected a positive integer, got '%1'")
            .arg(parser.value(f.exit_after));
    if (parser.isSet(f.ranks) && !positiveInt(parser.value(f.ranks), o.ranks))
        return QStringLiteral("--ranks: expected a positive integer, got '%1'").arg(parser.value(f.ranks));
    if (parser.isSet(f.timeout) && !positiveInt(parser.value(f.timeout), o.timeout_seconds))
        return QStringLiteral("--timeout: expected a positive number of seconds, got '%1'")
            .arg(parser.value(f.timeout));
    if (parser.isSet(f.retain)) {
        bool ok = false;
        const qulonglong n = parser.value(f.retain).toULongLong(&ok);
        if (!ok)
            return QStringLiteral("--retain-updates: expected a number of updates (0: all), got '%1'")
                .arg(parser.value(f.retain));
        o.retain_updates = std::size_t(n);
    }
    if (parser.isSet(f.size)) {
        const QRegularExpressionMatch m =
            QRegularExpression(QStringLiteral("^(\\d{3,5})x(\\d{3,5})$")).match(parser.value(f.size));
        if (!m.hasMatch())
            return QStringLiteral("--size: expected WIDTHxHEIGHT such as 1600x1000, got '%1'")
                .arg(parser.value(f.size));
        o.size = QSize(m.captured(1).toInt(), m.captured(2).toInt());
    }
    if (parser.isSet(f.theme)) {
        o.theme = parser.value(f.theme);
        if (o.theme != QLatin1String("dark") && o.theme != QLatin1String("light"))
            return QStringLiteral("--theme: expected dark or light, got '%1'").arg(o.theme);
    }
    return {};
}

// The options that need one another: "" or what is missing.
QString checkCombinations(const DashboardOptions& o) {
    if (o.ranks > 0 && o.connect.isEmpty()) return QStringLiteral("--ranks needs --connect SPEC");
    for (const QString& spec : o.connect) {
        QString error;
        if (!sp::ui::parseJobSpec(spec, o.ranks, &error))
            return o.ranks > 0 ? QStringLiteral("--connect '%1' with --ranks %2: %3")
                                     .arg(spec)
                                     .arg(o.ranks)
                                     .arg(error)
                               : QStringLiteral("--connect '%1': %2").arg(spec, error);
    }
    if (!o.screenshot.isEmpty() && o.replay.isEmpty() && o.connect.isEmpty())
        return QStringLiteral("--screenshot needs --replay FILE or --connect SPEC");
    if (o.exit_after_updates > 0 && o.connect.isEmpty())
        return QStringLiteral("--exit-after-updates needs --connect SPEC");
    if (o.server_key_file.isEmpty() != o.client_key_file.isEmpty())
        return QStringLiteral("CURVE needs both --server-key and --client-key");
    return {};
}

}  // namespace

std::optional<DashboardOptions> parseDashboardOptions(const QCoreApplication& app) {
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("Selective Precision dashboard: watch and steer per-block precision routing live, or "
                       "replay telemetry."));
    parser.addHelpOption();
    parser.addVersionOption();
    const Flags flags;
    parser.addOptions(flags.all());
    if (!parser.parse(app.arguments())) return usageError(parser.errorText());
    if (parser.isSet(QStringLiteral("help"))) parser.showHelp(0);
    if (parser.isSet(QStringLiteral("version"))) parser.showVersion();
    if (!parser.positionalArguments().isEmpty())
        return usageError(QStringLiteral("unexpected argument '%1' (files are opened with --replay FILE)")
                              .arg(parser.positionalArguments().first()));
    DashboardOptions o;
    QString error = readValues(parser, flags, o);
    if (error.isEmpty()) error = checkCombinations(o);
    if (!error.isEmpty()) return usageError(error);
    return o;
}

}  // namespace sp::dashboard
