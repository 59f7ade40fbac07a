// The experiment's plots, painted with QPainter (no display needed): frontier.png (bytes saved
// against the eval-loss change, one point per scheme with the seed range as error bars) and
// eval_loss.png (the held-out loss curves and their difference to all-BF16).
#include <QFontMetricsF>
#include <QImage>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "experiment.h"
#include "experiment_oracle.h"

namespace sp::experiment {
namespace {

const QColor kUniformColor(110, 110, 110);
const QColor kSelectiveColor(31, 119, 180);
const QColor kPalette[] = {QColor(0, 0, 0),       QColor(214, 39, 40),   QColor(255, 127, 14),
                           QColor(188, 189, 34),  QColor(140, 86, 75),   QColor(31, 119, 180),
                           QColor(23, 190, 207),  QColor(44, 160, 44),   QColor(148, 103, 189),
                           QColor(227, 119, 194), QColor(127, 127, 127), QColor(0, 90, 50)};

// A step of 1, 2 or 5 times a power of ten giving about `ticks` intervals over [lo, hi].
double nice_step(double lo, double hi, int ticks) {
    const double raw = std::max((hi - lo) / ticks, 1e-12);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0})
        if (m * mag >= raw) return m * mag;
    return 10.0 * mag;
}

// A plot area with round-number ticks, grid lines and axis titles; map() takes data to pixels.
struct Axes {
    QRectF plot;
    double x0, x1, y0, y1;
    QPointF map(double x, double y) const {
        return {plot.left() + plot.width() * (x - x0) / (x1 - x0),
                plot.bottom() - plot.height() * (y - y0) / (y1 - y0)};
    }
};

Axes draw_axes(QPainter& p, const QRectF& area, const QString& title, const QString& x_title,
               const QString& y_title, double x0, double x1, double y0, double y1) {
    const double xs = nice_step(x0, x1, 8), ys = nice_step(y0, y1, 6);
    Axes a{area.adjusted(80, 45, -25, -60), std::floor(x0 / xs) * xs, std::ceil(x1 / xs) * xs,
           std::floor(y0 / ys) * ys, std::ceil(y1 / ys) * ys};
    QFont font = p.font();
    font.setPixelSize(17);
    font.setBold(true);
    p.setFont(font);
    p.setPen(Qt::black);
    p.drawText(QRectF(area.left(), area.top() + 8, area.width(), 30), Qt::AlignHCenter, title);
    font.setBold(false);
    font.setPixelSize(13);
    p.setFont(font);
    const int decimals_x = xs >= 1 ? 0 : int(std::ceil(-std::log10(xs)));
    const int decimals_y = ys >= 1 ? 0 : int(std::ceil(-std::log10(ys)));
    for (double y = a.y0; y <= a.y1 + ys / 2; y += ys) {
        const QPointF at = a.map(a.x0, y);
        p.setPen(QColor(228, 228, 228));
        p.drawLine(QPointF(a.plot.left(), at.y()), QPointF(a.plot.right(), at.y()));
        p.setPen(Qt::black);
        p.drawText(QRectF(a.plot.left() - 75, at.y() - 9, 68, 18), Qt::AlignRight | Qt::AlignVCenter,
                   QString::number(std::fabs(y) < ys / 2 ? 0.0 : y, 'f', decimals_y));
    }
    for (double x = a.x0; x <= a.x1 + xs / 2; x += xs) {
        const QPointF at = a.map(x, a.y0);
        p.setPen(QColor(228, 228, 228));
        p.drawLine(QPointF(at.x(), a.plot.top()), QPointF(at.x(), a.plot.bottom()));
        p.setPen(Qt::black);
        p.drawText(QRectF(at.x() - 40, a.plot.bottom() + 6, 80, 18), Qt::AlignHCenter,
                   QString::number(x, 'f', decimals_x));
    }
    p.setPen(Qt::black);
    p.drawRect(a.plot);
    p.drawText(QRectF(a.plot.left(), a.plot.bottom() + 30, a.plot.width(), 20), Qt::AlignHCenter, x_title);
    p.save();
    p.translate(area.left() + 16, a.plot.center().y());
    p.rotate(-90);
    p.drawText(QRectF(-200, -10, 400, 20), Qt::AlignHCenter, y_title);
    p.restore();
    return a;
}

