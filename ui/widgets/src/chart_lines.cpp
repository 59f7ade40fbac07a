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

// A line named `look.name + name` in `look`'s dash and legend role, read in place from `series`.
LineSource makeLine(const LineSource& look, const QString& name, QColor color, const StoreSeries& series,
                    GapPolicy gaps = GapPolicy::break_line) {
    LineSource line = look;
    line.name = look.name + name;
    line.color = color;
    line.gaps = gaps;
    line.setSeries(series);
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

constexpr std::array<RunField, 4> kPrecisionFields = {RunField::blocks_bf16, RunField::blocks_int8,
                                                      RunField::blocks_fp8, RunField::blocks_int4};

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
    // Without a store the lines are there, empty: each chart keeps its line series from the start.
    static const TelemetryStore kNoRun;
    addStoreLines(which, store_ ? *store_ : kNoRun, shownCount(), LineSource(), out);
}

void ChartsPanel::addRunLines(Chart which, const OverlaidRun& run, std::size_t index,
                              std::vector<LineSource>& out) const {
    LineSource look;
    look.name = run.name + QStringLiteral(": ");
    look.style = kRunStyles[index % kRunStyles.size()];
    look.legend = LegendEntry::run;
    look.run = run.name;
    addStoreLines(which, *run.store, run.store->updateCount(), look, out);
}

// A run's lines of a chart, read from its store: this run's (look.legend own) or an overlaid run's
// counterparts, whose selected blocks are found by name (runs of one model share its names).
void ChartsPanel::addStoreLines(Chart which, const TelemetryStore& store, std::size_t n,
                                const LineSource& look, std::vector<LineSource>& out) const {
    const bool own = look.legend == LegendEntry::own;
    const auto run = [&](RunField f) { return StoreSeries::run(store, f, n); };
    switch (which) {
        case Chart::saving:
            out.push_back(makeLine(look, tr("estimated"), QColor::fromRgb(kEstimatedColor),
                                   run(RunField::estimated_saving)));
            out.push_back(makeLine(look, tr("measured"), QColor::fromRgb(kMeasuredColor),
                                   run(RunField::measured_saving)));
            if (!own) break;
            out.push_back(makeLine(look, tr("budget target"), QColor::fromRgb(kTargetColor),
                                   run(RunField::budget_target)));
            out.back().style = Qt::DashLine;
            break;
        case Chart::precision: {
            const auto looks = precisionLines(dark_);
            for (std::size_t i = 0; i < looks.size(); ++i)
                out.push_back(makeLine(look, looks[i].first, looks[i].second, run(kPrecisionFields[i]),
                                       GapPolicy::skip));
            break;
        }
        case Chart::sensitivity:
        case Chart::gradient: {
            const BlockField field =
                which == Chart::sensitivity ? BlockField::sensitivity : BlockField::l2_norm;
            const std::size_t shown = std::min<std::size_t>(selected_.size(), kMaxSelectedLines);
            for (std::size_t i = 0; i < shown && store_; ++i) {
                const int b = selected_[i];
                if (b < 0 || b >= store_->blockCount()) continue;
                const std::string& name = store_->layout()[std::size_t(b)].name;
                const int block = own ? b : blockNamed(store, name);
                if (block < 0) continue;
                out.push_back(makeLine(look, QString::fromStdString(name), QColor::fromRgb(kBlockColors[i]),
                                       StoreSeries::block(store, block, field, n)));
            }
            break;
        }
        case Chart::loss:
            addLossLines(run(RunField::train_loss), run(RunField::eval_loss), look, out);
            break;
    }
}

// Train and eval loss, smoothed when smoothing is on (another run's as this run's, so that they
// compare); this run's raw losses are drawn faint behind. The eval loss is sparse (only where
// evaluated) and drawn where it was measured (eval_step): its line joins the known points. The
// smoothed values are computed per redraw (an EMA has no summary) and dropped after it.
void ChartsPanel::addLossLines(const StoreSeries& train, const StoreSeries& eval, const LineSource& look,
                               std::vector<LineSource>& out) const {
    const bool smooth = smoothing_ > 0.0;
    const QColor train_color = QColor::fromRgb(kTrainLossColor);
    const QColor eval_color = QColor::fromRgb(kEvalLossColor);
    if (smooth && look.legend == LegendEntry::own) {
        QColor faint_train = train_color, faint_eval = eval_color;
        faint_train.setAlpha(kRawAlpha);
        faint_eval.setAlpha(kRawAlpha);
        out.push_back(makeLine(look, tr("train loss (raw)"), faint_train, train, GapPolicy::skip));
        out.push_back(makeLine(look, tr("eval loss (raw)"), faint_eval, eval, GapPolicy::skip));
        out[out.size() - 2].legend = out.back().legend = LegendEntry::none;
    }
    out.push_back(makeLine(look, tr("train loss"), train_color, train, GapPolicy::skip));
    if (smooth) out.back().setComputed(train, emaSmooth(valuesOf(train), train.size(), smoothing_));
    out.push_back(makeLine(look, tr("eval loss"), eval_color, eval, GapPolicy::skip));
    if (smooth) out.back().setComputed(eval, emaSmooth(valuesOf(eval), eval.size(), smoothing_));
}

void ChartsPanel::addOverlayLines(Chart which, std::vector<LineSource>& out) const {
    for (const Overlay& o : overlays_) {
        if (o.chart != which) continue;
        LineSource line;
        line.name = o.name;
        line.color = QColor::fromRgb(o.color);
        line.gaps = GapPolicy::skip;
        const std::size_t count = std::min(o.steps.size(), o.values.size());
        if (which == Chart::loss && smoothing_ > 0.0) {
            line.owned_y = std::make_shared<std::vector<float>>(emaSmooth(o.values, count, smoothing_));
            line.setSamples(o.steps, *line.owned_y, count);
        } else
            line.setSamples(o.steps, o.values, count);
        out.push_back(std::move(line));
    }
}

// The steps of everything there is to draw: this run's updates shown (and where their eval losses
// were measured: the evaluation before training is at step 0), the overlays' and overlaid runs'.
std::pair<double, double> ChartsPanel::fullXRange() const {
    const std::size_t n = store_ ? shownCount() : 0;
    bool have = n > 0;
    double lo = have ? double(store_->row(0).step) : 0.0;
    double hi = have ? double(store_->row(n - 1).step) : 1.0;
    // eval_step does not decrease: the first eval loss is the earliest.
    for (std::size_t u = 0; u < n; ++u)
        if (std::isfinite(store_->row(u).eval_loss)) {
            lo = std::min(lo, double(store_->row(u).eval_step));
            break;
        }
    const auto take = [&](double first, double last) {
        lo = have ? std::min(lo, first) : first;
        hi = have ? std::max(hi, last) : last;
        have = true;
    };
    for (const Overlay& o : overlays_)
        if (!o.steps.empty()) take(o.steps.front(), o.steps.back());
    for (const OverlaidRun& r : overlay_runs_)
        if (!r.store->empty()) take(double(r.store->row(0).step), double(r.store->rows().back().step));
    return {lo, std::max(hi, lo + 1.0)};
}

}  // namespace sp::ui
