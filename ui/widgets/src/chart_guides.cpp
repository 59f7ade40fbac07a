// ChartsPanel's explanations and guides: each chart's tooltip, the policy's thresholds and hold band
// on the sensitivity chart (core/POLICY.md rules 5 and 6; named in the chart's legend, where no grid
// line runs through them), and the marks where blocks switched precision, operator commands applied
// and rollbacks happened (saving and loss charts).
#include <algorithm>
#include <cmath>

#include <QAreaSeries>
#include <QBrush>
#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QPen>
#include <QScatterSeries>
#include <QValueAxis>

#include "chart_box.h"
#include "chart_math.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

namespace {

bool hasConfig(const RunSession* session) {
    if (!session) return false;
    const std::string& json = session->header().config_json;
    return !json.empty() && json != "{}";
}

}  // namespace

void ChartsPanel::setExplanations() {
    const QString marks =
        tr("\nMarks at the top: ● a block switched precision, ■ an operator command applied, "
           "▲ a rollback (nearby marks merge).");
    chartView(Chart::saving)
        ->setToolTip(tr("Share of the BF16 bytes the blocks no longer move, in %.\n"
                        "estimated: from element widths (an INT8 or FP8 block moves half the bytes of a "
                        "BF16 one, an INT4 block a quarter).\n"
                        "measured: from the bytes the runtime really copied; only runtimes that count "
                        "them report it.\n"
                        "budget target (grey, dashed): mode budget only, the saving the plan aimed at.") +
                     marks);
    chartView(Chart::precision)->setToolTip(tr("How many blocks run in each precision after each update."));
    chartView(Chart::sensitivity)
        ->setToolTip(tr("Sensitivity score in [0, 1] of the selected blocks (gradient and quantization-error "
                        "terms).\nLines: the policy's thresholds from the run's config. A BF16 block moves "
                        "to INT8 below int8_threshold − hysteresis_margin; an INT8 block returns to BF16 at "
                        "bf16_threshold or above; in the shaded hold band a block keeps its precision. The "
                        "first assignment uses int8_threshold itself."));
    chartView(Chart::gradient)
        ->setToolTip(tr("Window average of the selected blocks' gradient L2 norm (per block)."));
    chartView(Chart::loss)
        ->setToolTip(tr("Training loss of each update's step and the held-out (eval) loss, "
                        "drawn at the step it was measured; smoothed lines over faint "
                        "raw ones (see Loss smoothing).") +
                     marks);
}

void ChartsPanel::buildGuides() {
    ChartBox& sens = *charts_[std::size_t(Chart::sensitivity)];
    sens.band = new QAreaSeries(new QLineSeries(sens.chart), new QLineSeries(sens.chart));
    sens.band->setName(tr("hold band"));
    sens.chart->addSeries(sens.band);
    sens.band->attachAxis(sens.x);
    sens.band->attachAxis(sens.y);
    for (std::size_t i = 0; i < kGuideColors.size(); ++i) {
        auto* line = new QLineSeries();
        sens.chart->addSeries(line);
        line->attachAxis(sens.x);
        line->attachAxis(sens.y);
        sens.guides.push_back(line);
    }
    buildMarkerSeries();
    for (auto& box : charts_) styleExtras(*box);
}

void ChartsPanel::buildMarkerSeries() {
    for (Chart which : {Chart::saving, Chart::loss}) {
        ChartBox& box = *charts_[std::size_t(which)];
        const std::array<QString, kMarkerKinds> names = {tr("switch"), tr("command"), tr("rollback")};
        const std::array<QScatterSeries::MarkerShape, kMarkerKinds> shapes = {
            QScatterSeries::MarkerShapeCircle, QScatterSeries::MarkerShapeRectangle,
            QScatterSeries::MarkerShapeTriangle};
        for (int k = 0; k < kMarkerKinds; ++k) {
            auto* s = new QScatterSeries();
            s->setName(names[std::size_t(k)]);
            s->setMarkerShape(shapes[std::size_t(k)]);
            box.chart->addSeries(s);
            s->attachAxis(box.x);
            s->attachAxis(box.y);
            box.markers[std::size_t(k)] = s;  // explained by the controls row's key and the tooltip
        }
    }
}

void ChartsPanel::styleExtras(ChartBox& box) {
    // Axis titles in a small font: the plots are small, a default-size title squeezes them.
    for (QAbstractAxis* axis : {static_cast<QAbstractAxis*>(box.x), static_cast<QAbstractAxis*>(box.y),
                                static_cast<QAbstractAxis*>(box.log_y)}) {
        if (!axis) continue;
        QFont font = axis->titleFont();
        font.setPointSizeF(7.5);  // fixed: themes may or may not reset it
        font.setBold(false);
        axis->setTitleFont(font);
    }
    fitAxisTitles(box);
    // setTheme() recolours every series, the guides and marks too: their own colours back.
    if (box.band) {
        box.band->setBrush(QColor::fromRgba(kBandColor));
        box.band->setPen(Qt::NoPen);
    }
    for (std::size_t i = 0; i < box.guides.size(); ++i) {
        QPen pen(QColor::fromRgb(kGuideColors[i]));
        pen.setWidthF(1.0);
        pen.setStyle(i == 2 ? Qt::DotLine : Qt::DashLine);  // int8_threshold: first assignment only
        box.guides[i]->setPen(pen);
    }
    for (std::size_t k = 0; k < box.markers.size(); ++k) {
        if (!box.markers[k]) continue;
        box.markers[k]->setColor(QColor::fromRgb(kMarkerColors[k]));
        box.markers[k]->setBorderColor(QColor::fromRgb(kMarkerColors[k]));
        box.markers[k]->setMarkerSize(7.0);
    }
}

