#include "sp/ui/main_window.h"

#include <algorithm>
#include <optional>

#include <QAction>
#include <QCloseEvent>
#include <QComboBox>
#include <QCoreApplication>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QMimeData>
#include <QSplitter>
#include <QStatusBar>
#include <QToolBar>
#include <QVBoxLayout>

#include "fit_columns.h"
#include "sp/ui/block_table_model.h"
#include "sp/ui/block_table_panel.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/connection_dialog.h"
#include "sp/ui/control_actions.h"
#include "sp/ui/event_log_model.h"
#include "sp/ui/event_log_panel.h"
#include "sp/ui/heatmap_legend.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/live_source.h"
#include "sp/ui/rank_job.h"
#include "sp/ui/rank_panel.h"
#include "sp/ui/recent_list.h"
#include "sp/ui/replay_bar.h"
#include "sp/ui/replay_source.h"
#include "sp/ui/run_session.h"
#include "sp/ui/timeline.h"
#include "sp/ui/what_if_panel.h"

namespace sp::ui {

namespace {
constexpr int kRepaintMs = 33;  // ~30 Hz: views repaint at most this often, however fast data arrives

QString stateColor(SourceState s) {
    switch (s) {
        case SourceState::live:
        case SourceState::loaded:
            return QStringLiteral("#3fb950");
        case SourceState::loading:
        case SourceState::connecting:
            return QStringLiteral("#58a6ff");
        case SourceState::stale:
            return QStringLiteral("#d29922");
        case SourceState::failed:
        case SourceState::disconnected:
            return QStringLiteral("#f85149");
        case SourceState::idle:
            break;
    }
    return QStringLiteral("#8b949e");
}

// A run that ended is done, not in trouble (grey), and so is one an agent restart ended; a replayed
// file that was cut is a warning.
QString stateColor(const RunSession& session) {
    if (session.runEnd() || !session.followedBy().isEmpty()) return QStringLiteral("#8b949e");
    if (!session.cutMessage().isEmpty()) return QStringLiteral("#d29922");
    return stateColor(session.state());
}
}  // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent),
      timeline_(new Timeline(this)),
      heatmap_(new HeatmapView(this)),
      legend_(new HeatmapLegend(Qt::Vertical, this)),
      replay_bar_(new ReplayBar(timeline_, this)),
      charts_(new ChartsPanel(this)),
      table_(new BlockTablePanel(this)),
      events_(new EventLogPanel(this)),
      what_if_(new WhatIfPanel(this)),
      control_(new ControlActions([this] { return selection_; }, this)),
      rank_panel_(new RankPanel(this)),
      rank_dock_(new QDockWidget(tr("Ranks"), this)),
      job_warning_(new QLabel(this)),
      splitter_(new QSplitter(Qt::Vertical, this)),
      runs_(new QComboBox(this)),
      state_label_(new QLabel(this)),
      run_label_(new QLabel(this)),
      counts_label_(new QLabel(this)),
      recent_files_(std::make_unique<RecentList>(QStringLiteral("recent/files"))),
      recent_endpoints_(std::make_unique<RecentList>(QStringLiteral("recent/endpoints"))) {
    setWindowTitle(tr("Selective Precision"));
    setObjectName(QStringLiteral("MainWindow"));
    installPrompts();
    setAcceptDrops(true);

    buildCentre();
    buildActions();
    buildMenus();
    buildDocks();

    state_label_->setTextFormat(Qt::RichText);
    statusBar()->addWidget(state_label_);
    statusBar()->addWidget(run_label_, 1);
    statusBar()->addPermanentWidget(counts_label_);

    connect(heatmap_, &HeatmapView::selectionChanged, this, [this](const std::vector<int>& blocks) {
        onSelectionChanged(blocks);
        table_->setSelectedBlocks(blocks);
    });
    connect(table_, &BlockTablePanel::selectionChanged, this, [this](const std::vector<int>& blocks) {
        onSelectionChanged(blocks);
        heatmap_->setSelection(blocks);
    });
    connect(heatmap_, &HeatmapView::contextMenuRequested, this, &MainWindow::showContextMenu);
    // The table's block filter also filters the heatmap's rows.
    connect(table_, &BlockTablePanel::shownBlocksChanged, heatmap_, &HeatmapView::setShownBlocks);
    connect(what_if_, &WhatIfPanel::finished, this, &MainWindow::takeWhatIf);
    connect(events_, &EventLogPanel::stepActivated, this, [this](qint64 step) { goToStep(step); });
    connect(table_, &BlockTablePanel::contextMenuRequested, this, &MainWindow::showContextMenu);
    connect(control_, &ControlActions::commandFailed, this,
            [this](const QString& why) { statusBar()->showMessage(why, 5000); });
    connect(runs_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0 && static_cast<std::size_t>(i) < sessions_.size()) setCurrentSession(sessions_[i]);
    });
    // "Follow live edge" is about the heatmap's viewport: scrolling back to look at history does
    // not stop new updates from arriving, it only stops the view from jumping to them.
    connect(heatmap_, &HeatmapView::followLiveEdgeChanged, follow_action_, &QAction::setChecked);

    repaint_.setInterval(kRepaintMs);
    connect(&repaint_, &QTimer::timeout, this, &MainWindow::refreshViews);
    repaint_.start();
    restoreSettings();
    showJob();  // a restored layout does not show the rank panel without a job
    updateStatus();
}

