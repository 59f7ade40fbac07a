#pragma once
// What a person reading ChartsPanel's charts needs, measured from what Qt Charts draws (test_layout_fits):
// tick labels that neither run together nor go missing, legends shown whole, the budget target line
// clear of the plot's top edge and of the marks, the policy's threshold names legible. Each check
// returns one line per problem ("saving: x labels '3140' and '3160' are 2 px apart").
#include <cmath>

#include <QAbstractSeries>
#include <QChart>
#include <QChartView>
#include <QColor>
#include <QFontMetrics>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QStringList>
#include <QTextDocument>
#include <QValueAxis>

#include "sp/ui/charts_panel.h"

namespace sp::test {

// The values a value axis puts ticks (and labels) at.
inline std::vector<double> tickValues(const QValueAxis& axis) {
    std::vector<double> out;
    const double lo = axis.min(), hi = axis.max(), eps = (hi - lo) * 1e-9;
    if (axis.tickType() == QValueAxis::TicksDynamic && axis.tickInterval() > 0) {
        const double step = axis.tickInterval();
        for (double v = axis.tickAnchor() + std::ceil((lo - axis.tickAnchor()) / step - 1e-9) * step;
             v <= hi + eps; v += step)
            out.push_back(v);
    } else {
        for (int i = 0; i < axis.tickCount(); ++i)
            out.push_back(lo + (hi - lo) * i / std::max(1, axis.tickCount() - 1));
    }
    return out;
}

inline QString tickLabel(const QValueAxis& axis, double v) {
    return QString::asprintf(axis.labelFormat().toLatin1().constData(), v);
}

inline QValueAxis* valueAxis(QChart* chart, Qt::Orientation o) {
    for (QAbstractAxis* a : chart->axes(o))
        if (a->isVisible()) return qobject_cast<QValueAxis*>(a);
    return nullptr;
}

// The tick labels Qt Charts shows for an axis: its visible text items reading as a tick's value,
// by scene rectangle, in tick order; a tick whose label Qt left out (it would have run into its
// neighbour) has an empty rectangle.
inline std::vector<std::pair<QString, QRectF>> shownTickLabels(QChart* chart, const QValueAxis& axis) {
    std::vector<std::pair<QString, QRectF>> out;
    const QRectF plot = chart->mapRectToScene(chart->plotArea());
    for (double v : tickValues(axis)) {
        const QString text = tickLabel(axis, v);
        QRectF found;
        for (QGraphicsItem* item : chart->scene()->items()) {
            auto* label = dynamic_cast<QGraphicsTextItem*>(item);
            if (label == nullptr || !label->isVisible() || label->toPlainText() != text) continue;
            const QRectF r = label->sceneBoundingRect();
            // Beside the plot on the axis' side, level with the tick.
            const bool beside = axis.orientation() == Qt::Horizontal
                                    ? r.top() >= plot.bottom() - 1 && r.top() <= plot.bottom() + 20
                                    : r.right() <= plot.left() + 1 && r.right() >= plot.left() - 80;
            if (beside) found = r;
        }
        out.emplace_back(text, found);
    }
    return out;
}

// Tick labels as Qt Charts draws them: every tick has its value (Qt leaves out a label that would run
// into the one before, and the grid line goes without it), and x labels are at least a digit's width
// apart (closer, "3140" "3160" read as "31403160").
inline QStringList crowdedTickLabels(QChart* chart, const QString& name) {
    QStringList out;
    for (Qt::Orientation o : {Qt::Horizontal, Qt::Vertical}) {
        QValueAxis* axis = valueAxis(chart, o);
        if (axis == nullptr) continue;
        const double gap = QFontMetricsF(axis->labelsFont()).horizontalAdvance(QLatin1Char('0'));
        QRectF previous;
        QString previous_text;
        for (const auto& [text, r] : shownTickLabels(chart, *axis)) {
            if (r.isEmpty()) {
                out << QStringLiteral("%1: the %2 tick %3 has no label")
                           .arg(name, o == Qt::Horizontal ? "x" : "y", text);
                continue;
            }
            // A label's box has margins around the text: the text's own extent is what touches.
            const double text_width = QFontMetricsF(axis->labelsFont()).horizontalAdvance(text);
            const double left = r.center().x() - text_width / 2;
            if (o == Qt::Horizontal && !previous.isEmpty() &&
                left - (previous.center().x() +
                        QFontMetricsF(axis->labelsFont()).horizontalAdvance(previous_text) / 2) <
                    gap)
                out << QStringLiteral("%1: x labels '%2' and '%3' run together")
                           .arg(name, previous_text, text);
            previous = r;
            previous_text = text;
        }
    }
    return out;
}

// A legend label's text as it reads (rich text; non-breaking spaces and hyphens as plain ones).
inline QString legendText(const QLabel& legend) {
    QTextDocument doc;
    doc.setHtml(legend.text());
    return doc.toPlainText().replace(QChar::Nbsp, QLatin1Char(' ')).replace(QChar(0x2011), QLatin1Char('-'));
}

// Qt's own legend cuts every entry to "estim..." when the entries are wider than the legend.
inline QStringList elidedLegend(QChart* chart, const QString& name) {
    QStringList out;
    if (!chart->legend()->isVisible()) return out;
    const QFontMetricsF fm(chart->legend()->font());
    double needs = 0.0;
    QStringList entries;
    for (QLegendMarker* m : chart->legend()->markers()) {
        if (!m->isVisible()) continue;
        needs += fm.horizontalAdvance(m->label()) + fm.height() + 10;  // the marker's box and spacing
        entries << m->label();
    }
    const double has = chart->legend()->geometry().width();
    if (!entries.isEmpty() && needs > has)
        out << QStringLiteral("%1: legend '%2' needs %3 px, has %4")
                   .arg(name, entries.join(QStringLiteral(", ")))
                   .arg(needs, 0, 'f', 0)
                   .arg(has, 0, 'f', 0);
    return out;
}

// The panel's legend labels (objectName "chartLegend", "overlayRunsKey"): as tall and wide as their
// wrapped text, and under their chart, not over its x labels.
inline QStringList clippedLegendLabels(QWidget* panel) {
    QStringList out;
    QList<QLabel*> labels = panel->findChildren<QLabel*>(QStringLiteral("chartLegend"));
    labels += panel->findChildren<QLabel*>(QStringLiteral("overlayRunsKey"));
    for (const QLabel* legend : labels) {
        if (!legend->isVisible()) continue;
        if (qEnvironmentVariableIsSet("SP_DEBUG_CHARTS"))
            for (const QChartView* view : legend->parentWidget()->findChildren<QChartView*>())
                qInfo() << panel->geometry() << legend->parentWidget()->geometry() << view->geometry()
                        << view->minimumSizeHint() << legend->geometry()
                        << legend->heightForWidth(legend->width()) << legend->minimumSizeHint();
        for (const QChartView* view : legend->parentWidget()->findChildren<QChartView*>())
            if (view->isVisible() && view->geometry().intersects(legend->geometry()))
                out << QStringLiteral("legend '%1' lies over its chart (%2 px)")
                           .arg(legendText(*legend))
                           .arg(view->geometry().intersected(legend->geometry()).height());
        const int needs =
            legend->wordWrap() ? legend->heightForWidth(legend->width()) : legend->sizeHint().height();
        if (needs > legend->height() || legend->minimumSizeHint().width() > legend->width())
            out << QStringLiteral("legend '%1' needs %2 px, has %3x%4")
                       .arg(legendText(*legend))
                       .arg(needs)
                       .arg(legend->width())
                       .arg(legend->height());
    }
    return out;
}

// CIE76 colour difference in L*a*b* (sRGB, D65): about 2 is just noticeable, 40 is another colour.
inline double colorDistance(QColor a, QColor b) {
    const auto lab = [](QColor c) {
        const auto linear = [](double v) {
            return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
        };
        const double r = linear(c.redF()), g = linear(c.greenF()), bl = linear(c.blueF());
        const double x = (0.4124 * r + 0.3576 * g + 0.1805 * bl) / 0.95047;
        const double y = 0.2126 * r + 0.7152 * g + 0.0722 * bl;
        const double z = (0.0193 * r + 0.1192 * g + 0.9505 * bl) / 1.08883;
        const auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116.0; };
        return std::array<double, 3>{116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))};
    };
    const auto p = lab(a), q = lab(b);
    return std::sqrt((p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]) +
                     (p[2] - q[2]) * (p[2] - q[2]));
}