std::vector<ChartsPanel::Threshold> ChartsPanel::thresholds() const {
    if (!hasConfig(session_)) return {};
    const sp::Config& c = session_->runConfig();
    // The same double the policy compares with (POLICY.md rule 6: computed as written).
    const double enter_int8 = c.int8_threshold - c.hysteresis_margin;
    return {
        {tr("→BF16 ≥ %1").arg(c.bf16_threshold, 0, 'g', 3), c.bf16_threshold},
        {tr("→INT8 < %1").arg(enter_int8, 0, 'g', 3), enter_int8},
        {tr("int8_threshold %1").arg(c.int8_threshold, 0, 'g', 3), c.int8_threshold},
    };
}

std::optional<std::pair<double, double>> ChartsPanel::holdBand() const {
    const std::vector<Threshold> t = thresholds();
    if (t.empty()) return std::nullopt;
    return std::pair{t[1].y, t[0].y};
}

void ChartsPanel::drawThresholds(double x_lo, double x_hi) {
    ChartBox& sens = *charts_[std::size_t(Chart::sensitivity)];
    const std::vector<Threshold> t = thresholds();
    for (std::size_t i = 0; i < sens.guides.size(); ++i) {
        QLineSeries* line = sens.guides[i];
        line->setVisible(i < t.size());
        if (i >= t.size()) continue;
        line->setName(t[i].name);
        line->replace(QList<QPointF>{{x_lo, t[i].y}, {x_hi, t[i].y}});
    }
    const auto band = holdBand();
    sens.band->setVisible(band.has_value());
    if (band) {
        sens.band->lowerSeries()->replace(QList<QPointF>{{x_lo, band->first}, {x_hi, band->first}});
        sens.band->upperSeries()->replace(QList<QPointF>{{x_lo, band->second}, {x_hi, band->second}});
    }
}

std::vector<double> ChartsPanel::markerSteps(Chart chart, Marker kind) const {
    const ChartBox& box = *charts_[std::size_t(chart)];
    if (!box.markers[0]) return {};
    return box.marker_steps[std::size_t(kind)];
}

// The marks' steps in [x_lo, x_hi], merged (kMaxMarkers per kind), for the saving and loss charts.
// Reads the shown updates that changed precisions (the store's list of them) and the log's commands
// and rollbacks (by its category index), not every update at every redraw. Steps normally ascend
// with updates, but nothing here relies on it: a file out of order still gets its marks.
void ChartsPanel::collectMarkers(double x_lo, double x_hi) {
    std::array<std::vector<double>, kMarkerKinds> raw;
    const std::size_t n = shownCount();
    if (n > 0) {
        const std::vector<std::uint32_t>& changed = store_->updatesWithChanges();
        const auto shown_end = std::lower_bound(changed.begin(), changed.end(), n);
        for (auto it = changed.begin(); it != shown_end; ++it) {
            const auto step = double(store_->row(*it).step);
            if (step >= x_lo && step <= x_hi) raw[0].push_back(step);
        }
    }
    if (session_ && n > 0) {  // events past the timeline cursor are not shown yet
        const EventLog& log = session_->events();
        const std::int64_t last_step = store_->row(n - 1).step;
        for (const std::size_t i : log.select(EventCategory::command, last_step)) {
            const EventEntry& e = log.at(i);
            if (e.step >= 0 && e.state == CommandState::applied) raw[1].push_back(double(e.step));
        }
        for (const std::size_t i : log.select(EventCategory::rollback, last_step))
            if (log.at(i).step >= 0) raw[2].push_back(double(log.at(i).step));
    }
    for (Chart which : {Chart::saving, Chart::loss})
        for (int k = 0; k < kMarkerKinds; ++k)
            charts_[std::size_t(which)]->marker_steps[std::size_t(k)] =
                mergeMarkers(raw[std::size_t(k)], x_lo, x_hi, kMaxMarkers);
}

// Each kind of mark in its strip at the top of the y range (linear or log) the chart now shows.
void ChartsPanel::placeMarkers(ChartBox& box) {
    double lo = box.y->min();
    double hi = box.y->max();
    const bool log = box.log && box.log_y;
    if (log) {
        lo = std::log(box.log_y->min());
        hi = std::log(box.log_y->max());
    }
    for (int k = 0; k < kMarkerKinds; ++k) {
        const std::vector<double>& steps = box.marker_steps[std::size_t(k)];
        const double at = lo + kMarkerHeights[std::size_t(k)] * (hi - lo);
        const double y = log ? std::exp(at) : at;
        QList<QPointF> points;
        points.reserve(qsizetype(steps.size()));
        for (double s : steps) points.append({s, y});
        QScatterSeries* series = box.markers[std::size_t(k)];
        series->replace(points);
        series->setVisible(!points.isEmpty());
    }
}

}  // namespace sp::ui