// The window's dialogs behind the control actions and the exports (tests replace them).
void MainWindow::installPrompts() {
    control_->setTargetPrompt([this](double& target_pct) {
        bool ok = false;
        target_pct = QInputDialog::getDouble(this, tr("Budget target"),
                                             tr("Bytes to save against all-BF16 (percent):"), target_pct, 0.0,
                                             100.0, 1, &ok);
        return ok;
    });
    control_->setTolerancePrompt([this](double& pct) {
        bool ok = false;
        pct = QInputDialog::getDouble(
            this, tr("Loss tolerance"),
            tr("Estimated increase of the training loss the plan may cost (percent):"), pct, 0.0, 100.0, 4,
            &ok);
        return ok;
    });
    control_->setLifetimePrompt([this](std::int64_t& steps) {
        bool ok = false;
        steps =
            QInputDialog::getInt(this, tr("Pin lifetime"),
                                 tr("Pins sent from now on end after this many steps (0: until released):"),
                                 int(steps), 0, 100'000'000, 100, &ok);
        return ok;
    });
    control_->setConfirmPrompt([this](const QString& text) {
        return QMessageBox::warning(this, tr("Pin against the policy"), text,
                                    QMessageBox::Yes | QMessageBox::Cancel,
                                    QMessageBox::Cancel) == QMessageBox::Yes;
    });
    save_path_prompt_ = [this](const QString& title, const QString& suggestion, const QString& filter) {
        return QFileDialog::getSaveFileName(this, title, suggestion, filter);
    };
    // The charts' CSV export asks through the same prompt: one hook answers every export.
    charts_->setCsvPathPrompt([this](const QString& suggested) {
        return save_path_prompt_(tr("Export series as CSV"), suggested, tr("CSV files (*.csv)"));
    });
}

// The heatmap with its legend, the job's warning bar and the replay bar above the charts.
void MainWindow::buildCentre() {
    auto* top = new QWidget(this);
    auto* heat_row = new QHBoxLayout;
    heat_row->setContentsMargins(0, 0, 0, 0);
    heat_row->addWidget(heatmap_, 1);
    heat_row->addWidget(legend_);
    auto* top_layout = new QVBoxLayout(top);
    top_layout->setContentsMargins(0, 0, 0, 0);
    top_layout->setSpacing(2);
    // A data-parallel job's warnings (a rank's map differs from rank 0's, a rank behind or silent).
    job_warning_->setObjectName(QStringLiteral("JobWarning"));
    job_warning_->setWordWrap(true);
    job_warning_->setStyleSheet(
        QStringLiteral("background: #d29922; color: #1c1c1c; padding: 4px 8px; font-weight: bold"));
    job_warning_->hide();
    top_layout->addWidget(job_warning_);
    top_layout->addLayout(heat_row, 1);
    top_layout->addWidget(replay_bar_);
    splitter_->setObjectName(QStringLiteral("MainSplitter"));
    splitter_->addWidget(top);
    splitter_->addWidget(charts_);
    splitter_->setStretchFactor(0, 1);
    splitter_->setStretchFactor(1, 1);
    setCentralWidget(splitter_);
}

