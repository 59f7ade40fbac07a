// ColumnFitter (ui/window/src/fit_columns.h): a fit measures the rows in view, never the whole model,
// once per burst of changes; columns grow to what is in view and fit afresh after a reset.
#include <QAbstractTableModel>
#include <QHeaderView>
#include <QSignalSpy>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QtTest>

#include "fit_columns.h"

using sp::ui::ColumnFitter;

namespace {

constexpr int kRows = 20000;
constexpr int kColumns = 4;

class BigModel : public QAbstractTableModel {
  public:
    int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : rows_; }
    int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : kColumns; }
    QVariant data(const QModelIndex& index, int role) const override {
        if (role != Qt::DisplayRole) return {};
        if (index.row() == long_row_ && index.column() == 1) return QString(200, QLatin1Char('w'));
        return QStringLiteral("r%1 c%2").arg(index.row()).arg(index.column());
    }
    // Every cell changed, row by row, as BlockTableModel::refresh says it.
    void touchAll() {
        for (int r = 0; r < rows_; ++r) emit dataChanged(index(r, 0), index(r, kColumns - 1));
    }
    void setLongRow(int row) {
        long_row_ = row;
        emit dataChanged(index(row, 0), index(row, kColumns - 1));
    }
    void resetTo(int rows) {
        beginResetModel();
        rows_ = rows;
        long_row_ = -1;
        endResetModel();
    }

  private:
    int rows_ = kRows;
    int long_row_ = -1;
};

// Counts the cells measured: every size hint a fit (or Qt itself) takes goes through the delegate.
class CountingDelegate : public QStyledItemDelegate {
  public:
    using QStyledItemDelegate::QStyledItemDelegate;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override {
        ++count;
        return QStyledItemDelegate::sizeHint(option, index);
    }
    mutable int count = 0;
};

struct Rig {
    Rig() {
        view.setModel(&model);
        view.setItemDelegate(&delegate);
        view.resize(500, 300);
        fitter = sp::ui::keepColumnsFitted(&view);
    }
    int rowsInView() const {
        return view.viewport()->height() / view.verticalHeader()->defaultSectionSize() + 2;
    }
    BigModel model;
    CountingDelegate delegate;
    QTableView view;
    ColumnFitter* fitter = nullptr;
};

}  // namespace

class TestFitColumns : public QObject {
    Q_OBJECT
  private slots:
    // 20,000 rows whose every cell changed: one fit of the screenful in view.
    void aBurstMeasuresTheRowsInViewOnly() {
        Rig rig;
        rig.view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&rig.view));
        QSignalSpy fitted(rig.fitter, &ColumnFitter::fitted);
        rig.fitter->fitNow();  // whatever showing the view scheduled
        rig.delegate.count = 0;
        fitted.clear();
        rig.model.touchAll();
        QVERIFY(fitted.wait());
        QCOMPARE(fitted.count(), 1);  // one burst, one fit
        QVERIFY2(rig.delegate.count > 0, "the fit measured nothing");
        QVERIFY2(rig.delegate.count <= rig.rowsInView() * kColumns,
                 qPrintable(QStringLiteral("%1 cells measured for %2 rows in view")
                                .arg(rig.delegate.count)
                                .arg(rig.rowsInView())));
        QCOMPARE(rig.fitter->lastMeasuredCells(), rig.delegate.count);
    }

    // A view in a hidden dock or tab: a viewport's height in rows, not the model.
    void aHiddenViewMeasuresOneScreenful() {
        Rig rig;
        QSignalSpy fitted(rig.fitter, &ColumnFitter::fitted);
        rig.model.touchAll();
        QVERIFY(fitted.wait());
        QVERIFY(rig.delegate.count > 0);
        QVERIFY2(rig.delegate.count <= rig.rowsInView() * kColumns,
                 qPrintable(QString::number(rig.delegate.count)));
    }

    // A long cell in view widens its column; scrolled out of view it keeps the room; a reset fits
    // afresh.
    void columnsGrowWithWhatIsInViewAndFitAfreshOnReset() {
        Rig rig;
        rig.view.show();
        QVERIFY(QTest::qWaitForWindowExposed(&rig.view));
        QSignalSpy fitted(rig.fitter, &ColumnFitter::fitted);
        rig.fitter->fitNow();
        const int narrow = rig.view.columnWidth(1);
        const int text = rig.view.fontMetrics().horizontalAdvance(QString(200, QLatin1Char('w')));
        QVERIFY(narrow < text);

        rig.model.setLongRow(kRows - 1);  // out of view: nothing to fit
        rig.model.setLongRow(1);
        QVERIFY(fitted.wait());
        QVERIFY2(rig.view.columnWidth(1) >= text, qPrintable(QString::number(rig.view.columnWidth(1))));

        rig.view.scrollTo(rig.model.index(kRows / 2, 0));
        QVERIFY(fitted.wait());
        QVERIFY(rig.view.columnWidth(1) >= text);  // no jitter while scrolling

        rig.model.resetTo(10);
        QVERIFY(fitted.wait());
        QCOMPARE(rig.view.columnWidth(1), narrow);
    }
};

QTEST_MAIN(TestFitColumns)
#include "test_fit_columns.moc"
