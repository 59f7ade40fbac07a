#include "sp/ui/charts_panel.h"

#include <algorithm>
#include <cmath>

#include <QChart>
#include <QChartView>
#include <QEvent>
#include <QGridLayout>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QValueAxis>

#include "chart_box.h"
#include "chart_line.h"
#include "chart_math.h"
#include "sp/ui/colormap.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

namespace {

// Okabe–Ito, for the selected blocks' lines (distinct for most colour-blind viewers).
constexpr std::array<QRgb, ChartsPanel::kMaxSelectedLines> kBlockColors = {
    0xFF0072B2u, 0xFFE69F00u, 0xFF009E73u, 0xFFCC79A7u, 0xFF56B4E9u, 0xFFD55E00u, 0xFFF0E442u, 0xFF999999u};
constexpr QRgb kEstimatedColor = 0xFF0072B2u;
constexpr QRgb kMeasuredColor = 0xFFD55E00u;
constexpr QRgb kTargetColor = 0xFF009E73u;
constexpr QRgb kTrainLossColor = 0xFF0072B2u;
constexpr QRgb kEvalLossColor = 0xFFE69F00u;
constexpr int kRawAlpha = 70;  // the unsmoothed losses, behind the smoothed ones

// Finite y extent of the drawn points (NaN pair when there are none).
void extendRange(const QList<QPointF>& points, double& lo, double& hi) {
    for (const QPointF& p : points) {
        lo = std::min(lo, p.y());
        hi = std::max(hi, p.y());
    }
}

// A 1/2/5 x 10^k tick spacing giving about `target` intervals over `span`.
double niceStep(double span, int target = 5) {
    const double raw = span / target;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double norm = raw / magnitude;
    return (norm < 1.5 ? 1.0 : norm < 3.0 ? 2.0 : norm < 7.0 ? 5.0 : 10.0) * magnitude;
}

// Sets an axis to [lo, hi] (NaN/empty: the fallback), optionally with 5 % headroom (not below a
// lower bound of exactly 0, so counts and percentages start at the axis), and ticks at round values.
void setNiceRange(QValueAxis* axis, double lo, double hi, double fallback_lo, double fallback_hi, bool pad) {
    if (!(lo <= hi)) {
        lo = fallback_lo;
        hi = fallback_hi;
    }
    if (hi - lo < 1e-9) {
        const double half = std::max(1e-3, std::abs(hi) * 0.05);
        lo -= half;
        hi += half;
    }
    if (pad) {
        const double margin = (hi - lo) * 0.05;
        hi += margin;
        if (lo != 0.0) lo -= margin;
    }
    const double step = niceStep(hi - lo);
    // Order matters: the axis lays its ticks out after each call, and the old interval over a much
    // wider new range would create millions of tick items. A growing interval goes first, a
    // shrinking one last, so every intermediate state has about as few ticks as the final one.
    axis->setTickAnchor(0.0);
    if (step >= axis->tickInterval()) {
        axis->setTickInterval(step);
        axis->setRange(lo, hi);
    } else {
        axis->setRange(lo, hi);
        axis->setTickInterval(step);
    }
    axis->setTickType(QValueAxis::TicksDynamic);
    const int decimals = step >= 1.0 ? 0 : std::min(6, int(std::ceil(-std::log10(step) - 1e-9)));
    axis->setLabelFormat(QStringLiteral("%.%1f").arg(decimals));
}

constexpr double kInf = std::numeric_limits<double>::infinity();

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
    auto* layout = new QGridLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(2);
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
    for (int i = 0; i < kChartCount; ++i) {
        auto box = std::make_unique<ChartBox>();
        box->title = titles[std::size_t(i)].first;
        box->chart = new QChart();
        box->chart->setTitle(box->title);
        box->chart->legend()->setAlignment(
            Qt::AlignTop);  // beside the plot it eats the width of small charts
        box->chart->setMargins(QMargins(4, 2, 4, 2));
        box->chart->setAnimationOptions(QChart::NoAnimation);
        box->x = new QValueAxis();
        box->x->setTitleText(tr("step"));
        box->y = new QValueAxis();
        for (QValueAxis* axis : {box->x, box->y}) {
            axis->setRange(0.0, 1.0);
            axis->setTickInterval(0.2);      // setNiceRange() moves it with the range
            axis->setTruncateLabels(false);  // small charts otherwise show "..." for every tick
        }
        box->y->setTitleText(titles[std::size_t(i)].second);
        box->chart->addAxis(box->x, Qt::AlignBottom);
        box->chart->addAxis(box->y, Qt::AlignLeft);
        box->view = new QChartView(box->chart, this);
        box->view->setRenderHint(QPainter::Antialiasing, true);
        box->view->setMinimumHeight(155);
        box->view->viewport()->setMouseTracking(true);  // the hover readout follows the mouse
        box->view->viewport()->installEventFilter(this);
        if (i < 2 || i == static_cast<int>(Chart::loss))
            layout->addWidget(box->view, 1, i == static_cast<int>(Chart::loss) ? 4 : 2 * i, 1, 2);
        else
            layout->addWidget(box->view, 2, 3 * (i - 2), 1, 3);
        charts_[std::size_t(i)] = std::move(box);
    }
    auto& saving = *charts_[std::size_t(Chart::saving)];
    saving.addLine(tr("estimated"), QColor::fromRgb(kEstimatedColor));
    saving.addLine(tr("measured"), QColor::fromRgb(kMeasuredColor));
    saving.addLine(tr("budget target"), QColor::fromRgb(kTargetColor));
    auto& precision = *charts_[std::size_t(Chart::precision)];
    precision.addLine(QStringLiteral("BF16"), QColor::fromRgb(precisionColor(Precision::bf16)));
    precision.addLine(QStringLiteral("INT8"), QColor::fromRgb(precisionColor(Precision::int8)));
    precision.addLine(QStringLiteral("FP8"), QColor::fromRgb(precisionColor(Precision::fp8_e4m3)));
    precision.addLine(QStringLiteral("INT4"), QColor::fromRgb(precisionColor(Precision::int4)));
    auto& loss = *charts_[std::size_t(Chart::loss)];
    // The raw losses first, so that they lie faint behind the smoothed lines.
    QColor faint_train = QColor::fromRgb(kTrainLossColor);
    QColor faint_eval = QColor::fromRgb(kEvalLossColor);
    faint_train.setAlpha(kRawAlpha);
    faint_eval.setAlpha(kRawAlpha);
    loss.addLine(tr("train loss (raw)"), faint_train);
    loss.addLine(tr("eval loss (raw)"), faint_eval);
    loss.addLine(tr("train loss"), QColor::fromRgb(kTrainLossColor));
    loss.addLine(tr("eval loss"), QColor::fromRgb(kEvalLossColor));
    for (auto& box : charts_) box->own_lines = box->lines.size();
    no_loss_label_ = new QLabel(tr("No loss in this run."), this);
    no_loss_label_->setAlignment(Qt::AlignCenter);
    no_loss_label_->setEnabled(false);              // greyed: a note, not data
    layout->addWidget(no_loss_label_, 1, 4, 1, 2);  // in the loss chart's place
    loss.view->hide();
    setExplanations();
    buildControls(layout);
    buildGuides();
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
    for (auto* column : runColumns()) column->clear();
    steps_.clear();
    eval_steps_.clear();
    selected_.clear();
    ++resets_;
    drawn_valid_ = false;
    refresh();
}