inline QLineSeries* lineNamed(QChart* chart, const QString& name) {
    for (QAbstractSeries* s : chart->series())
        if (s->name() == name && s->isVisible()) return qobject_cast<QLineSeries*>(s);
    return nullptr;
}

// The saving chart's budget target: a tenth of the plot below its top, the marks' strip above it by
// a mark's size, and a colour of its own (not the command marks').
inline QStringList targetProblems(QChart* chart) {
    QStringList out;
    QLineSeries* target = lineNamed(chart, QStringLiteral("budget target"));
    if (target == nullptr || target->count() == 0) return {QStringLiteral("saving: no budget target line")};
    const QRectF plot = chart->plotArea();
    const double y = chart->mapToPosition(target->at(0), target).y();
    if (y - plot.top() < 0.1 * plot.height())
        out << QStringLiteral("saving: the target is %1 px under the plot's top (plot %2 px tall)")
                   .arg(y - plot.top(), 0, 'f', 1)
                   .arg(plot.height(), 0, 'f', 0);
    for (QAbstractSeries* s : chart->series()) {
        auto* marks = qobject_cast<QScatterSeries*>(s);
        if (marks == nullptr || !marks->isVisible() || marks->count() == 0) continue;
        const double mark_y = chart->mapToPosition(marks->at(0), marks).y();
        if (y - mark_y < marks->markerSize())
            out << QStringLiteral("saving: '%1' marks %2 px above the target line")
                       .arg(marks->name())
                       .arg(y - mark_y);
        const double distance = colorDistance(marks->color(), target->pen().color());
        if (distance < 40)
            out << QStringLiteral("saving: '%1' marks' colour is %2 from the target's (want 40)")
                       .arg(marks->name())
                       .arg(distance, 0, 'f', 1);
    }
    return out;
}

