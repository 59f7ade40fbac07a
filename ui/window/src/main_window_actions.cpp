// MainWindow's menus, toolbar, dialogs, exports and settings (the layout and data wiring are in
// main_window.cpp).
#include <QAbstractSpinBox>
#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QKeyEvent>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QRegularExpression>
#include <QScreen>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
#include <QTableView>
#include <QToolBar>
#include <QToolButton>

#include "sp/ui/block_table_panel.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/connection_dialog.h"
#include "sp/ui/control_actions.h"
#include "sp/ui/event_log_panel.h"
#include "sp/ui/export.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/main_window.h"
#include "sp/ui/recent_list.h"
#include "sp/ui/run_session.h"
#include "sp/ui/theme.h"
#include "sp/ui/timeline.h"

namespace sp::ui {
namespace {

// Lets the window's Space shortcut through when the focus is in a spin box of `window`: a number
// has no use for a space. (A ShortcutOverride left unaccepted lets the shortcut fire.)
class NumberFieldsLeaveSpace : public QObject {
  public:
    explicit NumberFieldsLeaveSpace(QWidget* window) : QObject(window), window_(window) {}

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override {
        if (event->type() != QEvent::ShortcutOverride) return false;
        const auto* key = static_cast<QKeyEvent*>(event);
        if (key->key() != Qt::Key_Space || key->modifiers() != Qt::NoModifier) return false;
        auto* widget = qobject_cast<QWidget*>(watched);
        if (!widget || widget->window() != window_) return false;
        // The spin box itself or its line edit.
        const bool number = qobject_cast<QAbstractSpinBox*>(widget) ||
                            qobject_cast<QAbstractSpinBox*>(widget->parentWidget());
        if (!number) return false;
        event->ignore();
        return true;
    }

