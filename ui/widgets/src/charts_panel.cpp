#include "sp/ui/charts_panel.h"

#include <algorithm>
#include <cmath>

#include <QAction>
#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QGridLayout>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QVBoxLayout>
#include <QValueAxis>

#include "chart_box.h"
#include "chart_line.h"
#include "chart_math.h"
#include "chart_series.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

namespace {

// Finite y extent of the drawn points.
void extendRange(const QList<QPointF>& points, double& lo, double& hi) {
    for (const QPointF& p : points) {
        lo = std::min(lo, p.y());
        hi = std::max(hi, p.y());
    }
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// The y extent a chart shows for data in [lo, hi] (lo > hi: no data): savings and counts start at
// 0, sensitivity shows its whole [0, 1] score.
std::pair<double, double> yExtent(ChartsPanel::Chart which, double lo, double hi, int blocks) {
    using C = ChartsPanel::Chart;
    const bool any = lo <= hi;
    switch (which) {
        case C::saving:
            return {any ? std::min(0.0, lo) : 0.0, any ? std::max(1.0, hi) : 100.0};
        case C::precision:
            return {0.0, std::max(double(std::max(1, blocks)), any ? hi : 0.0)};
        case C::sensitivity:
            return {any ? std::min(0.0, lo) : 0.0, any ? std::max(1.0, hi) : 1.0};
        case C::gradient:
            return {any ? std::min(0.0, lo) : 0.0, any ? hi : 1.0};
        case C::loss:
            return {any ? lo : 0.0, any ? hi : 1.0};
    }
    return {0.0, 1.0};
}

}  // namespace

ChartsPanel::ChartsPanel(QWidget* parent) : QWidget(parent) {
    dark_ = palette().color(QPalette::Window).lightness() < 128;
    buildCharts();
    applyTheme();
}

ChartsPanel::~ChartsPanel() {
    // Lines remove their series from charts the views still own; the views outlive this body.
    for (auto& box : charts_) {
        box->view->viewport()->removeEventFilter(this);
        box->lines.clear();
    }
}

void ChartsPanel::buildCharts() {
    // A row of controls, then two rows of charts (savings | precision counts | loss, then
    // sensitivity | L2) on a six-column grid: five stacked charts would force a window taller than a
    // 1280x800 screen.
    grid_ = new QGridLayout(this);
    grid_->setContentsMargins(0, 0, 0, 0);
    grid_->setSpacing(2);
    // The y titles name the value and its unit, short enough for a 150 px plot (longer ones are cut
    // to "..."); the tooltips say more: the saving is a share of the BF16 bytes moved
    // (core/TELEMETRY.md), sensitivity a score in [0, 1].
    const std::array<std::pair<QString, QString>, kChartCount> titles = {{
        {tr("Bandwidth saving (%) by step"), tr("saving (%)")},
        {tr("Blocks per precision by step"), tr("blocks")},
        {tr("Sensitivity of selected blocks by step"), tr("sensitivity")},
        {tr("Gradient L2 of selected blocks by step"), tr("gradient L2")},
        {tr("Loss by step"), tr("loss")},
    }};
    for (int i = 0; i < kChartCount; ++i)
        buildChart(Chart(i), titles[std::size_t(i)].first, titles[std::size_t(i)].second);
    grid_->setRowStretch(1, 1);
    grid_->setRowStretch(2, 1);
    no_loss_label_ = new QLabel(tr("No loss in this run."), this);
    no_loss_label_->setAlignment(Qt::AlignCenter);
    no_loss_label_->setEnabled(false);  // greyed: a note, not data
    const ChartBox& loss = *charts_[std::size_t(Chart::loss)];
    grid_->addWidget(no_loss_label_, loss.row, loss.column, 1, loss.columns);  // in the loss chart's place
    loss.frame->hide();
    loss.view->hide();
    setExplanations();
    buildControls(grid_);
    // The run's own lines first (series order is drawing order: the guides and marks go over them).
    for (int i = 0; i < kChartCount; ++i) syncLines(*charts_[std::size_t(i)], linesOf(Chart(i)));
    buildGuides();
}

void ChartsPanel::buildChart(Chart which, const QString& title, const QString& y_title) {
    auto box = std::make_unique<ChartBox>();
    box->title = title;
    box->chart = new QChart();
    box->chart->setTitle(title);
    // The legend is a label under the chart (chart_legend.cpp): Qt's cuts every entry to "estim..."
    // when a small chart has several.
    box->chart->legend()->hide();
    box->chart->setMargins(QMargins(4, 0, 4, 0));
    box->chart->setAnimationOptions(QChart::NoAnimation);
    box->x = new QValueAxis();
    box->x->setTitleText(tr("step"));
    box->y = new QValueAxis();
    for (QValueAxis* axis : {box->x, box->y}) {
        axis->setRange(0.0, 1.0);
        axis->setTickInterval(0.2);      // setAxisRange() moves it with the range
        axis->setTruncateLabels(false);  // small charts otherwise show "..." for every tick
    }
    box->y->setTitleText(y_title);
    box->chart->addAxis(box->x, Qt::AlignBottom);
    box->chart->addAxis(box->y, Qt::AlignLeft);
    box->frame = new QWidget(this);
    box->view = new QChartView(box->chart, box->frame);
    box->view->setRenderHint(QPainter::Antialiasing, true);
    // Low enough that a legend of two or three rows still fits under the chart at 1280x800.
    box->view->setMinimumHeight(100);
    box->view->viewport()->setMouseTracking(true);  // the hover readout follows the mouse
    box->view->viewport()->installEventFilter(this);
    box->legend = new QLabel(box->frame);
    box->legend->setObjectName(QStringLiteral("chartLegend"));
    box->legend->setWordWrap(true);
    box->legend->setAlignment(Qt::AlignHCenter | Qt::AlignTop);
    box->legend->setTextFormat(Qt::RichText);
    box->legend->setContentsMargins(4, 0, 4, 2);
    QFont small = box->legend->font();
    small.setPointSizeF(kLegendPointSize);
    box->legend->setFont(small);
    auto* column = new QVBoxLayout(box->frame);
    column->setContentsMargins(0, 0, 0, 0);
    column->setSpacing(0);
    column->addWidget(box->view, 1);
    column->addWidget(box->legend);
    const int i = static_cast<int>(which);
    if (i < 2 || which == Chart::loss) {  // the first row: three charts of two columns each
        box->row = 1;
        box->column = which == Chart::loss ? 4 : 2 * i;
        box->columns = 2;
    } else {  // the second row: two charts of three columns each
        box->row = 2;
        box->column = 3 * (i - 2);
        box->columns = 3;
    }
    box->integer_ticks = which == Chart::precision;
    grid_->addWidget(box->frame, box->row, box->column, 1, box->columns);
    // Ticks that fit their labels depend on the plot's size, which Qt Charts settles after layout.
    connect(box->chart, &QChart::plotAreaChanged, this,
            [this, which] { fitTicks(*charts_[std::size_t(which)]); });
    charts_[std::size_t(which)] = std::move(box);
    buildActions(which);
}

// --- Data ---------------------------------------------------------------------------------------

void ChartsPanel::setSession(const RunSession* session) {
    if (session_) disconnect(session_, nullptr, this, nullptr);
    session_ = session;
    if (session_) {
        connect(session_, &RunSession::reset, this, &ChartsPanel::resetData);
        connect(session_, &QObject::destroyed, this, [this] { setStore(nullptr); });
    }
    store_ = session_ ? &session_->store() : nullptr;
    resetData();
}

void ChartsPanel::setStore(const TelemetryStore* store) {
    if (session_) disconnect(session_, nullptr, this, nullptr);
    session_ = nullptr;
    store_ = store;
    resetData();
}

void ChartsPanel::resetData() {
    store_updates_ = 0;
    selected_.clear();
    ++resets_;
    // Another run (or the same one started over): its steps are not the zoomed ones.
    x_view_.reset();
    ++x_view_revision_;
    drawn_valid_ = false;
    refresh();
}

std::size_t ChartsPanel::shownCount() const {
    return std::min(store_ ? store_->updateCount() : 0, cursor_);
}

void ChartsPanel::refresh() {
    if (store_) {  // reset and refilled behind our back?
        const std::size_t n = store_->updateCount();
        if (n < store_updates_ || (store_updates_ > 0 && store_->row(0).timestamp != store_first_timestamp_))
            ++resets_;
        store_updates_ = n;
        if (n > 0) store_first_timestamp_ = store_->row(0).timestamp;
    }
    DrawnKey key{store_, shownCount(), selected_, plotWidth(), dark_, resets_, overlays_revision_};
    key.session = session_ ? session_->revision() : 0;  // events: the markers
    key.smoothing = smoothing_;
    key.log_loss = logScale(Chart::loss);
    key.log_gradient = logScale(Chart::gradient);
    key.x_view = x_view_revision_;
    if (drawn_valid_ && key == drawn_) return;
    redraw();
    drawn_ = std::move(key);
    drawn_valid_ = true;
}

void ChartsPanel::setSelectedBlocks(std::vector<int> blocks) {
    std::sort(blocks.begin(), blocks.end());
    blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
    if (blocks == selected_) return;
    selected_ = std::move(blocks);
    refresh();
}

void ChartsPanel::setOverlays(std::vector<Overlay> overlays) {
    overlays_ = std::move(overlays);
    ++overlays_revision_;
    refresh();
}

void ChartsPanel::setOverlayRuns(std::vector<OverlayRun> runs) {
    std::vector<OverlaidRun> next;
    for (OverlayRun& r : runs) {
        if (r.store == nullptr) continue;
        next.push_back(OverlaidRun{std::move(r.name), r.store});
    }
    overlay_runs_ = std::move(next);
    ++overlays_revision_;
    updateRunsKey();
    refresh();
}

void ChartsPanel::setTimelineCursor(std::size_t count) {
    if (count == cursor_) return;
    cursor_ = count;
    refresh();
}

// --- Drawing ------------------------------------------------------------------------------------

// The widest plot shown (all charts decimate alike; an enlarged chart is wider than the others).
int ChartsPanel::plotWidth() const {
    int widest = 0;
    for (const auto& box : charts_)
        if (!box->frame->isHidden()) widest = std::max(widest, int(box->chart->plotArea().width()));
    if (widest >= 16) return widest;
    // Not laid out yet: estimate from the view (the axis labels take about 60 px).
    return std::max(200, charts_[std::size_t(Chart::saving)]->view->width() - 60);
}

void ChartsPanel::updateTitles() {
    const int wanted = std::min<int>(int(selected_.size()), kMaxSelectedLines);
    for (Chart which : {Chart::sensitivity, Chart::gradient}) {
        ChartBox& box = *charts_[std::size_t(which)];
        QString title = box.title;
        if (selected_.empty()) {
            title += tr(" (select blocks)");
        } else if (int(selected_.size()) > wanted) {
            title += tr(" (first %1 of %2 selected)").arg(wanted).arg(selected_.size());
        }
        if (box.chart->title() != title) box.chart->setTitle(title);
    }
}

void ChartsPanel::redraw() {
    updateTitles();
    full_x_ = fullXRange();
    shown_x_ = full_x_;
    if (x_view_) {
        shown_x_ = *x_view_;
        if (x_view_follows_edge_) {  // the same width, ending at the last step
            const double width = x_view_->second - x_view_->first;
            shown_x_ = {std::max(full_x_.first, full_x_.second - width), full_x_.second};
        }
    }
    const auto [x_lo, x_hi] = shown_x_;
    // Two pixels per decimation column: the min/max envelope looks the same and Qt Charts, whose
    // cost is per point (geometry, stroking), gets half the points.
    const int columns = std::max(64, plotWidth() / 2);
    collectMarkers(x_lo, x_hi);
    for (int c = 0; c < kChartCount; ++c) {
        const bool any = drawChart(Chart(c), linesOf(Chart(c)), x_lo, x_hi, columns);
        if (Chart(c) == Chart::loss) has_loss_ = any;
    }
    drawThresholds(x_lo, x_hi);
    for (auto& box : charts_) box->reset_zoom->setEnabled(x_view_.has_value());
    updateVisibility();
    no_loss_label_->setText(shownCount() == 0 ? tr("No loss yet.") : tr("No loss in this run."));
}

// Decimates the chart's lines over [x_lo, x_hi] and draws them: the chart is emptied, given its
// ranges and refilled, so Qt Charts lays each series out once (not once per replace and again per
// range change). Returns whether any line has data (over the whole run, not only the range shown).
bool ChartsPanel::drawChart(Chart which, const std::vector<LineSource>& sources, double x_lo, double x_hi,
                            int columns) {
    ChartBox& box = *charts_[std::size_t(which)];
    std::vector<DecimatedSeries> decimated;
    decimated.reserve(sources.size());
    double lo = kInf, hi = -kInf;
    bool any = false;
    for (const LineSource& s : sources) {
        decimated.push_back(s.draw(x_lo, x_hi, columns));
        extendRange(decimated.back().points, lo, hi);
        any = any || s.hasFiniteSample();
    }
    syncLines(box, sources);
    for (auto& line : box.lines) line->clearPoints();
    syncYAxes(box);  // before the new points: a log axis must never see a value <= 0
    setAxisRange(box, Qt::Horizontal, x_lo, x_hi);
    // The marks have a strip at the top of the plot to themselves: the data (the budget target too)
    // stays under it.
    bool marks = false;
    for (const auto& steps : box.marker_steps) marks = marks || !steps.empty();
    const auto [y_lo, y_hi] = yExtent(which, lo, hi, store_ ? store_->blockCount() : 1);
    const double top = marks ? y_lo + (y_hi - y_lo) / kDataShareUnderMarks : y_hi + 0.05 * (y_hi - y_lo);
    // 5 % headroom below too, except at an axis starting at 0 (counts, percentages).
    setAxisRange(box, Qt::Vertical, (y_lo == 0.0 || marks) ? y_lo : y_lo - 0.05 * (y_hi - y_lo), top);
    if (box.log) {  // only positive values have a place on a log axis
        double log_lo = kInf, log_hi = -kInf;
        for (auto& d : decimated) {
            d = positiveOnly(d);
            extendRange(d.points, log_lo, log_hi);
        }
        if (marks && log_lo > 0.0 && log_lo < log_hi)
            log_hi = log_lo * std::pow(log_hi / log_lo, 1.0 / kDataShareUnderMarks);
        setLogRange(box, log_lo, log_hi);
    }
    for (std::size_t i = 0; i < box.lines.size(); ++i) {
        box.lines[i]->setVisible(!decimated[i].points.isEmpty());
        box.lines[i]->setData(decimated[i]);
    }
    syncYAxes(box);  // segments the lines added hang on the linear axis
    if (box.markers[0]) placeMarkers(box);
    updateLegend(which, sources);
    return any;
}

// One ChartLine per source, in order; existing lines take the sources' names and looks.
void ChartsPanel::syncLines(ChartBox& box, const std::vector<LineSource>& sources) {
    if (box.lines.size() > sources.size()) box.lines.resize(sources.size());
    for (std::size_t i = 0; i < sources.size(); ++i) {
        const LineSource& s = sources[i];
        if (i < box.lines.size())
            box.lines[i]->setLook(s.name, s.color, s.style);
        else {
            box.lines.push_back(std::make_unique<ChartLine>(box.chart, box.x, box.y, s.name, s.color));
            box.lines.back()->setLook(s.name, s.color, s.style);
        }
    }
}

}  // namespace sp::ui
