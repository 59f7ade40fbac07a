#pragma once
// The replay timeline under the heatmap: play/pause, step back/forward, a slider over the
// updates, playback speed, and where the cursor is. A thin view over a Timeline.
#include <QWidget>

class QComboBox;
class QLabel;
class QSlider;
class QToolButton;

namespace sp::ui {

class Timeline;
class TelemetryStore;

class ReplayBar : public QWidget {
    Q_OBJECT
  public:
    explicit ReplayBar(Timeline* timeline, QWidget* parent = nullptr);

    // Shows the step of the cursor; null store: positions only.
    void setStore(const TelemetryStore* store);
    // Re-reads the timeline (count and position); cheap, called on the repaint tick.
    void refresh();

  private:
    Timeline* timeline_;
    const TelemetryStore* store_ = nullptr;
    QToolButton* play_;
    QToolButton* back_;
    QToolButton* forward_;
    QSlider* slider_;
    QComboBox* speed_;
    QLabel* position_;
};

}  // namespace sp::ui
