// The replay's Space key: play / pause from wherever the focus is in the window (the heatmap, the
// Events or What-if tab, a button), except a field that takes text, where Space is typed.
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QPushButton>
#include <QTabBar>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "dashboard_fixture.h"
#include "sp/ui/event_log_panel.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"
#include "sp/ui/timeline.h"
#include "sp/ui/what_if_panel.h"

using namespace sp::ui;

class TestReplayKeys : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixture_;

    // Space with `target` focused; whether the replay's playing state flipped.
    static bool spaceToggles(MainWindow& w, QWidget* target) {
        auto* timeline = w.findChild<Timeline*>();
        target->setFocus(Qt::OtherFocusReason);
        if (QApplication::focusWidget() != target)
            qWarning("could not focus %s", target->metaObject()->className());
        const bool before = timeline->playing();
        QTest::keyClick(target, Qt::Key_Space);
        const bool after = timeline->playing();
        if (after) timeline->pause();
        return before != after;
    }

  private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QStandardPaths::setTestModeEnabled(true);
        registerUiMetaTypes();
        fixture_ = dir_.filePath(QStringLiteral("run.jsonl"));
        sp::test::writeDashboardFixture(fixture_.toStdString(), 6, 40);
    }

    void spacePlaysAndPausesFromEveryPanelButATextField() {
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        w.activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(&w));
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();

        auto* events = w.findChild<EventLogPanel*>();
        auto* what_if = w.findChild<WhatIfPanel*>();
        QVERIFY(events && what_if);
        QVERIFY2(spaceToggles(w, events->view()), "Space with the Events tab's table focused");
        // The docks' tab bar, as a click on "What-if" leaves it, and the panel it shows.
        QTabBar* tabs = nullptr;
        for (QTabBar* bar : w.findChildren<QTabBar*>())
            for (int i = 0; i < bar->count(); ++i)
                if (bar->tabText(i) == QStringLiteral("What-if")) tabs = bar;
        QVERIFY(tabs);
        for (int i = 0; i < tabs->count(); ++i)
            if (tabs->tabText(i) == QStringLiteral("What-if"))
                QTest::mouseClick(tabs, Qt::LeftButton, {}, tabs->tabRect(i).center());
        QTRY_VERIFY(what_if->isVisible());
        tabs->setFocusPolicy(Qt::StrongFocus);  // as a keyboard user reaches it
        QVERIFY2(spaceToggles(w, tabs), "Space with the docks' tab bar focused");
        QVERIFY2(spaceToggles(w, what_if->table()), "Space with the What-if tab's table focused");
        auto* run = what_if->findChild<QPushButton*>();
        QVERIFY(run);
        QVERIFY2(spaceToggles(w, run), "Space with the What-if tab's button focused");
        // A number field (the what-if thresholds): Space means nothing in a number, so it plays.
        auto* threshold = what_if->findChild<QDoubleSpinBox*>();
        QVERIFY(threshold);
        const double before = threshold->value();
        QVERIFY2(spaceToggles(w, threshold), "Space with a what-if threshold focused");
        QCOMPARE(threshold->value(), before);
        // A field that takes text keeps its Space (a search or a number being typed).
        if (auto* search = events->findChild<QLineEdit*>()) QVERIFY(!spaceToggles(w, search));
    }
};

QTEST_MAIN(TestReplayKeys)
#include "test_replay_keys.moc"
