// ChartsPanel's theme (light or dark, following the palette until set) and what it hands out for
// export and tests: the views, an image of the panel, the points drawn.
#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QLabel>
#include <QLineSeries>

#include "chart_box.h"

namespace sp::ui {

namespace {

// One flat background for the chart and its legend under it, so that the two read as one.
QColor chartBackground(bool dark) {
    return dark ? QColor(0x2e, 0x30, 0x3a) : QColor(Qt::white);
}

}  // namespace

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
        box->chart->setBackgroundBrush(chartBackground(dark_));
        // setTheme() recolours every series: give the lines their own colours back (the redraw that
        // follows gives the BF16 line its theme's grey).
        for (auto& line : box->lines) line->setColor(line->color());
        styleExtras(*box);
        QPalette palette = box->frame->palette();
        palette.setColor(QPalette::Window, chartBackground(dark_));
        palette.setColor(QPalette::WindowText, dark_ ? QColor(0xd8, 0xd8, 0xd8) : QColor(0x30, 0x30, 0x30));
        box->frame->setPalette(palette);
        box->frame->setAutoFillBackground(true);
        box->legend->setPalette(palette);
    }
    updateRunsKey();
    drawn_valid_ = false;  // the legend's samples and BF16's grey follow the theme
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

QSize ChartsPanel::sizeHint() const {
    constexpr int kPreferredRowHeight = 180;
    return {QWidget::sizeHint().width(), 24 + 2 * kPreferredRowHeight};
}

QChartView* ChartsPanel::chartView(Chart chart) const {
    return charts_[std::size_t(chart)]->view;
}

std::vector<QChartView*> ChartsPanel::chartViews() const {
    std::vector<QChartView*> views;
    for (const auto& box : charts_) {
        if (!box->view->isHidden() && !box->frame->isHidden()) views.push_back(box->view);
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