  private:
    QWidget* window_;
};

}  // namespace

void MainWindow::buildActions() {
    open_action_ =
        new QAction(style()->standardIcon(QStyle::SP_DialogOpenButton), tr("&Open telemetry…"), this);
    open_action_->setShortcut(QKeySequence::Open);
    open_action_->setToolTip(tr("Replay a JSONL telemetry file (Ctrl+O)"));
    connect(open_action_, &QAction::triggered, this, &MainWindow::openDialog);
    connect_action_ =
        new QAction(style()->standardIcon(QStyle::SP_DriveNetIcon), tr("&Connect to agent…"), this);
    connect_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_K));
    connect_action_->setToolTip(tr("Follow a running agent live (Ctrl+K)"));
    connect(connect_action_, &QAction::triggered, this, &MainWindow::connectDialog);

    follow_action_ = new QAction(tr("&Follow live edge"), this);
    follow_action_->setCheckable(true);
    follow_action_->setChecked(true);
    follow_action_->setShortcut(QKeySequence(Qt::Key_End));
    follow_action_->setToolTip(tr("Keep the newest update in view (End)"));
    follow_action_->setVisible(false);  // shown while the current run is live (setCurrentSession)
    connect(follow_action_, &QAction::triggered, this, [this](bool follow) {
        heatmap_->setFollowLiveEdge(follow);
        if (follow) timeline_->setFollowing(true);
    });
    fit_action_ = new QAction(tr("&Fit heatmap"), this);
    fit_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
    connect(fit_action_, &QAction::triggered, heatmap_, &HeatmapView::fitAll);

    play_action_ = new QAction(tr("&Play / pause"), this);
    play_action_->setShortcut(QKeySequence(Qt::Key_Space));
    // A number field (the what-if thresholds, the budget target) takes Space as text it then refuses,
    // so the key did nothing once such a field had the focus; there it plays and pauses instead.
    // Fields that take text keep their Space.
    qApp->installEventFilter(new NumberFieldsLeaveSpace(this));
    connect(play_action_, &QAction::triggered, timeline_, &Timeline::togglePlay);
    step_back_action_ = new QAction(tr("Step &back"), this);
    step_back_action_->setShortcut(QKeySequence(Qt::Key_Comma));
    connect(step_back_action_, &QAction::triggered, timeline_, &Timeline::stepBack);
    step_forward_action_ = new QAction(tr("Step &forward"), this);
    step_forward_action_->setShortcut(QKeySequence(Qt::Key_Period));
    connect(step_forward_action_, &QAction::triggered, timeline_, &Timeline::stepForward);
    // The routing history at any zoom: cells coloured by format instead of sensitivity.
    precision_view_action_ = new QAction(tr("Heatmap by &precision"), this);
    precision_view_action_->setCheckable(true);
    precision_view_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_P));
    precision_view_action_->setToolTip(
        tr("Colour the heatmap's cells by the format each block ran in (Ctrl+P); off: by sensitivity"));
    connect(precision_view_action_, &QAction::toggled, this, [this](bool on) {
        heatmap_->setColorMode(on ? HeatmapView::ColorMode::precision : HeatmapView::ColorMode::sensitivity);
    });
    for (QAction* a : {play_action_, step_back_action_, step_forward_action_, follow_action_, fit_action_,
                       precision_view_action_})
        addAction(a);

    QToolBar* bar = addToolBar(tr("Main"));
    bar->setObjectName(QStringLiteral("MainToolBar"));
    bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    bar->addAction(open_action_);
    bar->addAction(connect_action_);
    bar->addSeparator();
    runs_->setObjectName(QStringLiteral("runPicker"));
    runs_->setMinimumContentsLength(44);  // setRunPickerText fits the label into this
    runs_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    runs_->setToolTip(tr("The run shown (one per file or agent)"));
    bar->addWidget(runs_);
    bar->addSeparator();
    // One "Pin" button for the five formats and the pins' terms: five pin buttons would push the
    // toolbar past a 1280-pixel window.
    auto* pin_menu = new QMenu(this);
    for (sp::Precision p : sp::kAllPrecisions) pin_menu->addAction(control_->pin(p));
    pin_menu->addSeparator();
    pin_menu->addAction(control_->pinLifetime());
    pin_menu->addAction(control_->releaseOnSpike());
    auto* pin_button = new QToolButton(bar);
    pin_button->setObjectName(QStringLiteral("pinButton"));
    // Enabled with the pin actions it opens (a replay, or no selection: nothing to pin).
    connect(control_->pin(sp::Precision::int8), &QAction::enabledChanged, pin_button,
            &QToolButton::setEnabled);
    pin_button->setEnabled(control_->pin(sp::Precision::int8)->isEnabled());
    pin_button->setText(tr("Pin"));
    pin_button->setToolTip(tr("Pin the selected blocks to a format (Ctrl+I INT8, Ctrl+B BF16, …)"));
    pin_button->setMenu(pin_menu);
    pin_button->setPopupMode(QToolButton::InstantPopup);
    pin_button->setToolButtonStyle(Qt::ToolButtonTextOnly);
    bar->addWidget(pin_button);
    bar->addAction(control_->release());
    bar->addAction(control_->releaseAll());
    bar->addSeparator();
    bar->addAction(follow_action_);
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(open_action_);
    recent_files_menu_ = file->addMenu(tr("Open &recent"));
    file->addAction(connect_action_);
    recent_endpoints_menu_ = file->addMenu(tr("Connect r&ecent"));
    file->addSeparator();
    file->addAction(tr("Export &heatmap as PNG…"), this, &MainWindow::exportHeatmap);
    file->addAction(tr("Export &charts as PNG…"), this, &MainWindow::exportCharts);
    file->addAction(tr("Export block &table as CSV…"), this, &MainWindow::exportTable);
    export_events_action_ =
        file->addAction(tr("Export &event log as CSV…"), this, &MainWindow::exportEventLog);
    export_events_action_->setToolTip(
        tr("Save the shown run's whole event log: step, time (UTC), kind, state, text, detail"));
    events_->addContextAction(export_events_action_);
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    view_menu_ = menuBar()->addMenu(tr("&View"));
    view_menu_->addAction(follow_action_);
    view_menu_->addAction(fit_action_);
    view_menu_->addAction(precision_view_action_);
    view_menu_->addSeparator();
    view_menu_->addAction(play_action_);
    view_menu_->addAction(step_back_action_);
    view_menu_->addAction(step_forward_action_);
    view_menu_->addSeparator();
    compare_action_ = view_menu_->addAction(tr("&Overlay other runs"));
    compare_action_->setCheckable(true);
    compare_action_->setToolTip(
        tr("Draw every other open run over the current one's charts (dashed, named in each legend)"));
    connect(compare_action_, &QAction::toggled, this, [this] { updateOverlays(); });
    dark_action_ = view_menu_->addAction(tr("&Dark theme"));
    dark_action_->setCheckable(true);
    dark_action_->setChecked(true);
    connect(dark_action_, &QAction::toggled, this,
            [this](bool dark) { setTheme(dark ? Theme::dark : Theme::light); });

    QMenu* control = menuBar()->addMenu(tr("&Control"));
    for (QAction* a : control_->blockActions()) control->addAction(a);
    control->addSeparator();
    for (sp::Mode m : kMenuModes) control->addAction(control_->mode(m));
    control->addAction(control_->budgetTarget());
    control->addAction(control_->lossTolerance());
    control->addSeparator();
    control->addAction(control_->pinLifetime());
    control->addAction(control_->releaseOnSpike());

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Keyboard shortcuts"), this, &MainWindow::showShortcuts)
        ->setShortcut(QKeySequence::HelpContents);
    help->addAction(tr("&About"), this, [this] {
        QMessageBox::about(this, tr("About Selective Precision"),
                           tr("<b>sp-dashboard %1</b><p>Watch and steer per-block BF16/INT8/FP8 routing "
                              "while a transformer trains.</p>")
                               .arg(QStringLiteral(SP_VERSION)));
    });
    updateRecentMenus();
}