// Each threshold's name is legible: in a legend label of the panel, or on the plot with no
// horizontal line (grid, guide, band edge) through it.
inline QStringList illegibleThresholds(sp::ui::ChartsPanel& panel) {
    QStringList out;
    QChart* chart = panel.chartView(sp::ui::ChartsPanel::Chart::sensitivity)->chart();
    std::vector<double> lines_at;  // y in px of every horizontal line on the plot
    if (QValueAxis* y = valueAxis(chart, Qt::Vertical))
        for (double v : tickValues(*y))
            lines_at.push_back(chart->plotArea().bottom() -
                               (v - y->min()) / (y->max() - y->min()) * chart->plotArea().height());
    for (const auto& t : panel.thresholds()) {
        QLineSeries* guide = lineNamed(chart, t.name);
        if (guide != nullptr && guide->count() > 0)
            lines_at.push_back(chart->mapToPosition(guide->at(0), guide).y());
    }
    for (const auto& t : panel.thresholds()) {
        bool legible = false;
        for (const QLabel* legend : panel.findChildren<QLabel*>(QStringLiteral("chartLegend")))
            legible = legible || (legend->isVisible() && legendText(*legend).contains(t.name));
        for (QGraphicsItem* item : chart->childItems()) {
            auto* label = dynamic_cast<QGraphicsSimpleTextItem*>(item);
            if (label == nullptr || !label->isVisible() || label->text() != t.name) continue;
            const QRectF r = label->mapRectToParent(label->boundingRect());
            bool crossed = false;
            for (double y : lines_at) crossed = crossed || (y > r.top() + 1 && y < r.bottom() - 1);
            if (crossed)
                out << QStringLiteral("sensitivity: a line runs through the label '%1'").arg(t.name);
            else
                legible = true;
        }
        if (!legible) out << QStringLiteral("sensitivity: '%1' is nowhere legible").arg(t.name);
    }
    return out;
}

}  // namespace sp::test
