#pragma once
// One logical line of a Qt chart, drawn from a decimated series. Qt Charts draws NaN badly, so a
// line with gaps is a few QLineSeries (one per segment) sharing a name, colour and legend entry.
// Private to sp_ui.
#include <vector>

#include <QColor>
#include <QString>

#include "sp/ui/decimate.h"

QT_BEGIN_NAMESPACE
class QAbstractAxis;
class QChart;
class QLineSeries;
QT_END_NAMESPACE

namespace sp::ui {

class ChartLine {
  public:
    // More segments than this are joined into the last one (a line broken in hundreds of places
    // would cost a series each and read no better).
    static constexpr int kMaxSegments = 32;

    ChartLine(QChart* chart, QAbstractAxis* x_axis, QAbstractAxis* y_axis, QString name, QColor color);
    ~ChartLine();
    ChartLine(const ChartLine&) = delete;
    ChartLine& operator=(const ChartLine&) = delete;

    void setData(const DecimatedSeries& data);
    // Empties the series (cheap), so that axis range changes that follow do not re-lay out the old
    // points: Qt Charts recomputes a series' geometry on every replace and every range change.
    void clearPoints();
    void setColor(QColor color);
    void setName(const QString& name);
    void setVisible(bool visible);
    // Name, colour and dash at once; the segments are restyled only when one of them changed.
    void setLook(const QString& name, QColor color, Qt::PenStyle style);
    const QString& name() const { return name_; }
    bool visible() const { return visible_; }
    QColor color() const { return color_; }
    Qt::PenStyle style() const { return style_; }
    // The series drawing this line (segment 0 first); tests read their points.
    const std::vector<QLineSeries*>& segments() const { return segments_; }
    // All points of the line, in order (segments concatenated).
    QList<QPointF> points() const;

  private:
    QLineSeries* addSegment();
    void styleSegment(QLineSeries* s, bool first) const;

    QChart* chart_;
    QAbstractAxis* x_axis_;
    QAbstractAxis* y_axis_;
    QString name_;
    QColor color_;
    Qt::PenStyle style_ = Qt::SolidLine;
    bool visible_ = true;
    int used_ = 0;  // segments holding points
    std::vector<QLineSeries*> segments_;
};

}  // namespace sp::ui
