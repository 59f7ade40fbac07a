// ChartsPanel's hover readout: over a plot, a vertical guide at the nearest recorded step and a label
// with every line's value there. readoutAt() builds the text, so tests read what the label shows.
#include <algorithm>
#include <cmath>

#include <QBrush>
#include <QChart>
#include <QChartView>
#include <QGraphicsLineItem>
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QPen>
#include <QValueAxis>

#include "chart_box.h"
#include "chart_math.h"
#include "chart_series.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

namespace {

QString number(float v) {
    return QString::number(double(v), 'g', 4);
}

}  // namespace

std::size_t ChartsPanel::nearestUpdate(double step) const {
    const std::size_t n = shownCount();
    if (n == 0 || !std::isfinite(step)) return kNoCursor;
    const StoreSeries steps = StoreSeries::run(*store_, RunField::train_loss, n);  // x: the steps
    const std::size_t at = steps.lowerBound(step);
    if (at == n) return n - 1;
    if (at > 0 && step - steps.x(at - 1) <= steps.x(at) - step) return at - 1;  // ties go to the earlier step
    return at;
}

QString ChartsPanel::readoutAt(Chart chart, double step) const {
    const std::size_t u = nearestUpdate(step);
    if (u == kNoCursor) return {};
    const UpdateRow& row = store_->row(u);
    QStringList parts{tr("step %1").arg(row.step)};
    const auto add = [&](const QString& name, float v, bool percent = false) {
        if (!std::isfinite(v)) return;
        parts << (percent ? QStringLiteral("%1 %2%").arg(name).arg(double(v), 0, 'f', 1)
                          : QStringLiteral("%1 %2").arg(name, number(v)));
    };
    switch (chart) {
        case Chart::saving:
            add(tr("estimated"), row.estimated_saving_pct, true);
            add(tr("measured"), row.measured_saving_pct, true);
            add(tr("budget target"), row.budget_target_pct, true);
            break;
        case Chart::precision: {
            const std::array<std::pair<const char*, int>, 4> counts = {{{"BF16", row.blocks_bf16},
                                                                        {"INT8", row.blocks_int8},
                                                                        {"FP8", row.blocks_fp8},
                                                                        {"INT4", row.blocks_int4}}};
            for (const auto& [name, count] : counts) add(QLatin1String(name), float(count));
            break;
        }
        case Chart::sensitivity:
        case Chart::gradient: {
            const std::size_t shown = std::min<std::size_t>(selected_.size(), kMaxSelectedLines);
            for (std::size_t i = 0; i < shown; ++i) {
                const int b = selected_[i];
                if (!store_ || b < 0 || b >= store_->blockCount()) continue;
                add(QString::fromStdString(store_->layout()[std::size_t(b)].name),
                    store_->value(
                        b, u, chart == Chart::sensitivity ? BlockField::sensitivity : BlockField::l2_norm));
            }
            break;
        }
        case Chart::loss: {
            add(tr("train loss"), row.train_loss);
            if (smoothing_ > 0.0) {
                const StoreSeries train = StoreSeries::run(*store_, RunField::train_loss, u + 1);
                add(tr("smoothed"), emaSmooth(valuesOf(train), u + 1, smoothing_)[u]);
            }
            // The latest eval loss measured up to this update, with its step when that is another.
            for (std::size_t k = u + 1; k-- > 0;) {
                const UpdateRow& at = store_->row(k);
                if (!std::isfinite(at.eval_loss)) continue;
                add(tr("eval loss"), at.eval_loss);
                if (at.eval_step != row.step) parts.back() += tr(" (step %1)").arg(at.eval_step);
                break;
            }
            break;
        }
    }
    return parts.join(QStringLiteral(" · "));
}

QString ChartsPanel::hoverText(Chart chart) const {
    const ChartBox& box = *charts_[std::size_t(chart)];
    if (!box.hover_text || !box.hover_text->isVisible()) return {};
    return box.hover_text->text();
}

void ChartsPanel::showHover(Chart chart, QPointF view_pos) {
    hideHover();
    ChartBox& box = *charts_[std::size_t(chart)];
    const QPointF at = box.chart->mapFromScene(box.view->mapToScene(view_pos.toPoint()));
    const QRectF plot = box.chart->plotArea();
    const double span = box.x->max() - box.x->min();
    if (!plot.contains(at) || plot.width() <= 0 || span <= 0) return;
    const double step = box.x->min() + (at.x() - plot.left()) / plot.width() * span;
    const QString text = readoutAt(chart, step);
    if (text.isEmpty()) return;
    if (!box.hover_line) {  // children of the chart: they move and go with it
        box.hover_line = new QGraphicsLineItem(box.chart);
        box.hover_back = new QGraphicsRectItem(box.chart);
        box.hover_text = new QGraphicsSimpleTextItem(box.hover_back);
        box.hover_line->setZValue(100);
        box.hover_back->setZValue(101);
    }
    const QColor ink = dark_ ? QColor(230, 230, 230) : QColor(40, 40, 40);
    box.hover_line->setPen(QPen(ink, 1.0, Qt::DashLine));
    box.hover_back->setBrush(dark_ ? QColor(30, 30, 30, 220) : QColor(255, 255, 255, 220));
    box.hover_back->setPen(QPen(ink, 0.5));
    box.hover_text->setBrush(ink);
    const double x =
        plot.left() + (double(store_->row(nearestUpdate(step)).step) - box.x->min()) / span * plot.width();
    box.hover_line->setLine(x, plot.top(), x, plot.bottom());
    box.hover_text->setText(text);
    if (box.hover_text->boundingRect().width() + 12 > plot.width())  // one value a line
        box.hover_text->setText(QString(text).replace(QStringLiteral(" · "), QStringLiteral("\n")));
    const QRectF size = box.hover_text->boundingRect().adjusted(-3, -1, 3, 1);
    // Beside the guide, on the side with room, at the top of the plot.
    double left = x + 6 + size.width() <= plot.right() ? x + 6 : std::max(plot.left(), x - 6 - size.width());
    box.hover_back->setRect(QRectF(0, 0, size.width(), size.height()));
    box.hover_back->setPos(left, plot.top() + 2);
    box.hover_text->setPos(3, 1);
    for (QGraphicsItem* item :
         {static_cast<QGraphicsItem*>(box.hover_line), static_cast<QGraphicsItem*>(box.hover_back)})
        item->show();
}

void ChartsPanel::hideHover() {
    for (auto& box : charts_) {
        if (!box->hover_line) continue;
        box->hover_line->hide();
        box->hover_back->hide();
    }
}

}  // namespace sp::ui