void ChartsPanel::appendRunColumns() {
    const std::size_t n = store_->updateCount();
    if (steps_.size() > n || (!steps_.empty() && store_->row(0).timestamp != first_timestamp_)) {
        // The store was reset and refilled behind our back: start over.
        for (auto* column : runColumns()) column->clear();
        steps_.clear();
        eval_steps_.clear();
        ++resets_;
    }
    if (steps_.size() == n) return;
    if (steps_.empty()) first_timestamp_ = store_->row(0).timestamp;
    for (std::size_t u = steps_.size(); u < n; ++u) {
        const UpdateRow& r = store_->row(u);
        steps_.push_back(double(r.step));
        estimated_.push_back(r.estimated_saving_pct);
        measured_.push_back(r.measured_saving_pct);
        target_.push_back(r.budget_target_pct);
        bf16_.push_back(float(r.blocks_bf16));
        int8_.push_back(float(r.blocks_int8));
        fp8_.push_back(float(r.blocks_fp8));
        int4_.push_back(float(r.blocks_int4));
        train_loss_.push_back(r.train_loss);
        eval_loss_.push_back(r.eval_loss);
        eval_steps_.push_back(double(r.eval_step));
    }
}

std::size_t ChartsPanel::shownCount() const {
    return std::min(steps_.size(), cursor_);
}

void ChartsPanel::refresh() {
    if (store_) appendRunColumns();
    DrawnKey key{store_, shownCount(), selected_, plotWidth(), dark_, resets_, overlays_revision_};
    key.session = session_ ? session_->revision() : 0;  // events: the markers
    key.smoothing = smoothing_;
    key.log_loss = logScale(Chart::loss);
    key.log_gradient = logScale(Chart::gradient);
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
    for (Chart which : {Chart::saving, Chart::loss}) {
        ChartBox& box = *charts_[std::size_t(which)];
        box.lines.resize(box.own_lines);
        for (const Overlay& o : overlays)
            if (o.chart == which) box.addLine(o.name, QColor::fromRgb(o.color));
    }
    overlays_ = std::move(overlays);
    ++overlays_revision_;
    refresh();
}

