// Timeline: following the live edge, seeking, stepping and playback over a growing update count.
#include <QSignalSpy>
#include <QtTest>

#include "sp/ui/timeline.h"

using sp::ui::Timeline;

class TestTimeline : public QObject {
    Q_OBJECT
  private slots:
    void followsTheLiveEdgeByDefault() {
        Timeline t;
        QSignalSpy moved(&t, &Timeline::positionChanged);
        t.setCount(5);
        QVERIFY(t.following());
        QCOMPARE(t.position(), std::size_t(5));
        t.setCount(9);
        QCOMPARE(t.position(), std::size_t(9));
        QCOMPARE(moved.count(), 2);
    }

    void seekingStopsFollowingAndNewUpdatesDoNotMoveTheCursor() {
        Timeline t;
        t.setCount(10);
        QSignalSpy follow(&t, &Timeline::followingChanged);
        t.setPosition(4);
        QVERIFY(!t.following());
        QCOMPARE(follow.count(), 1);
        t.setCount(20);
        QCOMPARE(t.position(), std::size_t(4));
        t.stepForward();
        QCOMPARE(t.position(), std::size_t(5));
        t.stepBack();
        t.stepBack();
        QCOMPARE(t.position(), std::size_t(3));
        t.setPosition(20);  // landing on the end follows again
        QVERIFY(t.following());
        t.setCount(25);
        QCOMPARE(t.position(), std::size_t(25));
    }

    void positionIsClamped() {
        Timeline t;
        t.setCount(3);
        t.setPosition(0);
        QCOMPARE(t.position(), std::size_t(1));  // at least one update is shown when there is one
        t.setPosition(99);
        QCOMPARE(t.position(), std::size_t(3));
        Timeline empty;
        empty.stepBack();
        QCOMPARE(empty.position(), std::size_t(0));
    }

    void playbackAdvancesAndStopsAtTheEnd() {
        Timeline t;
        t.setCount(30);
        t.setSpeed(500);  // 20 updates per 40 ms tick
        QSignalSpy playing(&t, &Timeline::playingChanged);
        t.play();
        QVERIFY(t.playing());
        QVERIFY(!t.following());
        QCOMPARE(t.position(), std::size_t(1));  // playing from the end restarts at the beginning
        QTRY_VERIFY_WITH_TIMEOUT(!t.playing(), 5000);
        QCOMPARE(t.position(), std::size_t(30));
        QCOMPARE(playing.count(), 2);
    }

    void pauseKeepsTheCursor() {
        Timeline t;
        t.setCount(1000);
        t.setPosition(10);
        t.setSpeed(25);  // one update per tick
        t.play();
        QTRY_VERIFY_WITH_TIMEOUT(t.position() >= 12, 5000);
        t.pause();
        const std::size_t at = t.position();
        QTest::qWait(150);
        QCOMPARE(t.position(), at);
        QVERIFY(at < 1000);
    }
};

QTEST_MAIN(TestTimeline)
#include "test_timeline.moc"
