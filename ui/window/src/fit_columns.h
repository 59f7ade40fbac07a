#pragma once
// Table columns as wide as their text: a horizontal scroll bar rather than an ellipsis. Private to
// sp_ui_window (the block table, the event log and the ranks panel use it).
#include <QObject>
#include <QTimer>

class QTableView;

namespace sp::ui {

// Sizes every column of a view to its header and the rows in view, and keeps it so: once per burst
// of model changes (rows in or out, data changed in view, a reset or a re-sort), after a scroll and
// after the viewport resizes. A fit measures the rows the viewport shows (a viewport's height in rows
// while the view is hidden), never the whole model: a table of 400 blocks whose every cell changes
// each update, or a log of 100,000 events, costs one screenful to fit. (Qt's ResizeToContents mode,
// used before, measured up to 1,000 rows per column on every dataChanged: seconds per load.)
// Between resets a column only grows, so what scrolled past keeps its room and changing values do
// not make the columns jitter; a reset or removed rows fit the columns afresh.
class ColumnFitter : public QObject {
    Q_OBJECT
  public:
    // Watches `view`'s model (set before; the view keeps that model) and lives as long as the view.
    explicit ColumnFitter(QTableView* view);

    // Fits now (what the burst's timer runs).
    void fitNow();
    // The cells the last fit measured (header sections not counted).
    int lastMeasuredCells() const { return last_measured_; }

  signals:
    void fitted();

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

  private:
    void soon(bool afresh);
    // The model rows in view, top to bottom (hidden rows left out).
    std::vector<int> rowsInView() const;

    QTableView* view_;
    QTimer timer_;
    bool afresh_ = true;
    int last_measured_ = 0;
};

// Fits `view`'s columns and keeps them fitted (a ColumnFitter, child of the view).
ColumnFitter* keepColumnsFitted(QTableView* view);

}  // namespace sp::ui
