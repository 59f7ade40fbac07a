#include "sp/ui/heatmap_legend.h"

#include <array>
#include <functional>
#include <utility>

#include <QPainter>

#include "heatmap_glyphs.h"
#include "sp/ui/colormap.h"

namespace sp::ui {

namespace {

constexpr auto kShownPrecisions = kAllPrecisions;
constexpr int kBarThickness = 14;
constexpr int kBarLength = 160;
constexpr int kMargin = 6;

// One legend entry: a swatch or glyph and its text. Returns the entry's width.
int drawEntry(QPainter& p, QPoint at, int fh, const QString& text,
              const std::function<void(const QRect&)>& mark) {
    const QRect box(at.x(), at.y(), fh, fh);
    mark(box.adjusted(1, 1, -1, -1));
    p.setPen(p.pen().color());
    const int text_w = p.fontMetrics().horizontalAdvance(text);
    p.drawText(QRect(box.right() + 5, at.y(), text_w + 2, fh), Qt::AlignLeft | Qt::AlignVCenter, text);
    return fh + 5 + text_w;
}

}  // namespace

HeatmapLegend::HeatmapLegend(Qt::Orientation orientation, QWidget* parent)
    : QWidget(parent), orientation_(orientation) {
    setSizePolicy(orientation == Qt::Vertical ? QSizePolicy(QSizePolicy::Fixed, QSizePolicy::Preferred)
                                              : QSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed));
}

void HeatmapLegend::setOrientation(Qt::Orientation orientation) {
    orientation_ = orientation;
    updateGeometry();
    update();
}

QSize HeatmapLegend::sizeHint() const {
    const int fh = fontMetrics().height();
    if (orientation_ == Qt::Vertical) {
        const int w = fontMetrics().horizontalAdvance(QStringLiteral("FP8 E5M2 (8-bit)")) + fh + 2 * kMargin;
        return {w, kBarLength + 10 * (fh + 4) + 2 * kMargin};
    }
    return {kBarLength + 8 * 90, 2 * fh + kBarThickness + 3 * kMargin};
}

QSize HeatmapLegend::minimumSizeHint() const {
    return sizeHint();
}

void HeatmapLegend::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    const int fh = fontMetrics().height();
    p.setPen(pal.color(QPalette::WindowText));

    const bool vertical = orientation_ == Qt::Vertical;
    // Title and colour bar with ticks at 0, .25, .5, .75, 1.
    p.drawText(QRect(kMargin, kMargin, width() - 2 * kMargin, fh), Qt::AlignLeft | Qt::AlignVCenter,
               tr("sensitivity"));
    const int bar_top = kMargin + fh + 4;
    const QRect bar = vertical ? QRect(kMargin, bar_top, kBarThickness, kBarLength)
                               : QRect(kMargin, bar_top, kBarLength, kBarThickness);
    p.drawImage(bar, colormapGradient(bar.size(), orientation_));
    p.setPen(pal.color(QPalette::WindowText));
    for (int i = 0; i <= 4; ++i) {
        const double t = i / 4.0;
        const QString label = QString::number(t, 'g', 2);
        if (vertical) {
            const int y = bar.bottom() - int(t * (bar.height() - 1));
            p.drawLine(bar.right() + 1, y, bar.right() + 4, y);
            p.drawText(QRect(bar.right() + 7, y - fh / 2, 40, fh), Qt::AlignLeft | Qt::AlignVCenter, label);
        } else {
            const int x = bar.left() + int(t * (bar.width() - 1));
            p.drawLine(x, bar.bottom() + 1, x, bar.bottom() + 4);
            p.drawText(QRect(x - 20, bar.bottom() + 5, 40, fh), Qt::AlignHCenter | Qt::AlignTop, label);
        }
    }

    // The marks: missing, precisions, pin, config.
    std::vector<std::pair<QString, std::function<void(const QRect&)>>> entries;
    auto swatch = [&p](QRgb color) {
        return [&p, color](const QRect& r) { p.fillRect(r, QColor::fromRgb(color)); };
    };
    entries.emplace_back(tr("no value"), swatch(kMissingColor));
    for (Precision prec : kShownPrecisions)
        entries.emplace_back(precisionLabel(prec), swatch(precisionColor(prec)));
    entries.emplace_back(tr("pinned"),
                         [&p](const QRect& r) { glyphs::drawPin(p, r, QColor::fromRgb(glyphs::kPinColor)); });
    entries.emplace_back(tr("config"), [&p](const QRect& r) {
        glyphs::drawLock(p, r, QColor::fromRgb(glyphs::kConfigColor));
    });

    QPoint at = vertical ? QPoint(kMargin, bar.bottom() + 12) : QPoint(bar.right() + 40, bar_top - fh / 2);
    const int row_h = fh + 4;
    for (const auto& [text, mark] : entries) {
        p.setPen(pal.color(QPalette::WindowText));
        const int w = drawEntry(p, at, fh, text, mark);
        if (vertical) {
            at.ry() += row_h;
        } else {
            at.rx() += w + 14;
            if (at.x() > width() - 80) at = QPoint(bar.right() + 40, at.y() + row_h);
        }
    }
    if (vertical) {
        p.setPen(pal.color(QPalette::PlaceholderText));
        p.drawText(QRect(kMargin, at.y() + 4, width() - 2 * kMargin, 3 * fh),
                   Qt::AlignLeft | Qt::TextWordWrap, tr("strip and corner marks: precision"));
    }
}

}  // namespace sp::ui