QImage white_image(int width, int height) {
    QImage image(width, height, QImage::Format_RGB32);
    image.fill(Qt::white);
    return image;
}

void save(QImage& image, const QString& path) {
    if (!image.save(path, "PNG")) throw std::runtime_error("cannot write " + path.toStdString());
}

}  // namespace

void write_frontier_png(const QString& path, const Settings& s, const std::vector<VariantResult>& results) {
    const VariantResult* bf16 = find(results, "bf16");
    QImage image = white_image(1400, 900);
    QPainter p(&image);
    p.setRenderHint(QPainter::Antialiasing);
    struct Point {
        const VariantResult* v;
        Spread x, y;
    };
    std::vector<Point> points;
    double x1 = 10, y0 = 0, y1 = 0.5;
    for (const VariantResult& v : results) {
        Point pt{&v, spread(v.runs, [](auto& r) { return r.saving_pct; }),
                 spread(v.runs, [&](auto& r) { return delta_pct(r, *bf16); })};
        x1 = std::max(x1, pt.x.hi);
        y0 = std::min(y0, pt.y.lo);
        y1 = std::max(y1, pt.y.hi);
        points.push_back(pt);
    }
    const double ypad = 0.08 * (y1 - y0);
    const Axes a =
        draw_axes(p, QRectF(0, 0, 1400, 900),
                  QString("Fine-tune (%1): bytes saved against eval-loss change, %2 seed(s) (bars: range)")
                      .arg(s.mode + " + " + s.scope)
                      .arg(s.seeds.size()),
                  "bytes saved vs all-BF16 (%)", "final eval loss vs all-BF16, same seed (%)", 0, x1 * 1.05,
                  y0 - ypad, y1 + ypad);
    p.setPen(QPen(QColor(150, 150, 150), 1, Qt::DashLine));
    p.drawLine(a.map(a.x0, 0), a.map(a.x1, 0));
    // The points first, then their labels: right of the point, or the nearest slot above or below
    // it that overlaps no point and no other label.
    std::vector<QRectF> taken;
    for (const Point& pt : points) {
        const bool uniform = pt.v->variant.family == Family::uniform;
        const QColor c = uniform ? kUniformColor : kSelectiveColor;
        p.setPen(QPen(c, 1.6));
        p.drawLine(a.map(pt.x.mean, pt.y.lo), a.map(pt.x.mean, pt.y.hi));
        p.drawLine(a.map(pt.x.lo, pt.y.mean), a.map(pt.x.hi, pt.y.mean));
        const QPointF at = a.map(pt.x.mean, pt.y.mean);
        p.setBrush(c);
        if (uniform)
            p.drawRect(QRectF(at.x() - 6, at.y() - 6, 12, 12));
        else
            p.drawEllipse(at, 6.5, 6.5);
        taken.push_back(QRectF(at.x() - 7, at.y() - 7, 14, 14));
    }
    const QFontMetricsF metrics(p.font());
    p.setPen(Qt::black);
    for (const Point& pt : points) {
        const QPointF at = a.map(pt.x.mean, pt.y.mean);
        const QString& label = pt.v->variant.label;
        QRectF box(at.x() + 10, at.y() - 9, metrics.horizontalAdvance(label) + 4, 18);
        for (int k = 1; k < 40; ++k) {
            if (std::none_of(taken.begin(), taken.end(), [&](const QRectF& t) { return t.intersects(box); }))
                break;
            box.moveTop(at.y() - 9 + (k % 2 == 1 ? 1 : -1) * 18.0 * int((k + 1) / 2));
        }
        taken.push_back(box);
        p.drawText(box, Qt::AlignLeft | Qt::AlignVCenter, label);
    }
    // Legend.
    const QRectF legend(a.plot.left() + 12, a.plot.top() + 12, 300, 56);
    p.fillRect(legend, QColor(255, 255, 255, 235));
    p.setPen(QColor(170, 170, 170));
    p.setBrush(Qt::NoBrush);
    p.drawRect(legend);
    p.setBrush(kUniformColor);
    p.setPen(kUniformColor);
    p.drawRect(QRectF(legend.left() + 12, legend.top() + 12, 12, 12));
    p.setBrush(kSelectiveColor);
    p.setPen(kSelectiveColor);
    p.drawEllipse(QPointF(legend.left() + 18, legend.top() + 40), 6.5, 6.5);
    p.setPen(Qt::black);
    p.drawText(QRectF(legend.left() + 34, legend.top() + 9, 260, 18), "uniform format (every block)");
    p.drawText(QRectF(legend.left() + 34, legend.top() + 31, 260, 18), "Selective Precision");
    p.end();
    save(image, path);
}

