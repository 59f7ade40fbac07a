#pragma once
// Which updates the views show. Live: all of them, following the newest (the live edge).
// Replay: a cursor the user moves with the slider, step keys or playback; views show updates
// [0, position()). One timeline per window; the views read position() on every repaint tick.
#include <cstddef>

#include <QObject>
#include <QTimer>

namespace sp::ui {

class Timeline : public QObject {
    Q_OBJECT
  public:
    explicit Timeline(QObject* parent = nullptr);

    // Number of updates available (the store's update count).
    std::size_t count() const { return count_; }
    // Updates shown: [0, position()). Equals count() while following.
    std::size_t position() const { return following_ ? count_ : position_; }
    bool following() const { return following_; }
    bool playing() const { return timer_.isActive(); }
    // Playback speed in updates per second.
    double speed() const { return speed_; }

  public slots:
    void setCount(std::size_t count);
    // Moves the cursor (clamped to [1, count]); stops following unless it lands on the end.
    void setPosition(std::size_t pos);
    void setFollowing(bool follow);
    void stepForward() { setPosition(position() + 1); }
    void stepBack() { setPosition(position() > 1 ? position() - 1 : 1); }
    // Playback from the cursor; at the end it stops (replay) or keeps following (live).
    void play();
    void pause();
    void togglePlay() { playing() ? pause() : play(); }
    void setSpeed(double updates_per_second);

  signals:
    void positionChanged(std::size_t position);
    void followingChanged(bool following);
    void playingChanged(bool playing);

  private:
    void tick();

    QTimer timer_;
    std::size_t count_ = 0;
    std::size_t position_ = 0;
    bool following_ = true;
    double speed_ = 20.0;
    double carry_ = 0.0;  // fractional updates owed by playback between ticks
};

}  // namespace sp::ui
