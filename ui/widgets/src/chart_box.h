#pragma once
// One chart of ChartsPanel with everything drawn on it: the run's lines, the overlays' lines, and the
// extras (log axis, threshold guides, markers, hover guide). Private to sp_ui_widgets; shared by the
// panel's source files (charts_panel.cpp, chart_scale.cpp, chart_guides.cpp, chart_readout.cpp,
// chart_theme.cpp).
#include <array>
#include <memory>
#include <vector>

#include <QChart>
#include <QString>
#include <QValueAxis>

#include "chart_line.h"
#include "sp/ui/charts_panel.h"

QT_BEGIN_NAMESPACE
class QAreaSeries;
class QGraphicsLineItem;
class QGraphicsRectItem;
class QGraphicsSimpleTextItem;
class QLineSeries;
class QLogValueAxis;
class QScatterSeries;
QT_END_NAMESPACE

namespace sp::ui {

// The marks' colours (switch, command, rollback): the charts draw them, the controls row's key names them.
inline constexpr std::array<QRgb, ChartsPanel::kMarkerKinds> kMarkerColors = {0xFF8866AAu, 0xFF009E73u,
                                                                              0xFFCC0000u};

struct ChartsPanel::ChartBox {
    QChart* chart = nullptr;
    QChartView* view = nullptr;
    QValueAxis* x = nullptr;
    QValueAxis* y = nullptr;
    QLogValueAxis* log_y = nullptr;  // loss and gradient charts only; shown instead of y when on
    bool log = false;
    QString title;
    std::vector<std::unique_ptr<ChartLine>> lines;
    std::size_t own_lines = 0;  // the run's own; overlay lines follow them

    // Sensitivity chart: the hold band (an area) and the threshold lines, in thresholds() order.
    QAreaSeries* band = nullptr;
    std::vector<QLineSeries*> guides;
    std::vector<QGraphicsSimpleTextItem*> guide_labels;  // the guides' names, at their right end
    QGraphicsSimpleTextItem* band_label = nullptr;       // inside the band, at its left end
    // Saving and loss charts: one scatter series per Marker kind.
    std::array<QScatterSeries*, kMarkerKinds> markers{};
    std::array<std::vector<double>, kMarkerKinds> marker_steps;

    // The hover guide: a vertical line and a label over the plot.
    QGraphicsLineItem* hover_line = nullptr;
    QGraphicsRectItem* hover_back = nullptr;
    QGraphicsSimpleTextItem* hover_text = nullptr;

    ChartLine* addLine(const QString& name, QColor color) {
        lines.push_back(std::make_unique<ChartLine>(chart, x, y, name, color));
        return lines.back().get();
    }
    QAbstractAxis* activeY() const;
};

}  // namespace sp::ui