void write_eval_png(const QString& path, const Settings& s, const std::vector<VariantResult>& results) {
    const VariantResult* bf16 = find(results, "bf16");
    QImage image = white_image(1700, 750);
    QPainter p(&image);
    p.setRenderHint(QPainter::Antialiasing);
    // Per scheme: the eval curve (mean over seeds) and its difference to all-BF16 (mean of the
    // per-seed differences, in percent).
    struct Curve {
        const VariantResult* v;
        std::vector<QPointF> loss, delta;
    };
    std::vector<Curve> curves;
    double l0 = 1e300, l1 = -1e300, d0 = 0, d1 = 0.5;
    for (const VariantResult& v : results) {
        Curve c{&v, {}, {}};
        const auto& steps = v.runs.front().eval_curve;
        for (std::size_t i = 0; i < steps.size(); ++i) {
            double loss = 0, delta = 0;
            for (std::size_t k = 0; k < v.runs.size(); ++k) {
                const double mine = v.runs[k].eval_curve.at(i).second,
                             base = bf16->runs[k].eval_curve.at(i).second;
                loss += mine / double(v.runs.size());
                delta += 100.0 * (mine - base) / base / double(v.runs.size());
            }
            const double x = double(steps[i].first);
            c.loss.emplace_back(x, loss);
            c.delta.emplace_back(x, delta);
            // The first fifth is the steep descent every scheme shares: left off the scales.
            if (x >= double(s.finetune_steps) / 5.0) {
                l0 = std::min(l0, loss), l1 = std::max(l1, loss);
                d0 = std::min(d0, delta), d1 = std::max(d1, delta);
            }
        }
        curves.push_back(std::move(c));
    }
    const Axes left = draw_axes(
        p, QRectF(0, 0, 850, 750),
        "Fine-tune (" + s.mode + " + " + s.scope + "): held-out loss (mean over seeds)", "fine-tuning step",
        "eval loss", 0, double(s.finetune_steps), l0 - 0.03 * (l1 - l0), l1 + 0.03 * (l1 - l0));
    const Axes right = draw_axes(
        p, QRectF(850, 0, 850, 750), "Held-out loss vs all-BF16 (mean of per-seed changes)",
        "fine-tuning step", "eval loss vs all-BF16 (%)", 0, double(s.finetune_steps), d0 - 0.1, d1 + 0.1);
    for (std::size_t i = 0; i < curves.size(); ++i) {
        const bool uniform = curves[i].v->variant.family == Family::uniform;
        const QPen pen(kPalette[i % 12], 2.2, uniform ? Qt::DashLine : Qt::SolidLine);
        for (const auto& [axes, points] :
             {std::pair{&left, &curves[i].loss}, std::pair{&right, &curves[i].delta}}) {
            p.save();
            p.setClipRect(axes->plot);
            p.setPen(pen);
            QPainterPath line;
            for (std::size_t k = 0; k < points->size(); ++k) {
                const QPointF at = axes->map((*points)[k].x(), (*points)[k].y());
                k == 0 ? line.moveTo(at) : line.lineTo(at);
            }
            p.drawPath(line);
            p.restore();
        }
        // Legend in the left panel's upper right: dashed = uniform, solid = Selective Precision.
        const double y = left.plot.top() + 16 + 19.0 * double(i);
        const QRectF row(left.plot.right() - 290, y - 9, 282, 19);
        p.fillRect(row, QColor(255, 255, 255, 235));
        p.setPen(pen);
        p.drawLine(QPointF(row.left() + 6, y), QPointF(row.left() + 40, y));
        p.setPen(Qt::black);
        p.drawText(row.adjusted(48, 0, 0, 0), Qt::AlignVCenter, curves[i].v->variant.label);
    }
    p.end();
    save(image, path);
}