void MainWindow::buildDocks() {
    auto* table_dock = new QDockWidget(tr("Blocks"), this);
    table_dock->setObjectName(QStringLiteral("BlocksDock"));
    table_dock->setWidget(table_);
    addDockWidget(Qt::RightDockWidgetArea, table_dock);
    event_dock_ = new QDockWidget(tr("Events"), this);
    event_dock_->setObjectName(QStringLiteral("EventsDock"));
    event_dock_->setWidget(events_);
    // Table above the log in one right-hand column: the centre keeps its full height for the
    // heatmap and charts, and a command's pending -> applied stays in view next to its block.
    addDockWidget(Qt::RightDockWidgetArea, event_dock_);
    splitDockWidget(table_dock, event_dock_, Qt::Vertical);
    resizeDocks({table_dock}, {480}, Qt::Horizontal);
    resizeDocks({table_dock, event_dock_}, {3, 2}, Qt::Vertical);
    // What-if shares the log's place (a tab): tried occasionally, not watched all the time.
    auto* what_if_dock = new QDockWidget(tr("What-if"), this);
    what_if_dock->setObjectName(QStringLiteral("WhatIfDock"));
    what_if_dock->setWidget(what_if_);
    addDockWidget(Qt::RightDockWidgetArea, what_if_dock);
    tabifyDockWidget(event_dock_, what_if_dock);
    // The ranks of a data-parallel job: a third tab there (placeRanksDock), shown only while the
    // current run is a job of several ranks (showJob).
    rank_dock_->setObjectName(QStringLiteral("RanksDock"));
    rank_dock_->setWidget(rank_panel_);
    rank_dock_->installEventFilter(this);  // a close by the user is remembered (eventFilter)
    setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
    placeRanksDock();
    rank_dock_->hide();

    view_menu_->addSeparator();
    view_menu_->addAction(table_dock->toggleViewAction());
    view_menu_->addAction(event_dock_->toggleViewAction());
    view_menu_->addAction(what_if_dock->toggleViewAction());
    view_menu_->addAction(rank_dock_->toggleViewAction());
    // Opening the panel again takes back an earlier close.
    connect(rank_dock_->toggleViewAction(), &QAction::triggered, this, [this](bool shown) {
        if (shown) rememberRanksClosed(false);
    });
}

MainWindow::~MainWindow() {
    for (RankJob* j : jobs_)
        if (j != nullptr) j->stop();
    for (RunSession* s : sessions_) s->stop();
}

void MainWindow::openFile(const QString& path) {
    recent_files_->add(path);
    updateRecentMenus();
    addSession(std::make_unique<ReplaySource>(path));
}

// A combo box clips its text without an ellipsis, which once turned "finished at step 5999" into
// "finished at step 5": the state is always shown whole, and the run's label is elided at its start
// to the room left (its end tells runs apart; the full text is the item's tooltip). A run before an
// agent restart sits just above the agent's entry, which names the endpoint: its own label is its run id.
void MainWindow::setRunPickerText(int index, const RunSession& session) {
    const QString state = QStringLiteral(" — ") + session.shortStateText();
    const QFontMetrics fm = runs_->fontMetrics();
    const int room = fm.averageCharWidth() * runs_->minimumContentsLength() - fm.horizontalAdvance(state);
    const QString name = session.followedBy().isEmpty()
                             ? session.source().label()
                             : tr("run %1").arg(QString::fromStdString(session.header().run_id));
    const QString label = fm.elidedText(name, Qt::ElideLeft, std::max(room, 0));
    runs_->setItemText(index, label + state);
    runs_->setItemData(index, session.runLabel() + QStringLiteral(" — ") + session.stateText(),
                       Qt::ToolTipRole);
}

void MainWindow::addSession(std::unique_ptr<TelemetrySource> source) {
    auto* session = new RunSession(std::move(source), this);
    sessions_.push_back(session);
    // Each run keeps its own table and log models, so switching runs loses no sort or scroll state.
    table_models_.push_back(new BlockTableModel(session, session));
    event_models_.push_back(new EventLogModel(session, session));
    jobs_.push_back(nullptr);  // connectTo sets a job's
    connect(session, &RunSession::stateChanged, this, [this, session] {
        const auto index = std::find(sessions_.begin(), sessions_.end(), session) - sessions_.begin();
        setRunPickerText(static_cast<int>(index), *session);
        control_->updateEnabled();
        updateStatus();
    });
    connect(session, &RunSession::reset, this, [this, session] {
        if (session == current_) {
            timeline_->setCount(0);
            shown_revision_ = UINT64_MAX;
        }
    });
    connect(session, &RunSession::earlierRunKept, this,
            [this, session](RunSession* earlier) { insertEarlierRun(*session, earlier); });
    connect(session, &RunSession::earlierRunDropped, this, &MainWindow::removeEarlierRun);
    runs_->addItem(QString());
    setRunPickerText(runs_->count() - 1, *session);
    setCurrentSession(session);
    runs_->setCurrentIndex(runs_->count() - 1);
    session->start();
}

