#pragma once
// One chart of ChartsPanel with everything drawn on it: the run's lines, the overlays' lines, and the
// extras (log axis, threshold guides, markers, hover guide), its legend and its context menu. Private
// to sp_ui_widgets; shared by the panel's source files (charts_panel.cpp, chart_lines.cpp,
// chart_scale.cpp, chart_guides.cpp, chart_legend.cpp, chart_readout.cpp, chart_navigation.cpp,
// chart_actions.cpp, chart_theme.cpp).
#include <array>
#include <memory>
#include <vector>

#include <QChart>
#include <QString>
#include <QValueAxis>

#include "chart_line.h"
#include "chart_series.h"
#include "sp/ui/charts_panel.h"

QT_BEGIN_NAMESPACE
class QAction;
class QAreaSeries;
class QGraphicsLineItem;
class QGraphicsRectItem;
class QGraphicsSimpleTextItem;
class QLabel;
class QLineSeries;
class QLogValueAxis;
class QScatterSeries;
QT_END_NAMESPACE

namespace sp::ui {

// The marks' colours (switch, command, rollback): the charts draw them, the controls row's key names them.
inline constexpr std::array<QRgb, ChartsPanel::kMarkerKinds> kMarkerColors = {0xFF8866AAu, 0xFF009E73u,
                                                                              0xFFCC0000u};
// The marks sit in a strip at the top of the plot, one height per kind (a share of the y range) so that
// they do not cover each other; the data stays in the share under them, so that no line (the budget
// target, a saving at its maximum) runs under the marks.
inline constexpr std::array<double, ChartsPanel::kMarkerKinds> kMarkerHeights = {0.97, 0.91, 0.85};
inline constexpr double kDataShareUnderMarks = 0.72;

// The colours of the run's own lines, shared by the lines, the legend and the overlaid runs' lines.
inline constexpr QRgb kEstimatedColor = 0xFF0072B2u;
inline constexpr QRgb kMeasuredColor = 0xFFD55E00u;
inline constexpr QRgb kTargetColor = 0xFF888888u;  // grey and dashed: a reference, not a measurement
inline constexpr QRgb kTrainLossColor = 0xFF0072B2u;
inline constexpr QRgb kEvalLossColor = 0xFFE69F00u;
// The policy's lines on the sensitivity chart (thresholds() order) and the hold band between them.
inline constexpr std::array<QRgb, 3> kGuideColors = {0xFFCC3311u, 0xFF0077BBu, 0xFF0077BBu};
inline constexpr QRgb kBandColor = 0x40999999u;  // translucent grey: the lines stay readable through it
// One dash per overlaid run (the run's own lines are solid); a fifth run reuses the first dash.
inline constexpr std::array<Qt::PenStyle, 4> kRunStyles = {Qt::DashLine, Qt::DotLine, Qt::DashDotLine,
                                                           Qt::DashDotDotLine};
// The legends' small font (chart_legend.cpp), in points: the charts are small.
inline constexpr double kLegendPointSize = 8.0;

struct ChartsPanel::ChartBox {
    QWidget* frame = nullptr;  // the view with its legend under it: what the grid places
    QChart* chart = nullptr;
    QChartView* view = nullptr;
    QLabel* legend = nullptr;  // wraps instead of cutting names short (objectName "chartLegend")
    QValueAxis* x = nullptr;
    QValueAxis* y = nullptr;
    QLogValueAxis* log_y = nullptr;  // loss and gradient charts only; shown instead of y when on
    bool log = false;
    bool integer_ticks = false;  // counts: no tick between two whole numbers
    bool fitting_ticks = false;  // fitTicks() is running (it moves the plot, which calls it again)
    QString title;
    std::vector<std::unique_ptr<ChartLine>> lines;  // as linesOf() lists them

    // Where the grid puts the chart when none is enlarged: row, column, columns spanned.
    int row = 1;
    int column = 0;
    int columns = 2;
    QAction* enlarge = nullptr;  // checkable: "Enlarge chart" / checked, restores
    QAction* reset_zoom = nullptr;
    QAction* export_csv = nullptr;

    // Sensitivity chart: the hold band (an area) and the threshold lines, in thresholds() order.
    QAreaSeries* band = nullptr;
    std::vector<QLineSeries*> guides;
    // Saving and loss charts: one scatter series per Marker kind.
    std::array<QScatterSeries*, kMarkerKinds> markers{};
    std::array<std::vector<double>, kMarkerKinds> marker_steps;

    // The hover guide: a vertical line and a label over the plot.
    QGraphicsLineItem* hover_line = nullptr;
    QGraphicsRectItem* hover_back = nullptr;
    QGraphicsSimpleTextItem* hover_text = nullptr;

    QAbstractAxis* activeY() const;
};

// A run drawn over the current one (setOverlayRuns): its name and its store, read at every redraw.
struct ChartsPanel::OverlaidRun {
    QString name;
    const TelemetryStore* store = nullptr;
};

}  // namespace sp::ui