// The pretraining's held-out loss: the whole run, and its second half on its own scale, where the
// flattening shows.
void write_pretrain_png(const QString& path, const Settings& s, const Pretrain& pretrain) {
    QImage image = white_image(1700, 650);
    QPainter p(&image);
    p.setRenderHint(QPainter::Antialiasing);
    const auto& curve = pretrain.run.eval_curve;
    const double steps = double(s.pretrain_steps);
    for (const bool zoom : {false, true}) {
        double l0 = 1e300, l1 = -1e300;
        for (const auto& [step, loss] : curve)
            if (!zoom || double(step) >= steps / 2) l0 = std::min(l0, loss), l1 = std::max(l1, loss);
        if (l1 <= l0) l1 = l0 + 0.01;
        const double x0 = zoom ? steps / 2 : 0;
        const Axes a = draw_axes(p, QRectF(zoom ? 850 : 0, 0, 850, 650),
                                 zoom ? "Pretraining, second half" : "Pretraining (BF16): held-out loss",
                                 "pretraining step", "eval loss", x0, steps, l0 - 0.05 * (l1 - l0),
                                 l1 + 0.05 * (l1 - l0));
        p.save();
        p.setClipRect(a.plot);
        p.setPen(QPen(kSelectiveColor, 2.2));
        QPainterPath line;
        bool first = true;
        for (const auto& [step, loss] : curve) {
            if (double(step) < x0) continue;
            const QPointF at = a.map(double(step), loss);
            first ? line.moveTo(at) : line.lineTo(at);
            first = false;
        }
        p.drawPath(line);
        p.restore();
    }
    p.end();
    save(image, path);
}