void MainWindow::updateRecentMenus() {
    if (recent_files_menu_ == nullptr) return;
    recent_files_menu_->clear();
    for (const QString& path : recent_files_->items())
        recent_files_menu_->addAction(path, this, [this, path] { openFile(path); });
    recent_files_menu_->setEnabled(!recent_files_menu_->isEmpty());
    recent_endpoints_menu_->clear();
    for (const QString& spec : recent_endpoints_->items())
        recent_endpoints_menu_->addAction(spec, this, [this, spec] {
            QString error;
            if (!connectTo({spec, {}, {}}, &error)) QMessageBox::warning(this, tr("Cannot connect"), error);
        });
    recent_endpoints_menu_->setEnabled(!recent_endpoints_menu_->isEmpty());
}

void MainWindow::showShortcuts() {
    QString rows;
    auto row = [&rows](const QAction* a) {
        if (a->shortcut().isEmpty()) return;
        rows += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                    .arg(a->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped(),
                         QString(a->text()).remove(QLatin1Char('&')).toHtmlEscaped());
    };
    for (const QAction* a : {open_action_, connect_action_, follow_action_, fit_action_, play_action_,
                             step_back_action_, step_forward_action_})
        row(a);
    for (const QAction* a : control_->all()) row(a);
    rows +=
        tr("<tr><td><b>Ctrl+wheel, +/−</b></td><td>Zoom the heatmap</td></tr>"
           "<tr><td><b>Wheel, middle-drag</b></td><td>Pan the heatmap</td></tr>"
           "<tr><td><b>Click, Ctrl+click, drag</b></td><td>Select blocks in the heatmap</td></tr>"
           "<tr><td><b>Right click</b></td><td>Pin / release the selected blocks</td></tr>");
    QMessageBox::information(this, tr("Keyboard shortcuts"),
                             QStringLiteral("<table cellpadding=3>%1</table>").arg(rows));
}

