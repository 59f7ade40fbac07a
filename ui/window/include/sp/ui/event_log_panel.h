#pragma once
// The event log: newest at the bottom (kept in view unless the user scrolled up), a category
// filter, command states coloured (pending / applied / rejected).
#include <QWidget>

class QAbstractItemModel;
class QComboBox;
class QSortFilterProxyModel;
class QTableView;

namespace sp::ui {

class EventLogPanel : public QWidget {
    Q_OBJECT
  public:
    explicit EventLogPanel(QWidget* parent = nullptr);
    // An EventLogModel; null shows nothing.
    void setModel(QAbstractItemModel* model);
    QTableView* view() const { return view_; }

  private:
    QSortFilterProxyModel* proxy_;
    QComboBox* category_;
    QTableView* view_;
};

}  // namespace sp::ui
