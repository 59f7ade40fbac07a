// Nothing clipped at the default sizes (issue: "Nothing clipped, nothing lost at any zoom"): at
// 1600x1000 and 1280x800, with 6 and with 48 blocks, every header and cell of the block table and
// the event log is as wide as its text needs (a horizontal scroll bar may appear, an ellipsis may
// not), the status bar's labels hold their text, and the toolbar shows every action without its
// overflow arrow. Widths are measured against what the header and the delegate ask for, computed
// from the text and the style, not against what the view happened to give.
#include <algorithm>

#include <QAction>
#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QHeaderView>
#include <QLabel>
#include <QStatusBar>
#include <QStyleOptionComboBox>
#include <QTableView>
#include <QTemporaryDir>
#include <QToolBar>
#include <QToolButton>
#include <QtTest>

#include "chart_layout_checks.h"
#include "dashboard_fixture.h"
#include "sp/ui/block_table_panel.h"
#include "sp/ui/charts_panel.h"
#include "sp/ui/event_log_panel.h"
#include "sp/ui/main_window.h"
#include "sp/ui/run_session.h"

using namespace sp::ui;

namespace {

// "header 'Sensitivity' needs 96 px, has 80" for each header or cell narrower than its text needs.
QStringList clippedIn(const QTableView& view, const QString& name) {
    QStringList out;
    const QAbstractItemModel* model = view.model();
    const QHeaderView* header = view.horizontalHeader();
    for (int c = 0; c < model->columnCount(); ++c) {
        if (view.isColumnHidden(c)) continue;
        const int has = header->sectionSize(c);
        const int needs = header->sectionSizeHint(c);
        if (needs > has)
            out << QStringLiteral("%1 header '%2' needs %3 px, has %4")
                       .arg(name, model->headerData(c, Qt::Horizontal).toString())
                       .arg(needs)
                       .arg(has);
        // The style draws a cell's text inside the cell less a text margin on either side (and the
        // grid line) and elides it when it is wider: the condition below is exactly that.
        const int margin = view.style()->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, &view) + 1;
        const int frame = 2 * margin + (view.showGrid() ? 1 : 0);
        for (int r = 0; r < model->rowCount(); ++r) {
            const QModelIndex index = model->index(r, c);
            const QString text = index.data().toString();
            if (text.isEmpty()) continue;
            const QVariant font = index.data(Qt::FontRole);
            const QFontMetrics fm(font.isValid() ? font.value<QFont>() : view.font());
            const int cell_needs = fm.horizontalAdvance(text) + frame;
            if (cell_needs > view.columnWidth(c))
                out << QStringLiteral("%1 row %2 column '%3': '%4' needs %5 px, has %6")
                           .arg(name)
                           .arg(r)
                           .arg(model->headerData(c, Qt::Horizontal).toString(), text)
                           .arg(cell_needs)
                           .arg(view.columnWidth(c));
        }
    }
    return out;
}

QStringList clippedLabels(QWidget& bar) {
    QStringList out;
    for (const QLabel* label : bar.findChildren<QLabel*>()) {
        if (!label->isVisible() || label->text().isEmpty()) continue;
        // The label's own measure of its text (rich text included), against the width it got.
        const int needs = label->sizeHint().width();
        if (needs > label->width())
            out << QStringLiteral("status label '%1' needs %2 px, has %3")
                       .arg(label->text())
                       .arg(needs)
                       .arg(label->width());
    }
    return out;
}

// Everything test_layout_fits checks on the charts (chart_layout_checks.h), once they are laid out.
QStringList chartProblems(MainWindow& w) {
    auto* charts = w.findChild<ChartsPanel*>();
    w.refreshViews();
    QTest::qWait(200);  // Qt Charts lays out on its own schedule
    charts->refresh();
    QStringList problems;
    const std::vector<std::pair<ChartsPanel::Chart, QString>> names = {
        {ChartsPanel::Chart::saving, QStringLiteral("saving")},
        {ChartsPanel::Chart::precision, QStringLiteral("precision")},
        {ChartsPanel::Chart::sensitivity, QStringLiteral("sensitivity")},
        {ChartsPanel::Chart::gradient, QStringLiteral("gradient")},
        {ChartsPanel::Chart::loss, QStringLiteral("loss")}};
    const std::vector<QChartView*> shown = charts->chartViews();
    for (const auto& [chart, name] : names) {
        QChartView* view = charts->chartView(chart);
        if (std::find(shown.begin(), shown.end(), view) == shown.end()) continue;  // enlarged another
        problems << sp::test::crowdedTickLabels(view->chart(), name)
                 << sp::test::elidedLegend(view->chart(), name);
    }
    problems << sp::test::clippedLegendLabels(charts);
    if (std::find(shown.begin(), shown.end(), charts->chartView(ChartsPanel::Chart::saving)) != shown.end())
        problems << sp::test::targetProblems(charts->chartView(ChartsPanel::Chart::saving)->chart());
    if (std::find(shown.begin(), shown.end(), charts->chartView(ChartsPanel::Chart::sensitivity)) !=
        shown.end())
        problems << sp::test::illegibleThresholds(*charts);
    return problems;
}

