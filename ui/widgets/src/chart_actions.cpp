// Each chart's context menu in ChartsPanel: "Enlarge chart" (the chart alone in the panel; checked,
// it restores the others), "Reset zoom" (all the steps again) and "Export series as CSV…" (the
// chart's lines at full resolution). The actions belong to the chart's view, named so that tests
// find them: chartEnlarge, chartResetZoom, chartExportCsv.
#include <QAction>
#include <QChartView>
#include <QFileDialog>
#include <QGridLayout>
#include <QLabel>
#include <QMessageBox>
#include <QSaveFile>

#include "chart_box.h"
#include "chart_series.h"

namespace sp::ui {

namespace {

// What the CSV of each chart is called unless the user names it otherwise.
QString suggestedCsvName(ChartsPanel::Chart which) {
    switch (which) {
        case ChartsPanel::Chart::saving:
            return QStringLiteral("saving.csv");
        case ChartsPanel::Chart::precision:
            return QStringLiteral("blocks_per_precision.csv");
        case ChartsPanel::Chart::sensitivity:
            return QStringLiteral("sensitivity.csv");
        case ChartsPanel::Chart::gradient:
            return QStringLiteral("gradient_l2.csv");
        case ChartsPanel::Chart::loss:
            return QStringLiteral("loss.csv");
    }
    return QStringLiteral("series.csv");
}

}  // namespace

void ChartsPanel::buildActions(Chart which) {
    ChartBox& box = *charts_[std::size_t(which)];
    box.enlarge = new QAction(tr("Enlarge chart"), box.view);
    box.enlarge->setObjectName(QStringLiteral("chartEnlarge"));
    box.enlarge->setCheckable(true);
    box.enlarge->setToolTip(tr("Show this chart alone in the panel (also: double-click its title)."));
    connect(box.enlarge, &QAction::triggered, this,
            [this, which](bool on) { setEnlarged(on ? std::optional<Chart>(which) : std::nullopt); });
    box.reset_zoom = new QAction(tr("Reset zoom (all steps)"), box.view);
    box.reset_zoom->setObjectName(QStringLiteral("chartResetZoom"));
    box.reset_zoom->setToolTip(tr("Show every step again (also: double-click the plot)."));
    box.reset_zoom->setEnabled(false);
    connect(box.reset_zoom, &QAction::triggered, this, &ChartsPanel::resetXView);
    box.export_csv = new QAction(tr("Export series as CSV…"), box.view);
    box.export_csv->setObjectName(QStringLiteral("chartExportCsv"));
    box.export_csv->setToolTip(tr("Write this chart's lines, every recorded step, one column per line."));
    connect(box.export_csv, &QAction::triggered, this, [this, which] { exportCsvAsked(which); });
    box.view->addActions({box.enlarge, box.reset_zoom, box.export_csv});
    box.view->setContextMenuPolicy(Qt::ActionsContextMenu);
}

void ChartsPanel::setEnlarged(std::optional<Chart> chart) {
    if (chart == enlarged_) return;
    enlarged_ = chart;
    placeCharts();
    updateVisibility();
    for (int c = 0; c < kChartCount; ++c) {
        ChartBox& box = *charts_[std::size_t(c)];
        const bool on = enlarged_ == Chart(c);
        const QSignalBlocker block(box.enlarge);
        box.enlarge->setChecked(on);
        box.enlarge->setText(on ? tr("Restore all charts") : tr("Enlarge chart"));
    }
}

// The enlarged chart takes both rows of the grid; the others keep their cells (hidden meanwhile).
void ChartsPanel::placeCharts() {
    for (int c = 0; c < kChartCount; ++c) {
        ChartBox& box = *charts_[std::size_t(c)];
        grid_->removeWidget(box.frame);
        if (enlarged_ == Chart(c))
            grid_->addWidget(box.frame, 1, 0, 2, 6);
        else
            grid_->addWidget(box.frame, box.row, box.column, 1, box.columns);
    }
}

// Which charts show: all, or the enlarged one alone; the loss chart only with a loss to draw (the
// note "No loss in this run." in its place otherwise).
void ChartsPanel::updateVisibility() {
    for (int c = 0; c < kChartCount; ++c) {
        ChartBox& box = *charts_[std::size_t(c)];
        const bool has_data = Chart(c) != Chart::loss || has_loss_;
        box.view->setVisible(has_data);
        box.frame->setVisible(has_data && (!enlarged_ || enlarged_ == Chart(c)));
    }
    no_loss_label_->setVisible(!has_loss_ && (!enlarged_ || enlarged_ == Chart::loss));
}

QString ChartsPanel::seriesCsv(Chart chart) const {
    return linesCsv(linesOf(chart));
}

QString ChartsPanel::exportSeriesCsv(Chart chart, const QString& path) const {
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) return file.errorString();
    file.write(seriesCsv(chart).toUtf8());
    if (!file.commit()) return file.errorString();
    return {};
}

void ChartsPanel::exportCsvAsked(Chart which) {
    const QString suggested = suggestedCsvName(which);
    const QString path = csv_path_prompt_ ? csv_path_prompt_(suggested)
                                          : QFileDialog::getSaveFileName(this, tr("Export series as CSV"),
                                                                         suggested, tr("CSV files (*.csv)"));
    if (path.isEmpty()) return;
    const QString error = exportSeriesCsv(which, path);
    if (!error.isEmpty())
        QMessageBox::warning(this, tr("Export series as CSV"), tr("Could not write %1: %2").arg(path, error));
}

}  // namespace sp::ui
