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
    const auto end = run_->steps.begin() + std::ptrdiff_t(n);
    const auto it = std::lower_bound(run_->steps.begin(), end, step);
    if (it == end) return n - 1;
    const auto at = std::size_t(it - run_->steps.begin());
    if (at > 0 && step - run_->steps[at - 1] <= *it - step) return at - 1;  // ties go to the earlier step
    return at;
}

QString ChartsPanel::readoutAt(Chart chart, double step) const {
    const std::size_t u = nearestUpdate(step);
    if (u == kNoCursor) return {};
    QStringList parts{tr("step %1").arg(std::int64_t(run_->steps[u]))};
    const auto add = [&](const QString& name, float v, bool percent = false) {
        if (!std::isfinite(v)) return;
        parts << (percent ? QStringLiteral("%1 %2%").arg(name).arg(double(v), 0, 'f', 1)
                          : QStringLiteral("%1 %2").arg(name, number(v)));
    };
    switch (chart) {
        case Chart::saving:
            add(tr("estimated"), run_->estimated[u], true);
            add(tr("measured"), run_->measured[u], true);
            add(tr("budget target"), run_->target[u], true);
            break;
        case Chart::precision: {
            const std::array<std::pair<const char*, const std::vector<float>*>, 4> counts = {
                {{"BF16", &run_->bf16}, {"INT8", &run_->int8}, {"FP8", &run_->fp8}, {"INT4", &run_->int4}}};
            for (const auto& [name, column] : counts) add(QLatin1String(name), (*column)[u]);
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
            add(tr("train loss"), run_->train_loss[u]);
            if (smoothing_ > 0.0) add(tr("smoothed"), emaSmooth(run_->train_loss, u + 1, smoothing_)[u]);
            // The latest eval loss measured up to this update, with its step when that is another.
            for (std::size_t k = u + 1; k-- > 0;) {
                if (!std::isfinite(run_->eval_loss[k])) continue;
                add(tr("eval loss"), run_->eval_loss[k]);
                if (run_->eval_steps[k] != run_->steps[u])
                    parts.back() += tr(" (step %1)").arg(std::int64_t(run_->eval_steps[k]));
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
    const double x = plot.left() + (run_->steps[nearestUpdate(step)] - box.x->min()) / span * plot.width();
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