void ChartsPanel::setTimelineCursor(std::size_t count) {
    if (count == cursor_) return;
    cursor_ = count;
    refresh();
}

// --- Drawing ------------------------------------------------------------------------------------

int ChartsPanel::plotWidth() const {
    const auto& box = *charts_[std::size_t(Chart::saving)];
    const int plot = int(box.chart->plotArea().width());
    if (plot >= 16) return plot;
    // Not laid out yet: estimate from the view (the axis labels and legend take about 160 px).
    return std::max(200, box.view->width() - 160);
}

void ChartsPanel::rebuildSelectedLines() {
    const int wanted = std::min<int>(int(selected_.size()), kMaxSelectedLines);
    for (Chart which : {Chart::sensitivity, Chart::gradient}) {
        auto& box = *charts_[std::size_t(which)];
        box.lines.resize(std::min<std::size_t>(box.lines.size(), std::size_t(wanted)));
        for (int i = 0; i < wanted; ++i) {
            const int b = selected_[std::size_t(i)];
            const QString name = store_ && b < store_->blockCount()
                                     ? QString::fromStdString(store_->layout()[std::size_t(b)].name)
                                     : QStringLiteral("blocks.%1").arg(b);
            const QColor color = QColor::fromRgb(kBlockColors[std::size_t(i)]);
            if (std::size_t(i) < box.lines.size()) {
                box.lines[std::size_t(i)]->setName(name);
                box.lines[std::size_t(i)]->setColor(color);
            } else {
                box.addLine(name, color);
            }
        }
        QString title = box.title;
        if (selected_.empty()) {
            title += tr(" (select blocks)");
        } else if (int(selected_.size()) > wanted) {
            title += tr(" (first %1 of %2 selected)").arg(wanted).arg(selected_.size());
        }
        box.chart->setTitle(title);
    }
}