// The run before an agent restart keeps a picker entry of its own, just above the agent's current run
// (the session goes on with the new run, and stays current if it was).
void MainWindow::insertEarlierRun(const RunSession& followed_by, RunSession* earlier) {
    const auto at = std::find(sessions_.begin(), sessions_.end(), &followed_by);
    const auto index = at - sessions_.begin();
    sessions_.insert(at, earlier);
    table_models_.insert(table_models_.begin() + index, new BlockTableModel(earlier, earlier));
    event_models_.insert(event_models_.begin() + index, new EventLogModel(earlier, earlier));
    jobs_.insert(jobs_.begin() + index, nullptr);
    // After the lists: the picker's current index moves past the new entry, and the entry it then
    // names must be the same run.
    runs_->insertItem(int(index), QString());
    setRunPickerText(int(index), *earlier);
    overlaid_.clear();  // other runs' overlays include it
}

void MainWindow::removeEarlierRun(RunSession* earlier) {
    const auto at = std::find(sessions_.begin(), sessions_.end(), earlier);
    if (at == sessions_.end()) return;
    if (earlier == current_) {  // shown: the agent's current run takes its place
        const auto live = std::find(sessions_.begin(), sessions_.end(), earlier->parent());
        runs_->setCurrentIndex(int(live - sessions_.begin()));
    }
    const auto index = at - sessions_.begin();
    sessions_.erase(at);
    table_models_.erase(table_models_.begin() + index);
    event_models_.erase(event_models_.begin() + index);
    jobs_.erase(jobs_.begin() + index);
    runs_->removeItem(int(index));
    // The charts hold the overlaid runs' stores: rebuilt now, before the run is deleted.
    overlaid_.clear();
    updateOverlays();
}

void MainWindow::setCurrentSession(RunSession* session) {
    if (session == current_) return;
    current_ = session;
    selection_.clear();
    const auto index =
        static_cast<std::size_t>(std::find(sessions_.begin(), sessions_.end(), session) - sessions_.begin());
    table_model_ = session ? table_models_[index] : nullptr;
    event_model_ = session ? event_models_[index] : nullptr;
    heatmap_->setSession(session);
    charts_->setSession(session);
    table_->setModel(table_model_);
    events_->setModel(event_model_);
    replay_bar_->setStore(session ? &session->store() : nullptr);
    control_->setSession(session);
    what_if_->setSession(session);
    export_events_action_->setEnabled(session != nullptr);
    showJob();
    what_if_overlays_.clear();  // the what-if was the previous run's
    const bool live = session != nullptr && session->isLive();
    replay_bar_->setVisible(!live);
    follow_action_->setVisible(live);  // a replay has no live edge (its End key goes with it)
    timeline_->setCount(session ? session->store().updateCount() : 0);
    timeline_->setFollowing(true);
    shown_revision_ = UINT64_MAX;
    setWindowTitle(session ? tr("%1 — Selective Precision").arg(session->runLabel())
                           : tr("Selective Precision"));
    refreshViews();
}

void MainWindow::refreshViews() {
    if (current_ == nullptr) return;
    const std::uint64_t revision = current_->revision();
    timeline_->setCount(current_->store().updateCount());
    const std::size_t position = timeline_->position();
    updateOverlays();  // other runs may have moved while this one did not
    if (revision == shown_revision_ && position == shown_position_) return;
    shown_revision_ = revision;
    shown_position_ = position;
    heatmap_->setTimelineCursor(position);
    charts_->setTimelineCursor(position);
    // Away from the live edge the log shows what had happened by the cursor's step.
    const bool at_edge = timeline_->following() || position == 0;
    events_->setStepLimit(at_edge ? std::nullopt
                                  : std::optional<std::int64_t>(current_->store().row(position - 1).step));
    table_model_->setUpdate(timeline_->following() ? BlockTableModel::kFollowLatest
                                                   : (position > 0 ? position - 1 : 0));
    heatmap_->refresh();
    charts_->refresh();
    table_model_->refresh();
    event_model_->sync();
    replay_bar_->refresh();
    what_if_->refresh();
    control_->updateEnabled();
    updateStatus();
}

void MainWindow::goToStep(std::int64_t step) {
    if (current_ == nullptr || current_->store().empty()) return;
    const std::vector<UpdateRow>& rows = current_->store().rows();
    const auto at =
        std::partition_point(rows.begin(), rows.end(), [step](const UpdateRow& r) { return r.step < step; });
    const std::size_t update = at == rows.end() ? rows.size() - 1 : std::size_t(at - rows.begin());
    timeline_->setPosition(update + 1);
    heatmap_->scrollToUpdate(update);
    refreshViews();
}

