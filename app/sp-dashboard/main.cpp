// sp-dashboard: the Selective Precision dashboard (see ui/ for everything it shows).
#include <QApplication>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QIcon>
#include <QSettings>
#include <QTemporaryDir>
#include <cstdio>

#include "app_timings.h"
#include "dashboard_options.h"
#include "headless_run.h"
#include "sp/ui/connection_dialog.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_source.h"
#include "sp/ui/theme.h"

namespace sp::dashboard {
namespace {

// The offscreen platform (headless screenshots) warns about window-manager features it lacks on
// every window; that is noise in a demo's output, not a problem. Everything else passes through.
QtMessageHandler default_handler = nullptr;
void filterPlatformNoise(QtMsgType type, const QMessageLogContext& context, const QString& message) {
    if (type == QtWarningMsg && message.contains(QLatin1String("does not support propagateSizeHints")))
        return;
    default_handler(type, context, message);
}

void setApplicationNames() {
    QCoreApplication::setOrganizationName(QStringLiteral("selective-precision"));
    QCoreApplication::setApplicationName(QStringLiteral("sp-dashboard"));
    QCoreApplication::setApplicationVersion(QStringLiteral(SP_VERSION));
}

// --help and --version need no window: answered before QApplication, which would need a display.
bool asksForHelpOrVersion(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const QLatin1String arg(argv[i]);
        if (arg == QLatin1String("-h") || arg == QLatin1String("--help") ||
            arg == QLatin1String("--help-all") || arg == QLatin1String("-v") ||
            arg == QLatin1String("--version"))
            return true;
    }
    return false;
}

}  // namespace
}  // namespace sp::dashboard

int main(int argc, char** argv) {
    using namespace sp::dashboard;
    QElapsedTimer since_start;  // --timings counts from here
    since_start.start();
    if (asksForHelpOrVersion(argc, argv)) {
        QCoreApplication app(argc, argv);
        setApplicationNames();
        return parseDashboardOptions(app) ? 0 : 2;  // QCommandLineParser prints and exits 0 itself
    }
    default_handler = qInstallMessageHandler(filterPlatformNoise);
    QApplication app(argc, argv);
    setApplicationNames();
    QApplication::setDesktopFileName(QStringLiteral("org.selectiveprecision.Dashboard"));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/sp-dashboard.svg")));
    std::optional<DashboardOptions> options = parseDashboardOptions(app);
    if (!options) return 2;
    sp::ui::registerUiMetaTypes();
    sp::ui::RunSession::setLiveRetainUpdates(options->retain_updates);
    // A headless run (a screenshot) neither reads nor writes the user's saved settings: it always
    // shows the default layout and never changes the next interactive session. Every QSettings in
    // the program then goes to an empty folder that disappears with the run.
    QTemporaryDir throwaway_settings;
    if (options->headless()) {
        if (!throwaway_settings.isValid()) {
            std::fprintf(stderr,
                         "sp-dashboard: cannot create a temporary folder for a headless run's settings\n");
            return 1;
        }
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, throwaway_settings.path());
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, throwaway_settings.path());
    }

    const QString theme =
        !options->theme.isEmpty() ? options->theme : QSettings().value(QStringLiteral("theme")).toString();
    sp::ui::MainWindow window;
    window.setTheme(sp::ui::themeFromString(theme));
    // --size wins over a saved geometry; a screenshot never depends on one.
    if (options->size || options->headless())
        window.resize(options->size.value_or(sp::ui::MainWindow::kDefaultSize));
    for (const QString& spec : options->connect) {
        QString error;
        if (!window.connectTo({spec, options->server_key_file, options->client_key_file, options->ranks},
                              &error)) {
            std::fprintf(stderr, "sp-dashboard: --connect %s: %s\n", qPrintable(spec), qPrintable(error));
            return 2;
        }
    }
    for (const QString& path : options->replay) window.openFile(path);
    AppTimings* timings = options->timings ? new AppTimings(&window, since_start, &app) : nullptr;
    if (timings != nullptr) timings->mark("open_s");
    window.show();
    if (options->headless()) new HeadlessRun(&window, *options, timings, &app);
    return QApplication::exec();
}
