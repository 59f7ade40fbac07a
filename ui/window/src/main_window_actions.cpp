// MainWindow's menus, toolbar, dialogs, exports and settings (the layout and data wiring are in
// main_window.cpp).
#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QComboBox>
#include <QFileDialog>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QStyle>
#include <QTableView>
#include <QToolBar>

#include "sp/ui/block_table_panel.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/connection_dialog.h"
#include "sp/ui/control_actions.h"
#include "sp/ui/export.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/main_window.h"
#include "sp/ui/recent_list.h"
#include "sp/ui/theme.h"
#include "sp/ui/timeline.h"

namespace sp::ui {

void MainWindow::buildActions() {
    openAction_ =
        new QAction(style()->standardIcon(QStyle::SP_DialogOpenButton), tr("&Open telemetry…"), this);
    openAction_->setShortcut(QKeySequence::Open);
    openAction_->setToolTip(tr("Replay a JSONL telemetry file (Ctrl+O)"));
    connect(openAction_, &QAction::triggered, this, &MainWindow::openDialog);
    connectAction_ =
        new QAction(style()->standardIcon(QStyle::SP_DriveNetIcon), tr("&Connect to agent…"), this);
    connectAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_K));
    connectAction_->setToolTip(tr("Follow a running agent live (Ctrl+K)"));
    connect(connectAction_, &QAction::triggered, this, &MainWindow::connectDialog);

    followAction_ = new QAction(tr("&Follow live edge"), this);
    followAction_->setCheckable(true);
    followAction_->setChecked(true);
    followAction_->setShortcut(QKeySequence(Qt::Key_End));
    followAction_->setToolTip(tr("Keep the newest update in view (End)"));
    connect(followAction_, &QAction::triggered, this, [this](bool follow) {
        heatmap_->setFollowLiveEdge(follow);
        if (follow) timeline_->setFollowing(true);
    });
    fitAction_ = new QAction(tr("&Fit heatmap"), this);
    fitAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
    connect(fitAction_, &QAction::triggered, heatmap_, &HeatmapView::fitAll);

    playAction_ = new QAction(tr("&Play / pause"), this);
    playAction_->setShortcut(QKeySequence(Qt::Key_Space));
    connect(playAction_, &QAction::triggered, timeline_, &Timeline::togglePlay);
    stepBackAction_ = new QAction(tr("Step &back"), this);
    stepBackAction_->setShortcut(QKeySequence(Qt::Key_Comma));
    connect(stepBackAction_, &QAction::triggered, timeline_, &Timeline::stepBack);
    stepForwardAction_ = new QAction(tr("Step &forward"), this);
    stepForwardAction_->setShortcut(QKeySequence(Qt::Key_Period));
    connect(stepForwardAction_, &QAction::triggered, timeline_, &Timeline::stepForward);
    for (QAction* a : {playAction_, stepBackAction_, stepForwardAction_, followAction_, fitAction_})
        addAction(a);

    QToolBar* bar = addToolBar(tr("Main"));
    bar->setObjectName(QStringLiteral("MainToolBar"));
    bar->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    bar->addAction(openAction_);
    bar->addAction(connectAction_);
    bar->addSeparator();
    runs_->setMinimumContentsLength(28);
    runs_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    runs_->setToolTip(tr("The run shown (one per file or agent)"));
    bar->addWidget(runs_);
    bar->addSeparator();
    for (QAction* a : control_->blockActions()) bar->addAction(a);
    bar->addSeparator();
    bar->addAction(followAction_);
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(openAction_);
    recentFilesMenu_ = file->addMenu(tr("Open &recent"));
    file->addAction(connectAction_);
    recentEndpointsMenu_ = file->addMenu(tr("Connect r&ecent"));
    file->addSeparator();
    file->addAction(tr("Export &heatmap as PNG…"), this, &MainWindow::exportHeatmap);
    file->addAction(tr("Export &charts as PNG…"), this, &MainWindow::exportCharts);
    file->addAction(tr("Export block &table as CSV…"), this, &MainWindow::exportTable);
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    viewMenu_ = menuBar()->addMenu(tr("&View"));
    viewMenu_->addAction(followAction_);
    viewMenu_->addAction(fitAction_);
    viewMenu_->addSeparator();
    viewMenu_->addAction(playAction_);
    viewMenu_->addAction(stepBackAction_);
    viewMenu_->addAction(stepForwardAction_);
    viewMenu_->addSeparator();
    darkAction_ = viewMenu_->addAction(tr("&Dark theme"));
    darkAction_->setCheckable(true);
    darkAction_->setChecked(true);
    connect(darkAction_, &QAction::toggled, this,
            [this](bool dark) { setTheme(dark ? Theme::dark : Theme::light); });

    QMenu* control = menuBar()->addMenu(tr("&Control"));
    for (QAction* a : control_->blockActions()) control->addAction(a);
    control->addSeparator();
    for (sp::Mode m : {sp::Mode::dynamic, sp::Mode::budget, sp::Mode::static_, sp::Mode::off})
        control->addAction(control_->mode(m));
    control->addAction(control_->budgetTarget());

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
    if (recentFilesMenu_ == nullptr) return;
    recentFilesMenu_->clear();
    for (const QString& path : recentFiles_->items())
        recentFilesMenu_->addAction(path, this, [this, path] { openFile(path); });
    recentFilesMenu_->setEnabled(!recentFilesMenu_->isEmpty());
    recentEndpointsMenu_->clear();
    for (const QString& spec : recentEndpoints_->items())
        recentEndpointsMenu_->addAction(spec, this, [this, spec] {
            QString error;
            if (!connectTo({spec, {}, {}}, &error)) QMessageBox::warning(this, tr("Cannot connect"), error);
        });
    recentEndpointsMenu_->setEnabled(!recentEndpointsMenu_->isEmpty());
}

