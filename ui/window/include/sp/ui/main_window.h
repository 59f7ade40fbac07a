#pragma once
// The dashboard's window: heatmap with its legend and the replay bar on top, charts below, the
// block table and the event log in docks. It owns the runs (one RunSession per file or agent),
// shows one at a time, and repaints on a timer when the shown run changed (batched repaints).
// Logic lives in sp_ui_model; this class only wires views to it.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <QMainWindow>
#include <QSize>
#include <QTimer>

#include "sp/ui/charts_panel.h"

class QComboBox;
class QDockWidget;
class QLabel;
class QSplitter;

namespace sp::ui {

class BlockTableModel;
class BlockTablePanel;
class ControlActions;
class EventLogModel;
class EventLogPanel;
class WhatIfPanel;
class HeatmapLegend;
class HeatmapView;
class RankJob;
class RankPanel;
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
    // The size of a first launch and of a screenshot (`sp-dashboard --size` changes it).
    static constexpr QSize kDefaultSize{1600, 1000};

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Opens a JSONL file for replay (loaded in the background); the new run becomes current.
    void openFile(const QString& path);
    // Connects to an agent, or to the ranks of a data-parallel job (`request.ranks`, a ';' list:
    // parseJobSpec), followed as one run: rank 0's. False (with `error` set) when the spec or key
    // files are invalid.
    bool connectTo(const ConnectionRequest& request, QString* error);

    // Every run, in the run picker's order (the runs before an agent's restarts just above its own).
    const std::vector<RunSession*>& sessions() const { return sessions_; }
    RunSession* currentSession() const { return current_; }
    // The data-parallel job `session` is rank 0 of; null for a single agent or a file.
    RankJob* jobOf(const RunSession* session) const;
    void setCurrentSession(RunSession* session);
    void setTheme(Theme theme);

    // The whole window as an image (headless --screenshot); runs one repaint tick first.
    QImage renderWindow();
    // Repaints now if anything changed (the timer calls this).
    void refreshViews();
    // Moves the timeline cursor and the heatmap to the update where `step` shows: the first at or
    // after it (the last update for a later step). What double-clicking an event does.
    void goToStep(std::int64_t step);

    // Where an export goes: (title, suggested file name, filter) -> the path, "" when cancelled. A
    // file dialog unless replaced (tests answer with a path of their own).
    using SavePathPrompt =
        std::function<QString(const QString& title, const QString& suggestion, const QString& filter)>;
    void setSavePathPrompt(SavePathPrompt prompt) { save_path_prompt_ = std::move(prompt); }

  protected:
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;

  private:
    // Settings: whether the user closed the Ranks panel, and the layout's version (1: the Ranks panel
    // is a tab of the right-hand column; a layout saved before that had it under the charts).
    static constexpr char kRanksClosedKey[] = "window/ranks_closed";
    static constexpr char kLayoutVersionKey[] = "window/layout_version";
    static constexpr int kLayoutVersion = 1;

    void buildActions();
    void buildMenus();
    void buildDocks();
    void buildCentre();
    void installPrompts();
    void addSession(std::unique_ptr<TelemetrySource> source);
    // A run before an agent restart (RunSession::earlierRunKept) gets a picker entry, and loses it
    // when the session drops it (earlierRunDropped).
    void insertEarlierRun(const RunSession& followed_by, RunSession* earlier);
    void removeEarlierRun(RunSession* earlier);
    void setRunPickerText(int index, const RunSession& session);
    void onSelectionChanged(const std::vector<int>& blocks);
    void showContextMenu(const std::vector<int>& blocks, const QPoint& global_pos);
    void updateStatus();
    void updateRecentMenus();
    void showShortcuts();
    void exportHeatmap();
    void exportCharts();
    void exportTable();
    void exportEventLog();
    void openDialog();
    void connectDialog();
    void saveSettings();
    void restoreSettings();
    // The charts' overlays: the other runs on every chart (View ▸ Overlay other runs) and the
    // what-if's saving. Rebuilt only when one of them changed.
    void updateOverlays();
    void takeWhatIf();
    // The rank panel and the warning bar follow the current run's job (hidden without one, and the
    // panel while the user keeps it closed).
    void showJob();
    // The Ranks dock's own place: a tab beside the event log, so it takes no height from the heatmap
    // and charts.
    void placeRanksDock();
    // The user closed (true) or opened again (false) the Ranks panel; kept in the settings.
    void rememberRanksClosed(bool closed);

    std::vector<RunSession*> sessions_;
    RunSession* current_ = nullptr;
    std::uint64_t shown_revision_ = UINT64_MAX;
    std::size_t shown_position_ = SIZE_MAX;
    std::vector<int> selection_;

    Timeline* timeline_;
    HeatmapView* heatmap_;
    HeatmapLegend* legend_;
    ReplayBar* replay_bar_;
    ChartsPanel* charts_;
    BlockTablePanel* table_;
    EventLogPanel* events_;
    WhatIfPanel* what_if_;
    // Per session (same index as sessions_), owned by the session.
    std::vector<BlockTableModel*> table_models_;
    std::vector<EventLogModel*> event_models_;
    std::vector<RankJob*> jobs_;              // null where the run is not a job of several ranks
    BlockTableModel* table_model_ = nullptr;  // the current session's
    EventLogModel* event_model_ = nullptr;
    ControlActions* control_;
    RankPanel* rank_panel_;
    QDockWidget* rank_dock_;
    QDockWidget* event_dock_ = nullptr;
    bool ranks_closed_ = false;  // by the user: jobs then leave the Ranks panel closed
    QLabel* job_warning_;        // the current job's warnings, above the heatmap
    QSplitter* splitter_;
    QComboBox* runs_;
    QLabel* state_label_;
    QLabel* run_label_;
    QLabel* counts_label_;
    QTimer repaint_;
    std::unique_ptr<RecentList> recent_files_;
    std::unique_ptr<RecentList> recent_endpoints_;
    QMenu* recent_files_menu_ = nullptr;
    QMenu* recent_endpoints_menu_ = nullptr;
    QMenu* view_menu_ = nullptr;
    QAction* open_action_ = nullptr;
    QAction* connect_action_ = nullptr;
    QAction* follow_action_ = nullptr;
    QAction* fit_action_ = nullptr;
    QAction* precision_view_action_ = nullptr;
    QAction* play_action_ = nullptr;
    QAction* step_back_action_ = nullptr;
    QAction* step_forward_action_ = nullptr;
    QAction* dark_action_ = nullptr;
    QAction* compare_action_ = nullptr;
    QAction* export_events_action_ = nullptr;  // File menu and the event log's context menu
    SavePathPrompt save_path_prompt_;
    std::vector<ChartsPanel::Overlay> what_if_overlays_;
    std::vector<std::uint64_t> overlaid_;  // what the overlays were built from (see updateOverlays)
    const RunSession* overlaid_session_ = nullptr;
};

}  // namespace sp::ui
