#include "sp/ui/heatmap_legend.h"

#include <algorithm>
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
constexpr int kBarLength = 140;
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
    setToolTip(note());  // the horizontal legend has no room for the note
}

void HeatmapLegend::setOrientation(Qt::Orientation orientation) {
    orientation_ = orientation;
    updateGeometry();
    update();
}

QSize HeatmapLegend::sizeHint() const {
    const int fh = fontMetrics().height();
    if (orientation_ == Qt::Vertical) {
        int text_w = fontMetrics().horizontalAdvance(QStringLiteral("FP8 E5M2 (8-bit)"));
        for (const QString& text : entryTexts())
            text_w = std::max(text_w, fontMetrics().horizontalAdvance(text));
        // Room for the note, wrapped to the legend's width, under the entries.
        const int w = text_w + fh + 5 + 2 * kMargin;
        const int note_h =
            fontMetrics().boundingRect(QRect(0, 0, w - 2 * kMargin, 1000), Qt::TextWordWrap, note()).height();
        return {w, verticalEntriesBottom() + 4 + note_h + kMargin};
    }
    return {kBarLength + 9 * 100, 2 * fh + kBarThickness + 3 * kMargin};
}

QSize HeatmapLegend::minimumSizeHint() const {
    // The entries must fit; the note shows only where it fits whole (the tooltip holds it too), so
    // the legend does not raise the window's minimum height.
    const QSize hint = sizeHint();
    if (orientation_ != Qt::Vertical) return hint;
    return {hint.width(), verticalEntriesBottom() + kMargin};
}

// Where the vertical legend's entries end: title, colour bar, then one row per entry (as painted).
int HeatmapLegend::verticalEntriesBottom() const {
    const int row_h = fontMetrics().height() + 4;
    return kMargin + row_h + kBarLength + 12 + int(entryTexts().size()) * row_h;
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

    // The marks: missing, precisions, pin, config (badge and period band), a command in flight.
    const QStringList texts = entryTexts();
    std::vector<std::function<void(const QRect&)>> marks;
    auto swatch = [&p](QRgb color) {
        return [&p, color](const QRect& r) { p.fillRect(r, QColor::fromRgb(color)); };
    };
    // A period: a band along the top of a cell-coloured swatch, as on the grid.
    auto band = [&p](QRgb color) {
        return [&p, color](const QRect& r) {
            p.fillRect(r, QColor::fromRgb(sensitivityColor(0.5f)));
            p.fillRect(QRect(r.left(), r.top(), r.width(), 3), QColor::fromRgb(color));
        };
    };
    marks.emplace_back(swatch(kMissingColor));
    for (Precision prec : kShownPrecisions) marks.emplace_back(swatch(precisionColor(prec)));
    // The badge (at the displayed update) over the band (the period on the row).
    auto badged = [&p, band](QRgb color, bool pin) {
        return [&p, band, color, pin](const QRect& r) {
            band(color)(r);
            const QRectF glyph(r.left() + r.width() * 0.2, r.top() + r.height() * 0.25, r.width() * 0.6,
                               r.height() * 0.75);
            pin ? glyphs::drawPin(p, glyph, Qt::white) : glyphs::drawLock(p, glyph, Qt::white);
        };
    };
    marks.emplace_back(badged(glyphs::kPinColor, true));
    marks.emplace_back(badged(glyphs::kConfigColor, false));
    marks.emplace_back([&p](const QRect& r) {
        p.save();
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(Qt::white, 2));
        p.drawRect(r.adjusted(1, 1, -1, -1));
        p.setPen(QPen(QColor::fromRgb(glyphs::kPinColor), 2, Qt::DashLine));
        p.drawRect(r.adjusted(1, 1, -1, -1));
        p.restore();
    });
    std::vector<std::pair<QString, std::function<void(const QRect&)>>> entries;
    for (std::size_t i = 0; i < marks.size() && i < std::size_t(texts.size()); ++i)
        entries.emplace_back(texts[qsizetype(i)], marks[i]);

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
        // Whole or not at all: a note cut mid-sentence would mislead (the tooltip holds it anyway).
        const QRect room(kMargin, at.y() + 4, width() - 2 * kMargin, height() - at.y() - 4 - kMargin);
        const QRect needs = p.fontMetrics().boundingRect(room, Qt::AlignLeft | Qt::TextWordWrap, note());
        note_shown_ = needs.height() <= room.height();
        if (note_shown_) {
            p.setPen(pal.color(QPalette::PlaceholderText));
            p.drawText(room, Qt::AlignLeft | Qt::TextWordWrap, note());
        }
    }
}

QStringList HeatmapLegend::entryTexts() const {
    QStringList texts{tr("no value")};
    for (Precision prec : kShownPrecisions) texts << precisionLabel(prec);
    texts << tr("pinned: badge, band") << tr("config: badge, band") << tr("command pending");
    return texts;
}

QString HeatmapLegend::note() const {
    // Says when the cells carry precision, so the key never promises a mark the zoom leaves out.
    return tr(
        "Precision: the strip left of the grid; on cells, a corner square (cells \u2265 10 px) or "
        "a line under the row (rows \u2265 6 px).");
}

}  // namespace sp::ui
