// ChartsPanel's controls row (loss smoothing, log scales) and what they change on the charts: the
// log y axis of the loss and gradient charts, and the axes: ranges with ticks as dense as their
// labels allow (never so dense that labels run together or Qt Charts leaves some out), and titles
// where they fit.
#include <algorithm>
#include <cmath>

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QFontMetrics>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QSlider>
#include <QTextDocument>
#include <QVBoxLayout>
#include <QValueAxis>

#include "chart_box.h"
#include "chart_math.h"

namespace sp::ui {

namespace {

// Ticks at most this many intervals apart: more would be noise even where labels fit.
constexpr int kMaxXIntervals = 8;
constexpr int kMaxYIntervals = 6;

QString tickText(double v, int decimals) {
    return QString::number(v, 'f', decimals);  // what the axis' "%.Nf" label format writes
}

// Sets the axis to [lo, hi] with ticks every `interval` from 0. Order matters: the axis lays its
// ticks out after each call, and the old interval over a much wider new range would create millions
// of tick items. A growing interval goes first, a shrinking one last, so every intermediate state has
// about as few ticks as the final one.
void applyTicks(QValueAxis* axis, double lo, double hi, double interval) {
    axis->setTickAnchor(0.0);
    if (interval >= axis->tickInterval()) {
        axis->setTickInterval(interval);
        axis->setRange(lo, hi);
    } else {
        axis->setRange(lo, hi);
        axis->setTickInterval(interval);
    }
    axis->setTickType(QValueAxis::TicksDynamic);
    axis->setLabelFormat(QStringLiteral("%.%1f").arg(tickDecimals(interval)));
}

// The interval for one of the box's axes over [lo, hi]: x labels side by side need their width and
// a gap of two digits; y labels above each other need the height of the box Qt Charts lays each out
// in (the text and a text document's margin above and below) and a pixel: closer, Qt leaves labels
// out and a grid line goes without its value. Before the chart is laid out the plot's size is
// estimated from the view's.
double tickInterval(const QChartView& view, const QChart& chart, const QValueAxis& axis, bool integer,
                    double lo, double hi) {
    const QRectF plot = chart.plotArea();
    const QFontMetricsF fm(axis.labelsFont());
    const bool horizontal = axis.orientation() == Qt::Horizontal;
    const double length = horizontal ? (plot.width() > 16 ? plot.width() : view.width() - 60.0)
                                     : (plot.height() > 16 ? plot.height() : view.height() - 70.0);
    const auto room = [&](double interval) {
        if (!horizontal) return fm.height() + 2.0 * QTextDocument().documentMargin() + 1.0;
        const int decimals = tickDecimals(interval);
        const double first = std::ceil(lo / interval) * interval;
        const double last = std::floor(hi / interval) * interval;
        return std::max(fm.horizontalAdvance(tickText(first, decimals)),
                        fm.horizontalAdvance(tickText(last, decimals))) +
               2.0 * fm.horizontalAdvance(QLatin1Char('0'));
    };
    const double interval =
        fittedTickInterval(hi - lo, length, horizontal ? kMaxXIntervals : kMaxYIntervals, room);
    return integer ? std::max(1.0, interval) : interval;
}

}  // namespace

QAbstractAxis* ChartsPanel::ChartBox::activeY() const {
    if (log && log_y) return log_y;
    return y;
}

void ChartsPanel::buildControls(QGridLayout* layout) {
    auto* row = new QWidget(this);
    auto* column = new QVBoxLayout(row);
    column->setContentsMargins(0, 0, 0, 0);
    column->setSpacing(0);
    auto* h = new QHBoxLayout;
    column->addLayout(h);
    h->setContentsMargins(4, 0, 4, 0);
    auto* label = new QLabel(tr("Loss smoothing"), row);
    smoothing_slider_ = new QSlider(Qt::Horizontal, row);
    smoothing_slider_->setRange(0, int(std::lround(kMaxSmoothing * 100)));
    smoothing_slider_->setValue(int(std::lround(smoothing_ * 100)));
    smoothing_slider_->setMaximumWidth(160);
    smoothing_label_ = new QLabel(QString::number(smoothing_, 'f', 2), row);
    const QString smoothing_tip =
        tr("Exponential moving average of the losses (as TensorBoard smooths): 0 draws the raw losses, "
           "0.99 smooths the most. The raw losses stay drawn faint behind.");
    for (QWidget* w : {static_cast<QWidget*>(label), static_cast<QWidget*>(smoothing_slider_)})
        w->setToolTip(smoothing_tip);
    log_loss_ = new QCheckBox(tr("Log loss"), row);
    log_loss_->setToolTip(tr("Loss chart on a logarithmic y axis (values <= 0 are left out)."));
    log_gradient_ = new QCheckBox(tr("Log gradient L2"), row);
    log_gradient_->setToolTip(tr("Gradient L2 chart on a logarithmic y axis (values <= 0 are left out)."));
    h->addWidget(label);
    h->addWidget(smoothing_slider_);
    h->addWidget(smoothing_label_);
    h->addSpacing(12);
    h->addWidget(log_loss_);
    h->addWidget(log_gradient_);
    h->addSpacing(12);
    h->addWidget(buildMarkerKey(row));
    h->addStretch(1);
    // The overlaid runs' key, under the controls while runs are overlaid: every chart draws a run in
    // the same dash, so it is named once here rather than in each small chart's legend.
    runs_key_ = new QLabel(row);
    runs_key_->setObjectName(QStringLiteral("overlayRunsKey"));
    runs_key_->setTextFormat(Qt::RichText);
    runs_key_->setWordWrap(true);
    runs_key_->setContentsMargins(4, 0, 4, 0);
    runs_key_->setToolTip(
        tr("Other runs drawn over this one (View > Overlay other runs): each chart draws a "
           "run's lines in the same colours as this run's, in the run's dash."));
    runs_key_->hide();
    column->addWidget(runs_key_);
    layout->addWidget(row, 0, 0, 1, 6);
    connect(smoothing_slider_, &QSlider::valueChanged, this,
            [this](int value) { setLossSmoothing(value / 100.0); });
    connect(log_loss_, &QCheckBox::toggled, this, [this](bool on) { setLogScale(Chart::loss, on); });
    connect(log_gradient_, &QCheckBox::toggled, this, [this](bool on) { setLogScale(Chart::gradient, on); });
    buildLogAxes();
}

// The key of the marks on the saving and loss charts (their legends have no room for it).
QWidget* ChartsPanel::buildMarkerKey(QWidget* parent) const {
    const auto mark = [](int kind, const char* glyph) {
        return QStringLiteral("<span style='color:%1'>%2</span>")
            .arg(QColor::fromRgb(kMarkerColors[std::size_t(kind)]).name(), QString::fromUtf8(glyph));
    };
    auto* key = new QLabel(tr("Marks: %1 precision switch %2 command applied %3 rollback")
                               .arg(mark(0, "●"), mark(1, "■"), mark(2, "▲")),
                           parent);
    key->setTextFormat(Qt::RichText);
    key->setToolTip(tr("On the saving and loss charts, at the steps where blocks changed precision, an "
                       "operator command (pin, release, ...) applied, or loss feedback rolled blocks back "
                       "to BF16. Marks closer than about 1/%1 of the x range merge into one.")
                        .arg(kMaxMarkers));
    return key;
}

// Both y axes stay in the chart; the one not in use is hidden (syncYAxes).
void ChartsPanel::buildLogAxes() {
    for (Chart which : {Chart::gradient, Chart::loss}) {
        ChartBox& box = *charts_[std::size_t(which)];
        box.log_y = new QLogValueAxis();
        box.log_y->setLabelFormat(QStringLiteral("%.3g"));
        box.log_y->setTitleText(box.y->titleText() + tr(", log"));
        box.log_y->setVisible(false);
        box.chart->addAxis(box.log_y, Qt::AlignLeft);
    }
}

void ChartsPanel::setLossSmoothing(double weight) {
    weight = std::isfinite(weight) ? std::clamp(weight, 0.0, kMaxSmoothing) : 0.0;
    smoothing_ = weight;
    const int position = int(std::lround(weight * 100));
    if (smoothing_slider_->value() != position) {
        const QSignalBlocker block(smoothing_slider_);
        smoothing_slider_->setValue(position);
    }
    smoothing_label_->setText(QString::number(weight, 'f', 2));
    refresh();
}

void ChartsPanel::setLogScale(Chart chart, bool on) {
    QCheckBox* box = logScaleBox(chart);
    if (!box) return;  // only the loss and gradient charts have one
    charts_[std::size_t(chart)]->log = on;
    if (box->isChecked() != on) {
        const QSignalBlocker block(box);
        box->setChecked(on);
    }
    refresh();
}

bool ChartsPanel::logScale(Chart chart) const {
    return charts_[std::size_t(chart)]->log;
}

QCheckBox* ChartsPanel::logScaleBox(Chart chart) const {
    if (chart == Chart::loss) return log_loss_;
    if (chart == Chart::gradient) return log_gradient_;
    return nullptr;
}

// Every series of the chart hangs on the y axis in use: lines grow segments (attached to the linear
// axis) as their data breaks, so this runs after every redraw.
void ChartsPanel::syncYAxes(ChartBox& box) {
    if (!box.log_y) return;
    QAbstractAxis* want = box.activeY();
    QAbstractAxis* other = box.log ? static_cast<QAbstractAxis*>(box.y) : box.log_y;
    const auto sync = [&](QAbstractSeries* s) {
        const QList<QAbstractAxis*> axes = s->attachedAxes();
        if (axes.contains(other)) s->detachAxis(other);
        if (!axes.contains(want)) s->attachAxis(want);
    };
    for (auto& line : box.lines)
        for (QLineSeries* s : line->segments()) sync(s);
    for (QScatterSeries* s : box.markers) {
        if (!s) continue;
        if (!s->attachedAxes().contains(want)) s->clear();  // placed for the other axis; redrawn next
        sync(s);
    }
    box.y->setVisible(!box.log);
    box.log_y->setVisible(box.log);
}

// A loss spans a fraction of a decade, where powers of 10 would leave the axis without a label: the
// base is chosen so that about four ticks fall in the range (a wide range keeps base 10).
void ChartsPanel::setLogRange(ChartBox& box, double lo, double hi) {
    if (!(lo > 0.0 && lo <= hi)) {
        lo = 0.1;
        hi = 10.0;
    }
    lo /= 1.05;
    hi *= 1.05;
    const double ratio = hi / lo;
    const double base = ratio >= 1e4 ? 10.0 : std::max(1.001, std::pow(ratio, 0.25));
    box.log_y->setBase(base);
    box.log_y->setRange(lo, hi);
}

// Axis titles where they fit: the x title only on a chart tall enough to spare its line, a y title
// only when the plot is taller than the text (shorter, Qt cuts it to "..."). Judged from the view's
// height, which the widget layout sets synchronously, not from the chart's plot area, which Qt Charts
// lays out later: a screenshot then never depends on how far that layout got.
void ChartsPanel::fitAxisTitles(ChartBox& box) {
    constexpr int kMinHeightForXTitle = 220;
    constexpr int kOverhead = 60;  // chart title, x labels and margins, measured at 1x
    constexpr int kXTitleHeight = 16;
    const int height = box.view->height();
    const bool x_title = height >= kMinHeightForXTitle;
    box.x->setTitleVisible(x_title);
    const int plot_height = height - kOverhead - (x_title ? kXTitleHeight : 0);
    for (QAbstractAxis* axis : {static_cast<QAbstractAxis*>(box.y), static_cast<QAbstractAxis*>(box.log_y)}) {
        if (!axis) continue;
        const int text = QFontMetrics(axis->titleFont()).horizontalAdvance(axis->titleText());
        axis->setTitleVisible(text + 8 <= plot_height);
    }
}

void ChartsPanel::setAxisRange(ChartBox& box, Qt::Orientation orientation, double lo, double hi) {
    QValueAxis* axis = orientation == Qt::Horizontal ? box.x : box.y;
    if (!(lo <= hi)) {
        lo = 0.0;
        hi = 1.0;
    }
    if (hi - lo < 1e-9) {  // a flat line: a little room around it
        const double half = std::max(1e-3, std::abs(hi) * 0.05);
        lo -= half;
        hi += half;
    }
    const bool integer = box.integer_ticks && orientation == Qt::Vertical;
    applyTicks(axis, lo, hi, tickInterval(*box.view, *box.chart, *axis, integer, lo, hi));
}

// The plot's size moved (a resize, an axis' labels widening): the ranges stay, the intervals follow.
void ChartsPanel::fitTicks(ChartBox& box) {
    if (box.fitting_ticks) return;
    box.fitting_ticks = true;
    for (QValueAxis* axis : {box.x, box.y}) {
        const bool integer = box.integer_ticks && axis == box.y;
        const double interval = tickInterval(*box.view, *box.chart, *axis, integer, axis->min(), axis->max());
        if (interval != axis->tickInterval()) applyTicks(axis, axis->min(), axis->max(), interval);
    }
    box.fitting_ticks = false;
}

}  // namespace sp::ui
