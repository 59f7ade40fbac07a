#pragma once
// --timings: when the user sees what, in seconds since sp-dashboard started (main() entered), one
// line each on stderr as it happens: `sp-dashboard: timing NAME SECONDS`, NAME one of
//   open_s         the window has the --replay files and --connect runs (loads started)
//   first_paint_s  the heatmap painted (and the frame was flushed) with at least one update
//   loaded_s       every replayed file has loaded (or failed); not printed for live runs alone
//   screenshot_s   --screenshot: the PNG is written
// bench_dashboard_app reads them; each is printed once.
#include <QElapsedTimer>
#include <QObject>
#include <set>
#include <string>

namespace sp::ui {
class MainWindow;
}

namespace sp::dashboard {

class AppTimings : public QObject {
    Q_OBJECT
  public:
    // `since_start` runs from main()'s start. Watches the window's runs as they are now.
    AppTimings(sp::ui::MainWindow* window, QElapsedTimer since_start, QObject* parent = nullptr);

    // Prints NAME and the seconds since the start, unless NAME was printed already.
    void mark(const char* name);

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

  private:
    void checkLoaded();

    sp::ui::MainWindow* window_;
    QElapsedTimer since_start_;
    std::set<std::string> marked_;
    bool paint_seen_ = false;
};

}  // namespace sp::dashboard
