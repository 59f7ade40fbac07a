#pragma once
// The dashboard's window: heatmap with its legend and the replay bar on top, charts below, the
// block table and the event log in docks. It owns the runs (one RunSession per file or agent),
// shows one at a time, and repaints on a timer when the shown run changed (batched repaints).
// Logic lives in sp_ui_model; this class only wires views to it.
#include <cstdint>
#include <memory>
#include <vector>

#include <QMainWindow>
#include <QTimer>

class QComboBox;
class QLabel;
class QSplitter;

namespace sp::ui {

class BlockTableModel;
class BlockTablePanel;
class ChartsPanel;
class ControlActions;
class EventLogModel;
class EventLogPanel;
class HeatmapLegend;
class HeatmapView;
class RecentList;
class ReplayBar;
class RunSession;
class TelemetrySource;
class Timeline;
struct ConnectionRequest;
enum class Theme;

class MainWindow : public QMainWindow {
    Q_OBJECT
  public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Opens a JSONL file for replay (loaded in the background); the new run becomes current.
    void openFile(const QString& path);
    // Connects to an agent. False (with `error` set) when the spec or key files are invalid.
    bool connectTo(const ConnectionRequest& request, QString* error);

    const std::vector<RunSession*>& sessions() const { return sessions_; }
    RunSession* currentSession() const { return current_; }
    void setCurrentSession(RunSession* session);
    void setTheme(Theme theme);

    // The whole window as an image (headless --screenshot); runs one repaint tick first.
    QImage renderWindow();
    // Repaints now if anything changed (the timer calls this).
    void refreshViews();

  protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

  private:
    void buildActions();
    void buildMenus();
    void addSession(std::unique_ptr<TelemetrySource> source);
    void onSelectionChanged(const std::vector<int>& blocks);
    void showContextMenu(const std::vector<int>& blocks, const QPoint& globalPos);
    void updateStatus();
    void updateRecentMenus();
    void showShortcuts();
    void exportHeatmap();
    void exportCharts();
    void exportTable();
    void openDialog();
    void connectDialog();
    void saveSettings();
    void restoreSettings();

    std::vector<RunSession*> sessions_;
    RunSession* current_ = nullptr;
    std::uint64_t shownRevision_ = UINT64_MAX;
    std::size_t shownPosition_ = SIZE_MAX;
    std::vector<int> selection_;

    Timeline* timeline_;
    HeatmapView* heatmap_;
    HeatmapLegend* legend_;
    ReplayBar* replayBar_;
    ChartsPanel* charts_;
    BlockTablePanel* table_;
    EventLogPanel* events_;
    // Per session (same index as sessions_), owned by the session.
    std::vector<BlockTableModel*> tableModels_;
    std::vector<EventLogModel*> eventModels_;
    BlockTableModel* tableModel_ = nullptr;  // the current session's
    EventLogModel* eventModel_ = nullptr;
    ControlActions* control_;
    QSplitter* splitter_;
    QComboBox* runs_;
    QLabel* stateLabel_;
    QLabel* runLabel_;
    QLabel* countsLabel_;
    QTimer repaint_;
    std::unique_ptr<RecentList> recentFiles_;
    std::unique_ptr<RecentList> recentEndpoints_;
    QMenu* recentFilesMenu_ = nullptr;
    QMenu* recentEndpointsMenu_ = nullptr;
    QMenu* viewMenu_ = nullptr;
    QAction* openAction_ = nullptr;
    QAction* connectAction_ = nullptr;
    QAction* followAction_ = nullptr;
    QAction* fitAction_ = nullptr;
    QAction* playAction_ = nullptr;
    QAction* stepBackAction_ = nullptr;
    QAction* stepForwardAction_ = nullptr;
    QAction* darkAction_ = nullptr;
};

}  // namespace sp::ui
