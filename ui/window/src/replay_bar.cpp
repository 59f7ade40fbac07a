#include "sp/ui/replay_bar.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QStyle>
#include <QToolButton>

#include "sp/ui/telemetry_store.h"
#include "sp/ui/timeline.h"

namespace sp::ui {

ReplayBar::ReplayBar(Timeline* timeline, QWidget* parent)
    : QWidget(parent),
      timeline_(timeline),
      play_(new QToolButton(this)),
      back_(new QToolButton(this)),
      forward_(new QToolButton(this)),
      slider_(new QSlider(Qt::Horizontal, this)),
      speed_(new QComboBox(this)),
      position_(new QLabel(this)) {
    back_->setIcon(style()->standardIcon(QStyle::SP_MediaSeekBackward));
    back_->setToolTip(tr("Step back one update (,)"));
    forward_->setIcon(style()->standardIcon(QStyle::SP_MediaSeekForward));
    forward_->setToolTip(tr("Step forward one update (.)"));
    play_->setToolTip(tr("Play / pause (Space)"));
    slider_->setToolTip(tr("Updates shown"));
    for (int ups : {5, 10, 20, 50, 100, 500}) speed_->addItem(tr("%1 updates/s").arg(ups), ups);
    speed_->setCurrentIndex(2);
    speed_->setToolTip(tr("Playback speed"));
    position_->setMinimumWidth(
        position_->fontMetrics().horizontalAdvance(QStringLiteral("update 000000 / 000000 · step 00000000")));

    auto* row = new QHBoxLayout(this);
    row->setContentsMargins(4, 2, 4, 2);
    row->addWidget(back_);
    row->addWidget(play_);
    row->addWidget(forward_);
    row->addWidget(slider_, 1);
    row->addWidget(position_);
    row->addWidget(speed_);

    connect(play_, &QToolButton::clicked, timeline_, &Timeline::togglePlay);
    // A pause moves nothing, so the repaint tick (which redraws on new data or a new position)
    // would leave the pause icon up: the icon follows the timeline's own signal.
    connect(timeline_, &Timeline::playingChanged, this, &ReplayBar::refresh);
    connect(back_, &QToolButton::clicked, timeline_, &Timeline::stepBack);
    connect(forward_, &QToolButton::clicked, timeline_, &Timeline::stepForward);
    connect(slider_, &QSlider::valueChanged, this,
            [this](int v) { timeline_->setPosition(static_cast<std::size_t>(v)); });
    connect(speed_, &QComboBox::currentIndexChanged, this,
            [this](int i) { timeline_->setSpeed(speed_->itemData(i).toDouble()); });
    timeline_->setSpeed(speed_->currentData().toDouble());
    refresh();
}

void ReplayBar::setStore(const TelemetryStore* store) {
    store_ = store;
    refresh();
}

void ReplayBar::refresh() {
    const int count = static_cast<int>(timeline_->count());
    const int pos = static_cast<int>(timeline_->position());
    {
        const QSignalBlocker block(slider_);  // moving the slider here is not a user seek
        slider_->setRange(count > 0 ? 1 : 0, count);
        slider_->setValue(pos);
    }
    play_->setIcon(
        style()->standardIcon(timeline_->playing() ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
    QString text = tr("update %1 / %2").arg(pos).arg(count);
    if (store_ != nullptr && pos > 0 && static_cast<std::size_t>(pos) <= store_->updateCount())
        text += tr(" · step %1").arg(store_->row(static_cast<std::size_t>(pos) - 1).step);
    position_->setText(text);
    const bool any = count > 0;
    for (QWidget* w : {static_cast<QWidget*>(play_), static_cast<QWidget*>(back_),
                       static_cast<QWidget*>(forward_), static_cast<QWidget*>(slider_)})
        w->setEnabled(any);
}

}  // namespace sp::ui