void MainWindow::showShortcuts() {
    QString rows;
    auto row = [&rows](const QAction* a) {
        if (a->shortcut().isEmpty()) return;
        rows += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                    .arg(a->shortcut().toString(QKeySequence::NativeText).toHtmlEscaped(),
                         QString(a->text()).remove(QLatin1Char('&')).toHtmlEscaped());
    };
    for (const QAction* a : {openAction_, connectAction_, followAction_, fitAction_, playAction_,
                             stepBackAction_, stepForwardAction_})
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
    ConnectionDialog dialog(recentEndpoints_->items(), this);
    if (dialog.exec() != QDialog::Accepted) return;
    QString error;
    if (!connectTo(dialog.request(), &error)) QMessageBox::warning(this, tr("Cannot connect"), error);
}

namespace {
QString askPath(QWidget* parent, const QString& title, const QString& suggestion, const QString& filter) {
    return QFileDialog::getSaveFileName(parent, title, suggestion, filter);
}
}  // namespace

void MainWindow::exportHeatmap() {
    const QString path =
        askPath(this, tr("Export heatmap"), QStringLiteral("heatmap.png"), tr("PNG (*.png)"));
    if (path.isEmpty()) return;
    const QString error = exportPng(heatmap_->renderToImage(heatmap_->size() * devicePixelRatio()), path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Export failed"), error);
}

void MainWindow::exportCharts() {
    const QString path = askPath(this, tr("Export charts"), QStringLiteral("charts.png"), tr("PNG (*.png)"));
    if (path.isEmpty()) return;
    const QString error = exportPng(charts_->grab().toImage(), path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Export failed"), error);
}

void MainWindow::exportTable() {
    const QString path =
        askPath(this, tr("Export block table"), QStringLiteral("blocks.csv"), tr("CSV (*.csv)"));
    if (path.isEmpty()) return;
    const QString error = exportCsv(*table_->sourceModel(), path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Export failed"), error);
}

void MainWindow::setTheme(Theme theme) {
    applyTheme(theme);
    if (darkAction_ != nullptr && darkAction_->isChecked() != isDark(theme))
        darkAction_->setChecked(isDark(theme));
    charts_->setDarkTheme(isDark(theme));
    QSettings().setValue(QStringLiteral("theme"), toString(theme));
    shownRevision_ = UINT64_MAX;
    refreshViews();
}

void MainWindow::saveSettings() {
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    settings.setValue(QStringLiteral("window/splitter"), splitter_->saveState());
}

void MainWindow::restoreSettings() {
    QSettings settings;
    restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
    splitter_->restoreState(settings.value(QStringLiteral("window/splitter")).toByteArray());
}

}  // namespace sp::ui