void MainWindow::openDialog() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open telemetry"), QString(),
                                                      tr("Telemetry (*.jsonl *.json);;All files (*)"));
    if (!path.isEmpty()) openFile(path);
}

void MainWindow::connectDialog() {
    ConnectionDialog dialog(recent_endpoints_->items(), this);
    if (dialog.exec() != QDialog::Accepted) return;
    QString error;
    if (!connectTo(dialog.request(), &error)) QMessageBox::warning(this, tr("Cannot connect"), error);
}

namespace {
// "<run id>-events.csv", the id's characters a file name may not hold replaced.
QString eventLogFileName(const std::string& run_id) {
    QString id = QString::fromStdString(run_id);
    id.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._-]")), QStringLiteral("_"));
    return id.isEmpty() ? QStringLiteral("events.csv") : id + QStringLiteral("-events.csv");
}
}  // namespace

void MainWindow::exportHeatmap() {
    const QString path =
        save_path_prompt_(tr("Export heatmap"), QStringLiteral("heatmap.png"), tr("PNG (*.png)"));
    if (path.isEmpty()) return;
    const QString error = exportPng(heatmap_->renderToImage(heatmap_->size() * devicePixelRatio()), path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Export failed"), error);
}

void MainWindow::exportCharts() {
    const QString path =
        save_path_prompt_(tr("Export charts"), QStringLiteral("charts.png"), tr("PNG (*.png)"));
    if (path.isEmpty()) return;
    const QString error = exportPng(charts_->grab().toImage(), path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Export failed"), error);
}

void MainWindow::exportTable() {
    const QString path =
        save_path_prompt_(tr("Export block table"), QStringLiteral("blocks.csv"), tr("CSV (*.csv)"));
    if (path.isEmpty()) return;
    const QString error = exportCsv(*table_->sourceModel(), path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Export failed"), error);
}

void MainWindow::exportEventLog() {
    if (current_ == nullptr) return;
    const QString path = save_path_prompt_(tr("Export event log"),
                                           eventLogFileName(current_->header().run_id), tr("CSV (*.csv)"));
    if (path.isEmpty()) return;
    const QString error = exportEventLogCsv(current_->events(), path);
    if (!error.isEmpty()) {
        QMessageBox::warning(this, tr("Export failed"), error);
        return;
    }
    statusBar()->showMessage(
        tr("Event log saved to %1 (%2 entries)").arg(path).arg(current_->events().size()), 5000);
}

void MainWindow::setTheme(Theme theme) {
    applyTheme(theme);
    if (dark_action_ != nullptr && dark_action_->isChecked() != isDark(theme))
        dark_action_->setChecked(isDark(theme));
    charts_->setDarkTheme(isDark(theme));
    QSettings().setValue(QStringLiteral("theme"), toString(theme));
    shown_revision_ = UINT64_MAX;
    refreshViews();
}

void MainWindow::saveSettings() {
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    settings.setValue(QStringLiteral("window/splitter"), splitter_->saveState());
    settings.setValue(QLatin1String(kLayoutVersionKey), kLayoutVersion);
}

void MainWindow::restoreSettings() {
    QSettings settings;
    // The first launch (nothing saved) opens at the default size, within the screen, rather than at
    // whatever the layouts' minimum happens to be.
    if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray())) {
        const QScreen* screen = QGuiApplication::primaryScreen();
        resize(screen ? kDefaultSize.boundedTo(screen->availableGeometry().size()) : kDefaultSize);
    }
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    // A layout saved before the Ranks panel became a tab has it under the charts, squashing them.
    if (settings.value(QLatin1String(kLayoutVersionKey)).toInt() < kLayoutVersion &&
        dockWidgetArea(rank_dock_) == Qt::BottomDockWidgetArea)
        placeRanksDock();
    ranks_closed_ = settings.value(QLatin1String(kRanksClosedKey)).toBool();
    splitter_->restoreState(settings.value(QStringLiteral("window/splitter")).toByteArray());
}

}  // namespace sp::ui
