#include "sp/ui/timeline.h"

#include <algorithm>
#include <cmath>

namespace sp::ui {

namespace {
constexpr int kTickMs = 40;  // 25 Hz: smooth enough, and the views repaint at about this rate
}

Timeline::Timeline(QObject* parent) : QObject(parent) {
    timer_.setInterval(kTickMs);
    connect(&timer_, &QTimer::timeout, this, &Timeline::tick);
}

void Timeline::setCount(std::size_t count) {
    if (count == count_) return;
    const std::size_t before = position();
    count_ = count;
    position_ = std::min(position_, count_);
    if (position() != before) emit positionChanged(position());
}

void Timeline::setPosition(std::size_t pos) {
    const std::size_t before = position();
    position_ = std::clamp<std::size_t>(pos, count_ > 0 ? 1 : 0, count_);
    const bool follow = position_ == count_ && !playing();
    if (follow != following_) {
        following_ = follow;
        emit followingChanged(following_);
    }
    if (position() != before) emit positionChanged(position());
}

void Timeline::setFollowing(bool follow) {
    if (follow == following_) return;
    if (follow) pause();
    const std::size_t before = position();
    following_ = follow;
    position_ = count_;
    emit followingChanged(following_);
    if (position() != before) emit positionChanged(position());
}

void Timeline::play() {
    if (playing()) return;
    if (following_ || position_ >= count_) {  // start from the beginning, like a video at its end
        following_ = false;
        emit followingChanged(false);
        position_ = std::min<std::size_t>(1, count_);
        emit positionChanged(position_);
    }
    carry_ = 0.0;
    timer_.start();
    emit playingChanged(true);
}

void Timeline::pause() {
    if (!playing()) return;
    timer_.stop();
    emit playingChanged(false);
}

void Timeline::setSpeed(double updates_per_second) {
    speed_ = std::clamp(updates_per_second, 0.5, 10000.0);
}

void Timeline::tick() {
    carry_ += speed_ * kTickMs / 1000.0;
    const double whole = std::floor(carry_);
    if (whole < 1.0) return;
    carry_ -= whole;
    position_ = std::min(count_, position_ + static_cast<std::size_t>(whole));
    emit positionChanged(position_);
    if (position_ >= count_) pause();
}

}  // namespace sp::ui
