#pragma once
// --screenshot / --exit-after-updates: waits until every replay has loaded and the live runs have
// delivered the requested number of updates (in total, an earlier run's before an agent restart
// included) or every live run has ended, then renders the window, saves the PNG and quits.
// Exit codes: 0 done, 1 a file failed to load (or holds no telemetry record) or the PNG could not be
// written, 3 timed out.
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include "dashboard_options.h"

namespace sp::ui {
class MainWindow;
}

namespace sp::dashboard {

class AppTimings;

class HeadlessRun : public QObject {
    Q_OBJECT
  public:
    // `timings` (--timings; may be null) is told when the screenshot is written.
    HeadlessRun(sp::ui::MainWindow* window, DashboardOptions options, AppTimings* timings,
                QObject* parent = nullptr);

  private:
    void poll();
    bool ready(QString* failure) const;
    void finish(int code);

    sp::ui::MainWindow* window_;
    DashboardOptions options_;
    AppTimings* timings_;
    QTimer poll_;
    QElapsedTimer clock_;
};

}  // namespace sp::dashboard
