// The lines each chart of ChartsPanel draws, at full resolution, before decimation: the run's own
// lines, then each overlaid run's counterparts of them (dashed), then the overlays (the what-if). The
// same list draws the chart, writes its legend and exports its CSV, so the three always agree.
#include <algorithm>
#include <cmath>

#include "chart_box.h"
#include "chart_math.h"
#include "chart_series.h"
#include "sp/ui/colormap.h"
#include "sp/ui/telemetry_store.h"

namespace sp::ui {

namespace {

// Okabe–Ito, for the selected blocks' lines (distinct for most colour-blind viewers).
constexpr std::array<QRgb, ChartsPanel::kMaxSelectedLines> kBlockColors = {
    0xFF0072B2u, 0xFFE69F00u, 0xFF009E73u, 0xFFCC79A7u, 0xFF56B4E9u, 0xFFD55E00u, 0xFFF0E442u, 0xFF999999u};
constexpr int kRawAlpha = 70;  // the unsmoothed losses, behind the smoothed ones

// A line named `look.name + name` in `look`'s dash and legend role, over (xs, ys) up to `n`.
LineSource makeLine(const LineSource& look, const QString& name, QColor color, const std::vector<double>& xs,
                    const std::vector<float>& ys, std::size_t n, GapPolicy gaps = GapPolicy::break_line) {
    LineSource line = look;
    line.name = look.name + name;
    line.color = color;
    line.gaps = gaps;
    line.setSamples(xs, ys, n);
    return line;
}

LineSource makeLine(const LineSource& look, const QString& name, QColor color, const std::vector<double>& xs,
                    const FieldSeries& ys, std::size_t n) {
    LineSource line = look;
    line.name = look.name + name;
    line.color = color;
    line.setDecodedSamples(xs, ys, n);
    return line;
}

// The blocks per precision: BF16's light grey is for the dark heatmap strip, a light chart needs more.
std::array<std::pair<QString, QColor>, 4> precisionLines(bool dark) {
    return {{{QStringLiteral("BF16"),
              dark ? QColor::fromRgb(precisionColor(Precision::bf16)) : QColor(0x70, 0x70, 0x70)},
             {QStringLiteral("INT8"), QColor::fromRgb(precisionColor(Precision::int8))},
             {QStringLiteral("FP8"), QColor::fromRgb(precisionColor(Precision::fp8_e4m3))},
             {QStringLiteral("INT4"), QColor::fromRgb(precisionColor(Precision::int4))}}};
}

const std::vector<float>& precisionColumn(const RunColumns& c, std::size_t i) {
    return *std::array{&c.bf16, &c.int8, &c.fp8, &c.int4}[i];
}

int blockNamed(const TelemetryStore& store, const std::string& name) {
    const BlockLayout& layout = store.layout();
    for (std::size_t b = 0; b < layout.size(); ++b)
        if (layout[b].name == name) return int(b);
    return -1;
}

}  // namespace

std::vector<LineSource> ChartsPanel::linesOf(Chart which) const {
    std::vector<LineSource> out;
    addOwnLines(which, out);
    for (std::size_t i = 0; i < overlay_runs_.size(); ++i) addRunLines(which, overlay_runs_[i], i, out);
    addOverlayLines(which, out);
    return out;
}

void ChartsPanel::addOwnLines(Chart which, std::vector<LineSource>& out) const {
    const RunColumns& c = *run_;
    const std::size_t n = shownCount();
    const LineSource own;
    switch (which) {
        case Chart::saving:
            out.push_back(
                makeLine(own, tr("estimated"), QColor::fromRgb(kEstimatedColor), c.steps, c.estimated, n));
            out.push_back(
                makeLine(own, tr("measured"), QColor::fromRgb(kMeasuredColor), c.steps, c.measured, n));
            out.push_back(
                makeLine(own, tr("budget target"), QColor::fromRgb(kTargetColor), c.steps, c.target, n));
            out.back().style = Qt::DashLine;
            break;
        case Chart::precision: {
            const auto looks = precisionLines(dark_);
            for (std::size_t i = 0; i < looks.size(); ++i)
                out.push_back(makeLine(own, looks[i].first, looks[i].second, c.steps, precisionColumn(c, i),
                                       n, GapPolicy::skip));
            break;
        }
        case Chart::sensitivity:
        case Chart::gradient: {
            const BlockField field =
                which == Chart::sensitivity ? BlockField::sensitivity : BlockField::l2_norm;
            const std::size_t shown = std::min<std::size_t>(selected_.size(), kMaxSelectedLines);
            for (std::size_t i = 0; i < shown; ++i) {
                const int b = selected_[i];
                if (!store_ || b < 0 || b >= store_->blockCount()) continue;
                const QString name = QString::fromStdString(store_->layout()[std::size_t(b)].name);
                out.push_back(makeLine(own, name, QColor::fromRgb(kBlockColors[i]), c.steps,
                                       store_->series(b, field), n));
            }
            break;
        }
        case Chart::loss:
            addLossLines(c, n, own, out);
            break;
    }
}

void ChartsPanel::addRunLines(Chart which, const OverlaidRun& run, std::size_t index,
                              std::vector<LineSource>& out) const {
    const RunColumns& c = run.columns;
    const std::size_t n = c.size();
    LineSource look;
    look.name = run.name + QStringLiteral(": ");
    look.style = kRunStyles[index % kRunStyles.size()];
    look.legend = LegendEntry::run;
    look.run = run.name;
    switch (which) {
        case Chart::saving:
            out.push_back(
                makeLine(look, tr("estimated"), QColor::fromRgb(kEstimatedColor), c.steps, c.estimated, n));
            out.push_back(
                makeLine(look, tr("measured"), QColor::fromRgb(kMeasuredColor), c.steps, c.measured, n));
            break;
        case Chart::precision: {
            const auto looks = precisionLines(dark_);
            for (std::size_t i = 0; i < looks.size(); ++i)
                out.push_back(makeLine(look, looks[i].first, looks[i].second, c.steps, precisionColumn(c, i),
                                       n, GapPolicy::skip));
            break;
        }
        case Chart::sensitivity:
        case Chart::gradient: {  // the same blocks, found by name: runs of one model share its names
            const BlockField field =
                which == Chart::sensitivity ? BlockField::sensitivity : BlockField::l2_norm;
            const std::size_t shown = std::min<std::size_t>(selected_.size(), kMaxSelectedLines);
            for (std::size_t i = 0; i < shown && store_ && run.store; ++i) {
                const int b = selected_[i];
                if (b < 0 || b >= store_->blockCount()) continue;
                const std::string& name = store_->layout()[std::size_t(b)].name;
                const int other = blockNamed(*run.store, name);
                if (other < 0) continue;
                out.push_back(makeLine(look, QString::fromStdString(name), QColor::fromRgb(kBlockColors[i]),
                                       c.steps, run.store->series(other, field), n));
            }
            break;
        }
        case Chart::loss:
            addLossLines(c, n, look, out);
            break;
    }
}

// Train and eval loss, smoothed when smoothing is on (another run's as this run's, so that they
// compare); this run's raw losses are drawn faint behind. The eval loss is sparse (only where
// evaluated) and drawn where it was measured (eval_step): its line joins the known points.
void ChartsPanel::addLossLines(const RunColumns& c, std::size_t n, const LineSource& look,
                               std::vector<LineSource>& out) const {
    const bool smooth = smoothing_ > 0.0;
    const QColor train_color = QColor::fromRgb(kTrainLossColor);
    const QColor eval_color = QColor::fromRgb(kEvalLossColor);
    if (smooth && look.legend == LegendEntry::own) {
        QColor faint_train = train_color, faint_eval = eval_color;
        faint_train.setAlpha(kRawAlpha);
        faint_eval.setAlpha(kRawAlpha);
        out.push_back(
            makeLine(look, tr("train loss (raw)"), faint_train, c.steps, c.train_loss, n, GapPolicy::skip));
        out.push_back(
            makeLine(look, tr("eval loss (raw)"), faint_eval, c.eval_steps, c.eval_loss, n, GapPolicy::skip));
        out[out.size() - 2].legend = out.back().legend = LegendEntry::none;
    }
    out.push_back(makeLine(look, tr("train loss"), train_color, c.steps, c.train_loss, n, GapPolicy::skip));
    if (smooth) out.back().setOwnedSamples(c.steps, emaSmooth(c.train_loss, n, smoothing_));
    out.push_back(makeLine(look, tr("eval loss"), eval_color, c.eval_steps, c.eval_loss, n, GapPolicy::skip));
    if (smooth) out.back().setOwnedSamples(c.eval_steps, emaSmooth(c.eval_loss, n, smoothing_));
}

void ChartsPanel::addOverlayLines(Chart which, std::vector<LineSource>& out) const {
    for (const Overlay& o : overlays_) {
        if (o.chart != which) continue;
        LineSource line;
        line.name = o.name;
        line.color = QColor::fromRgb(o.color);
        line.gaps = GapPolicy::skip;
        const std::size_t count = std::min(o.steps.size(), o.values.size());
        if (which == Chart::loss && smoothing_ > 0.0)
            line.setOwnedSamples(o.steps, emaSmooth(o.values, count, smoothing_));
        else
            line.setSamples(o.steps, o.values, count);
        out.push_back(std::move(line));
    }
}

// The steps of everything there is to draw: this run's updates shown (and where their eval losses
// were measured: the evaluation before training is at step 0), the overlays' and overlaid runs'.
std::pair<double, double> ChartsPanel::fullXRange() const {
    const RunColumns& c = *run_;
    const std::size_t n = shownCount();
    bool have = n > 0;
    double lo = have ? c.steps.front() : 0.0;
    double hi = have ? c.steps[n - 1] : 1.0;
    for (std::size_t u = 0; u < n; ++u)
        if (std::isfinite(c.eval_loss[u])) lo = std::min(lo, c.eval_steps[u]);
    const auto take = [&](const std::vector<double>& steps) {
        if (steps.empty()) return;
        lo = have ? std::min(lo, steps.front()) : steps.front();
        hi = have ? std::max(hi, steps.back()) : steps.back();
        have = true;
    };
    for (const Overlay& o : overlays_) take(o.steps);
    for (const OverlaidRun& r : overlay_runs_) take(r.columns.steps);
    return {lo, std::max(hi, lo + 1.0)};
}

}  // namespace sp::ui
