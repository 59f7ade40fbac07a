#include "chart_line.h"

#include <QChart>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPen>

namespace sp::ui {

ChartLine::ChartLine(QChart* chart, QAbstractAxis* x_axis, QAbstractAxis* y_axis, QString name, QColor color)
    : chart_(chart), x_axis_(x_axis), y_axis_(y_axis), name_(std::move(name)), color_(color) {
    addSegment();
}

ChartLine::~ChartLine() {
    for (QLineSeries* s : segments_) {
        chart_->removeSeries(s);
        delete s;
    }
}

QLineSeries* ChartLine::addSegment() {
    auto* s = new QLineSeries();
    chart_->addSeries(s);
    s->attachAxis(x_axis_);
    s->attachAxis(y_axis_);
    segments_.push_back(s);
    styleSegment(s, segments_.size() == 1);
    return s;
}

void ChartLine::styleSegment(QLineSeries* s, bool first) const {
    s->setName(name_);
    QPen pen(color_);
    pen.setWidthF(1.5);
    pen.setStyle(style_);
    s->setPen(pen);
    s->setVisible(visible_);
    // One legend entry per line: only the first segment's marker shows.
    for (QLegendMarker* m : chart_->legend()->markers(s)) m->setVisible(first && visible_);
}

void ChartLine::setData(const DecimatedSeries& data) {
    const int segments = std::min(data.segmentCount(), kMaxSegments);
    while (int(segments_.size()) < segments) addSegment();
    for (int i = 0; i < int(segments_.size()); ++i) {
        if (i < segments) {
            const qsizetype begin = data.segmentBegin(i);
            // The last allowed segment takes everything after it (joined across the gaps).
            const qsizetype end = i + 1 == segments ? data.points.size() : data.segmentEnd(i);
            segments_[std::size_t(i)]->replace(data.points.mid(begin, end - begin));
        } else if (i < used_ || segments_[std::size_t(i)]->count() > 0) {
            segments_[std::size_t(i)]->clear();
        }
    }
    used_ = segments;
}

void ChartLine::clearPoints() {
    for (int i = 0; i < used_; ++i) segments_[std::size_t(i)]->clear();
    used_ = 0;
}

void ChartLine::setColor(QColor color) {
    color_ = color;
    for (std::size_t i = 0; i < segments_.size(); ++i) styleSegment(segments_[i], i == 0);
}

void ChartLine::setName(const QString& name) {
    name_ = name;
    for (std::size_t i = 0; i < segments_.size(); ++i) styleSegment(segments_[i], i == 0);
}

void ChartLine::setLook(const QString& name, QColor color, Qt::PenStyle style) {
    if (name == name_ && color == color_ && style == style_) return;
    name_ = name;
    color_ = color;
    style_ = style;
    for (std::size_t i = 0; i < segments_.size(); ++i) styleSegment(segments_[i], i == 0);
}

void ChartLine::setVisible(bool visible) {
    if (visible == visible_) return;
    visible_ = visible;
    for (std::size_t i = 0; i < segments_.size(); ++i) styleSegment(segments_[i], i == 0);
}

QList<QPointF> ChartLine::points() const {
    QList<QPointF> all;
    for (int i = 0; i < used_; ++i) all += segments_[std::size_t(i)]->points();
    return all;
}

}  // namespace sp::ui
