// The mouse on ChartsPanel's plots: the hover readout follows it, the wheel zooms the steps around
// it, a drag pans them, and a double-click resets the zoom (on a plot) or enlarges the chart (on its
// title). Every chart shows the same step range, so all of them zoom and pan together.
#include <cmath>

#include <QChart>
#include <QChartView>
#include <QMouseEvent>
#include <QValueAxis>
#include <QWheelEvent>

#include "chart_box.h"
#include "chart_math.h"

namespace sp::ui {

namespace {

// One notch of a usual wheel (120 units) shows 80 % of the steps: five notches about a third.
constexpr double kZoomPerNotch = 0.8;
constexpr double kWheelNotch = 120.0;
// Zoomed in no further than this many steps across the plot.
constexpr double kMinStepsShown = 4.0;

}  // namespace

bool ChartsPanel::eventFilter(QObject* watched, QEvent* event) {
    for (int c = 0; c < kChartCount; ++c) {
        if (charts_[std::size_t(c)]->view->viewport() != watched) continue;
        switch (event->type()) {
            case QEvent::Wheel:
                if (onWheel(Chart(c), static_cast<QWheelEvent*>(event))) return true;
                break;
            case QEvent::MouseButtonPress:
            case QEvent::MouseMove:
            case QEvent::MouseButtonRelease:
            case QEvent::MouseButtonDblClick:
                if (onMouse(Chart(c), static_cast<QMouseEvent*>(event))) return true;
                break;
            case QEvent::Leave:
                hideHover();
                break;
            case QEvent::Resize:
                fitAxisTitles(*charts_[std::size_t(c)]);
                break;
            default:
                break;
        }
        break;
    }
    return QWidget::eventFilter(watched, event);
}

// The step under a point of the chart's viewport; nullopt outside the plot.
std::optional<double> ChartsPanel::stepAt(Chart chart, QPointF view_pos) const {
    const ChartBox& box = *charts_[std::size_t(chart)];
    const QPointF at = box.chart->mapFromScene(box.view->mapToScene(view_pos.toPoint()));
    const QRectF plot = box.chart->plotArea();
    if (!plot.contains(at) || plot.width() <= 0) return std::nullopt;
    return box.x->min() + (at.x() - plot.left()) / plot.width() * (box.x->max() - box.x->min());
}

bool ChartsPanel::onWheel(Chart chart, QWheelEvent* event) {
    const std::optional<double> anchor = stepAt(chart, event->position());
    const int delta = event->angleDelta().y();
    if (!anchor || delta == 0) return false;
    const StepRange full{full_x_.first, full_x_.second};
    const double min_span = std::min(full.span(), kMinStepsShown);
    const StepRange view = zoomedRange({shown_x_.first, shown_x_.second}, *anchor,
                                       std::pow(kZoomPerNotch, delta / kWheelNotch), full, min_span);
    setXViewRange(view.lo, view.hi);
    event->accept();
    return true;
}

bool ChartsPanel::onMouse(Chart chart, QMouseEvent* event) {
    ChartBox& box = *charts_[std::size_t(chart)];
    const std::optional<double> step = stepAt(chart, event->position());
    switch (event->type()) {
        case QEvent::MouseButtonPress:
            if (event->button() != Qt::LeftButton || !step) return false;
            drag_chart_ = chart;
            drag_from_x_ = event->position().x();
            drag_from_range_ = shown_x_;
            return true;
        case QEvent::MouseMove: {
            showHover(chart, event->position());
            if (drag_chart_ != chart || !(event->buttons() & Qt::LeftButton)) return false;
            const double width = box.chart->plotArea().width();
            if (width <= 0) return false;
            // Dragging right brings earlier steps in: the range moves against the mouse.
            const StepRange from{drag_from_range_.first, drag_from_range_.second};
            const StepRange view =
                pannedRange(from, -(event->position().x() - drag_from_x_) / width * from.span(),
                            {full_x_.first, full_x_.second});
            if (view.lo != shown_x_.first || view.hi != shown_x_.second) setXViewRange(view.lo, view.hi);
            return true;
        }
        case QEvent::MouseButtonRelease:
            drag_chart_.reset();
            return false;
        case QEvent::MouseButtonDblClick: {
            if (event->button() != Qt::LeftButton) return false;
            const QPointF at = box.chart->mapFromScene(box.view->mapToScene(event->position().toPoint()));
            if (step) {
                resetXView();
            } else if (at.y() < box.chart->plotArea().top()) {  // the title: enlarge, or restore
                setEnlarged(enlarged_ == chart ? std::nullopt : std::optional<Chart>(chart));
            }
            return true;
        }
        default:
            return false;
    }
}

void ChartsPanel::setXView(double lo, double hi) {
    lo = std::max(lo, full_x_.first);
    hi = std::min(hi, full_x_.second);
    if (!(lo < hi)) return;
    setXViewRange(lo, hi);
}

// A range as wide as everything (or wider) is no zoom: the charts follow all the steps again.
void ChartsPanel::setXViewRange(double lo, double hi) {
    if (lo <= full_x_.first && hi >= full_x_.second) {
        resetXView();
        return;
    }
    x_view_ = std::pair{lo, hi};
    x_view_follows_edge_ = hi >= full_x_.second;
    ++x_view_revision_;
    refresh();
}

void ChartsPanel::resetXView() {
    if (!x_view_) return;
    x_view_.reset();
    x_view_follows_edge_ = false;
    ++x_view_revision_;
    refresh();
}

bool ChartsPanel::xZoomed() const {
    return x_view_.has_value();
}

std::pair<double, double> ChartsPanel::xRange() const {
    return shown_x_;
}

}  // namespace sp::ui
