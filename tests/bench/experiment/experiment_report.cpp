// The experiment's report: a Markdown table (with the verdict against the goal, computed
// from the numbers), a per-run CSV and a PNG of the eval-loss curves painted with QPainter.
#include <QDir>
#include <QFile>
#include <QImage>
#include <QPainter>
#include <QPainterPath>
#include <QTextStream>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "experiment.h"

namespace sp::experiment {
namespace {

struct Spread {
    double mean = 0, lo = 0, hi = 0;
};

template <typename F>
Spread spread(const std::vector<RunResult>& runs, F value) {
    Spread s{0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
    for (const RunResult& r : runs) {
        const double v = value(r);
        s.mean += v / double(runs.size());
        s.lo = std::min(s.lo, v);
        s.hi = std::max(s.hi, v);
    }
    return s;
}

QString num(double v, int decimals) {
    // A value that rounds to zero prints as 0, not as "-0.00".
    if (std::fabs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0.0;
    return QString::number(v, 'f', decimals);
}

// "2.2345 (2.2301 .. 2.2389)": the mean over the seeds and the range; just the value for one seed.
QString with_range(const Spread& s, int decimals, const QString& unit = {}) {
    if (s.lo == s.hi) return num(s.mean, decimals) + unit;
    return num(s.mean, decimals) + unit + " (" + num(s.lo, decimals) + " .. " + num(s.hi, decimals) + ")";
}

const VariantResult* find(const std::vector<VariantResult>& results, const QString& key) {
    for (const auto& r : results)
        if (r.variant.key == key) return &r;
    return nullptr;
}

// Per-seed relative difference of the final eval loss to all-BF16 with the same seed, in percent.
double delta_pct(const RunResult& r, const VariantResult& bf16) {
    for (const RunResult& b : bf16.runs)
        if (b.seed == r.seed) return 100.0 * (r.final_eval - b.final_eval) / b.final_eval;
    return std::numeric_limits<double>::quiet_NaN();
}

QString rollbacks_per_seed(const std::vector<RunResult>& runs) {
    QStringList parts;
    for (const RunResult& r : runs) parts << QString::number(r.rollbacks);
    return parts.join(", ");
}

QString markdown_table(const std::vector<VariantResult>& results, const VariantResult& bf16) {
    QString t;
    QTextStream o(&t);
    o << "| Scheme | Final eval loss | Δ vs all-BF16 | Bytes saved | INT8 block-steps | Wall time / run | "
         "Switches | "
         "Rollbacks (per seed) |\n"
      << "|---|---|---|---|---|---|---|---|\n";
    for (const VariantResult& vr : results) {
        if (vr.runs.empty()) {
            o << "| " << vr.variant.label << " | " << vr.variant.unavailable_why << " | | | | | | |\n";
            continue;
        }
        o << "| " << vr.variant.label << " | "
          << with_range(spread(vr.runs, [](auto& r) { return r.final_eval; }), 4) << " | "
          << with_range(spread(vr.runs, [&](auto& r) { return delta_pct(r, bf16); }), 2, "%") << " | "
          << with_range(spread(vr.runs, [](auto& r) { return r.saving_pct; }), 1, "%") << " | "
          << num(100.0 * spread(vr.runs, [](auto& r) { return r.int8_share; }).mean, 0) << "% | "
          << num(spread(vr.runs, [](auto& r) { return r.wall_s; }).mean, 0) << " s | "
          << with_range(spread(vr.runs, [](auto& r) { return double(r.switches); }), 1) << " | "
          << rollbacks_per_seed(vr.runs) << " |\n";
    }
    return t;
}

// The goal, checked on the numbers: >= 25% bytes saved, eval loss within 1% of all-BF16
// (every seed), and better than uniform INT8's loss.
QString verdict(const std::vector<VariantResult>& results, const VariantResult& bf16) {
    const VariantResult* int8 = find(results, "int8");
    QString t;
    QTextStream o(&t);
    for (const char* key : {"sp", "sp_rollback", "sp_nocal", "sp_nocal_rollback"}) {
        const VariantResult* vr = find(results, key);
        if (!vr || vr->runs.empty()) continue;
        const Spread saved = spread(vr->runs, [](auto& r) { return r.saving_pct; });
        const Spread delta = spread(vr->runs, [&](auto& r) { return delta_pct(r, bf16); });
        const bool saves = saved.lo >= 25.0;
        const bool close = delta.hi <= 1.0;
        bool beats_int8 = int8 && !int8->runs.empty();
        if (beats_int8)
            for (std::size_t k = 0; k < vr->runs.size(); ++k)
                beats_int8 = beats_int8 && vr->runs[k].final_eval < int8->runs[k].final_eval;
        o << "- **" << vr->variant.label << "**: saves " << num(saved.lo, 1) << "–" << num(saved.hi, 1)
          << "% of the bytes (goal ≥ 25%: " << (saves ? "met" : "**missed**") << "); eval loss "
          << num(delta.lo, 2) << "% to " << num(delta.hi, 2)
          << "% vs all-BF16 (goal ≤ +1%: " << (close ? "met" : "**missed**") << "); "
          << (beats_int8 ? "lower eval loss than all-INT8 on every seed"
                         : "**not** lower than all-INT8 on every seed")
          << ".\n";
    }
    return t;
}

void write_csv(const QString& path, const std::vector<VariantResult>& results, const VariantResult& bf16) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write " + path.toStdString());
    QTextStream o(&f);
    o << "scheme,label,seed,final_eval_loss,delta_vs_bf16_pct,bytes_saved_pct,int8_block_step_share,wall_s,"
         "switches,"
         "rollbacks,rollback_steps,available\n";
    for (const VariantResult& vr : results) {
        if (vr.runs.empty()) {
            o << vr.variant.key << ",\"" << vr.variant.label << "\",,,,,,,,,,\"" << vr.variant.unavailable_why
              << "\"\n";
            continue;
        }
        for (const RunResult& r : vr.runs) {
            QStringList steps;
            for (auto s : r.rollback_steps) steps << QString::number(s);
            o << vr.variant.key << ",\"" << vr.variant.label << "\"," << r.seed << ',' << num(r.final_eval, 6)
              << ',' << num(delta_pct(r, bf16), 4) << ',' << num(r.saving_pct, 4) << ','
              << num(r.int8_share, 4) << ',' << num(r.wall_s, 1) << ',' << r.switches << ',' << r.rollbacks
              << ",\"" << steps.join(' ') << "\",yes\n";
        }
    }
}

// ---- the PNG ------------------------------------------------------------------------------

struct Series {
    QString label;
    QColor color;
    std::vector<QPointF> points;  // (step, loss)
    std::vector<double> markers;  // steps with a vertical marker (rollbacks)
    Qt::PenStyle style = Qt::SolidLine;
};

// One panel: axes with ticks, the series, a legend in the upper right.
void paint_panel(QPainter& p, const QRectF& area, const QString& title, const QString& y_label,
                 const std::vector<Series>& series, double x_max, double y_min, double y_max) {
    const QRectF plot = area.adjusted(70, 40, -20, -50);
    auto map = [&](QPointF v) {
        return QPointF(plot.left() + plot.width() * v.x() / x_max,
                       plot.bottom() - plot.height() * (v.y() - y_min) / (y_max - y_min));
    };
    p.setPen(Qt::black);
    QFont font = p.font();
    font.setPixelSize(16);
    font.setBold(true);
    p.setFont(font);
    p.drawText(QRectF(area.left(), area.top() + 5, area.width(), 30), Qt::AlignHCenter, title);
    font.setBold(false);
    font.setPixelSize(13);
    p.setFont(font);
    p.drawRect(plot);
    for (int i = 0; i <= 5; ++i) {
        const double y = y_min + (y_max - y_min) * i / 5.0;
        const QPointF at = map({0, y});
        p.setPen(QColor(225, 225, 225));
        p.drawLine(QPointF(plot.left(), at.y()), QPointF(plot.right(), at.y()));
        p.setPen(Qt::black);
        p.drawText(QRectF(plot.left() - 65, at.y() - 9, 60, 18), Qt::AlignRight | Qt::AlignVCenter,
                   num(y, 2));
        const double x = x_max * i / 5.0;
        const QPointF xt = map({x, y_min});
        p.drawLine(xt, xt + QPointF(0, 5));
        p.drawText(QRectF(xt.x() - 40, plot.bottom() + 6, 80, 18), Qt::AlignHCenter,
                   QString::number(x, 'f', 0));
    }
    p.drawText(QRectF(plot.left(), plot.bottom() + 26, plot.width(), 20), Qt::AlignHCenter, "training step");
    p.save();
    p.translate(area.left() + 14, plot.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-100, -10, 200, 20), Qt::AlignHCenter, y_label);
    p.restore();

    p.save();
    p.setClipRect(plot);
    p.setRenderHint(QPainter::Antialiasing);
    for (const Series& s : series) {
        QPen pen(s.color, 2.2, s.style);
        p.setPen(pen);
        QPainterPath path;
        for (std::size_t i = 0; i < s.points.size(); ++i) {
            if (i == 0)
                path.moveTo(map(s.points[i]));
            else
                path.lineTo(map(s.points[i]));
        }
        p.drawPath(path);
        p.setPen(QPen(s.color, 1.2, Qt::DashLine));
        for (double m : s.markers) p.drawLine(map({m, y_min}), map({m, y_max}));
    }
    p.restore();

    const double row = 20;
    const QRectF legend(plot.right() - 330, plot.top() + 8, 322, row * double(series.size()) + 10);
    p.fillRect(legend, QColor(255, 255, 255, 230));
    p.setPen(QColor(160, 160, 160));
    p.drawRect(legend);
    for (std::size_t i = 0; i < series.size(); ++i) {
        const double y = legend.top() + 5 + row * (double(i) + 0.5);
        p.setPen(QPen(series[i].color, 3, series[i].style));
        p.drawLine(QPointF(legend.left() + 8, y), QPointF(legend.left() + 38, y));
        p.setPen(Qt::black);
        p.drawText(QRectF(legend.left() + 46, y - 10, legend.width() - 50, 20), Qt::AlignVCenter,
                   series[i].label);
    }
}

const QColor kColors[] = {QColor(0, 0, 0),     QColor(214, 39, 40),  QColor(31, 119, 180),
                          QColor(44, 160, 44), QColor(255, 127, 14), QColor(148, 103, 189),
                          QColor(140, 86, 75)};

void write_png(const QString& path, const Settings& s, const std::vector<VariantResult>& results) {
    QImage image(1600, 650, QImage::Format_RGB32);
    image.fill(Qt::white);
    QPainter p(&image);

    // Left: held-out loss, mean over the seeds, every scheme that ran.
    std::vector<Series> evals;
    double y_min = std::numeric_limits<double>::infinity(), y_max = -y_min;
    std::size_t color = 0;
    for (const VariantResult& vr : results) {
        if (vr.runs.empty()) continue;
        Series series{vr.variant.label, kColors[color++ % 7], {}, {}, Qt::SolidLine};
        const auto& first = vr.runs.front().eval_curve;
        for (std::size_t i = 0; i < first.size(); ++i) {
            double mean = 0;
            for (const RunResult& r : vr.runs) mean += r.eval_curve.at(i).second / double(vr.runs.size());
            series.points.emplace_back(double(first[i].first), mean);
            y_min = std::min(y_min, mean);
            // The first fifth of the run is the steep descent every scheme shares: leave it off the scale.
            if (double(first[i].first) >= double(s.steps) / 5.0) y_max = std::max(y_max, mean);
        }
        if (vr.variant.key.startsWith("sp"))
            series.style = vr.variant.key.contains("rollback") ? Qt::DashLine : Qt::SolidLine;
        evals.push_back(std::move(series));
    }
    const double pad = 0.05 * (y_max - y_min);
    paint_panel(p, QRectF(0, 0, 800, 650),
                QString("Held-out loss, mean of %1 seed(s); block %2's INT8 harsh")
                    .arg(s.seeds.size())
                    .arg(s.harsh_block),
                "eval loss", evals, double(s.steps), y_min - pad, y_max + pad);

    // Right: the training loss around the rollbacks (first seed, 10-step moving average).
    std::vector<Series> train;
    double t_min = std::numeric_limits<double>::infinity(), t_max = -t_min;
    const std::pair<const char*, QColor> shown[] = {
        {"bf16", kColors[0]}, {"sp_nocal", kColors[5]}, {"sp_nocal_rollback", kColors[6]}};
    for (const auto& [key, c] : shown) {
        const VariantResult* vr = find(results, key);
        if (!vr || vr->runs.empty()) continue;
        const RunResult& r = vr->runs.front();
        Series series{
            vr->variant.label + " (seed " + QString::number(r.seed) + ")", c, {}, {}, Qt::SolidLine};
        double sum = 0;
        for (std::size_t i = 0; i < r.train_loss.size(); ++i) {
            sum += r.train_loss[i];
            if (i >= 10) sum -= r.train_loss[i - 10];
            const double avg = sum / double(std::min<std::size_t>(i + 1, 10));
            series.points.emplace_back(double(i), avg);
            if (double(i) >= double(s.steps) / 5.0) {
                t_min = std::min(t_min, avg);
                t_max = std::max(t_max, avg);
            }
        }
        for (auto step : r.rollback_steps) series.markers.push_back(double(step));
        train.push_back(std::move(series));
    }
    const double tpad = 0.05 * (t_max - t_min);
    paint_panel(p, QRectF(800, 0, 800, 650), "Training loss (10-step mean); dashed lines: rollbacks",
                "train loss", train, double(s.steps), t_min - tpad, t_max + tpad);
    p.end();
    if (!image.save(path, "PNG")) throw std::runtime_error("cannot write " + path.toStdString());
}

}  // namespace

QString write_report(const Settings& s, const std::vector<VariantResult>& results, double total_wall_s) {
    const VariantResult* bf16 = find(results, "bf16");
    if (!bf16 || bf16->runs.empty()) throw std::runtime_error("the report needs the all-BF16 runs");
    const QDir out(s.out_dir);
    const QString table = markdown_table(results, *bf16);

    QStringList seeds;
    for (auto seed : s.seeds) seeds << QString::number(seed);
    QFile md(out.filePath("results.md"));
    if (!md.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw std::runtime_error("cannot write results.md");
    QTextStream o(&md);
    o << "# Selective Precision experiment\n\n"
      << "sp-trainer's byte-level GPT, " << s.blocks << " blocks, d_model " << s.d_model << ", " << s.steps
      << " steps, seeds " << seeds.join(", ") << "; every scheme trains the same model on the same batches.\n"
      << "Planted fault: block " << s.harsh_block
      << "'s INT8 is a deliberately harsh quantizer, stochastic ternary rounding onto a grid of "
      << s.harsh_step << " times each row's absmax (`--harsh-block " << s.harsh_block << " --harsh-step "
      << s.harsh_step
      << "`): unbiased, but noisier than the weights themselves and fresh every step, so training cannot "
         "learn "
         "around it. Calibration and the runtime both see it; BF16 is unaffected. The calibration-off rows "
         "start "
         "routing at step "
      << s.planted_warmup << " (`warmup_steps`).\n\n"
      << "Values are the mean over the seeds with the range in parentheses; Δ is per seed against all-BF16 "
         "with "
         "the same seed. Bytes saved are the bytes the runtime materialized over the whole run (initial load "
         "included) against the same copies in BF16. Wall time is per run, "
      << s.jobs << " runs in parallel on this machine; the whole experiment took "
      << num(total_wall_s / 60.0, 1) << " min.\n\n"
      << table << "\n## Against the goal\n\n"
      << verdict(results, *bf16) << "\n![eval loss](eval_loss.png)\n";
    md.close();
    write_csv(out.filePath("results.csv"), results, *bf16);
    write_png(out.filePath("eval_loss.png"), s, results);
    return table;
}

}  // namespace sp::experiment
