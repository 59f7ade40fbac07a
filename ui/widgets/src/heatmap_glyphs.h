#pragma once
// The marks the heatmap and its legend share: pin (operator) and padlock (config) glyphs and their
// colours. Private to sp_ui.
#include <algorithm>

#include <QColor>
#include <QPainter>
#include <QRectF>

namespace sp::ui::glyphs {

inline constexpr QRgb kPinColor = 0xFF0072B2u;     // Okabe–Ito blue: operator pin
inline constexpr QRgb kConfigColor = 0xFF56B4E9u;  // sky blue: forced by the run's config

// A map pin: round head over a needle, inside `box`.
inline void drawPin(QPainter& p, const QRectF& box, const QColor& color) {
    const double s = std::min(box.width(), box.height());
    const QPointF c(box.center().x(), box.top() + s * 0.38);
    p.setPen(QPen(color, std::max(1.0, s / 8.0)));
    p.drawLine(c, QPointF(c.x(), box.top() + s * 0.95));
    p.setPen(Qt::NoPen);
    p.setBrush(color);
    p.drawEllipse(c, s * 0.28, s * 0.28);
}

// A padlock: the run's config forces the block.
inline void drawLock(QPainter& p, const QRectF& box, const QColor& color) {
    const double s = std::min(box.width(), box.height());
    const QRectF body(box.center().x() - s * 0.32, box.top() + s * 0.45, s * 0.64, s * 0.45);
    p.setPen(QPen(color, std::max(1.0, s / 9.0)));
    p.setBrush(Qt::NoBrush);
    p.drawArc(QRectF(body.left() + s * 0.1, box.top() + s * 0.12, body.width() - s * 0.2, s * 0.6), 0,
              180 * 16);
    p.setPen(Qt::NoPen);
    p.setBrush(color);
    p.drawRect(body);
}

}  // namespace sp::ui::glyphs