// With SP_SCREENSHOT_DIR set, the window as the test left it, for a person to look at.
void saveScreenshot(MainWindow& w, const QString& name) {
    const QString dir = qEnvironmentVariable("SP_SCREENSHOT_DIR");
    if (!dir.isEmpty()) w.grab().save(QDir(dir).filePath(name));
}

}  // namespace

class TestLayoutFits : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;

  private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        QStandardPaths::setTestModeEnabled(true);  // QSettings go to a throwaway location
        QSettings().clear();
        registerUiMetaTypes();
    }

    void nothingIsClipped_data() {
        QTest::addColumn<QSize>("size");
        QTest::addColumn<int>("blocks");
        for (const QSize size : {QSize(1600, 1000), QSize(1280, 800)})
            for (const int blocks : {6, 48})
                QTest::addRow("%dx%d, %d blocks", size.width(), size.height(), blocks) << size << blocks;
    }

    void nothingIsClipped() {
        QFETCH(QSize, size);
        QFETCH(int, blocks);
        const QString file = dir_.filePath(QStringLiteral("run-%1.jsonl").arg(blocks));
        sp::test::writeDashboardFixture(file.toStdString(), blocks, 240);
        MainWindow w;
        w.resize(size);
        w.show();
        w.openFile(file);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        w.refreshViews();
        QTest::qWait(200);
        QCOMPARE(w.size(), size);

        QStringList clipped = clippedIn(*w.findChild<BlockTablePanel*>()->view(), QStringLiteral("table"));
        clipped << clippedIn(*w.findChild<EventLogPanel*>()->view(), QStringLiteral("events"));
        clipped << clippedLabels(*w.statusBar());
        for (const QToolBar* bar : w.findChildren<QToolBar*>()) {
            const auto* more = bar->findChild<QToolButton*>(QStringLiteral("qt_toolbar_ext_button"));
            if (more != nullptr && more->isVisible())
                clipped << QStringLiteral("toolbar '%1' overflows").arg(bar->windowTitle());
        }
        QVERIFY2(clipped.isEmpty(), qPrintable(clipped.join(QLatin1Char('\n'))));
    }

    // The run picker: a long file name is elided at its start, the state and its step number are
    // shown whole (a combo box clips without an ellipsis: "finished at step 5999" once read
    // "finished at step 5"), and the whole text fits the box's edit field.
    void runPickerShowsTheWholeState_data() {
        QTest::addColumn<QSize>("size");
        QTest::newRow("1600x1000") << QSize(1600, 1000);
        QTest::newRow("1280x800") << QSize(1280, 800);
    }

    void runPickerShowsTheWholeState() {
        QFETCH(QSize, size);
        const QString file =
            dir_.filePath(QStringLiteral("a-fine-tune-of-the-cluster-run-with-a-very-long-name-%1.jsonl")
                              .arg(size.width()));
        sp::test::writeDashboardFixture(file.toStdString(), 6, 600);
        MainWindow w;
        w.resize(size);
        w.show();
        w.openFile(file);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        auto* picker = w.findChild<QComboBox*>(QStringLiteral("runPicker"));
        QVERIFY(picker != nullptr);
        const QString state = w.currentSession()->shortStateText();
        QVERIFY2(state.contains(QStringLiteral("6000")), qPrintable(state));  // the last update's step
        const QString text = picker->currentText();
        QVERIFY2(text.endsWith(QStringLiteral(" — ") + state), qPrintable(text));
        QVERIFY2(text.contains(QChar(0x2026)), qPrintable(text));  // the name, elided
        QStyleOptionComboBox option;
        option.initFrom(picker);
        const QRect field = picker->style()->subControlRect(QStyle::CC_ComboBox, &option,
                                                            QStyle::SC_ComboBoxEditField, picker);
        QVERIFY2(picker->fontMetrics().horizontalAdvance(text) <= field.width(),
                 qPrintable(QStringLiteral("'%1' needs %2 px, has %3")
                                .arg(text)
                                .arg(picker->fontMetrics().horizontalAdvance(text))
                                .arg(field.width())));
        QVERIFY(picker->itemData(picker->currentIndex(), Qt::ToolTipRole).toString().contains(file));
    }

    // The charts at the default sizes (issue item 7): tick labels that neither run together nor go
    // missing, legends whole, the budget target clear of the top edge and of the marks, the
    // sensitivity chart's thresholds legible. A run in mode budget with the policy's config, two
    // blocks selected.
    void chartAxesAndLegendsFit_data() {
        QTest::addColumn<QSize>("size");
        QTest::newRow("1600x1000") << QSize(1600, 1000);
        QTest::newRow("1280x800") << QSize(1280, 800);
    }

    void chartAxesAndLegendsFit() {
        QFETCH(QSize, size);
        const QString file = dir_.filePath(QStringLiteral("budget-%1.jsonl").arg(size.width()));
        sp::test::writeDashboardFixture(file.toStdString(), 8, 320, true);
        MainWindow w;
        w.resize(size);
        w.show();
        w.openFile(file);
        QTRY_VERIFY_WITH_TIMEOUT(w.currentSession()->state() == SourceState::loaded, 10000);
        auto* charts = w.findChild<ChartsPanel*>();
        charts->setSelectedBlocks({0, 1});
        const QStringList problems = chartProblems(w);
        saveScreenshot(w, QStringLiteral("charts-%1x%2.png").arg(size.width()).arg(size.height()));
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
    }

    // The same with another run overlaid on every chart and a what-if's saving: more legend entries,
    // still whole; the what-if's colour apart from every other line's and mark's of the saving chart.
    void chartsWithOverlaysFit_data() { chartAxesAndLegendsFit_data(); }

    void chartsWithOverlaysFit() {
        QFETCH(QSize, size);
        const QString other =
            dir_.filePath(QStringLiteral("a-shorter-baseline-run-%1.jsonl").arg(size.width()));
        const QString file = dir_.filePath(QStringLiteral("budget-overlaid-%1.jsonl").arg(size.width()));
        sp::test::writeDashboardFixture(other.toStdString(), 8, 200, true,
                                        13);  // apart from this run's lines
        sp::test::writeDashboardFixture(file.toStdString(), 8, 320, true);
        MainWindow w;
        w.resize(size);
        w.show();
        w.openFile(other);
        w.openFile(file);
        for (RunSession* s : w.sessions()) QTRY_VERIFY_WITH_TIMEOUT(s->state() == SourceState::loaded, 10000);
        for (QAction* a : w.findChildren<QAction*>())
            if (a->text() == QStringLiteral("&Overlay other runs")) a->trigger();
        w.refreshViews();
        auto* charts = w.findChild<ChartsPanel*>();
        charts->setSelectedBlocks({0, 1});
        // What the window hands the charts after a what-if (test_what_if runs a real one).
        ChartsPanel::Overlay what_if{ChartsPanel::Chart::saving,
                                     QStringLiteral("what-if: estimated"),
                                     {},
                                     {},
                                     ChartsPanel::kWhatIfColor};
        for (int u = 0; u < 320; ++u) {
            what_if.steps.push_back(10.0 * (u + 1));
            what_if.values.push_back(float(35 + 10 * std::sin(u / 30.0)));
        }
        charts->setOverlays({what_if});
        QVERIFY(charts->linePoints(ChartsPanel::Chart::precision,
                                   QFileInfo(other).fileName() + QStringLiteral(": INT8")));
        QStringList problems = chartProblems(w);
        QChart* saving = charts->chartView(ChartsPanel::Chart::saving)->chart();
        for (QAbstractSeries* series : saving->series()) {
            auto* line = qobject_cast<QLineSeries*>(series);
            auto* marks = qobject_cast<QScatterSeries*>(series);
            if (series->name() == what_if.name || series->name().isEmpty() || (!line && !marks)) continue;
            const double distance = sp::test::colorDistance(QColor::fromRgb(what_if.color),
                                                            marks ? marks->color() : line->pen().color());
            if (distance < 40)
                problems << QStringLiteral("saving: '%1' is %2 from the what-if's colour")
                                .arg(series->name())
                                .arg(distance);
        }
        saveScreenshot(w, QStringLiteral("charts-overlaid-%1x%2.png").arg(size.width()).arg(size.height()));
        // One chart enlarged and zoomed in: its ticks follow its new size and range.
        charts->setEnlarged(ChartsPanel::Chart::sensitivity);
        charts->setXView(1000.0, 1400.0);
        problems << chartProblems(w);
        QCOMPARE(charts->chartViews().size(), std::size_t(1));
        saveScreenshot(
            w, QStringLiteral("chart-enlarged-zoomed-%1x%2.png").arg(size.width()).arg(size.height()));
        QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
    }
};

QTEST_MAIN(TestLayoutFits)
#include "test_layout_fits.moc"
