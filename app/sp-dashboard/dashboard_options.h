#pragma once
// sp-dashboard's command line.
#include <cstddef>
#include <optional>

#include <QSize>
#include <QString>
#include <QStringList>

#include "sp/ui/run_session.h"

class QCoreApplication;

namespace sp::dashboard {

struct DashboardOptions {
    QStringList replay;          // --replay FILE (repeatable)
    QStringList connect;         // --connect SPEC (repeatable); SPEC;SPEC;...: the ranks of one job
    int ranks = 0;               // --ranks N: each --connect is a data-parallel job of N ranks (0: not given)
    QString server_key_file;     // --server-key FILE (CURVE, applies to every --connect)
    QString client_key_file;     // --client-key FILE
    QString screenshot;          // --screenshot FILE.png: render once ready, save, exit
    int exit_after_updates = 0;  // --exit-after-updates N (live): ready after N updates in total
    int timeout_seconds = 120;   // --timeout S: headless runs give up after this long
    std::optional<QSize> size;   // --size WxH (the window's default size without it)
    QString theme;               // --theme dark|light ("" = the saved choice)
    bool timings = false;  // --timings: print open_s, first_paint_s, loaded_s, screenshot_s (app_timings.h)
    // --retain-updates N: a live run's per-block history kept at full resolution (0: all)
    std::size_t retain_updates = sp::ui::RunSession::kDefaultLiveRetainUpdates;

    // Headless: the window renders, saves and quits instead of waiting for the user.
    bool headless() const { return !screenshot.isEmpty() || exit_after_updates > 0; }
};

// Parses the arguments (Qt's own, e.g. -platform, were already removed by QApplication).
// On a usage error prints the message and returns nullopt (exit code 2); --help/--version exit 0.
std::optional<DashboardOptions> parseDashboardOptions(const QCoreApplication& app);

}  // namespace sp::dashboard