void ChartsPanel::redraw() {
    rebuildSelectedLines();
    const std::size_t n = shownCount();
    // Two pixels per decimation column: the min/max envelope looks the same and Qt Charts, whose
    // cost is per point (geometry, stroking), gets half the points.
    const int columns = std::max(64, plotWidth() / 2);
    double x_lo = 0.0;
    double x_hi = 1.0;
    if (n > 0) {
        x_lo = steps_.front();
        // An eval loss may have been measured before its record's step (step 0, before training).
        for (std::size_t u = 0; u < n; ++u)
            if (std::isfinite(eval_loss_[u])) x_lo = std::min(x_lo, eval_steps_[u]);
        x_hi = std::max(steps_[n - 1], x_lo + 1.0);
    }
    bool have_range = n > 0;
    for (const Overlay& o : overlays_) {  // another run may be longer
        if (o.steps.empty()) continue;
        x_lo = have_range ? std::min(x_lo, o.steps.front()) : o.steps.front();
        x_hi = std::max(have_range ? x_hi : x_lo + 1.0, o.steps.back());
        have_range = true;
    }
    auto decimate = [&](const std::vector<float>& y, GapPolicy gaps) {
        return decimateMinMax(steps_.data(), y.data(), std::min({n, y.size(), steps_.size()}), x_lo, x_hi,
                              columns, gaps);
    };

    // Everything is computed first, then each chart is emptied, given its ranges and refilled, so
    // Qt Charts lays each series out once (not once per replace and again per range change).
    struct Plan {
        std::vector<DecimatedSeries> data;  // one per line of the chart, in order
        std::vector<bool> visible;
        double y_lo = kInf, y_hi = -kInf;
        double fallback_lo = 0.0, fallback_hi = 1.0;
    };
    std::array<Plan, kChartCount> plans;
    auto add = [](Plan& plan, DecimatedSeries d, bool visible = true) {
        if (visible) extendRange(d.points, plan.y_lo, plan.y_hi);
        plan.data.push_back(std::move(d));
        plan.visible.push_back(visible);
    };
    {  // Bandwidth saving: the measured line only exists for runtimes that count real bytes.
        Plan& plan = plans[std::size_t(Chart::saving)];
        plan.y_lo = 0.0;
        plan.y_hi = 1.0;
        plan.fallback_hi = 100.0;
        add(plan, decimate(estimated_, GapPolicy::break_line));
        DecimatedSeries measured = decimate(measured_, GapPolicy::break_line);
        const bool has_measured = !measured.points.isEmpty();
        add(plan, std::move(measured), has_measured);
        DecimatedSeries target = decimate(target_, GapPolicy::break_line);  // budget mode only
        const bool has_target = !target.points.isEmpty();
        add(plan, std::move(target), has_target);
    }
    {
        Plan& plan = plans[std::size_t(Chart::precision)];
        plan.y_lo = 0.0;
        plan.y_hi = store_ ? double(std::max(1, store_->blockCount())) : 1.0;
        for (const std::vector<float>* column : {&bf16_, &int8_, &fp8_, &int4_})
            add(plan, decimate(*column, GapPolicy::skip));
    }
    for (auto [which, field] : {std::pair{Chart::sensitivity, BlockField::sensitivity},
                                std::pair{Chart::gradient, BlockField::l2_norm}}) {
        Plan& plan = plans[std::size_t(which)];
        for (std::size_t i = 0; i < charts_[std::size_t(which)]->lines.size(); ++i) {
            const int b = selected_[i];
            if (!store_ || b < 0 || b >= store_->blockCount()) {
                add(plan, {});
                continue;
            }
            add(plan, decimate(store_->series(b, field), GapPolicy::break_line));
        }
        plan.y_lo = std::min(0.0, plan.y_lo);
        if (which == Chart::sensitivity) plan.y_hi = std::max(1.0, plan.y_hi);
    }
    bool has_loss = false;
    {  // Loss: raw lines (faint, when smoothing) then the shown ones. Eval loss is sparse (only when
        // evaluated) and drawn where it was measured (eval_step), so its line joins the known points.
        Plan& plan = plans[std::size_t(Chart::loss)];
        auto decimate_eval = [&](const std::vector<float>& y) {
            return decimateMinMax(eval_steps_.data(), y.data(), std::min({n, y.size(), eval_steps_.size()}),
                                  x_lo, x_hi, columns, GapPolicy::skip);
        };
        const bool smooth = smoothing_ > 0.0;
        DecimatedSeries train = decimate(train_loss_, GapPolicy::skip);
        DecimatedSeries eval = decimate_eval(eval_loss_);
        const bool any_train = !train.points.isEmpty();
        const bool any_eval = !eval.points.isEmpty();
        has_loss = any_train || any_eval;
        add(plan, smooth ? train : DecimatedSeries{}, smooth && any_train);
        add(plan, smooth ? eval : DecimatedSeries{}, smooth && any_eval);
        if (smooth) {
            train = decimate(emaSmooth(train_loss_, n, smoothing_), GapPolicy::skip);
            eval = decimate_eval(emaSmooth(eval_loss_, n, smoothing_));
        }
        add(plan, std::move(train), any_train);
        add(plan, std::move(eval), any_eval);
    }
    for (const Overlay& o : overlays_) {  // in the order setOverlays() added their lines
        if (o.chart != Chart::saving && o.chart != Chart::loss) continue;
        const std::size_t count = std::min(o.steps.size(), o.values.size());
        // Another run's loss is smoothed as this run's is, so that the two compare.
        const bool smooth = o.chart == Chart::loss && smoothing_ > 0.0;
        const std::vector<float> smoothed =
            smooth ? emaSmooth(o.values, count, smoothing_) : std::vector<float>{};
        DecimatedSeries d = decimateMinMax(o.steps.data(), smooth ? smoothed.data() : o.values.data(), count,
                                           x_lo, x_hi, columns, GapPolicy::skip);
        const bool any = !d.points.isEmpty();
        has_loss = has_loss || (o.chart == Chart::loss && any);
        add(plans[std::size_t(o.chart)], std::move(d), any);
    }

    for (int c = 0; c < kChartCount; ++c) {
        ChartBox& box = *charts_[std::size_t(c)];
        Plan& plan = plans[std::size_t(c)];
        for (auto& line : box.lines) line->clearPoints();
        syncYAxes(box);  // before the new points: a log axis must never see a value <= 0
        setNiceRange(box.x, x_lo, x_hi, 0.0, 1.0, false);
        setNiceRange(box.y, plan.y_lo, plan.y_hi, plan.fallback_lo, plan.fallback_hi, true);
        if (box.log) {  // only positive values have a place on a log axis
            double lo = kInf, hi = -kInf;
            for (std::size_t i = 0; i < plan.data.size(); ++i) {
                plan.data[i] = positiveOnly(plan.data[i]);
                if (plan.visible[i]) extendRange(plan.data[i].points, lo, hi);
            }
            setLogRange(box, lo, hi);
        }
        for (std::size_t i = 0; i < box.lines.size() && i < plan.data.size(); ++i) {
            box.lines[i]->setVisible(plan.visible[i]);
            box.lines[i]->setData(plan.data[i]);
        }
        syncYAxes(box);  // segments the lines added hang on the linear axis
    }
    hideRawLossLegend();
    drawThresholds(x_lo, x_hi);
    drawMarkers(x_lo, x_hi);
    charts_[std::size_t(Chart::loss)]->view->setVisible(has_loss);
    no_loss_label_->setVisible(!has_loss);
    no_loss_label_->setText(n == 0 ? tr("No loss yet.") : tr("No loss in this run."));
}

}  // namespace sp::ui