// The paired measures at the last probe step: the exact oracle's measured frontier, every single-block map,
// the uniform formats and the schemes' maps, as (bytes saved, gap).
void write_paired_png(const QString& path, const Settings& s, const ModeResult& m) {
    const std::int64_t step = probe_steps(s).back();
    const std::vector<const Probe*> probes = probes_at(m.paired.probes, step, "");
    double x1 = 10, y0 = 0, y1 = 0.05;
    for (const Probe* pr : probes) {
        x1 = std::max(x1, pr->saving_pct);
        y0 = std::min(y0, pr->gap_pct);
        y1 = std::max(y1, pr->gap_pct);
    }
    QImage image = white_image(1400, 900);
    QPainter p(&image);
    p.setRenderHint(QPainter::Antialiasing);
    const double pad = 0.06 * (y1 - y0);
    const Axes a =
        draw_axes(p, QRectF(0, 0, 1400, 900),
                  QString("Paired measures (%1), step %2: bytes saved against the loss gap under the map")
                      .arg(m.mode + " + " + m.scope)
                      .arg(step),
                  "bytes saved vs all-BF16 (%)", "eval-loss gap vs all-BF16, same weights (%)", 0, x1 * 1.05,
                  y0 - pad, y1 + pad);
    p.save();
    p.setClipRect(a.plot);
    std::vector<std::pair<double, double>> oracle = {{0, 0}};
    for (const Probe* pr : probes)
        if (pr->name.startsWith(kOracleBudgetPrefix)) oracle.emplace_back(pr->saving_pct, pr->gap_pct);
    std::sort(oracle.begin(), oracle.end());
    p.setPen(QPen(QColor(44, 160, 44), 2.2));
    QPainterPath line;
    for (std::size_t i = 0; i < oracle.size(); ++i)
        i == 0 ? line.moveTo(a.map(oracle[i].first, oracle[i].second))
               : line.lineTo(a.map(oracle[i].first, oracle[i].second));
    p.drawPath(line);
    std::vector<QRectF> taken;
    std::vector<std::pair<QPointF, QString>> labels;
    for (const Probe* pr : probes) {
        const QPointF at = a.map(pr->saving_pct, pr->gap_pct);
        if (pr->name.startsWith("single:")) {
            p.setPen(Qt::NoPen);
            p.setBrush(QColor(190, 190, 190));
            p.drawEllipse(at, 3, 3);
            continue;
        }
        if (pr->name.startsWith("oracle:")) continue;
        const VariantResult* v = find(m.schemes, pr->name);
        const bool uniform = !v || v->variant.family == Family::uniform;
        const QColor c = uniform ? kUniformColor : kSelectiveColor;
        p.setPen(c);
        p.setBrush(c);
        uniform ? p.drawRect(QRectF(at.x() - 6, at.y() - 6, 12, 12)) : p.drawEllipse(at, 6.5, 6.5);
        taken.push_back(QRectF(at.x() - 7, at.y() - 7, 14, 14));
        labels.emplace_back(at, v ? v->variant.label : pr->name);
    }
    const QFontMetricsF metrics(p.font());
    p.setPen(Qt::black);
    for (const auto& [at, label] : labels) {
        QRectF box(at.x() + 10, at.y() - 9, metrics.horizontalAdvance(label) + 4, 18);
        for (int k = 1; k < 40; ++k) {
            if (std::none_of(taken.begin(), taken.end(), [&](const QRectF& t) { return t.intersects(box); }))
                break;
            box.moveTop(at.y() - 9 + (k % 2 == 1 ? 1 : -1) * 18.0 * int((k + 1) / 2));
        }
        taken.push_back(box);
        p.drawText(box, Qt::AlignLeft | Qt::AlignVCenter, label);
    }
    p.restore();
    const QRectF legend(a.plot.left() + 12, a.plot.top() + 12, 380, 100);
    p.fillRect(legend, QColor(255, 255, 255, 235));
    p.setPen(QColor(170, 170, 170));
    p.setBrush(Qt::NoBrush);
    p.drawRect(legend);
    p.setPen(QPen(QColor(44, 160, 44), 2.2));
    p.drawLine(QPointF(legend.left() + 8, legend.top() + 18), QPointF(legend.left() + 28, legend.top() + 18));
    p.setPen(kUniformColor);
    p.setBrush(kUniformColor);
    p.drawRect(QRectF(legend.left() + 12, legend.top() + 34, 12, 12));
    p.setPen(kSelectiveColor);
    p.setBrush(kSelectiveColor);
    p.drawEllipse(QPointF(legend.left() + 18, legend.top() + 62), 6.5, 6.5);
    p.setPen(Qt::NoPen);
    p.setBrush(QColor(190, 190, 190));
    p.drawEllipse(QPointF(legend.left() + 18, legend.top() + 84), 3, 3);
    p.setPen(Qt::black);
    p.drawText(QRectF(legend.left() + 34, legend.top() + 9, 340, 18),
               "exact oracle (budget plans, measured whole)");
    p.drawText(QRectF(legend.left() + 34, legend.top() + 31, 340, 18), "uniform format (every block)");
    p.drawText(QRectF(legend.left() + 34, legend.top() + 53, 340, 18), "Selective Precision map");
    p.drawText(QRectF(legend.left() + 34, legend.top() + 75, 340, 18), "one block alone in a low format");
    p.end();
    save(image, path);
}

}  // namespace sp::experiment
