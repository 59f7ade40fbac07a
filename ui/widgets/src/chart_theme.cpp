// ChartsPanel's theme (light or dark, following the palette until set) and what it hands out for
// export and tests: the views, an image of the panel, the points drawn.
#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QLineSeries>

#include "chart_box.h"
#include "sp/ui/colormap.h"

namespace sp::ui {

void ChartsPanel::setDarkTheme(bool dark) {
    theme_explicit_ = true;
    if (dark == dark_) return;
    dark_ = dark;
    applyTheme();
    refresh();
}

void ChartsPanel::applyTheme() {
    for (auto& box : charts_) {
        box->chart->setTheme(dark_ ? QChart::ChartThemeDark : QChart::ChartThemeLight);
        box->chart->setBackgroundRoundness(0);
        // setTheme() recolours every series: give the lines their own colours back.
        for (auto& line : box->lines) line->setColor(line->color());
        styleExtras(*box);
    }
    hideRawLossLegend();
    // BF16's light grey is for the dark heatmap strip; on a light chart it needs more contrast.
    auto& precision = *charts_[std::size_t(Chart::precision)];
    precision.lines[0]->setColor(dark_ ? QColor::fromRgb(precisionColor(Precision::bf16))
                                       : QColor(0x70, 0x70, 0x70));
}

void ChartsPanel::changeEvent(QEvent* event) {
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange && !theme_explicit_) {
        const bool dark = palette().color(QPalette::Window).lightness() < 128;
        if (dark != dark_) {
            dark_ = dark;
            applyTheme();
            refresh();
        }
    }
}

void ChartsPanel::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    refresh();  // a new width decimates differently
}

QChartView* ChartsPanel::chartView(Chart chart) const {
    return charts_[std::size_t(chart)]->view;
}

std::vector<QChartView*> ChartsPanel::chartViews() const {
    std::vector<QChartView*> views;
    for (const auto& box : charts_) {
        if (!box->view->isHidden()) views.push_back(box->view);
    }
    return views;
}

QImage ChartsPanel::renderToImage() {
    return grab().toImage();
}

std::optional<QList<QPointF>> ChartsPanel::linePoints(Chart chart, const QString& name) const {
    for (const auto& l : charts_[std::size_t(chart)]->lines) {
        if (l->name() == name && l->visible()) return l->points();
    }
    return std::nullopt;
}

qsizetype ChartsPanel::drawnPointCount() const {
    qsizetype total = 0;
    for (const auto& box : charts_) {
        for (const auto& l : box->lines) {
            for (const QLineSeries* s : l->segments()) total += s->count();
        }
    }
    return total;
}

}  // namespace sp::ui