void MainWindow::onSelectionChanged(const std::vector<int>& blocks) {
    selection_ = blocks;
    charts_->setSelectedBlocks(blocks);
    control_->updateEnabled();
}

void MainWindow::showContextMenu(const std::vector<int>& blocks, const QPoint& global_pos) {
    if (blocks != selection_) {
        onSelectionChanged(blocks);
        heatmap_->setSelection(blocks);
        table_->setSelectedBlocks(blocks);
    }
    control_->showContextMenu(blocks, global_pos, this);
}

void MainWindow::updateStatus() {
    if (current_ == nullptr) {
        state_label_->setText(tr("No run — File ▸ Open (Ctrl+O) or Connect (Ctrl+K)"));
        run_label_->clear();
        counts_label_->clear();
        return;
    }
    state_label_->setText(QStringLiteral("<span style='color:%1'>●</span> %2")
                              .arg(stateColor(*current_), current_->stateText().toHtmlEscaped()));
    state_label_->setToolTip(current_->cutMessage());
    const sp::RunHeader& header = current_->header();
    // A file by its name (the whole path in the tooltip), so the status line keeps its length.
    const QString source = current_->source().label();
    const QString shown = current_->fromAgent() ? source : QFileInfo(source).fileName();
    run_label_->setText(
        header.run_id.empty() ? shown : tr("run %1 · %2").arg(QString::fromStdString(header.run_id), shown));
    run_label_->setToolTip(source);
    const TelemetryStore& store = current_->store();
    // The policy's mode, the budget target or loss tolerance where it acts (it does nothing in another
    // mode), and the precision scope (POLICY.md rule 22): what a block's format rounds.
    const sp::Mode mode = current_->policyMode();
    QString counts =
        !current_->policyModeKnown() ? tr("mode unknown · ")
        : mode == sp::Mode::budget
            ? tr("mode budget, target %1% · ").arg(current_->budgetTargetPct(), 0, 'f', 1)
        : mode == sp::Mode::tolerance
            ? tr("mode tolerance, loss tolerance %1% · ")
                  .arg(QString::number(current_->lossTolerancePct(), 'g', 4))
            : tr("mode %1 · ").arg(QString::fromLatin1(to_string(mode).data(), int(to_string(mode).size())));
    const std::string& scope = current_->runConfig().precision_scope;
    counts += tr("%1 scope · ").arg(QString::fromStdString(scope));
    run_label_->setToolTip(
        source + (scope == "weights" ? tr("\nprecision scope: weights (stored and streamed in each block's "
                                          "format, computed in BF16)")
                                     : tr("\nprecision scope: compute (weights, inputs and output gradients "
                                          "in each block's format)")));
    counts += tr("%1 blocks · %2 updates").arg(store.blockCount()).arg(store.updateCount());
    if (!store.empty()) {
        // The cursor's step: in replay (or a paused live view) the status follows the timeline.
        const std::size_t position = timeline_->position();
        const std::int64_t last = store.row(store.updateCount() - 1).step;
        counts += timeline_->following() || position == 0
                      ? tr(" · step %1").arg(last)
                      : tr(" · step %1 of %2").arg(store.row(position - 1).step).arg(last);
    }
    if (current_->messagesLost() > 0) counts += tr(" · %1 lost").arg(current_->messagesLost());
    if (current_->loadReport().problem_count > 0)
        counts += tr(" · %1 bad lines").arg(current_->loadReport().problem_count);
    counts_label_->setText(counts);
}

QImage MainWindow::renderWindow() {
    shown_revision_ = UINT64_MAX;  // force one full refresh
    refreshViews();
    // The rows that refresh brought fit their columns on the next turn of the event loop: now.
    for (ColumnFitter* fitter : findChildren<ColumnFitter*>()) fitter->fitNow();
    // ... and labels whose text just changed (the status line at the end of a load) their room.
    QCoreApplication::sendPostedEvents(nullptr, QEvent::LayoutRequest);
    return grab().toImage();
}

void MainWindow::closeEvent(QCloseEvent* event) {
    saveSettings();
    for (RankJob* j : jobs_)
        if (j != nullptr) j->stop();
    for (RunSession* s : sessions_) s->stop();
    event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile()) openFile(url.toLocalFile());
    event->acceptProposedAction();
}

}  // namespace sp::ui
