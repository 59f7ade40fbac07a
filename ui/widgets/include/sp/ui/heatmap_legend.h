#pragma once
// The heatmap's key: the sensitivity colour bar (0..1 with ticks, and the grey of "no value") and the
// precision, pin, config and pending marks. Vertical (beside the heatmap) or horizontal (under it).
#include <QStringList>
#include <QWidget>

namespace sp::ui {

class HeatmapLegend : public QWidget {
    Q_OBJECT
  public:
    explicit HeatmapLegend(Qt::Orientation orientation = Qt::Vertical, QWidget* parent = nullptr);

    void setOrientation(Qt::Orientation orientation);
    Qt::Orientation orientation() const { return orientation_; }

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

    // The entries' texts, in order, and the note under them (what says where precision shows).
    QStringList entryTexts() const;
    QString note() const;
    // Whether the last paint drew the note (it is left out where it does not fit whole).
    bool noteShown() const { return note_shown_; }

  protected:
    void paintEvent(QPaintEvent* event) override;

  private:
    int verticalEntriesBottom() const;

    Qt::Orientation orientation_;
    bool note_shown_ = false;
};

}  // namespace sp::ui
