// The main window over a replayed file: table, heatmap and charts agree with the file, selection
// is shared between heatmap and table, control is disabled in replay, exports write what is shown,
// and the window renders legibly at the two sizes we support.
#include <QAction>
#include <QFile>
#include <QSettings>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "dashboard_fixture.h"
#include "sp/ui/block_table_model.h"
#include "sp/ui/block_table_panel.h"
#include "sp/ui/export.h"
#include "sp/ui/heatmap_view.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"
#include "sp/ui/telemetry_source.h"

using namespace sp::ui;

namespace {
QAction* actionNamed(QWidget& w, const QString& text) {
    for (QAction* a : w.findChildren<QAction*>())
        if (a->text() == text) return a;
    return nullptr;
}
}  // namespace

class TestMainWindow : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixture_;

  private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QStandardPaths::setTestModeEnabled(true);  // QSettings go to a throwaway location
        QSettings().clear();
        registerUiMetaTypes();
        fixture_ = dir_.filePath(QStringLiteral("run.jsonl"));
        sp::test::writeDashboardFixture(fixture_.toStdString(), 6, 40);
    }

    void replayFillsEveryView() {
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        w.openFile(fixture_);
        QCOMPARE(w.sessions().size(), std::size_t(1));
        RunSession* s = w.currentSession();
        QTRY_VERIFY_WITH_TIMEOUT(s->state() == SourceState::loaded, 10000);
        w.refreshViews();
        QCOMPARE(s->store().updateCount(), std::size_t(40));
        auto* panel = w.findChild<BlockTablePanel*>();
        QVERIFY(panel != nullptr);
        QAbstractItemModel* table = panel->sourceModel();
        QCOMPARE(table->rowCount(), 6);
        // Block 1 is pinned INT8 and block 5 forced BF16 by config in the last update.
        QVERIFY(
            table->index(1, BlockTableModel::ForcedColumn).data().toString().contains(QStringLiteral("pin")));
        QVERIFY(table->index(5, BlockTableModel::ForcedColumn)
                    .data()
                    .toString()
                    .contains(QStringLiteral("config")));
        QCOMPARE(table->index(1, BlockTableModel::PrecisionColumn).data().toString(), QStringLiteral("int8"));

        // Replay is read-only: every routing action is disabled, even with a selection.
        panel->view()->selectRow(0);
        for (const char* name : {"Pin BF16", "Pin INT8", "Release", "Release all"}) {
            QAction* a = actionNamed(w, QString::fromLatin1(name));
            QVERIFY2(a != nullptr, name);
            QVERIFY2(!a->isEnabled(), name);
        }
    }

    void selectionIsSharedBetweenTableAndHeatmap() {
        MainWindow w;
        w.resize(1280, 800);
        w.show();
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        auto* panel = w.findChild<BlockTablePanel*>();
        auto* heatmap = w.findChild<HeatmapView*>();
        QSignalSpy fromHeatmap(heatmap, &HeatmapView::selectionChanged);
        panel->setSelectedBlocks({2, 3});  // programmatic: no echo back
        QCOMPARE(panel->selectedBlocks(), (std::vector<int>{2, 3}));
        panel->view()->selectRow(4);  // a user selection in the table reaches the heatmap
        QCOMPARE(heatmap->selection(), (std::vector<int>{4}));
    }

    void exportsWriteWhatIsShown() {
        MainWindow w;
        w.openFile(fixture_);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        auto* panel = w.findChild<BlockTablePanel*>();
        const QString csv = dir_.filePath(QStringLiteral("blocks.csv"));
        QCOMPARE(exportCsv(*panel->sourceModel(), csv), QString());
        QFile f(csv);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 7);  // header + 6 blocks
        QVERIFY(lines[0].startsWith(panel->sourceModel()->headerData(0, Qt::Horizontal).toString()));
        QVERIFY(lines[2].contains(QStringLiteral("blocks.1")));
        QCOMPARE(csvField(QStringLiteral("a,b")), QStringLiteral("\"a,b\""));
        QCOMPARE(csvField(QStringLiteral("say \"x\"")), QStringLiteral("\"say \"\"x\"\"\""));
        // An unwritable path is reported, not silently ignored.
        QVERIFY(exportCsv(*panel->sourceModel(), QStringLiteral("/nonexistent-dir/x.csv"))
                    .contains(QStringLiteral("/nonexistent-dir/x.csv")));
    }

    void rendersAtBothSizes() {
        for (const QSize& size : {QSize(1600, 1000), QSize(1280, 800)}) {
            MainWindow w;
            w.resize(size);
            w.show();
            w.openFile(fixture_);
            QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
            const QImage image = w.renderWindow();
            QCOMPARE(image.size(), size * w.devicePixelRatio());
            if (qEnvironmentVariableIsSet("SP_SCREENSHOT_DIR"))  // for looking at it
                image.save(QStringLiteral("%1/main_window_%2x%3.png")
                               .arg(qEnvironmentVariable("SP_SCREENSHOT_DIR"))
                               .arg(size.width())
                               .arg(size.height()));
        }
    }
};

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
